"""Chapter 2's recovery panel: detection, restart, hot spares, failure domains and clustered failures, simulated.

The panel keeps its logic in plain methods (:meth:`RecoveryPanel.config`,
:meth:`RecoveryPanel.simulate_once`, :meth:`RecoveryPanel.figures`,
:meth:`RecoveryPanel.lever_rows`) that the sliders call and the tests call
directly.
"""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import ipywidgets as W

from .. import theory
from ..charts import recovery as recovery_charts
from ..charts import theory as theory_charts
from ..errors import ConfigError
from ..theory import SimConfig, SimResult, recovery_at_scale, renewal, simulate
from .common import big_number, chart_widget, definitions_note, set_big_number, show_panel
from .layout import float_slider, log_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="simulating...").properties(width=520, height=40)
DOMAIN_SIZES = (1, 2, 4, 8, 16, 32, 64)

#: Llama 3's device losses per GPU-second, charging every one of its 466 interruptions to one device.
LLAMA3_LOSS_RATE = theory.LLAMA3_INTERRUPTIONS / (theory.LLAMA3_GPUS * theory.LLAMA3_DURATION_S)


#: the baseline the panel compares with: Llama 3's 54 days with the chapter's costs (the sliders' defaults)
BASELINE = {"detect_min": 1.5, "restart_min": 5.0, "spares": 0, "interruption_scale": 1.0, "shape": 1.0, "interval_min": 10.0}


