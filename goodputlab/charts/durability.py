"""Charts of when a checkpoint is safe: goodput against interval with and without the lag to durable.

Chapter 4 draws each strategy twice: solid, with what makes its checkpoints
safe (an async save's lag to durable; a RAM tier that a node loss takes with
it), and dashed, counting only the part of the save that blocks, as if every
save were durable the moment it returned.
"""

from __future__ import annotations

from typing import Any, Mapping

import altair as alt

from .checkpoints import STRATEGY_COLORS

_EXTRA_COLORS = {"memory, node lost": "#d62728", "memory, peer copy": "#8c564b"}
#: Strategy colours: chapter 4's four, plus the RAM-tier variants.
COLORS = {**STRATEGY_COLORS, **_EXTRA_COLORS}


def goodput_vs_interval(
    curve_rows: list[dict[str, Any]],
    optima: Mapping[str, Mapping[str, float]] | None = None,
    measured: list[dict[str, Any]] | None = None,
    chosen_interval_s: float | None = None,
    title: str | None = None,
    width: int = 560,
) -> alt.LayerChart:
    """Goodput versus checkpoint interval per strategy: solid with durability, dashed blocking-only.

    ``curve_rows``: :func:`goodputlab.theory.checkpoint_tiers.strategy_curves`
    (``strategy, interval_s, goodput, model``). ``optima``: ``{strategy:
    {interval_s, goodput}}`` of the durable model, drawn as diamonds.
    ``measured``: real runs ``{strategy, interval_s, goodput}``, circles.
    ``chosen_interval_s``: a vertical rule. Click a legend entry to highlight
    a strategy (the selection is named ``durable_pick``).
    """
    strategies = list(dict.fromkeys(r["strategy"] for r in curve_rows))
    scale = alt.Scale(domain=strategies, range=[COLORS.get(s, "#7f7f7f") for s in strategies])
    pick = alt.selection_point(name="durable_pick", fields=["strategy"], bind="legend")
    x = alt.X("interval_s:Q", scale=alt.Scale(type="log"), title="checkpoint interval (s of training between saves)")
    y = alt.Y("goodput:Q", axis=alt.Axis(format="%"), title="expected goodput")
    color = alt.Color("strategy:N", scale=scale, legend=alt.Legend(title="strategy"))
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.15))
    dash = alt.StrokeDash(
        "model:N",
        scale=alt.Scale(domain=["durable", "blocking only"], range=[[1, 0], [5, 4]]),
        legend=alt.Legend(title="model", labelExpr="datum.label == 'durable' ? 'with the lag to durable' : 'blocking part only'"),
    )
    lines = (
        alt.Chart(alt.InlineData(values=curve_rows))
        .mark_line()
        .encode(
            x=x, y=y, color=color, strokeDash=dash, opacity=opacity, detail="model:N",
            tooltip=["strategy:N", "model:N", alt.Tooltip("interval_s:Q", format=".3g"), alt.Tooltip("goodput:Q", format=".1%")],
        )
        .add_params(pick)
    )
    layers: list[alt.Chart] = [lines]
    if optima:
        rows = [{"strategy": s, "interval_s": o["interval_s"], "goodput": o["goodput"], "what": "optimum"} for s, o in optima.items()]
        layers.append(
            alt.Chart(alt.InlineData(values=rows))
            .mark_point(shape="diamond", size=120, filled=True)
            .encode(x=x, y=y, color=color, opacity=opacity,
                    tooltip=["strategy:N", "what:N", alt.Tooltip("interval_s:Q", format=".3g"), alt.Tooltip("goodput:Q", format=".1%")])
        )
    if measured:
        layers.append(
            alt.Chart(alt.InlineData(values=[{**m, "what": "measured run"} for m in measured]))
            .mark_point(shape="circle", size=70, filled=False, strokeWidth=2)
            .encode(x=x, y=y, color=color, opacity=opacity,
                    tooltip=["strategy:N", "what:N", alt.Tooltip("interval_s:Q", format=".3g"), alt.Tooltip("goodput:Q", format=".1%")])
        )
    if chosen_interval_s:
        layers.append(
            alt.Chart(alt.InlineData(values=[{"interval_s": chosen_interval_s}]))
            .mark_rule(strokeDash=[4, 3], color="#555")
            .encode(x=x)
        )
    return alt.layer(*layers).properties(
        width=width, height=300, title=title or "goodput against interval: durable (solid) and blocking-only (dashed)"
    )
