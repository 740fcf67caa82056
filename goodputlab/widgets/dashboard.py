"""The workshop dashboard (``labs/dashboard.ipynb``, served by Voila with ``make dashboard``).

Every lever of a run on one screen, a Run button with progress, the live timeline, the
breakdown and the goodput, and beside the measurement the theory's prediction for the same
levers: the lab model (:func:`goodputlab.theory.predict_run`) fed with phase costs measured on a
real run (the dashboard's last run with the same strategy, else the recording nearest to the
levers) and the data wait from the stall model (:mod:`goodputlab.theory.data_stall`).

Levers that later work adds to :class:`~goodputlab.engine.config.RunConfig` (a failure mode,
hot spares) appear by themselves when their fields exist: :data:`OPTIONAL_LEVERS`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as W

from .. import charts
from ..checkpoints import registry
from ..engine.api import RunResult
from ..engine.config import RunConfig
from ..engine.recorded import nearest_recorded, recorded_run, recorded_runs
from ..engine.scratch import scratch_dir
from ..errors import ConfigError
from ..experiments.data_stall import predict_stall_for
from ..experiments.interval_sweep import measure_timings
from ..theory.data_stall import Calibration
from ..theory.lab_model import RunPrediction, predict_run
from .common import LEDGER_NOTE, PanelNote, RunControls, big_number, chart_widget, forget_old_runs, set_big_number, show_panel
from .layout import float_slider, interval_slider

#: The data-stall model's constants where a run does not measure them: reading a batch from memory
#: in the loop (R) and handing one over from a worker process (H), seconds (chapter 5, 2-core machine).
READ_S = 0.0004
HANDOFF_S = 0.001

#: The dashboard's defaults: the recordings ``every-*``, ``no-failures``, ``async-every-25`` and
#: ``deep-pipeline`` (tools/record_runs.py) were made with them.
DEFAULTS = dict(steps=500, threads=1, seed=1, ckpt="sync", ckpt_every=25, mtbf=10.0, workers=0, prefetch=2,
                io_latency_ms=5.0)

#: Fields the recovery work adds to RunConfig; a lever for each appears when the field exists.
OPTIONAL_LEVERS = ("failure_mode", "hot_spare", "hot_spares")
#: Choices a lever leaves out: a full disk needs a small file system of its own to fill (chapter 6 shows it).
LEFT_OUT = {"failure_mode": ("disk-full",)}

CHART_WIDTH = 560  # pixels: the levers and the charts fit side by side on a 1280-pixel screen
_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run").properties(width=CHART_WIDTH, height=60)


def _fields() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(RunConfig)}


def _describe(name: str, value: Any) -> str:
    """A recovery lever's setting for a run's label: ``hot spare``, ``hang``."""
    if isinstance(value, bool):
        return name.replace("_", " ") if value else f"no {name.replace('_', ' ')}"
    return str(value) if name == "failure_mode" else f"{name.replace('_', ' ')} {value}"


def _lever_for(name: str, field: dataclasses.Field) -> W.Widget:
    """A widget for a RunConfig field the dashboard does not know in advance: a dropdown for a
    choice, a checkbox for a switch, an integer box otherwise."""
    rule = field.metadata.get("rule")
    label = name.replace("_", " ")
    choices = getattr(rule, "choices", None)
    default = field.default
    if choices:
        options = [c for c in choices if c not in LEFT_OUT.get(name, ())]
        return W.Dropdown(options=options, value=default, description=label)
    if isinstance(default, bool):
        return W.Checkbox(value=default, description=label, indent=False)
    if isinstance(default, int):
        return W.BoundedIntText(value=default, min=0, max=16, description=label)
    return W.Text(value=str(default), description=label)


def _failure_mode_in_the_model(config: RunConfig, timings, mtbf: float):
    """The lab model's inputs for the run's failure mode: ``(timings, mtbf_s, a note)``.

    A hang is found only after the watchdog's timeout, a silence the measured phase costs do not hold:
    it comes before each relaunch. A failure the process survives (a loader rebuilt in place) loses
    no work and launches nothing: the model sees no failures, and the note says so.
    """
    mode = getattr(config, "failure_mode", None)
    if mode is None or mtbf == math.inf:
        return timings, mtbf, ""
    from ..recovery.modes import MODES

    if not MODES[mode].fatal:
        return timings, math.inf, f"; a {mode} is repaired in place: the model counts no restarts"
    timeout = config.resolved_hang_timeout() if mode == "hang" else None
    if timeout:
        timings = dataclasses.replace(timings, relaunch_delay_s=timings.relaunch_delay_s + timeout)
        return timings, mtbf, f"; each hang adds the watchdog's {timeout:g} s"
    return timings, mtbf, ""


class WorkshopDashboard:
    """Levers, Run, live charts and the theory beside them, for a room of participants.

    ``steps`` and any other :class:`RunConfig` field given as a keyword are fixed for
    every run; the levers set the rest. ``recorded=True`` starts with recorded runs
    (nothing trains: the recording nearest to the levers is loaded).
    """

    history_size = 5

    def __init__(self, steps: int = DEFAULTS["steps"], recorded: bool = False, out_root: str | Path | None = None,
                 **fixed: Any):
        self.fixed = {"threads": DEFAULTS["threads"], "seed": DEFAULTS["seed"], **fixed, "steps": steps}
        RunConfig(**self.fixed)  # fail now on a bad fixed setting, not at the first click
        self.out_root = Path(out_root) if out_root else scratch_dir("goodputlab-dashboard-")
        self.strategy = W.Dropdown(options=registry.names(), value=DEFAULTS["ckpt"], description="checkpoint strategy")
        self.ckpt_every = interval_slider(DEFAULTS["ckpt_every"], max(10, steps), off=True)
        self.mtbf = float_slider(DEFAULTS["mtbf"], 0.0, 30.0, 0.5, "MTBF (s, 0 = none)")
        self.workers = W.IntSlider(value=DEFAULTS["workers"], min=0, max=4, description="loader workers")
        self.prefetch = W.IntSlider(value=DEFAULTS["prefetch"], min=1, max=8, description="prefetch per worker (batches)",
                                    disabled=True)
        self.io_latency_ms = float_slider(DEFAULTS["io_latency_ms"], 0.0, 60.0, 1.0, "storage latency (ms)")
        fields = _fields()
        self.extra_levers: dict[str, W.Widget] = {
            name: _lever_for(name, fields[name]) for name in OPTIONAL_LEVERS if name in fields
        }
        self.controls = RunControls(steps, recorded=recorded)
        self.button, self.progress, self.status = self.controls.button, self.controls.progress, self.controls.status
        self.headline = big_number("goodput")
        self.prediction_line = W.HTML(value="")
        self.timeline = chart_widget(_EMPTY)
        self.breakdown = chart_widget(_EMPTY)
        self.history: list[tuple[str, dict]] = []
        self.result: RunResult | None = None
        self.prediction: RunPrediction | None = None
        self.prediction_source = ""
        self._recorded_costs: dict[tuple, tuple[str, Any]] = {}  # _cost_key -> (source, timings)
        self._own_runs: dict[tuple, RunResult] = {}  # _cost_key -> the last real run

        self.workers.observe(self._on_workers, names="value")
        self.button.on_click(lambda _: self.run_once())
        for lever in self.levers().values():
            lever.observe(lambda _: self.predict(), names="value")
        self.controls.recorded.observe(lambda _: self.predict(), names="value")

        levers = W.VBox([
            W.HTML("<b>checkpoints</b>"), self.strategy, self.ckpt_every,
            W.HTML("<b>failures</b>"), self.mtbf, *self.extra_levers.values(),
            W.HTML("<b>input pipeline</b>"), self.workers, self.prefetch, self.io_latency_ms,
        ])
        results = W.VBox([self.headline, self.prediction_line, self.timeline, self.breakdown, PanelNote(LEDGER_NOTE)],
                         layout=W.Layout(flex="1 1 auto", min_width="0"))
        self.widget = W.VBox([self.controls.widget, W.HBox([levers, results])])
        self.preview: tuple[str, RunResult] | None = None  # a recorded run drawn until the first Run
        self.predict()
        self._show_preview()

    # --- what the levers mean -----------------------------------------------------------------------
    def levers(self) -> dict[str, W.Widget]:
        """Every lever by the RunConfig field it sets."""
        return {"ckpt": self.strategy, "ckpt_every": self.ckpt_every, "mtbf": self.mtbf, **self.extra_levers,
                "workers": self.workers, "prefetch": self.prefetch, "io_latency_ms": self.io_latency_ms}

    def _on_workers(self, change) -> None:
        self.prefetch.disabled = change["new"] == 0  # prefetch needs worker processes

    def config(self) -> RunConfig:
        """The experiment the levers describe (raises ConfigError on a bad combination)."""
        settings = {name: lever.value for name, lever in self.levers().items()}
        if settings["workers"] == 0:
            settings["prefetch"] = None
        return RunConfig(**{**self.fixed, **settings})

    def label(self, config: RunConfig) -> str:
        mtbf = f"MTBF {config.mtbf:g}s" if config.mtbf > 0 else "no failures"
        extra = "".join(f", {_describe(name, getattr(config, name))}" for name in self.extra_levers
                        if getattr(config, name) != _fields()[name].default)
        return f"#{len(self.history) + 1}: {config.ckpt} every {config.ckpt_every}, {mtbf}, depth {config.pipeline_depth}{extra}"

    def _cost_key(self, config: RunConfig) -> tuple:
        """Runs whose phase costs stand for ``config``'s: the same strategy, model and recovery levers
        (a hot spare's restart is not a cold one's; a hang adds the watchdog's timeout)."""
        return (config.ckpt, config.model, *(getattr(config, name) for name in self.extra_levers))

    # --- the theory beside the measurement ----------------------------------------------------------
    def cost_source(self, config: RunConfig) -> tuple[str, Any]:
        """The phase costs that feed the prediction, and where they were measured: the dashboard's
        last run with this strategy, model and recovery levers (:meth:`_cost_key`), else the recording
        nearest to ``config`` among those with them (or with the same strategy and model); a run
        without failures borrows the recording's restore and relaunch costs."""
        key = self._cost_key(config)
        if key not in self._recorded_costs:
            recordings = recorded_runs()
            alike = [n for n, r in recordings.items() if self._cost_key(r.config) == key]
            same = alike or [n for n, r in recordings.items() if self._cost_key(r.config)[:2] == key[:2]]
            nearest = nearest_recorded(config, among=same or None)
            self._recorded_costs[key] = (f"recorded run {nearest.name!r}", measure_timings(recorded_run(nearest.name).events))
        source, timings = self._recorded_costs[key]
        if key in self._own_runs:
            own = self._own_runs[key]
            recorded = timings
            timings = measure_timings(own.events)
            source = "your last run"
            if own.summary["failures"] == 0:
                timings = dataclasses.replace(timings, restore_s=recorded.restore_s, relaunch_delay_s=recorded.relaunch_delay_s)
                source = "your last run (restarts: a recorded run)"
        return source, timings

    def predict(self) -> RunPrediction | None:
        """The lab model's prediction for the levers (None, with a note, for a bad combination)."""
        try:
            config = self.config()
        except ConfigError as e:
            self.prediction = None
            self.prediction_line.value = f"<span style='color:#888'>theory: no prediction ({e})</span>"
            return None
        source, timings = self.cost_source(config)
        step_s = timings.compute_s + timings.step_other_s
        stall = predict_stall_for(config, Calibration(step_s=step_s, read_s=READ_S, handoff_s=HANDOFF_S))
        timings = dataclasses.replace(timings, data_wait_s=stall.wait_per_step_s)
        every = config.ckpt_every if isinstance(config.ckpt_every, int) else 0
        mtbf = config.mtbf if config.mtbf > 0 else math.inf
        timings, mtbf, mode_note = _failure_mode_in_the_model(config, timings, mtbf)
        self.prediction = predict_run(timings, config.steps, every, mtbf)
        self.prediction_source = source
        p = self.prediction
        self.prediction_line.value = (
            f"<div style='font-size:1.1em'>theory predicts <span style='font-size:1.5em;font-weight:bold'>"
            f"{p.goodput:.1%}</span> <span style='color:#666'>&plusmn; {p.goodput_sd:.1%} for one run, "
            f"{p.failures:.1f} failures expected (lab model; costs measured on {source}, data wait from the stall model"
            f"{mode_note})</span></div>"
        )
        if self.result is not None or self.preview is not None:
            self._draw_breakdown()
        return p

    # --- running ------------------------------------------------------------------------------------
    def run_once(self) -> RunResult | None:
        """Run the experiment the levers describe (or load the nearest recording) and redraw."""
        started = self.controls.run(self.config, self.out_root / f"run-{len(self.history) + 1:03d}")
        if started is None:
            return None
        config, result = started
        self.result = result
        if not self.controls.recorded.value:  # the next prediction uses this run's own costs
            self._own_runs[self._cost_key(config)] = result
        self.history.append((self.label(config), result.summary))
        self._forget_old_runs()
        self.predict()
        self.redraw()
        return result

    def _forget_old_runs(self) -> None:
        self.history = forget_old_runs(self.history, self.history_size, self.out_root)

    def _show_preview(self) -> None:
        """Before the first Run, draw the recorded run nearest to the levers, so the dashboard (and its
        static figure on the website) shows a run rather than empty charts. It is not a run of the
        session: ``result``, ``history`` and :meth:`figures` leave it out."""
        config = self.config()
        nearest = nearest_recorded(config)
        preview = recorded_run(nearest.name)
        self.preview = (nearest.name, preview)
        set_big_number(self.headline, "goodput", f"{preview.goodput:.1%}",
                       f"a recorded run like these levers ({nearest.name!r}); press Run to train your own")
        self.timeline.chart = charts.timeline(preview.ledger, width=CHART_WIDTH)
        self._draw_breakdown()

    def _draw_breakdown(self) -> None:
        rows = []
        if self.prediction is not None:
            rows += self.prediction.breakdown_rows("theory, these levers")
        for label, summary in reversed(self.history):
            rows += charts.theory.summary_rows(summary, label)
        if not self.history and self.preview is not None:
            rows += charts.theory.summary_rows(self.preview[1].summary, f"recorded run {self.preview[0]!r}")
        self.breakdown.chart = charts.theory.breakdown_side_by_side(
            rows, width=CHART_WIDTH - 120, title="where the time went: the theory for the levers, then your runs (newest first)")

    def redraw(self) -> None:
        """Headline, timeline and breakdown from ``self.result``."""
        if self.result is None:
            return
        s = self.result.summary
        set_big_number(self.headline, "goodput", f"{s['goodput']:.1%}",
                       f"measured: wall {s['wall_s']:.1f} s, {s['failures']} failures, {s['checkpoints']} checkpoints")
        self.timeline.chart = charts.timeline(self.result.ledger, width=CHART_WIDTH)
        self._draw_breakdown()
        self.status.value = "done" if s["completed"] else f"stopped: {s['stop_reason']}"

    def figures(self) -> dict[str, Any]:
        """The dashboard's figures (for tests and ``record_metrics``)."""
        return {
            "goodput": None if self.result is None else self.result.goodput,
            "predicted": None if self.prediction is None else self.prediction.goodput,
            "runs": len(self.history),
            "levers": list(self.levers()),
            "recorded": self.controls.recorded.value,
        }

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
