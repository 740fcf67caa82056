"""Chapter 8's panel: batch size, learning-rate rule and target loss; throughput, efficiency and goodput redrawn.

As in the other panels, the logic is in plain methods (:meth:`EfficiencyPanel.analysis`,
:meth:`~EfficiencyPanel.redraw`, :meth:`~EfficiencyPanel.run_rule`) that the controls
call and the tests call directly. Moving the target loss or the batch size re-analyses
the measured sweeps at once (the loss curves are kept, so any target at or above the
sweep's can be read off them); choosing a rule that has not been measured yet offers a
**Run** button that trains it for real.
"""

from __future__ import annotations

import math
from typing import Mapping

import altair as alt
import ipywidgets as W

from ..charts.efficiency import factors_chart
from ..efficiency.analysis import SweepAnalysis, SweepResult
from ..efficiency.noise import LR_RULES
from ..errors import ConfigError
from ..training.workload import PRESETS, uniform_loss
from .common import big_number, chart_widget, set_big_number, show_panel
from .layout import float_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run to measure this rule").properties(width=620, height=60)


def _fmt(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


class EfficiencyPanel:
    """Throughput, statistical efficiency and goodput of measured sweeps, one per learning-rate rule.

    ``results`` maps a rule to its :class:`SweepResult` (or is a single result). All must
    share batch sizes and target. ``max_target`` caps the target-loss slider (default:
    0.6 nats above the sweep's target).
    """

    def __init__(self, results: Mapping[str, SweepResult] | SweepResult, max_target: float | None = None):
        if isinstance(results, SweepResult):
            results = {results.config.lr_rule: results}
        if not results:
            raise ValueError("EfficiencyPanel needs at least one measured sweep")
        self.results: dict[str, SweepResult] = dict(results)
        first = next(iter(self.results.values()))
        self.config = first.config
        for rule, r in self.results.items():
            if r.config.lr_rule != rule or r.config.replace(lr_rule=self.config.lr_rule) != self.config:
                raise ValueError(f"the sweep given for {rule!r} is not the same sweep under that rule")
        low = self.config.target_loss
        high = max_target if max_target is not None else min(low + 0.6, uniform_loss(PRESETS[self.config.model].vocab) - 0.2)
        self.rule = W.Dropdown(options=list(LR_RULES), value=self.config.lr_rule, description="learning-rate rule")
        self.target = float_slider(low, low, high, 0.01, "target loss (nats)")
        self.batch = W.SelectionSlider(options=list(self.config.batch_sizes), value=self.config.batch_sizes[len(self.config.batch_sizes) // 2], description="batch size (sequences)")
        self.button = W.Button(description="Run", button_style="primary", icon="play", disabled=True)
        self.progress = W.IntProgress(value=0, min=0, max=len(self.config.batch_sizes) + 1, description="parts")
        self.status = W.Label(value="")
        self.headline = big_number("goodput")
        self.chart = chart_widget(_EMPTY)
        self.current: SweepAnalysis | None = None
        for w in (self.rule, self.target, self.batch):
            w.observe(lambda _: self.redraw(), names="value")
        self.button.on_click(lambda _: self.run_rule())
        self.widget = W.VBox(
            [
                W.HBox([W.VBox([self.rule, self.target, self.batch]), W.VBox([W.HBox([self.button, self.progress]), self.status])]),
                self.headline,
                self.chart,
            ]
        )
        self.redraw()

    # --- what the controls mean ---------------------------------------------------------------
    def analysis(self) -> SweepAnalysis | None:
        """The measured sweep of the chosen rule, analysed at the chosen target (None if not measured)."""
        result = self.results.get(self.rule.value)
        return None if result is None else result.analyse(self.target.value)

    def redraw(self) -> SweepAnalysis | None:
        """Re-analyse and redraw the headline and the three charts; returns the analysis shown."""
        try:
            analysis = self.analysis()
        except ConfigError as e:
            self.status.value = f"not valid: {e}"
            return None
        self.current = analysis
        self.button.disabled = analysis is not None
        if analysis is None:
            self.status.value = f"the {self.rule.value} rule has not been measured: Run trains it ({len(self.config.batch_sizes) - 1} batch sizes)"
            self.headline.value = ""
            self.chart.chart = _EMPTY
            return None
        self.status.value = ""
        self.chart.chart = factors_chart(analysis, selected=self.batch.value)
        set_big_number(self.headline, "goodput", *self.describe(analysis, self.batch.value))
        return analysis

    def describe(self, analysis: SweepAnalysis, batch_size: int) -> tuple[str, str]:
        """The headline for ``batch_size``: the big figure and the sentence beside it."""
        r = analysis.row(batch_size)
        best = (
            f"best: measured {_fmt(analysis.best_batch_size, 'd')}, predicted {_fmt(analysis.predicted_best_batch_size, 'd')} "
            f"(sqrt(B_noise x knee) = {_fmt(analysis.optimal_batch_size, '.0f')}); noise scale at this loss {_fmt(analysis.noise_scale, '.0f')}"
        )
        if not r["reached"]:
            why = "diverged" if r["stopped"] == "diverged" else f"not within {self.config.max_steps} steps"
            return "missed", (
                f"batch {batch_size} ({analysis.lr_rule}, lr {r['lr']:.2g}) did not reach loss {analysis.target_loss:.2f}: {why}; "
                f"the noise scale predicts efficiency {_fmt(r['predicted_efficiency'], '.2f')}. {best}"
            )
        return f"{r['goodput']:,.0f}", (
            f"samples/s at batch {batch_size} = {r['samples_per_s']:,.0f} samples/s x efficiency "
            f"{r['statistical_efficiency']:.2f} (predicted {_fmt(r['predicted_efficiency'], '.2f')}); "
            f"{r['steps_to_target']} steps, {r['samples_to_target']:,} samples to loss {analysis.target_loss:.2f} "
            f"({analysis.lr_rule}, lr {r['lr']:.2g}). {best}"
        )

    # --- measuring a rule -----------------------------------------------------------------------
    def run_rule(self) -> SweepResult | None:
        """Train the chosen rule's sweep for real (same batch sizes, target and seed), then redraw.

        Reuses the measured throughput and the smallest batch's run, which no rule changes.
        Returns None when the rule is already measured.
        """
        rule = self.rule.value
        if rule in self.results:
            return None
        from ..efficiency.sweep import run_sweep

        known = next(iter(self.results.values()))
        self.button.disabled = True
        self.progress.value = 1
        self.status.value = f"training the {rule} rule..."

        def follow(p) -> None:
            self.progress.value = p.done
            if p.phase == "train":
                self.status.value = f"{rule}: batch {p.batch_size}, step {p.step}, loss {p.loss:.3f}"

        try:
            result = run_sweep(
                self.config.replace(lr_rule=rule),
                progress=follow,
                throughput=known.throughput,
                base_run=known.trajectories[self.config.base_batch],
            )
        finally:
            self.button.disabled = False
        self.results[rule] = result
        self.redraw()
        return result

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
