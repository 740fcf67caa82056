"""Charts of recovery at scale: what each lever is worth, non-Poisson failures, the timer and the progress policy."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import altair as alt

from ..theory import recovery_at_scale, renewal


def lever_chart(rows: Iterable[Mapping[str, Any]], width: int = 520, title: str | None = None) -> alt.Chart:
    """Goodput points each recovery lever adds to (or takes from) a baseline: one horizontal bar per lever.

    ``rows``: ``{lever, points, goodput}`` (:meth:`goodputlab.widgets.RecoveryPanel.lever_rows`).
    """
    rows = list(rows)
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("points:Q", title="goodput points against the baseline"),
            y=alt.Y("lever:N", sort=[r["lever"] for r in rows], title=None),
            color=alt.condition("datum.points >= 0", alt.value("#2ca02c"), alt.value("#d62728")),
            tooltip=["lever:N", alt.Tooltip("points:Q", format="+.2f"), alt.Tooltip("goodput:Q", format=".1%")],
        )
        .properties(width=width, height=26 * max(1, len(rows)), title=title or "what each lever is worth (closed form)")
    )


def shape_curve_rows(save_s: float, restart_s: float, mtbf_s: float, shapes: Iterable[float], intervals_s: Iterable[float]) -> list[dict]:
    """Rows ``{shape, interval_s, goodput}``: :func:`goodputlab.theory.renewal.periodic_goodput` per Weibull shape."""
    intervals = list(intervals_s)
    return [
        {"shape": f"Weibull shape {k:g}" + (" (Poisson)" if k == 1 else ""), "interval_s": tau,
         "goodput": renewal.periodic_goodput(tau, save_s, restart_s, mtbf_s, shape=k)}
        for k in shapes
        for tau in intervals
    ]


def shape_curves(rows: list[dict], optima: list[dict] | None = None, measured: list[dict] | None = None,
                 width: int = 560, title: str | None = None) -> alt.LayerChart:
    """Goodput against interval for several Weibull shapes (same mean), the optima as diamonds, simulated points as circles.

    ``optima`` and ``measured``: ``{shape, interval_s, goodput}`` (the shape as labelled in ``rows``).
    Clicking a legend entry highlights a shape (selection ``shape_pick``).
    """
    pick = alt.selection_point(name="shape_pick", fields=["shape"], bind="legend")
    x = alt.X("interval_s:Q", scale=alt.Scale(type="log"), title="checkpoint interval (s of compute)")
    y = alt.Y("goodput:Q", axis=alt.Axis(format="%"), title="expected goodput", scale=alt.Scale(zero=False))
    color = alt.Color("shape:N", legend=alt.Legend(title="time between failures"))
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.2))
    layers = [
        alt.Chart(alt.InlineData(values=rows)).mark_line()
        .encode(x=x, y=y, color=color, opacity=opacity,
                tooltip=["shape:N", alt.Tooltip("interval_s:Q", format=",.0f"), alt.Tooltip("goodput:Q", format=".2%")])
        .add_params(pick)
    ]
    if optima:
        layers.append(
            alt.Chart(alt.InlineData(values=[dict(o, what="optimum") for o in optima])).mark_point(shape="diamond", size=110, filled=True)
            .encode(x=x, y=y, color=color, opacity=opacity,
                    tooltip=["shape:N", "what:N", alt.Tooltip("interval_s:Q", format=",.0f"), alt.Tooltip("goodput:Q", format=".2%")])
        )
    if measured:
        layers.append(
            alt.Chart(alt.InlineData(values=[dict(m, what="simulated") for m in measured])).mark_point(shape="circle", size=70, filled=False, strokeWidth=2)
            .encode(x=x, y=y, color=color, opacity=opacity,
                    tooltip=["shape:N", "what:N", alt.Tooltip("interval_s:Q", format=",.0f"), alt.Tooltip("goodput:Q", format=".2%")])
        )
    return alt.layer(*layers).properties(width=width, height=280, title=title or "same mean time between failures, different shapes")


def policy_rows(ratios: Iterable[float]) -> list[dict]:
    """Rows ``{x, goodput, policy}``: the timer, the progress policy and first order against ``x = tau/M``."""
    rows = []
    for x in ratios:
        rows.append({"x": x, "policy": "progress: x/(e^x - 1)", "goodput": recovery_at_scale.progress_goodput_free(x, 1.0)})
        rows.append({"x": x, "policy": "wall-clock timer: (1 - e^-x)/x", "goodput": recovery_at_scale.timer_goodput_free(x, 1.0)})
        rows.append({"x": x, "policy": "first order: 1 - x/2", "goodput": max(0.0, 1.0 - x / 2.0)})
    return rows


def policy_chart(rows: list[dict], measured: list[dict] | None = None, width: int = 520) -> alt.LayerChart:
    """Goodput with free saves and restarts against ``tau/M`` for the two policies (and first order).

    ``measured``: ``{x, goodput, policy}`` from :func:`goodputlab.theory.recovery_at_scale.simulate_policies_free`.
    """
    x = alt.X("x:Q", title="interval / MTBF (tau / M)")
    y = alt.Y("goodput:Q", axis=alt.Axis(format="%"), title="goodput, free saves and restarts")
    color = alt.Color("policy:N", legend=alt.Legend(title=None, orient="bottom", columns=1))
    layers = [alt.Chart(alt.InlineData(values=rows)).mark_line().encode(
        x=x, y=y, color=color, tooltip=["policy:N", alt.Tooltip("x:Q", format=".2f"), alt.Tooltip("goodput:Q", format=".1%")])]
    if measured:
        layers.append(alt.Chart(alt.InlineData(values=measured)).mark_point(size=60, filled=True).encode(
            x=x, y=y, color=color, tooltip=["policy:N", alt.Tooltip("x:Q", format=".2f"), alt.Tooltip("goodput:Q", format=".1%")]))
    return alt.layer(*layers).properties(width=width, height=260, title="when is a checkpoint due? two exact answers")
