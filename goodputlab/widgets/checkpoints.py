"""Chapter 4's panel: pick a checkpoint strategy, a state size and an interval; see Daly's
goodput curves for every strategy, then run the experiment for real and see where it lands."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as W

from ..engine.scratch import scratch_dir
from ..experiments import strategy_compare as sc
from ..engine.api import RunResult
from ..charts.checkpoints import goodput_vs_interval
from ..charts.runs import timeline
from ..checkpoints import registry
from ..engine.config import RunConfig
from ..training.workload import PRESETS
from .common import (LEDGER_NOTE, PanelNote, RunControls, big_number, chart_widget, models_that_fit, set_big_number,
                     show_panel)
from .layout import interval_slider, log_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run").properties(width=620, height=60)
DEFAULT_RESTART_S = 2.5
"""Seconds a failure costs besides lost work before any run has measured it (a worker launch with torch)."""


class CheckpointPanel:
    """Controls: strategy, model preset (state size), interval (steps), MTBF (s).

    The curve chart redraws whenever a control changes (theory only, no run):
    Daly's goodput for each strategy with the save costs measured for that
    preset (``save_costs[model][strategy]``, seconds; measured on first use with
    :func:`goodputlab.experiments.checkpoint_stall.measure_strategy` when not given). **Run** runs the
    experiment and adds its measured goodput to the chart as a circle.
    ``steps`` and other keyword settings are fixed for every run. Of ``models``, the panel offers
    those whose run fits in the memory available (``memory_bytes``, default: this machine's now)
    and says why it leaves out the others.
    """

    def __init__(
        self,
        steps: int = 200,
        models: tuple[str, ...] = ("tiny", "small"),
        save_costs: dict[str, dict[str, float]] | None = None,
        out_root: str | Path | None = None,
        memory_bytes: int | None = None,
        **fixed: Any,
    ):
        self.fixed = {"steps": steps, **fixed}
        RunConfig(**self.fixed)  # fail now on a bad fixed setting
        self.out_root = Path(out_root) if out_root else scratch_dir("goodputlab-ckpt-panel-")
        self.save_costs: dict[str, dict[str, float]] = {m: dict(c) for m, c in (save_costs or {}).items()}
        self.restart_s: dict[str, float] = {}  # per model, from runs with failures
        self.step_s: dict[str, float] = {}  # per model: seconds of training per step, from runs
        self.measured: list[dict[str, Any]] = []  # {model, strategy, interval_s, goodput}
        self.result: RunResult | None = None
        self.strategy = W.ToggleButtons(options=list(registry.names()), value=registry.BASELINE, description="strategy")
        # only the model sizes whose run fits in this machine's memory (Binder: about 2 GB)
        offered, left_out = models_that_fit(models, memory_bytes)
        self.model = W.Dropdown(
            options=[(f"{m} ({PRESETS[m].state_bytes / 1e6:.0f} MB state)", m) for m in offered],
            value=offered[0], description="state size",
        )
        self.memory_note = W.Label(value=left_out)
        self.ckpt_every = interval_slider(20, max(10, steps))
        self.mtbf = log_slider(4.0, 0.5, 60.0, "MTBF (s)")
        self.controls = RunControls(steps)
        self.button, self.progress, self.status = self.controls.button, self.controls.progress, self.controls.status
        self.headline = big_number("goodput")
        self.curves = chart_widget(_EMPTY)
        self.timeline = chart_widget(_EMPTY)
        for control in (self.strategy, self.model, self.ckpt_every, self.mtbf):
            control.observe(lambda _: self.redraw_theory(), names="value")
        self.button.on_click(lambda _: self.run_once())
        self.widget = W.VBox(
            [
                self.strategy,
                W.HBox([W.VBox([self.model, self.ckpt_every]), W.VBox([self.mtbf])]),
                self.memory_note,
                self.controls.widget,
                self.headline,
                self.curves,
                self.timeline,
                PanelNote("Each curve is Daly's goodput for one strategy at the save cost measured for this state "
                          "size; a circle is a run you made, at its interval in seconds of training. The timeline is "
                          f"your last run. {LEDGER_NOTE}"),
            ]
        )

    # --- what the controls mean -----------------------------------------------------------
    def config(self) -> RunConfig:
        """The experiment the controls describe (raises ConfigError on a bad combination)."""
        return RunConfig(
            **{
                **self.fixed,
                "ckpt": self.strategy.value,
                "model": self.model.value,
                "ckpt_every": self.ckpt_every.value,
                "mtbf": self.mtbf.value,
            }
        )

    def costs_for(self, model: str) -> dict[str, float]:
        """Save cost (seconds) of each strategy for ``model``; measured here the first time it is needed."""
        if model not in self.save_costs:
            from ..experiments import checkpoint_stall as stall

            self.status.value = f"measuring a save of each strategy for {model}..."
            objs, device = stall.build_training_state(model)
            costs = {}
            for s in registry.names():
                root = Path(tempfile.mkdtemp(prefix=f"measure-{s}-", dir=self.out_root))
                costs[s] = stall.measure_strategy(s, objs, device, root, saves=1, probe=False, restore=False)["blocking_s"]
            self.save_costs[model] = costs
            self.status.value = ""
        return self.save_costs[model]

    def chosen_interval_s(self) -> float | None:
        """The slider's interval in seconds of training, once a run of this model measured a step."""
        per_step = self.step_s.get(self.model.value)
        return self.ckpt_every.value * per_step if per_step else None

    def theory_chart(self) -> alt.LayerChart:
        """Daly's goodput versus interval for every strategy at the chosen model and MTBF, with measured runs."""
        model, mtbf = self.model.value, self.mtbf.value
        costs = self.costs_for(model)
        restart = self.restart_s.get(model, DEFAULT_RESTART_S)
        lo = max(1e-3, 0.2 * min(sc.optimum(c, restart, mtbf)["interval_s"] for c in costs.values()))
        rows = sc.goodput_curves(costs, restart, mtbf, sc.log_intervals(lo, 3 * mtbf))
        optima = {s: sc.optimum(c, restart, mtbf) for s, c in costs.items()}
        points = [m for m in self.measured if m["model"] == model and abs(m["mtbf"] - mtbf) < 1e-9]
        return goodput_vs_interval(rows, optima=optima, measured=points, chosen_interval_s=self.chosen_interval_s())

    def redraw_theory(self) -> None:
        self.curves.chart = self.theory_chart()

    # --- running ---------------------------------------------------------------------------
    def run_once(self) -> RunResult | None:
        """Run the experiment the controls describe, record its point and redraw; None on bad input."""
        started = self.controls.run(self.config, self.out_root / f"run-{len(self.measured) + 1:03d}")
        if started is None:
            return None
        config, result = started
        self.result = result
        model = config.model
        rows = result.per_step()
        if rows:
            self.step_s[model] = statistics.median(r["compute_s"] + r["data_wait_s"] for r in rows)
        restart = sc.restart_cost_s(result)
        if restart is not None:
            self.restart_s[model] = restart
        self.costs_for(model)[config.ckpt] = sc.save_cost_s(result)  # the run's own measurement wins
        self.measured.append(
            {"model": model, "strategy": config.ckpt, "mtbf": config.mtbf, "interval_s": sc.interval_s(result), "goodput": result.goodput}
        )
        self.redraw()
        return result


    def redraw(self) -> None:
        """Headline, curves and the latest run's timeline."""
        self.redraw_theory()
        if self.result is None:
            return
        s = self.result.summary
        set_big_number(
            self.headline,
            "goodput",
            f"{s['goodput']:.1%}",
            f"{s['config']['ckpt']}: wall {s['wall_s']:.1f} s, {s['failures']} failures, "
            f"checkpoint_save {s['buckets']['checkpoint_save']:.2f} s",
        )
        self.timeline.chart = timeline(self.result.ledger)
        self.status.value = "done" if s["completed"] else f"stopped: {s['stop_reason']}"

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
