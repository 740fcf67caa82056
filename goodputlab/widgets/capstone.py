"""Chapter 10's panel: your cluster, every lever on one screen, every figure redrawn at once.

Logic in plain methods (:meth:`CapstonePanel.scenario`, :meth:`CapstonePanel.compute`,
:meth:`CapstonePanel.figures`, :meth:`CapstonePanel.redraw`) that the controls
call and the tests call directly. Theory only (no runs): a redraw takes
milliseconds.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import ipywidgets as W

from ..charts import capstone as capstone_charts
from ..charts.site_capstone import DISK_EVERY_STRATEGIES
from ..errors import ConfigError
from ..theory import capstone, human_duration
from .common import big_number, chart_widget, definitions_note, set_big_number, show_panel
from .layout import float_slider, log_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="...").properties(width=520, height=40)
GPU_COUNTS = tuple(2**k for k in range(3, 18))  # 8 .. 131,072


class CapstonePanel:
    """Every lever of the book for one training job; defaults are Llama 3 405B's pretraining.

    Controls: model size (billions of parameters), GPUs, per-GPU MTBF (years),
    storage bandwidth (GB/s), checkpoint strategy (and, for the RAM tiers,
    every how many checkpoints go to storage), hot spares, detection (s),
    restart (min), data-stall share, MFU and the price of a GPU-hour.
    Figures: goodput and effective training time at the optimal interval,
    the checkpoint's size and costs, GPU-hours and money lost per day,
    goodput x MFU; charts: goodput against the interval, where the time goes
    beside Llama 3's defaults, and (with ``lab``) the lab's measured ratios
    beside the cluster's.

    ``lab``: measured lab costs for :func:`goodputlab.theory.capstone.lab_ratio_rows`
    (``save_s``, ``restart_s``, ``mtbf_s``), or None.
    """

    def __init__(self, lab: dict | None = None, days: float = 54.0):
        d = capstone.ClusterScenario()
        self.lab, self.days = lab, days
        self.params_b = log_slider(d.parameters / 1e9, 1.0, 2000.0, "model size (billion params)")
        self.gpus = W.SelectionSlider(options=[(f"{n:,}", n) for n in GPU_COUNTS], value=d.gpus, description="GPUs",
                                      continuous_update=False)
        self.gpu_mtbf_years = log_slider(d.gpu_mtbf_years, 0.3, 50.0, "per-GPU MTBF (years)")
        self.storage_gbps = log_slider(d.storage_bps / 1e9, 1.0, 20_000.0, "storage bandwidth (GB/s)")
        self.strategy = W.ToggleButtons(options=list(capstone.STRATEGIES), value=d.strategy, description="checkpoint",
)
        self.disk_every = W.IntSlider(value=d.disk_every, min=1, max=100, description="RAM tier: storage every (saves)",
                                      continuous_update=False)
        self.spares = W.IntSlider(value=d.spares, min=0, max=1000, step=10, description="hot spares (interruptions)",
                                  continuous_update=False)
        self.detect_s = log_slider(d.detect_s, 1.0, 1800.0, "detection (s)")
        self.restart_min = log_slider(d.restart_s / 60.0, 0.2, 120.0, "restart: reschedule, init (min)")
        self.data_stall = float_slider(d.data_stall_share, 0.0, 0.3, 0.005, "data-stall share", fmt=".1%")
        self.mfu = float_slider(d.mfu, 0.05, 0.8, 0.01, "MFU", fmt=".0%")
        self.price = log_slider(d.price_per_gpu_hour, 0.1, 20.0, "price per GPU-hour ($)", fmt=".2f")
        self.headline = big_number("goodput")
        self.facts = W.HTML()
        self.status = W.Label(value="")
        self.curve_chart = chart_widget(_EMPTY)
        self.breakdown_chart = chart_widget(_EMPTY)
        self.ratio_chart = chart_widget(_EMPTY)
        self.result: capstone.ClusterResult | None = None
        self.defaults = capstone.evaluate(d.replace(days=days))
        for control in self.controls:
            control.observe(lambda _change: self.compute(), names="value")
        self.widget = W.VBox([
            self.strategy,
            W.HBox([W.VBox(self.controls[:6]), W.VBox(self.controls[6:-1])]),  # the last control is the strategy, above
            self.headline, self.facts, definitions_note(), self.status, self.curve_chart, self.breakdown_chart,
            *([self.ratio_chart] if lab else []),
        ])
        self.compute()

    @property
    def controls(self) -> list[W.Widget]:
        return [self.params_b, self.gpus, self.gpu_mtbf_years, self.storage_gbps, self.disk_every, self.spares,
                self.detect_s, self.restart_min, self.data_stall, self.mfu, self.price, self.strategy]

    def scenario(self) -> capstone.ClusterScenario:
        """The job the controls describe (raises ConfigError on a bad combination)."""
        return capstone.ClusterScenario(
            parameters=self.params_b.value * 1e9, gpus=self.gpus.value, gpu_mtbf_years=self.gpu_mtbf_years.value,
            storage_bps=self.storage_gbps.value * 1e9, strategy=self.strategy.value, disk_every=self.disk_every.value,
            spares=self.spares.value, detect_s=self.detect_s.value, restart_s=self.restart_min.value * 60.0,
            data_stall_share=self.data_stall.value, mfu=self.mfu.value, price_per_gpu_hour=self.price.value,
            days=self.days,
        )

    def compute(self) -> capstone.ClusterResult | None:
        """Evaluate the controls' scenario and redraw; None (and a message) on a bad combination."""
        # "storage every" changes nothing unless the RAM copy can be lost with its node: hidden otherwise
        self.disk_every.layout.display = "" if self.strategy.value in DISK_EVERY_STRATEGIES else "none"
        try:
            scenario = self.scenario()
        except ConfigError as e:
            self.status.value = f"not computed: {e}"
            return None
        self.result = capstone.evaluate(scenario)
        self.status.value = ""
        self.redraw()
        return self.result

    def figures(self) -> dict[str, Any]:
        """The headline figures of the last evaluation (:meth:`goodputlab.theory.capstone.ClusterResult.figures`)."""
        return self.result.figures()

    def facts_html(self) -> str:
        r, f = self.result, self.result.figures()
        c = r.checkpoint
        rows = [
            ("checkpoint", f"{f['checkpoint_tb']:.3g} TB ({c.state.checkpoint:g} bytes per parameter), {f['rank_mb']:,.0f} MB per GPU"),
            ("a save", f"written in {human_duration(c.write_s)}, blocks training {human_duration(r.blocking_s)}"
                       + (f", durable {human_duration(r.durable_lag_s)} after its snapshot" if r.durable_lag_s else "")),
            ("failures", f"one every {human_duration(r.scenario.job_mtbf_s)} ({f['failures_per_day']:.3g} a day)"
                         + (f", {r.spare_share:.0%} absorbed by spares" if r.spare_share else "")),
            ("recovery", f"{human_duration(r.recovery_s)} (detect, restart, restore)"
                         + (f"; {r.node_loss_share:.0%} of failures need the storage copy" if r.scenario.strategy.startswith("memory") else "")),
            ("best interval", f"a checkpoint every {human_duration(r.interval_s)}; storage busy {f['storage_busy_share']:.0%} of the time"),
            ("lost per day", f"{f['gpu_hours_lost_per_day']:,.0f} GPU-hours, {f['money_lost_per_day']:,.0f} at "
                             f"{r.scenario.price_per_gpu_hour:.2f} per GPU-hour"),
            ("goodput x MFU", f"{f['useful_flops_share']:.1%} of the GPUs' peak FLOPs became the model"),
        ]
        cells = "".join(f"<tr><td style='padding-right:1em'><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
        return f"<table>{cells}</table>"

    def redraw(self) -> None:
        if self.result is None:
            return
        r, f = self.result, self.result.figures()
        set_big_number(self.headline, "goodput", f"{f['goodput']:.1%}",
                       f"effective training time (ETTR) {f['ettr']:.1%}; Llama 3 defaults: {self.defaults.goodput:.1%}")
        self.facts.value = self.facts_html()
        optimum = {"interval_s": r.interval_s, "goodput": r.goodput}
        self.curve_chart.chart = capstone_charts.interval_chart(capstone_charts.interval_rows(r.scenario, r.interval_s, 30), optimum)
        self.breakdown_chart.chart = capstone_charts.breakdown({"Llama 3 405B defaults": self.defaults, "your cluster": r})
        if self.lab:
            self.ratio_chart.chart = capstone_charts.ratio_chart(capstone.lab_ratio_rows(self.lab, r))

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
