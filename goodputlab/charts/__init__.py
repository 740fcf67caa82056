"""Altair charts, one module per subject: runs, theory, cluster, checkpoints, durability, pipeline, recovery,
efficiency, serving, scaling, capstone; restarts (chapter 6); in_job (in-job recovery at scale).

Every chart is a plain function returning an Altair chart built from tidy rows, so a
widget redraws it by assigning ``JupyterChart.chart``. In a notebook call
:func:`setup_notebook` once: Altair then draws offline (the Vega JavaScript comes
from vl-convert-python, not a CDN). :func:`save_png` writes a static image for
places that run no kernel. The run charts (:func:`timeline`, :func:`breakdown`,
:func:`loss_curve`) are re-exported here.
"""

from __future__ import annotations

from . import (
    capstone, checkpoints, cluster, durability, efficiency, figures, in_job, pipeline, recovery, reproductions, restarts,
    runs, scaling, serving, theory,
)
from .base import CATEGORY_SCALE, save_png, setup_notebook
from .runs import breakdown, loss_curve, timeline

__all__ = [
    "CATEGORY_SCALE",
    "breakdown",
    "capstone",
    "checkpoints",
    "cluster",
    "durability",
    "efficiency",
    "figures",
    "in_job",
    "loss_curve",
    "pipeline",
    "recovery",
    "reproductions",
    "runs",
    "save_png",
    "scaling",
    "serving",
    "setup_notebook",
    "theory",
    "timeline",
]
