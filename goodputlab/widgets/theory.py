"""Panels for the theory chapters: failures at scale (chapter 2), the checkpoint interval (chapter 3).

As in :mod:`goodputlab.widgets.run_panel`, each panel keeps its logic in plain
methods (``simulate_once()``, ``update()``, ``compute()``) that the sliders
call and the tests call directly; charts are offline ``JupyterChart`` widgets
redrawn by assigning ``.chart``.
"""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import ipywidgets as W

from .. import theory
from ..charts import cluster as cluster_charts
from ..charts import theory as theory_charts
from ..errors import ConfigError
from ..theory import SimConfig, SimResult, simulate
from .common import big_number, chart_widget, definitions_note, set_big_number, show_panel
from .layout import choice_slider, log_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="simulating...").properties(width=520, height=40)
SECONDS_PER_YEAR = 365.0 * theory.SECONDS_PER_DAY

#: At most about this many simulated failures per redraw of the cluster panel (trials x failures).
MAX_FAILURE_CELLS = 400_000

#: Save costs (s) and restarts (min) the chapter-3 sliders step through: zero (the worked example's
#: free saves and restarts) and then a few per decade, so the useful range fills the track.
SAVE_COSTS_S: tuple[float, ...] = (0, 1, 2, 4, 8, 15, 30, 60, 120, 240, 480, 900, 1800)
RESTARTS_MIN: tuple[float, ...] = (0, 0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120)

#: Cluster sizes the chapter-2 slider steps through (powers of two up to 128k).
CLUSTER_SIZES: tuple[int, ...] = tuple(2**k for k in range(0, 18))


