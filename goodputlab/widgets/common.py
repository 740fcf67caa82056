"""What the chapters' panels share: an offline chart widget, a headline figure, the Run controls."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import altair as alt
import ipywidgets as W

from ..errors import ConfigError


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


class RunControls:
    """The Run button, progress bar and status line of a panel that starts real runs."""

    def __init__(self, steps: int, recorded: bool = False):
        self.button = W.Button(description="Run", button_style="primary", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=steps, description="steps")
        self.status = W.Label(value="")
        # a slow machine, Binder or a phone: load the recorded run nearest to the controls instead
        self.recorded = W.Checkbox(value=recorded, description="recorded runs (no training)", indent=False,
                                   layout=W.Layout(width="200px"))
        self.note = W.HTML(value="")
        self.widget = W.VBox([W.HBox([self.button, self.recorded, self.progress, self.status]), self.note])

    def on_progress(self, p) -> None:
        """Follow a run (a :class:`goodputlab.engine.supervisor.Progress`): the bar falls back after a failure."""
        self.progress.value = p.steps_done
        self.status.value = f"attempt {p.attempt}, failures {p.failures}: {p.phase}"

    def run(self, make_config: Callable, out: Path):
        """Build the config and run it with the button disabled; ``(config, result)``, or None on bad input.

        With the ``recorded`` box ticked nothing trains: the recorded run nearest to the
        config is loaded instead (:meth:`load_recorded`), and ``config`` is the recording's.

        A bad combination of controls is reported in the status line, not raised:
        it comes from a reader moving sliders, not from a bug.
        """
        from ..engine.api import run

        try:
            config = make_config()
        except ConfigError as e:
            self.status.value = f"not run: {e}"
            return None
        if self.recorded.value:
            return self.load_recorded(config)
        self.note.value = ""
        self.button.disabled = True
        self.progress.value = 0
        self.status.value = "starting..."
        try:
            result = run(config, out=out, progress=self.on_progress)
        finally:
            self.button.disabled = False
        return config, result

    def load_recorded(self, config):
        """The recorded run nearest to ``config``: ``(its config, its result)``; the note says how it differs."""
        from ..engine.recorded import nearest_recorded, recorded_run

        nearest = nearest_recorded(config)
        result = recorded_run(nearest.name)
        self.progress.value = min(self.progress.max, result.summary["steps_completed"])
        self.note.value = f"<i>{nearest.describe()}</i>"
        return result.config, result
