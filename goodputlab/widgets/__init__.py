"""ipywidgets panels for the chapters: controls that re-run real experiments and redraw charts.

Each panel keeps its logic in plain methods (``run_once``, ``redraw``...) so the
tests can set ``slider.value`` and call them directly: an exception inside an
ipywidgets callback only logs a warning, so a test of the callback alone
would pass while the panel is broken.
"""

from __future__ import annotations

import altair as alt
import ipywidgets as W


def chart_widget(chart: alt.TopLevelMixin) -> alt.JupyterChart:
    """An offline ``alt.JupyterChart`` (update it in place by assigning ``.chart``)."""
    alt.JupyterChart.enable_offline()
    return alt.JupyterChart(chart)


def big_number(label: str) -> W.HTML:
    """An HTML widget for a headline figure such as the goodput."""
    return W.HTML(value=f"<b>{label}</b>")


def set_big_number(widget: W.HTML, label: str, value: str, note: str = "") -> None:
    widget.value = (
        f"<div style='font-size:1.1em'>{label} <span style='font-size:1.8em;font-weight:bold'>{value}</span>"
        f" <span style='color:#666'>{note}</span></div>"
    )


from .run_panel import RunPanel  # noqa: E402

__all__ = ["RunPanel", "big_number", "chart_widget", "set_big_number"]