class ClusterPanel:
    """Chapter 2: how cluster size and per-device reliability set the failure rate and the goodput.

    Sliders: devices, per-device MTBF (years), job length (days), checkpoint
    interval (minutes), blocking save (seconds), restart (minutes). Each
    change re-runs the Monte Carlo simulator (:func:`goodputlab.theory.simulate`,
    ``trials`` runs of the whole job) with failures drawn in proportion to
    Llama 3's causes (fewer trials when each run has very many failures,
    so a redraw stays quick), and redraws: the MTBF-versus-size chart with this
    cluster marked, the simulated time breakdown, and the causes of the
    simulated failures. Defaults are Llama 3's: 16,384 GPUs, ~5.2 years per
    GPU, 54 days.
    """

    def __init__(self, trials: int = 200, seed: int = 0):
        self.trials, self.seed = trials, seed
        llama_device_mtbf = theory.device_mtbf_for_count(
            theory.LLAMA3_GPUS, theory.LLAMA3_DURATION_S, theory.LLAMA3_INTERRUPTIONS
        )
        self.devices = W.SelectionSlider(
            options=[(f"{n:,}", n) for n in CLUSTER_SIZES],
            value=theory.LLAMA3_GPUS,
            description="devices",
            continuous_update=False,
        )
        self.device_mtbf_years = log_slider(llama_device_mtbf / SECONDS_PER_YEAR, 0.1, 100.0, "per-device MTBF (years)")
        self.days = W.IntSlider(
            value=theory.LLAMA3_DAYS, min=1, max=120, description="job length (days)",
            continuous_update=False,
        )
        self.interval_min = log_slider(10.0, 1.0, 480.0, "checkpoint every (min)")
        self.save_s = log_slider(5.0, 0.5, 1800.0, "blocking save (s)")
        self.restart_min = log_slider(5.0, 0.5, 120.0, "restart + reload (min)")
        self.headline = big_number("goodput")
        self.facts = W.HTML()
        self.status = W.Label(value="")
        # drawn by the first simulate_once() below
        self.mtbf_chart = chart_widget(_EMPTY)
        self.breakdown_chart = chart_widget(_EMPTY)
        self.cause_chart = chart_widget(_EMPTY)
        self.result: SimResult | None = None
        for control in self.controls:
            control.observe(lambda _change: self.simulate_once(), names="value")
        self.widget = W.VBox(
            [
                W.HBox([W.VBox(self.controls[:3]), W.VBox(self.controls[3:])]),
                self.headline,
                self.facts,
                definitions_note(),
                self.status,
                self.mtbf_chart,
                self.breakdown_chart,
                self.cause_chart,
            ]
        )
        self.simulate_once()

    @property
    def controls(self) -> list[W.Widget]:
        return [self.devices, self.device_mtbf_years, self.days, self.interval_min, self.save_s, self.restart_min]

    def config(self) -> SimConfig:
        """The simulated job the sliders describe; failure causes in Llama 3's proportions."""
        causes = theory.llama3_cause_table()
        device_mtbf_s = self.device_mtbf_years.value * SECONDS_PER_YEAR
        duration_s = self.days.value * theory.SECONDS_PER_DAY
        # keep one redraw under a second or so: fewer trials when each has very many failures
        expected = self.devices.value * duration_s / device_mtbf_s
        trials = min(self.trials, max(5, int(MAX_FAILURE_CELLS / max(expected, 1.0))))
        return SimConfig(
            devices=self.devices.value,
            duration_s=duration_s,
            interval_s=self.interval_min.value * 60.0,
            # the cause table sets only the mix: one device, observed for device_mtbf x (total count)
            # seconds, gives a rate of exactly 1 / device_mtbf per device
            failure_causes=causes,
            causes_reference_s=device_mtbf_s * sum(count for _, count in causes),
            causes_reference_devices=1,
            save_s=self.save_s.value,
            restart_s=self.restart_min.value * 60.0,
            trials=trials,
            seed=self.seed,
        )

    def simulate_once(self) -> SimResult | None:
        """Simulate the job the sliders describe and redraw; ``None`` (and a message) on bad input."""
        try:
            config = self.config()
        except ConfigError as e:
            self.status.value = f"not simulated: {e}"
            return None
        self.result = simulate(config)
        self.status.value = ""
        self.redraw()
        return self.result

    def figures(self) -> dict[str, Any]:
        """The headline numbers of the last simulation (job MTBF in hours, failures, goodput)."""
        r, c = self.result, self.result.config
        return {
            "devices": c.devices,
            "job_mtbf_h": c.job_mtbf_s / theory.SECONDS_PER_HOUR,
            "failures_per_day": theory.SECONDS_PER_DAY / c.job_mtbf_s,
            "expected_failures": c.expected_failures,
            "simulated_failures": r.interruptions_mean,
            "goodput": r.goodput_mean,
            "goodput_p5": r.goodput_p5,
            "goodput_p95": r.goodput_p95,
            "ettr": r.ettr_mean,
            "daly_goodput": theory.daly_goodput(c.interval_s, c.save_s, c.restart_s, c.job_mtbf_s),
            "daly_ettr": theory.daly_ettr(c.interval_s, c.save_s, c.restart_s, c.job_mtbf_s),
        }

    def redraw(self) -> None:
        if self.result is None:
            return
        f = self.figures()
        set_big_number(
            self.headline,
            "simulated goodput",
            f"{f['goodput']:.1%}",
            f"(5th-95th percentile of {self.result.config.trials} runs: {f['goodput_p5']:.1%}-{f['goodput_p95']:.1%}); "
            f"ETTR {f['ettr']:.1%}",
        )
        self.facts.value = (
            f"{f['devices']:,} devices: one failure every <b>{theory.human_duration(f['job_mtbf_h'] * 3600)}</b>"
            f" ({f['failures_per_day']:.3g} a day), <b>{f['expected_failures']:,.0f}</b> expected in"
            f" {self.days.value} days (simulated mean {f['simulated_failures']:,.1f});"
            f" Daly's closed form: {f['daly_goodput']:.1%} goodput, {f['daly_ettr']:.1%} ETTR"
        )
        self.mtbf_chart.chart = cluster_charts.cluster_mtbf_chart(
            self.device_mtbf_years.value * SECONDS_PER_YEAR, highlight_devices=self.devices.value
        )
        self.breakdown_chart.chart = theory_charts.breakdown_side_by_side(
            self.result.breakdown_rows(f"simulated, {self.devices.value:,} devices"),
            title="where the time went (simulated mean)",
        )
        counts = self.result.causes_mean
        component = {r["cause"]: r["component"] for r in theory.LLAMA3_INTERRUPTION_CAUSES}
        rows = [
            {"cause": cause, "component": component.get(cause, "Planned"), "count": n, "share": 0.0}
            for cause, n in counts.items()
        ]
        total = sum(r["count"] for r in rows) or 1.0
        for r in rows:
            r["share"] = r["count"] / total
        self.cause_chart.chart = cluster_charts.cause_chart(rows).properties(
            title=f"what broke: mean failures per simulated job by cause ({total:,.1f} in all)"
        )

    def _ipython_display_(self) -> None:
        show_panel(self.widget)