class RecoveryPanel:
    """Llama 3's 54 days on 16,384 GPUs with the recovery levers on sliders.

    Sliders: detection (minutes), restart (minutes: reschedule and initialise),
    hot spares (interruptions the standby pool absorbs) and their swap-in
    time (seconds), the share of device losses that come as whole failure
    domains and the domain size, the Weibull shape of the time between
    failures, and the checkpoint interval (minutes; a save blocks ``save_s``,
    a restore takes ``restore_s``). Each change re-runs the simulator
    (``trials`` runs) and redraws the simulated breakdown beside the baseline
    (every lever at its default), and what each lever is worth on its own
    (closed forms).
    """

    def __init__(self, trials: int = 200, seed: int = 0, save_s: float = 5.0, restore_s: float = 60.0):
        self.trials, self.seed, self.save_s, self.restore_s = trials, seed, save_s, restore_s
        self.detect_min = log_slider(BASELINE["detect_min"], 0.05, 30.0, "detection (min)")
        self.restart_min = log_slider(BASELINE["restart_min"], 0.5, 60.0, "restart: reschedule, init (min)")
        self.spares = W.IntSlider(value=0, min=0, max=600, step=10, description="hot spares (interruptions)",
                                  continuous_update=False)
        self.spare_swap_s = log_slider(60.0, 5.0, 600.0, "spare swap-in (s)")
        self.correlated = float_slider(0.0, 0.0, 1.0, 0.05, "share lost as domains", fmt=".0%")
        self.domain = W.SelectionSlider(options=list(DOMAIN_SIZES), value=8, description="devices per domain",
                                        continuous_update=False)
        self.shape = log_slider(BASELINE["shape"], 0.4, 3.0, "Weibull shape (1: Poisson)")
        self.interval_min = log_slider(BASELINE["interval_min"], 1.0, 240.0, "checkpoint every (min)")
        self.headline = big_number("goodput")
        self.facts = W.HTML()
        self.status = W.Label(value="")
        self.breakdown_chart = chart_widget(_EMPTY)
        self.lever_chart = chart_widget(_EMPTY)
        self.result: SimResult | None = None
        self.baseline: SimResult | None = None
        for control in self.controls:
            control.observe(lambda _change: self.simulate_once(), names="value")
        self.widget = W.VBox([
            W.HBox([W.VBox(self.controls[:4]), W.VBox(self.controls[4:])]),
            self.headline, self.facts, definitions_note(), self.status, self.breakdown_chart, self.lever_chart,
        ])
        self.simulate_once()

    @property
    def controls(self) -> list[W.Widget]:
        return [self.detect_min, self.restart_min, self.spares, self.spare_swap_s,
                self.correlated, self.domain, self.shape, self.interval_min]

    # --- the model -----------------------------------------------------------------------
    def interruption_scale(self) -> float:
        """Interruptions per device lost: ``(1 - c) + c / d`` (fewer, larger events when losses come in domains)."""
        c, d = self.correlated.value, self.domain.value
        return recovery_at_scale.domain_interruption_rate(1, 1.0, d, c)

    def config(self, **overrides: Any) -> SimConfig:
        """The simulated job the sliders describe (``overrides`` replace slider values by name)."""
        detect = overrides.get("detect_min", self.detect_min.value) * 60.0
        restart = overrides.get("restart_min", self.restart_min.value) * 60.0
        spares = overrides.get("spares", self.spares.value)
        scale = overrides.get("interruption_scale", self.interruption_scale())
        return SimConfig(
            devices=theory.LLAMA3_GPUS,
            device_mtbf_s=1.0 / (LLAMA3_LOSS_RATE * scale),
            duration_s=theory.LLAMA3_DURATION_S,
            interval_s=overrides.get("interval_min", self.interval_min.value) * 60.0,
            save_s=self.save_s,
            restore_s=self.restore_s,
            restart_s=detect + restart,
            hot_spares=spares,
            spare_restart_s=detect + overrides.get("spare_swap_s", self.spare_swap_s.value) if spares else None,
            failure_shape=overrides.get("shape", self.shape.value),
            trials=self.trials,
            seed=self.seed,
        )

    def simulate_once(self) -> SimResult | None:
        """Simulate the sliders' job (and once, the baseline) and redraw; ``None`` and a message on bad input."""
        try:
            config = self.config()
        except ConfigError as e:
            self.status.value = f"not simulated: {e}"
            return None
        if self.baseline is None:
            self.baseline = simulate(self.config(**BASELINE))
        self.result = simulate(config)
        self.status.value = ""
        self.redraw()
        return self.result

    def closed_form(self, config: SimConfig) -> float:
        """Goodput of ``config`` from the renewal model, with the spares' share of failures mixed into the restart."""
        hit = recovery_at_scale.spare_hit_share(config.hot_spares, config.expected_failures) if config.hot_spares else 0.0
        restart = recovery_at_scale.mean_restart_with_spares(hit, config.spare_restart_s or config.restart_s, config.restart_s)
        return renewal.periodic_goodput(config.interval_s, config.save_s, restart + config.restore_s, config.job_mtbf_s,
                                        shape=config.failure_shape)

    def figures(self) -> dict[str, Any]:
        """Headline numbers of the last simulation and its closed form."""
        r, c = self.result, self.result.config
        hit = recovery_at_scale.spare_hit_share(c.hot_spares, c.expected_failures) if c.hot_spares else 0.0
        return {
            "goodput": r.goodput_mean,
            "goodput_p5": r.goodput_p5,
            "ettr": r.ettr_mean,
            "closed_form": self.closed_form(c),
            "baseline_goodput": self.baseline.goodput_mean,
            "interruptions": r.interruptions_mean,
            "expected_interruptions": c.expected_failures,
            "devices_per_interruption": recovery_at_scale.devices_per_interruption(self.domain.value, self.correlated.value),
            "spare_share": hit,
        }

    def typical(self) -> dict[str, float]:
        """A typical improvement of each lever over the baseline, shown while its slider sits at the baseline."""
        base = self.config(**BASELINE)
        return {"detect_min": 10 / 60, "restart_min": 1.0, "spares": 300,
                "interruption_scale": recovery_at_scale.domain_interruption_rate(1, 1.0, 8, 0.5), "shape": 0.7,
                "interval_min": round(theory.young_interval(self.save_s, base.job_mtbf_s) / 60, 1)}

    def lever_rows(self) -> list[dict]:
        """Goodput points each lever, set alone, adds to the baseline (closed forms): at its slider's value, or, while
        the slider sits at the baseline (where it adds nothing), at a typical improvement (:meth:`typical`), so the
        chart shows what each lever is worth from the first view. ``typical`` says which."""
        base = self.closed_form(self.config(**BASELINE))
        typical = self.typical()
        chosen = {"detect_min": self.detect_min.value, "restart_min": self.restart_min.value, "spares": self.spares.value,
                  "interruption_scale": self.interruption_scale(), "shape": self.shape.value,
                  "interval_min": self.interval_min.value}
        rows = []
        for key, value in chosen.items():
            at_base = math.isclose(value, BASELINE[key], rel_tol=1e-9, abs_tol=1e-12)
            v = typical[key] if at_base else value
            g = self.closed_form(self.config(**{**BASELINE, key: v}))
            rows.append({"lever": self._lever_name(key, v) + (" (typical)" if at_base else ""),
                         "points": 100.0 * (g - base), "goodput": g, "typical": at_base})
        return rows

    def _lever_name(self, key: str, v: float) -> str:
        if key == "interruption_scale":  # the share of losses as domains, at the slider's domain size (8 if typical)
            if v == self.interruption_scale():
                return f"{self.correlated.value:.0%} lost as domains of {self.domain.value}"
            return "50% lost as domains of 8"
        detect = f"{60 * v:.0f} s" if v < 1 else f"{v:.3g} min"
        return {"detect_min": f"detection {detect}", "restart_min": f"restart {v:.3g} min",
                "spares": f"{v:.0f} hot spares", "shape": f"Weibull shape {v:.2g}",
                "interval_min": f"checkpoint every {v:.3g} min"}[key]

    def redraw(self) -> None:
        if self.result is None:
            return
        f = self.figures()
        set_big_number(self.headline, "simulated goodput", f"{f['goodput']:.1%}",
                       f"(closed form {f['closed_form']:.1%}; baseline {f['baseline_goodput']:.1%}); ETTR {f['ettr']:.1%}")
        self.facts.value = (
            f"{f['interruptions']:,.0f} interruptions in 54 days (expected {f['expected_interruptions']:,.0f}),"
            f" {f['devices_per_interruption']:.2g} devices lost per interruption;"
            f" hot spares absorb {f['spare_share']:.0%} of them"
        )
        self.breakdown_chart.chart = theory_charts.breakdown_side_by_side(
            self.baseline.breakdown_rows("baseline: Llama 3, 1.5 + 5 min recovery")
            + self.result.breakdown_rows("your settings"),
            title="54 days of 16,384 GPUs (simulated mean)",
        )
        self.lever_chart.chart = recovery_charts.lever_chart(
            self.lever_rows(), title="what each lever is worth alone (closed form; typical: until you move its slider)")

    def _ipython_display_(self) -> None:
        show_panel(self.widget)


