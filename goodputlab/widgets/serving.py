"""Chapter 9's panel: the two SLOs, the rate, the length mix and the mode; Run serves that rate for real."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import altair as alt
import ipywidgets as W

from ..charts.serving import attainment_vs_rate, rate_rows, request_scatter, worker_timeline
from ..errors import ConfigError
from ..serving import MIXES, SLO, RateMeasurement
from .common import big_number, chart_widget, set_big_number, show_panel
from .layout import log_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run").properties(width=320, height=60)
MODES = ("colocated", "disaggregated")


class ServingPanel:
    """Serve the lab's model at a rate, under two latency objectives, and watch attainment against rate.

    The SLO sliders rescore every measurement at once: attainment is judged after the fact
    from each request's timestamps, so the same runs are read against new objectives without
    serving anything again. (A run stops once every request that could still meet the SLO it
    was served under has had its time; judged against a much looser SLO, its attainment is a
    lower bound, and the status line says so.) **Run** serves the chosen rate, mix and mode
    for ``duration_s`` seconds of arrivals and adds a point.

    ``servers`` maps a mode to a started :class:`~goodputlab.serving.cluster.ServingCluster` to
    reuse (the chapter's); a mode without one gets its own on the first Run, closed by
    :meth:`close`. ``history`` seeds the chart with earlier measurements.
    """

    def __init__(self, duration_s: float = 3.0, model: str = "serve", seed: int = 0, target: float = 0.9,
                 servers: Mapping[str, Any] | None = None, history: Iterable[RateMeasurement] = (),
                 ttft_ms: float = 250.0, tpot_ms: float = 20.0, rate: float = 8.0, mix: str = "chat", mode: str = "colocated"):
        from ..serving.cluster import ServerConfig

        ServerConfig(model=model, seed=seed)  # fail now on a bad fixed setting, not at the first click
        if not 0 < target <= 1:
            raise ConfigError("target", target, "a share of requests in (0, 1]")
        if not duration_s > 0:
            raise ConfigError("duration", duration_s, "seconds > 0")
        self.duration_s, self.model, self.seed, self.target = duration_s, model, seed, target
        self.ttft_ms = log_slider(ttft_ms, 20, 2000, "TTFT objective (ms)")
        self.tpot_ms = log_slider(tpot_ms, 2, 200, "TPOT objective (ms)")
        self.rate = log_slider(rate, 0.5, 60, "request rate (req/s)")
        self.mix = W.Dropdown(options=list(MIXES), value=mix, description="length mix")
        self.mode = W.ToggleButtons(options=list(MODES), value=mode, description="mode")
        self.button = W.Button(description="Run", button_style="primary", icon="play")
        self.status = W.Label(value="")
        self.mix_line = W.HTML()
        self.headline = big_number("attainment")
        self.curve = chart_widget(_EMPTY)
        self.scatter = chart_widget(_EMPTY)
        self.timeline = chart_widget(_EMPTY)
        self.history: list[RateMeasurement] = list(history)
        self.last: RateMeasurement | None = self.history[-1] if self.history else None
        self._servers: dict[str, Any] = dict(servers or {})
        self._own: set[str] = set()
        for w in (self.ttft_ms, self.tpot_ms, self.mix):
            w.observe(lambda _: self.redraw(), names="value")
        self.button.on_click(lambda _: self.run_once())
        self.widget = W.VBox([
            W.HBox([W.VBox([self.ttft_ms, self.tpot_ms, self.rate]), W.VBox([self.mix, self.mode])]),
            self.mix_line,
            W.HBox([self.button, self.status]),
            self.headline,
            self.curve,
            W.HBox([self.scatter]),
            self.timeline,
        ])
        self.redraw()

    # --- what the controls mean ---------------------------------------------------------------
    def slo(self) -> SLO:
        return SLO(float(self.ttft_ms.value), float(self.tpot_ms.value))

    def server(self, mode: str):
        """The server of ``mode``: the one given, or one this panel starts (and later closes)."""
        if mode not in self._servers:
            from ..serving.cluster import ServingCluster

            self.status.value = f"starting the {mode} workers..."
            self._servers[mode] = ServingCluster(mode=mode, model=self.model, seed=self.seed).start()
            self._own.add(mode)
        return self._servers[mode]

    def measurements(self) -> list[RateMeasurement]:
        """The measurements of the chosen mix, judged against the sliders' SLO."""
        slo = self.slo()
        return [m.rescore(slo) for m in self.history if m.info.get("mix") == self.mix.value]

    def goodput_among_measured(self) -> dict[str, float]:
        """Per mode: the highest rate measured (this mix) whose attainment meets the target under the sliders' SLO.

        Not a search: only the rates measured so far count; 0 when none meets it."""
        out = {}
        for mode in MODES:
            passing = [m.rate_rps for m in self.measurements() if m.mode == mode and m.attainment >= self.target]
            if any(m.mode == mode for m in self.measurements()):
                out[mode] = max(passing, default=0.0)
        return out

    # --- running ------------------------------------------------------------------------------
    def run_once(self) -> RateMeasurement | None:
        """Serve the chosen rate, mix and mode for real; add the measurement and redraw."""
        try:
            slo = self.slo()
        except ConfigError as e:
            self.status.value = f"not run: {e}"
            return None
        mode, rate, mix = self.mode.value, float(self.rate.value), self.mix.value
        self.button.disabled = True
        try:
            server = self.server(mode)
            self.status.value = f"serving {rate:g} req/s for {self.duration_s:g} s ({mode})..."
            m = server.measure_rate(rate, self.duration_s, slo, mix, self.seed)
        finally:
            self.button.disabled = False
        self.history.append(m)
        self.last = m
        self.redraw()
        return m

    def redraw(self) -> None:
        """Rescore every measurement against the sliders' SLO; redraw the curve, the last run's requests and timeline."""
        mix = MIXES[self.mix.value]
        self.mix_line.value = f"<i>{mix.describe()} ({mix.note})</i>"
        try:
            slo = self.slo()
        except ConfigError as e:
            self.status.value = f"not valid: {e}"
            return
        ms = self.measurements()
        if ms:
            goodput = self.goodput_among_measured()
            self.curve.chart = attainment_vs_rate(rate_rows(ms), self.target, goodput)
        if self.last is not None:
            last = self.last.rescore(slo)
            s = last.summary()
            p90 = lambda v: "unfinished" if v is None else f"{v:.0f} ms"
            set_big_number(
                self.headline, "attainment", f"{last.attainment:.0%}",
                f"{last.mode}, {last.rate_rps:g} req/s, {last.info.get('mix')}: {last.requests} requests in {last.duration_s:.3g} s; "
                f"p90 TTFT {p90(s['ttft_p90_ms'])}, p90 TPOT {p90(s['tpot_p90_ms'])}",
            )
            self.scatter.chart = request_scatter(last)
            start = min(1.0, 0.25 * last.duration_s)
            self.timeline.chart = worker_timeline(last, start_s=start, seconds=min(0.6, last.duration_s - start))
        inexact = [m for m in ms if not m.exact_for]
        if inexact:
            self.status.value = (f"{len(inexact)} of {len(ms)} points are lower bounds: they were served under a tighter SLO "
                                 f"and stopped before requests this slow would have finished")
        elif self.history:
            gp = ", ".join(f"{k} {v:g} req/s" for k, v in self.goodput_among_measured().items())
            self.status.value = f"highest measured rate meeting {self.target:.0%}: {gp}" if gp else "no measurement of this mix yet"

    def close(self) -> None:
        """Stop the workers this panel started."""
        for mode in list(self._own):
            self._servers.pop(mode).close()
            self._own.discard(mode)

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