class IntervalPanel:
    """Chapter 3: the U-curve of goodput against the checkpoint interval, with the optima moving.

    Sliders: checkpoint interval (minutes), save cost (seconds), job MTBF
    (hours), restart (minutes). :meth:`update` recomputes Young's and Daly's
    optima and the goodput at the chosen interval (first-order and Daly) and
    redraws the curve; :meth:`simulate_here` adds the simulator's answer at
    the chosen interval as a point. Defaults: the worked example (8.6
    failures a day, free saves and restarts, 2-hour interval).
    """

    def __init__(self, simulate_trials: int = 200, simulated_days: float = 365.0, seed: int = 0):
        self.simulate_trials, self.simulated_days, self.seed = simulate_trials, simulated_days, seed
        self.interval_min = log_slider(120.0, 1.0, 720.0, "checkpoint every (min)")
        self.save_s = choice_slider(SAVE_COSTS_S, 0.0, "save cost (s)")
        self.mtbf_h = log_slider(theory.WORKED_EXAMPLE_MTBF_S / 3600.0, 0.25, 200.0, "job MTBF (hours)")
        self.restart_min = choice_slider(RESTARTS_MIN, 0.0, "restart (min)")
        self.simulate_button = W.Button(description="simulate this interval", icon="play")
        self.headline = big_number("goodput")
        self.facts = W.HTML()
        self.simulated: list[dict[str, Any]] = []
        self.chart = chart_widget(self._curve())
        for control in self.controls:
            control.observe(lambda _change: self.update(), names="value")
        self.simulate_button.on_click(lambda _: self.simulate_here())
        self.widget = W.VBox(
            [
                W.HBox([W.VBox(self.controls[:2]), W.VBox(self.controls[2:])]),
                self.simulate_button,
                self.headline,
                self.facts,
                definitions_note(),
                self.chart,
            ]
        )
        self.update()

    @property
    def controls(self) -> list[W.Widget]:
        return [self.interval_min, self.save_s, self.mtbf_h, self.restart_min]

    def settings(self) -> dict[str, float]:
        """The sliders in seconds: ``interval_s, save_s, restart_s, mtbf_s``."""
        return {
            "interval_s": self.interval_min.value * 60.0,
            "save_s": float(self.save_s.value),
            "restart_s": self.restart_min.value * 60.0,
            "mtbf_s": self.mtbf_h.value * 3600.0,
        }

    def figures(self) -> dict[str, float]:
        """Optima (seconds) and goodput at the chosen interval under each model."""
        s = self.settings()
        tau, save, restart, mtbf = s["interval_s"], s["save_s"], s["restart_s"], s["mtbf_s"]
        first = theory.expected_goodput(tau, save, restart, mtbf)
        daly = theory.daly_goodput(tau, save, restart, mtbf)
        return {
            **s,
            "young_s": theory.young_interval(save, mtbf),
            "daly_s": theory.daly_interval(save, mtbf),
            "first_order": first,
            "daly": daly,
            "daly_ettr": theory.daly_ettr(tau, save, restart, mtbf),
            "first_order_ettr": theory.first_order_ettr(tau, restart, mtbf, save_s=save),
            "hours_lost_per_day_first_order": 24.0 * (1.0 - first),
            "hours_lost_per_day_daly": 24.0 * (1.0 - daly),
        }

    def _curve(self):
        s = self.settings()
        lo = min(60.0, s["interval_s"] / 2)
        hi = max(4.0 * s["mtbf_s"], 2.0 * s["interval_s"])
        return theory_charts.goodput_curve(
            s["save_s"],
            s["restart_s"],
            s["mtbf_s"],
            interval_range_s=(lo, hi),
            chosen_interval_s=s["interval_s"],
            measured=[r for r in self.simulated if r["key"] == self._key()] or None,
        )

    def _key(self) -> tuple[float, float, float]:
        s = self.settings()
        return (s["save_s"], s["restart_s"], s["mtbf_s"])

    def update(self) -> dict[str, float]:
        """Recompute the figures for the sliders and redraw; returns :meth:`figures`."""
        f = self.figures()
        set_big_number(
            self.headline,
            f"goodput at {theory.human_duration(f['interval_s'])}:",
            f"{f['daly']:.1%}",
            f"(Daly's exact model; first order says {f['first_order']:.1%}); ETTR {f['daly_ettr']:.1%}",
        )
        young = "continuously (free saves)" if f["young_s"] == 0 else theory.human_duration(f["young_s"])
        daly = "continuously (free saves)" if f["save_s"] == 0 else theory.human_duration(f["daly_s"])
        self.facts.value = (
            f"Young's optimum: <b>{young}</b>; Daly's: <b>{daly}</b>. "
            f"Hours lost per day: {f['hours_lost_per_day_first_order']:.2f} (first order),"
            f" {f['hours_lost_per_day_daly']:.2f} (Daly)."
        )
        self.chart.chart = self._curve()
        return f

    def simulate_here(self) -> SimResult:
        """Simulate a long job at the chosen settings and add its mean goodput to the chart."""
        s = self.settings()
        config = SimConfig(
            devices=1,
            device_mtbf_s=s["mtbf_s"],
            duration_s=self.simulated_days * theory.SECONDS_PER_DAY,
            interval_s=s["interval_s"],
            save_s=s["save_s"],
            restart_s=s["restart_s"],
            trials=self.simulate_trials,
            seed=self.seed,
        )
        result = simulate(config)
        self.simulated.append(
            {
                "key": self._key(),
                "interval_s": s["interval_s"],
                "goodput": result.goodput_mean,
                "label": f"simulated ({self.simulate_trials} x {self.simulated_days:g} days)",
            }
        )
        self.update()
        return result

    def _ipython_display_(self) -> None:
        show_panel(self.widget)