class PolicyPanel:
    """Chapter 3's sidebar: checkpoint after a count of progress, or on a wall-clock timer?

    Slider: the interval over the MTBF (``x = tau/M``). Free saves and restarts,
    Poisson failures: the two exact curves with the chosen ``x`` marked, the
    goodput of each and how often each saves; **simulate** plays both policies
    through the same ``failures`` simulated failures (:meth:`simulate_once`).
    """

    def __init__(self, failures: int = 20_000, seed: int = 0):
        self.failures, self.seed = failures, seed
        self.x = log_slider(0.5, 0.01, 3.0, "interval / MTBF")
        self.button = W.Button(description="simulate", icon="play")
        self.facts = W.HTML()
        self.chart = chart_widget(_EMPTY)
        self.simulated: list[dict] = []
        self.x.observe(lambda _change: self.redraw(), names="value")
        self.button.on_click(lambda _b: self.simulate_once())
        self.widget = W.VBox([W.HBox([self.x, self.button]), self.facts, self.chart])
        self.redraw()

    def figures(self) -> dict[str, float]:
        """Goodput of both policies at the slider's ``x``, and saves per MTBF of wall time."""
        x = self.x.value
        progress, timer = recovery_at_scale.progress_goodput_free(x, 1.0), recovery_at_scale.timer_goodput_free(x, 1.0)
        return {
            "x": x,
            "progress": progress,
            "timer": timer,
            # the timer saves every tau of wall time; the progress policy once per tau of kept work
            "timer_saves_per_mtbf": 1.0 / x,
            "progress_saves_per_mtbf": progress / x,
        }

    def simulate_once(self) -> dict[str, float]:
        """Both policies through the same simulated failures at the slider's ``x``; adds the points to the chart."""
        x = self.x.value
        s = recovery_at_scale.simulate_policies_free(x, 1.0, self.failures, seed=self.seed)
        self.simulated += [{"x": x, "policy": "progress: x/(e^x - 1)", "goodput": s["progress"]},
                           {"x": x, "policy": "wall-clock timer: (1 - e^-x)/x", "goodput": s["timer"]}]
        self.redraw()
        return s

    def redraw(self) -> None:
        f = self.figures()
        self.facts.value = (
            f"at tau = {f['x']:.3g} M: progress policy <b>{f['progress']:.1%}</b>, saving {f['progress_saves_per_mtbf']:.3g}"
            f" times per MTBF; timer <b>{f['timer']:.1%}</b>, saving {f['timer_saves_per_mtbf']:.3g} times per MTBF"
        )
        rows = recovery_charts.policy_rows([i / 40 for i in range(1, 121)])
        marks = [{"x": f["x"], "policy": "progress: x/(e^x - 1)", "goodput": f["progress"]},
                 {"x": f["x"], "policy": "wall-clock timer: (1 - e^-x)/x", "goodput": f["timer"]}]
        self.chart.chart = recovery_charts.policy_chart(rows, measured=self.simulated + marks)

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
