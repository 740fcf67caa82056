"""ipywidgets panels for the chapters: controls that re-run real experiments and redraw charts.

Every chapter's panels are re-exported here (``gl.widgets.ClusterPanel``); what
they share is in :mod:`~goodputlab.widgets.common`.

Each panel keeps its logic in plain methods (``run_once``, ``redraw``...) so the
tests can set ``slider.value`` and call them directly: an exception inside an
ipywidgets callback only logs a warning, so a test of the callback alone
would pass while the panel is broken.
"""

from __future__ import annotations

from .checkpoints import CheckpointPanel  # chapter 4
from .common import PanelView, RunControls, big_number, chart_widget, set_big_number, show_panel
from .capstone import CapstonePanel  # chapter 10
from .claim import ClaimPanel  # chapter 10
from .dashboard import WorkshopDashboard  # the workshop's dashboard (labs/dashboard.ipynb)
from .efficiency import EfficiencyPanel  # chapter 8
from .in_job import InJobPanel  # chapter 11
from .pipeline import DepthCalculator, PipelinePanel  # chapter 5
from .recovery import RecoveryRunPanel  # chapter 6
from .recovery_at_scale import PolicyPanel, RecoveryPanel  # chapters 2 and 3
from .run_panel import RunPanel  # chapter 1
from .scaling import ScalingPanel  # chapter 7
from .self_check import SelfCheck, self_check  # a question inside a chapter's section
from .serving import ServingPanel  # chapter 9
from .theory import CheckpointCalculator, ClusterPanel, IntervalPanel  # chapters 2 and 3
from .watch import Watch, watch  # gl.watch: a running job's breakdown

__all__ = [
    "CapstonePanel",
    "CheckpointCalculator",
    "CheckpointPanel",
    "ClaimPanel",
    "ClusterPanel",
    "DepthCalculator",
    "EfficiencyPanel",
    "InJobPanel",
    "IntervalPanel",
    "PanelView",
    "PipelinePanel",
    "PolicyPanel",
    "RecoveryPanel",
    "RecoveryRunPanel",
    "RunControls",
    "Watch",
    "RunPanel",
    "ScalingPanel",
    "SelfCheck",
    "ServingPanel",
    "WorkshopDashboard",
    "big_number",
    "chart_widget",
    "self_check",
    "set_big_number",
    "show_panel",
    "watch",
]