class CheckpointCalculator:
    """Chapter 3's "your cluster" calculator: from fleet numbers to a checkpoint interval.

    Inputs: devices, per-device MTBF (years), blocking save (seconds),
    restart including reload (minutes). :meth:`compute` returns the job MTBF,
    Young's and Daly's intervals, the goodput at Daly's interval and the
    device-hours lost per day, and shows them as a table.
    """

    def __init__(self, devices: int = 4096, device_mtbf_years: float = 5.0, save_s: float = 30.0, restart_min: float = 10.0):
        self.devices = W.BoundedIntText(value=devices, min=1, max=10_000_000, description="devices")
        self.device_mtbf_years = W.BoundedFloatText(
            value=device_mtbf_years, min=0.001, max=10_000.0, description="per-device MTBF (years)"
        )
        self.save_s = W.BoundedFloatText(value=save_s, min=0.0, max=1e6, description="blocking save (s)")
        self.restart_min = W.BoundedFloatText(
            value=restart_min, min=0.0, max=1e5, description="restart + reload (min)"
        )
        self.output = W.HTML()
        for control in (self.devices, self.device_mtbf_years, self.save_s, self.restart_min):
            control.observe(lambda _change: self.compute(), names="value")
        self.widget = W.VBox([self.devices, self.device_mtbf_years, self.save_s, self.restart_min, self.output,
                              definitions_note()])
        self.compute()

    def compute(self) -> dict[str, float] | None:
        """The recommendation for the inputs (seconds, shares, hours); ``None`` and a message on bad input."""
        try:
            mtbf = theory.cluster_mtbf(int(self.devices.value), self.device_mtbf_years.value * SECONDS_PER_YEAR)
            save, restart = float(self.save_s.value), self.restart_min.value * 60.0
            daly_s = theory.daly_interval(save, mtbf)
            young_s = theory.young_interval(save, mtbf)
        except ConfigError as e:
            self.output.value = f"<span style='color:#d62728'>{e}</span>"
            return None
        goodput = theory.daly_goodput(daly_s, save, restart, mtbf) if daly_s > 0 else math.exp(-restart / mtbf)
        ettr = theory.daly_ettr(daly_s, save, restart, mtbf) if daly_s > 0 else goodput
        result = {
            "job_mtbf_s": mtbf,
            "failures_per_day": theory.SECONDS_PER_DAY / mtbf,
            "young_s": young_s,
            "daly_s": daly_s,
            "goodput": goodput,
            "ettr": ettr,
            "device_hours_lost_per_day": (1.0 - goodput) * 24.0 * int(self.devices.value),
        }
        rows = [
            ("job MTBF", theory.human_duration(mtbf)),
            ("failures per day", f"{result['failures_per_day']:.3g}"),
            ("Young's interval", theory.human_duration(young_s)),
            ("Daly's interval", theory.human_duration(daly_s)),
            ("goodput at Daly's interval", f"{goodput:.1%}"),
            ("ETTR at Daly's interval (saves count as training)", f"{ettr:.1%}"),
            ("device-hours lost per day", f"{result['device_hours_lost_per_day']:,.0f}"),
        ]
        self.output.value = "<table>" + "".join(f"<tr><td>{k}</td><td><b>{v}</b></td></tr>" for k, v in rows) + "</table>"
        return result

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
