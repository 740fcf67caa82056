"""Charts of in-job recovery at scale: goodput against the number of replica groups, and where the rest went.

Plain functions returning Altair charts built from the tidy rows of
:func:`goodputlab.theory.sweep_rows` (one row per simulated job: restart from a
checkpoint first, then in-job recovery with each number of replica groups), like
:mod:`goodputlab.charts.cluster`; every param has an explicit name.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import altair as alt

from ..categories import CATEGORIES, COLORS, PRODUCTIVE
from .base import category_scale

#: The colour of simulated points, of the closed form beside them, and of the closed form with the costs of
#: more groups and of a dead peer's timeout.
SIMULATED, CLOSED_FORM, WITH_COSTS = "#1f77b4", "#555555", "#ff7f0e"


def goodput_by_groups(rows: Iterable[Mapping[str, Any]], width: int = 480, height: int = 260) -> alt.LayerChart:
    """Mean goodput (two standard errors as a bar) against replica groups (log 2), restart as a dashed line.

    ``rows``: :func:`goodputlab.theory.sweep_rows`, optionally with ``closed_form_goodput``
    (drawn as hollow diamonds) and ``with_costs_goodput`` (:func:`goodputlab.experiments.in_job.costed_rows`:
    the closed form with the collective timeout and the cross-group all-reduce, an orange dashed line).
    A hover (selection ``groups_hover``) shows a row's figures.
    """
    rows = [dict(r) for r in rows]
    in_job = [r for r in rows if r["recovery"] == "in-job"]
    restart = [r for r in rows if r["recovery"] == "restart"]
    for r in in_job:
        r["low"] = r["goodput_mean"] - 2 * r["goodput_stderr"]
        r["high"] = r["goodput_mean"] + 2 * r["goodput_stderr"]
    hover = alt.selection_point(name="groups_hover", fields=["replica_groups"], nearest=True, on="pointerover", empty=False)
    x = alt.X("replica_groups:Q", scale=alt.Scale(type="log", base=2), title="replica groups (log 2)",
              axis=alt.Axis(values=sorted({r["replica_groups"] for r in in_job}), format="d"))
    y = alt.Y("goodput_mean:Q", scale=alt.Scale(zero=False), title="goodput", axis=alt.Axis(format=".1%"))
    base = alt.Chart(alt.InlineData(values=in_job))
    line = base.mark_line(color=SIMULATED).encode(x=x, y=y)
    points = base.mark_point(filled=True, size=70, color=SIMULATED).encode(
        x=x, y=y, size=alt.condition(hover, alt.value(140), alt.value(70)),
        tooltip=[
            alt.Tooltip("replica_groups:Q", title="replica groups"),
            alt.Tooltip("goodput_mean:Q", title="goodput", format=".4f"),
            alt.Tooltip("goodput_stderr:Q", title="standard error", format=".5f"),
            alt.Tooltip("job_restarts_mean:Q", title="whole-job restarts", format=".1f"),
            alt.Tooltip("share_degraded:Q", title="degraded", format=".2%"),
        ],
    ).add_params(hover)
    errors = base.mark_rule(color=SIMULATED).encode(x=x, y="low:Q", y2="high:Q")
    layers = [line, errors, points]
    if in_job and in_job[0].get("closed_form_goodput") is not None:
        layers.append(
            base.mark_point(shape="diamond", size=110, filled=False, color=CLOSED_FORM)
            .encode(x=x, y=alt.Y("closed_form_goodput:Q"), tooltip=[alt.Tooltip("closed_form_goodput:Q", title="closed form", format=".4f")])
        )
    if in_job and in_job[0].get("with_costs_goodput") is not None:
        costed = base.mark_line(color=WITH_COSTS, strokeDash=[4, 3], point=alt.OverlayMarkDef(color=WITH_COSTS))
        layers.append(costed.encode(x=x, y=alt.Y("with_costs_goodput:Q"), tooltip=[
            alt.Tooltip("replica_groups:Q", title="replica groups"),
            alt.Tooltip("with_costs_goodput:Q", title="with the timeout and the all-reduce", format=".4f")]))
        last = max(in_job, key=lambda r: r["replica_groups"])
        layers.append(alt.Chart(alt.InlineData(values=[last])).mark_text(align="right", dy=12, color=WITH_COSTS)
                      .encode(x=x, y=alt.Y("with_costs_goodput:Q"), text=alt.value("with the timeout and the all-reduce")))
    if restart:
        level = alt.Chart(alt.InlineData(values=restart))
        layers.append(level.mark_rule(strokeDash=[6, 4], color=COLORS["restart"]).encode(y="goodput_mean:Q"))
        layers.append(
            level.mark_text(align="left", dx=4, dy=-7, color=COLORS["restart"])
            .encode(y="goodput_mean:Q", x=alt.value(0), text=alt.value("restart from a checkpoint"))
        )
    return alt.layer(*layers).properties(width=width, height=height, title="in-job recovery: goodput against replica groups")


def where_the_rest_went(rows: Iterable[Mapping[str, Any]], width: int = 360) -> alt.Chart:
    """Stacked bars: each job's share of the wall time that was not productive, by ledger category.

    One bar per row of :func:`goodputlab.theory.sweep_rows` (restart, then each number of
    groups), in the ledger's colours; clicking a legend entry highlights one category
    (selection ``category_pick``).
    """
    rows = list(rows)
    order = [r["label"] for r in rows]
    tidy = [
        {"label": r["label"], "category": c, "share": r[f"share_{c}"], "order": CATEGORIES.index(c)}
        for r in rows
        for c in CATEGORIES
        if c != PRODUCTIVE and r.get(f"share_{c}", 0.0) > 0
    ]
    shown = [c for c in CATEGORIES if any(t["category"] == c for t in tidy)]
    pick = alt.selection_point(name="category_pick", fields=["category"], bind="legend")
    return (
        alt.Chart(alt.InlineData(values=tidy))
        .mark_bar()
        .encode(
            x=alt.X("share:Q", stack="zero", title="share of the wall time", axis=alt.Axis(format=".1%")),
            y=alt.Y("label:N", sort=order, title=None),
            color=alt.Color("category:N", title="category", scale=category_scale(shown)),
            order=alt.Order("order:Q"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=["label:N", "category:N", alt.Tooltip("share:Q", format=".2%")],
        )
        .add_params(pick)
        .properties(width=width, height=24 * max(1, len(rows)), title="where the time that was not productive went")
    )


def replica_timeline(rows: Iterable[Mapping[str, Any]], width: int = 620) -> alt.Chart:
    """Each replica's (or rank's) timeline as bars along the wall clock, in the ledger's colours.

    ``rows``: :func:`goodputlab.experiments.in_job.timeline_rows` (``lane``, ``start``, ``end`` in
    seconds, ``category``); one lane per replica of each run, the restart's lanes first. Clicking a
    legend entry highlights one category (selection ``timeline_pick``).
    """
    rows = [dict(r) for r in rows]
    lanes = list(dict.fromkeys(r["lane"] for r in rows))
    shown = [c for c in CATEGORIES if any(r["category"] == c for r in rows)]
    pick = alt.selection_point(name="timeline_pick", fields=["category"], bind="legend")
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar(height=16)
        .encode(
            x=alt.X("start:Q", title="wall time (s)"),
            x2="end:Q",
            y=alt.Y("lane:N", sort=lanes, title=None),
            color=alt.Color("category:N", title="category", scale=category_scale(shown)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=["lane:N", "category:N", alt.Tooltip("start:Q", format=".2f"), alt.Tooltip("end:Q", format=".2f")],
        )
        .add_params(pick)
        .properties(width=width, height=26 * max(1, len(lanes)), title="each replica's time: restart against in-job recovery")
    )
