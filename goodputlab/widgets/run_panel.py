"""Chapter 1's panel: sliders for checkpoint interval, pipeline depth and failure rate,
a Run button that runs a short real experiment, and charts that redraw. Once a run has measured the
lab's costs, the panel also says what the lab model predicts for the sliders' settings, before the
next run measures it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as W

from .. import charts
from ..engine.api import RunResult
from ..engine.config import RunConfig
from ..engine.scratch import scratch_dir
from ..recovery.modes import restart_warning
from ..theory.data_stall import steady_state_wait_s
from ..theory.lab_model import RunTimings, predict_run
from .common import (LEDGER_NOTE, PanelNote, RunControls, big_number, chart_widget, forget_old_runs, set_big_number,
                     show_panel)
from .layout import float_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run").properties(width=680, height=60)


class RunPanel:
    """Controls + live charts for one experiment at a time; earlier runs stay in the comparison.

    ``steps`` and the other keyword settings (any :class:`RunConfig` field) are
    fixed for every run of the panel; the sliders set the rest.
    """

    history_size = 6

    def __init__(self, steps: int = 200, out_root: str | Path | None = None, **fixed: Any):
        self.fixed = {"steps": steps, **fixed}
        RunConfig(**self.fixed)  # fail now on a bad fixed setting, not at the first click
        self.out_root = Path(out_root) if out_root else scratch_dir("goodputlab-panel-")
        self.ckpt_every = W.IntSlider(value=25, min=0, max=max(10, steps), step=5, description="checkpoint every (steps)")
        self.mtbf = float_slider(3.0, 0.0, 20.0, 0.5, "MTBF (s, 0 = none)")
        self.workers = W.IntSlider(value=0, min=0, max=4, description="loader workers")
        self.prefetch = W.IntSlider(value=2, min=1, max=8, description="prefetch per worker (batches)", disabled=True)
        self.io_latency_ms = float_slider(10.0, 0.0, 60.0, 1.0, "storage latency (ms)")
        self.controls = RunControls(steps)
        self.button, self.progress, self.status = self.controls.button, self.controls.progress, self.controls.status
        self.headline = big_number("goodput")
        self.prediction = W.HTML()
        self.timings: RunTimings | None = None  # the last run's measured costs, for the model's prediction
        self.read_s = 0.0  # what loading a batch costs the loop besides the storage latency (measured with 0 workers)
        self.predictions: list[dict[str, float]] = []  # {predicted, measured} of each run made after the first
        self.timeline = chart_widget(_EMPTY)
        self.breakdown = chart_widget(_EMPTY)
        self.history: list[tuple[str, dict]] = []
        self.result: RunResult | None = None
        self.workers.observe(self._on_workers, names="value")
        for control in (self.ckpt_every, self.mtbf, self.workers, self.prefetch, self.io_latency_ms):
            control.observe(lambda _: self.show_prediction(), names="value")
        self.button.on_click(lambda _: self.run_once())
        self.widget = W.VBox(
            [
                W.HBox([W.VBox([self.ckpt_every, self.mtbf]), W.VBox([self.workers, self.prefetch, self.io_latency_ms])]),
                self.controls.widget,
                self.headline,
                self.prediction,
                self.timeline,
                self.breakdown,
                PanelNote("The timeline is the last run, one strip per worker process; the bars set your last "
                          f"runs side by side. {LEDGER_NOTE}"),
            ]
        )

    # --- what the controls mean ---------------------------------------------------------
    def _on_workers(self, change) -> None:
        self.prefetch.disabled = change["new"] == 0  # prefetch needs worker processes

    def config(self) -> RunConfig:
        """The experiment the controls describe (raises ConfigError on a bad combination)."""
        workers = self.workers.value
        return RunConfig(
            **{
                **self.fixed,
                "ckpt_every": self.ckpt_every.value,
                "mtbf": self.mtbf.value,
                "workers": workers,
                "prefetch": self.prefetch.value if workers > 0 else None,
                "io_latency_ms": self.io_latency_ms.value,
            }
        )

    def label(self, config: RunConfig) -> str:
        mtbf = f"MTBF {config.mtbf:g}s" if config.mtbf > 0 else "no failures"
        return f"#{len(self.history) + 1}: ckpt {config.ckpt_every}, {mtbf}, depth {config.pipeline_depth}"

    # --- the model's prediction -------------------------------------------------------------
    def predicted_goodput(self, config: RunConfig | None = None) -> float | None:
        """The lab model's goodput for ``config`` (default: the sliders'), fed the last run's measured costs;
        None before a run has measured them. The data wait per step comes from the pipeline model
        (:func:`~goodputlab.theory.data_stall.steady_state_wait_s`) with the latency and workers chosen."""
        if self.timings is None:
            return None
        config = config or self.config()
        tm = self.timings
        busy = tm.compute_s + tm.step_other_s
        wait = steady_state_wait_s(config.io_latency_ms / 1000, 0.0, config.workers, busy, read_s=self.read_s)
        timings = RunTimings(**{**tm.to_dict(), "data_wait_s": wait})
        return predict_run(timings, config.steps, config.ckpt_every, config.mtbf if config.mtbf > 0 else float("inf")).goodput

    def show_prediction(self) -> None:
        try:
            predicted = self.predicted_goodput()
        except Exception:  # a bad combination of sliders: the Run button says why
            predicted = None
        self.prediction.value = (
            "" if predicted is None else
            f"<b>the model predicts {predicted:.1%}</b> for these settings (fed your last run's measured costs); "
            "press Run to measure it")

    # --- running ----------------------------------------------------------------------------
    def run_once(self) -> RunResult | None:
        """Run the experiment the controls describe and redraw; returns its result (None on bad input)."""
        predicted = self.predicted_goodput() if self.timings is not None else None
        started = self.controls.run(self.config, self.out_root / f"run-{len(self.history) + 1:03d}")
        if started is None:
            return None
        config, result = started
        if predicted is not None:
            self.predictions.append({"predicted": predicted, "measured": result.goodput})
        self._learn(config, result)
        self.result = result
        self.history.append((self.label(config), result.summary))
        self._forget_old_runs()
        self.redraw()
        return result


    def _learn(self, config: RunConfig, result: RunResult) -> None:
        """Keep the run's measured costs for the next prediction."""
        from ..experiments.interval_sweep import measure_timings

        try:
            self.timings = measure_timings(result.events)
        except Exception:  # a run without a completed step teaches nothing
            return
        if config.workers == 0:
            self.read_s = max(0.0, self.timings.data_wait_s - config.io_latency_ms / 1000)

    def _forget_old_runs(self) -> None:
        self.history = forget_old_runs(self.history, self.history_size, self.out_root)

    def redraw(self) -> None:
        """Headline, timeline and the comparison of recent runs, from ``self.result``."""
        if self.result is None:
            return
        s = self.result.summary
        predicted = (f"; the model predicted {self.predictions[-1]['predicted']:.1%}"
                     if self.predictions and self.predictions[-1]["measured"] == s["goodput"] else "")
        set_big_number(
            self.headline,
            "goodput",
            f"{s['goodput']:.1%}",
            f"wall {s['wall_s']:.1f} s, {s['failures']} failures, {s['checkpoints']} checkpoints{predicted}",
        )
        self.show_prediction()
        self.timeline.chart = charts.timeline(self.result.ledger)
        self.breakdown.chart = charts.breakdown(dict(self.history))
        done = "done" if s["completed"] else f"stopped: {s['stop_reason']}"
        warning = restart_warning(s)
        self.status.value = f"{done}; warning: {warning}" if warning else done

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
