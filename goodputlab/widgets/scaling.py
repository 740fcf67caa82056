"""Chapter 7's panel: one job, any number of ranks, failures and stragglers (the simulator).

:class:`ScalingPanel` starts from the costs a measured run paid (:func:`from_run`) or from
defaults, and lets the reader move the number of ranks, each rank's failure rate, the
straggler factor (and how often a rank straggles) and the checkpoint interval. Every change
re-runs the simulator (:func:`goodputlab.theory.simulate`) for the chosen size and for a
ladder of sizes around it, and redraws the headline figures and where the time goes. Its
logic is in :meth:`~ScalingPanel.simulate_once`, which the tests call directly.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import ipywidgets as W

from ..charts import scaling as scaling_charts
from ..errors import ConfigError
from ..theory import SimConfig, SimResult, scaling, simulate
from .common import big_number, chart_widget, set_big_number, show_panel
from .layout import float_slider, log_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="simulating...").properties(width=520, height=40)

#: The sizes the ranks slider steps through, and the ladder the chart shows.
RANK_SIZES: tuple[int, ...] = tuple(2**k for k in range(0, 15))
LADDER: tuple[int, ...] = (1, 2, 16, 128, 1024, 16384)
MAX_FAILURE_CELLS = 300_000  # trials x expected failures per redraw, at most


class ScalingPanel:
    """Ranks, each rank's MTBF, the straggler factor and share, the checkpoint interval -> simulated goodput.

    Costs (seconds): ``save_s`` (blocking), ``restore_s``, ``restart_s`` and the job's
    ``duration_s``; ``rank_mtbf_s`` and ``interval_s`` are the sliders' starting points. Times
    may be a compressed lab's (the measured run's) or a real cluster's: goodput depends on their
    ratios.
    """

    def __init__(self, *, duration_s: float, rank_mtbf_s: float, interval_s: float, save_s: float,
                 restore_s: float, restart_s: float, straggler_factor: float = 1.5, straggler_share: float = 0.001,
                 ranks: int = 2, trials: int = 300, seed: int = 0):
        self.duration_s, self.save_s, self.restore_s, self.restart_s = duration_s, save_s, restore_s, restart_s
        self.trials, self.seed = trials, seed
        self.ranks = W.SelectionSlider(options=[(f"{n:,}", n) for n in RANK_SIZES], value=ranks, description="ranks",
                                       continuous_update=False)
        self.rank_mtbf_s = log_slider(rank_mtbf_s, rank_mtbf_s / 1e3, rank_mtbf_s * 1e3, "each rank's MTBF (s)")
        self.straggler_factor = float_slider(straggler_factor, 1.0, 4.0, 0.05, "straggler factor (x a step)")
        self.straggler_share = log_slider(max(straggler_share, 1e-5), 1e-5, 1.0, "share of a rank's steps slowed")
        self.interval_s = log_slider(interval_s, interval_s / 100, interval_s * 100, "checkpoint every (s)")
        self.headline = big_number("goodput")
        self.facts = W.HTML()
        self.status = W.Label(value="")
        self.sweep_chart = chart_widget(_EMPTY)
        self.results: dict[int, SimResult] = {}
        for control in self.controls:
            control.observe(lambda _change: self.simulate_once(), names="value")
        self.widget = W.VBox([W.HBox([W.VBox(self.controls[:3]), W.VBox(self.controls[3:])]),
                              self.headline, self.facts, self.status, self.sweep_chart])
        self.simulate_once()

    @classmethod
    def from_run(cls, result, **kwargs) -> ScalingPanel:
        """A panel on the costs a measured distributed run paid (:func:`goodputlab.experiments.scaling.measured_costs`)."""
        from ..experiments.scaling import measured_costs

        costs = measured_costs(result)
        config = result.config
        fields = dict(
            duration_s=result.summary["wall_s"],
            rank_mtbf_s=config.mtbf if config.mtbf > 0 else 10 * result.summary["wall_s"],
            interval_s=max(costs["interval_s"], 1e-3),
            save_s=costs["save_s"],
            restore_s=costs["restore_s"],
            restart_s=costs["restart_s"],
            straggler_factor=config.straggler_factor if config.straggler_prob > 0 else 1.5,
            straggler_share=config.straggler_prob if config.straggler_prob > 0 else 0.01,
            ranks=result.summary.get("world_size", 1),
        )
        fields.update(kwargs)
        return cls(**fields)

    @property
    def controls(self) -> list[W.Widget]:
        return [self.ranks, self.rank_mtbf_s, self.interval_s, self.straggler_factor, self.straggler_share]

    def config(self, ranks: int) -> SimConfig:
        """The simulated job of ``ranks`` ranks the sliders describe (every rank may straggle)."""
        expected = ranks * self.duration_s / self.rank_mtbf_s.value
        trials = min(self.trials, max(5, int(MAX_FAILURE_CELLS / max(expected, 1.0))))
        return SimConfig(
            devices=ranks, duration_s=self.duration_s, interval_s=self.interval_s.value,
            device_mtbf_s=self.rank_mtbf_s.value, save_s=self.save_s, restore_s=self.restore_s,
            restart_s=self.restart_s, straggler_factor=self.straggler_factor.value,
            straggler_share=self.straggler_share.value if self.straggler_factor.value > 1 else 0.0,
            trials=trials, seed=self.seed,
        )

    def simulate_once(self) -> dict[int, SimResult] | None:
        """Simulate the chosen size and the ladder; redraw. Returns ``{ranks: SimResult}`` (None on bad input)."""
        chosen = self.ranks.value
        try:
            self.results = {n: simulate(self.config(n)) for n in sorted(set(LADDER) | {chosen})}
        except ConfigError as e:
            self.status.value = f"not simulated: {e}"
            return None
        self.status.value = ""
        r = self.results[chosen]
        c = r.config
        set_big_number(self.headline, "goodput", f"{r.goodput_mean:.1%}", f"with {chosen:,} ranks (simulated)")
        q = scaling.step_slowed_probability(c.straggler_share, chosen) if c.straggler_factor > 1 else 0.0
        self.facts.value = (
            f"job MTBF {c.job_mtbf_s:.3g} s ({r.interruptions_mean:.3g} failures in {self.duration_s:.3g} s); "
            f"a step has a slow rank with probability {q:.1%}, so the healthy ranks wait "
            f"{c.straggler_wait_share:.1%} of the compute time"
        )
        self.sweep_chart.chart = scaling_charts.scale_sweep_chart(scaling_charts.sweep_rows(self.results))
        return self.results

    def _ipython_display_(self) -> None:
        show_panel(self.widget)

    def state(self) -> dict[str, Any]:
        """The sliders' values (for a chapter to record)."""
        return {"ranks": self.ranks.value, "rank_mtbf_s": self.rank_mtbf_s.value, "interval_s": self.interval_s.value,
                "straggler_factor": self.straggler_factor.value, "straggler_share": self.straggler_share.value}
