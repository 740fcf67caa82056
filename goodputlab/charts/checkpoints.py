"""Charts of chapter 4: the anatomy of a save, timelines side by side, goodput versus interval per strategy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

import altair as alt

from ..categories import COLORS
from .runs import held, timeline

#: One colour per strategy, the same in every chart of the chapter.
STRATEGY_COLORS = {"sync": "#1f77b4", "async": "#2ca02c", "dcp": "#9467bd", "memory": "#ff7f0e"}
STRATEGY_SCALE = alt.Scale(domain=list(STRATEGY_COLORS), range=list(STRATEGY_COLORS.values()))


def save_anatomy(rows: Iterable[Mapping[str, Any]], width: int = 560) -> alt.Chart:
    """Each strategy's save split into what blocks training and what runs in the background (milliseconds).

    ``rows`` are :func:`goodputlab.experiments.checkpoint_stall.measure_strategy` results (``strategy``,
    ``blocking_s``, ``durable_s``).
    """
    data = []
    for r in rows:
        blocking = r["blocking_s"] * 1000
        background = max(0.0, r["durable_s"] * 1000 - blocking)
        data.append({"strategy": r["strategy"], "part": "blocks training (snapshot)", "ms": round(blocking, 3), "order": 0})
        data.append({"strategy": r["strategy"], "part": "background (persist)", "ms": round(background, 3), "order": 1})
    order = [r["strategy"] for r in rows]
    return (
        alt.Chart(alt.InlineData(values=data))
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", stack="zero", title="milliseconds from the start of the save until it is durable"),
            y=alt.Y("strategy:N", sort=order, title=None),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(
                    domain=["blocks training (snapshot)", "background (persist)"],
                    range=[COLORS["checkpoint_save"], "#c6dbef"],
                ),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
            order=alt.Order("order:Q"),
            tooltip=["strategy:N", "part:N", alt.Tooltip("ms:Q", format=".1f")],
        )
        .properties(width=width, height=30 * max(1, len(order)), title="anatomy of a save")
    )


def strategy_timelines(results: Mapping[str, Any], width: int = 620, window_s: float | None = None) -> alt.VConcatChart:
    """The run of each strategy as a timeline (``goodputlab.charts.timeline``), stacked on one time axis.

    ``results`` maps a strategy to its :class:`~goodputlab.engine.api.RunResult`. ``window_s``: draw only the
    first that many seconds of each run (a long run's attempts would not fit); the titles are the whole run's.
    """
    panels = []
    categories = {c for result in results.values() for c in held(result.ledger)}  # one legend for the stack
    for name, result in results.items():
        led = result.ledger
        n_saves = result.summary["checkpoints"]
        title = (f"{name}: goodput {led.goodput:.1%}, checkpoint_save {led.buckets['checkpoint_save']:.2f} s "
                 f"in {n_saves} commits")
        if window_s is not None and window_s < led.wall_s:
            led = _first_seconds(led, window_s)
            title += f" (its first {window_s:g} s)"
        panels.append(timeline(led, title=title, width=width, categories=categories))
    return alt.vconcat(*panels).resolve_scale(x="shared", color="shared")


def _first_seconds(led, window_s: float):
    """The part of a ledger before ``window_s`` seconds: segments cut there, the failures before it."""
    segments = [replace(s, end=min(s.end, window_s)) for s in led.segments if s.start < window_s]
    buckets: dict[str, float] = {k: 0.0 for k in led.buckets}
    for s in segments:
        buckets[s.category] = buckets.get(s.category, 0.0) + s.duration
    return type(led)(segments, window_s, buckets, [t for t in led.failure_times if t < window_s], False)


def goodput_vs_interval(
    curve_rows: list[dict[str, Any]],
    optima: Mapping[str, Mapping[str, float]] | None = None,
    measured: list[dict[str, Any]] | None = None,
    chosen_interval_s: float | None = None,
    width: int = 560,
) -> alt.LayerChart:
    """Goodput (Daly's model) versus checkpoint interval, one curve per strategy, log-scaled interval.

    ``curve_rows``: :func:`goodputlab.experiments.strategy_compare.goodput_curves`. ``optima``:
    ``{strategy: optimum(...)}``, drawn as diamonds. ``measured``: rows
    ``{strategy, interval_s, goodput}`` from real runs, drawn as circles.
    ``chosen_interval_s`` draws a vertical rule (the panel's slider). Click a
    legend entry to highlight a strategy (the selection is named ``strategy_pick``).
    """
    pick = alt.selection_point(name="strategy_pick", fields=["strategy"], bind="legend")
    x = alt.X("interval_s:Q", scale=alt.Scale(type="log"), title="checkpoint interval (s of training between saves)")
    y = alt.Y("goodput:Q", axis=alt.Axis(format="%"), title="goodput (Daly's model)")
    color = alt.Color("strategy:N", scale=STRATEGY_SCALE, legend=alt.Legend(title="strategy"))
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.2))
    lines = (
        alt.Chart(alt.InlineData(values=curve_rows))
        .mark_line()
        .encode(x=x, y=y, color=color, opacity=opacity, tooltip=["strategy:N", alt.Tooltip("interval_s:Q", format=".3g"), alt.Tooltip("goodput:Q", format=".1%")])
        .add_params(pick)
    )
    layers = [lines]
    if optima:
        rows = [{"strategy": s, **o, "what": "Daly's optimum"} for s, o in optima.items()]
        layers.append(
            alt.Chart(alt.InlineData(values=rows))
            .mark_point(shape="diamond", size=120, filled=True)
            .encode(
                x=x, y=y, color=color, opacity=opacity,
                tooltip=["strategy:N", "what:N", alt.Tooltip("interval_s:Q", format=".3g"),
                         alt.Tooltip("goodput:Q", format=".1%"), alt.Tooltip("save_s:Q", format=".4f")],
            )
        )
    if measured:
        layers.append(
            alt.Chart(alt.InlineData(values=[{**m, "what": "measured run"} for m in measured]))
            .mark_point(shape="circle", size=70, filled=False, strokeWidth=2)
            .encode(
                x=x, y=y, color=color, opacity=opacity,
                tooltip=["strategy:N", "what:N", alt.Tooltip("interval_s:Q", format=".3g"), alt.Tooltip("goodput:Q", format=".1%")],
            )
        )
    if chosen_interval_s:
        layers.append(
            alt.Chart(alt.InlineData(values=[{"interval_s": chosen_interval_s}]))
            .mark_rule(strokeDash=[4, 3], color="#555")
            .encode(x=x)
        )
    return alt.layer(*layers).properties(width=width, height=300, title="goodput versus checkpoint interval")


def auto_interval_chart(
    decisions: Iterable[Mapping[str, Any]],
    optimum_s: float | None = None,
    failure_times: Iterable[float] = (),
    width: int = 620,
) -> alt.LayerChart:
    """What ``--ckpt-every auto`` chose over a run: the interval (seconds of training between saves)
    after each re-tuning, against wall time, with the failures it learnt from as red rules and,
    when known, Daly's optimum for the run's true MTBF and measured save cost as a dashed line.

    ``decisions`` are the run's ``ckpt_interval`` events (``t``, ``interval_s``, ``mtbf_s``, ``save_s``).
    """
    rows = [
        {
            "t": round(d["t"], 4),
            "interval_s": d["interval_s"],
            "mtbf_s": d["mtbf_s"],
            "save_ms": round(d["save_s"] * 1000, 3),
            "failures_seen": d["failures_seen"],
        }
        for d in decisions
    ]
    chosen = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(point=True, interpolate="step-after", color=STRATEGY_COLORS["sync"])
        .encode(
            x=alt.X("t:Q", title="wall time (s)"),
            y=alt.Y("interval_s:Q", title="chosen interval (s of training)"),
            tooltip=["t:Q", "interval_s:Q", "mtbf_s:Q", "save_ms:Q", "failures_seen:Q"],
        )
    )
    layers = [chosen]
    if optimum_s is not None:
        layers.append(
            alt.Chart(alt.InlineData(values=[{"optimum_s": optimum_s, "label": "Daly's optimum, true MTBF"}]))
            .mark_rule(strokeDash=[6, 3], color="#333")
            .encode(y="optimum_s:Q", tooltip=["label:N", "optimum_s:Q"])
        )
    fails = [{"t": round(t, 4)} for t in failure_times]
    if fails:
        layers.append(
            alt.Chart(alt.InlineData(values=fails)).mark_rule(color=COLORS["lost_work"], strokeDash=[4, 3]).encode(x="t:Q")
        )
    return alt.layer(*layers).properties(width=width, height=200, title="--ckpt-every auto re-tunes after every save")
