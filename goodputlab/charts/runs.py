"""Charts of measured runs: a timeline per attempt, the time breakdown, the loss."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import altair as alt

from ..categories import CATEGORIES, COLORS
from ..measure.ledger import Ledger, Segment, TimelineBins, coalesce
from .base import category_scale, present


def _readable_segments(segments: list[Segment], wall_s: float, width_px: int) -> list[Segment]:
    """Over 2000 segments: those narrower than a pixel merged by one-pixel bins, each drawn as its
    categories side by side, each as long as its time in the bin
    (:class:`~goodputlab.measure.ledger.TimelineBins`), and neighbours of one category joined.

    They would be invisible anyway; merging keeps a long run's chart small.
    The breakdown chart, built from the ledger's buckets, stays exact.
    """
    if len(segments) < 2000:
        return segments
    bins = TimelineBins(wall_s / width_px)
    for s in segments:
        bins.add(s.start, s.end, s.category, s.attempt, s.kind, s.step, s.lane)
    return coalesce(bins.segments())


def held(ledger: Ledger) -> list[str]:
    """The categories that hold time in ``ledger``, in the ledger's order."""
    return [c for c in CATEGORIES if ledger.buckets.get(c, 0.0) > 0]


def timeline(ledger: Ledger, title: str | None = None, width: int = 680,
             categories: Iterable[str] | None = None) -> alt.LayerChart:
    """A Gantt strip per attempt (a torchft job: per replica group), coloured by category, with each
    failure marked.

    x is wall time in seconds since the run started. The legend lists the categories the run holds,
    or ``categories`` (timelines stacked on one colour scale pass the union of theirs).
    """
    segs = _readable_segments(ledger.coalesced(), ledger.wall_s, width)
    rows = [
        {
            "start": round(s.start, 4),
            "end": round(s.end, 4),
            "seconds": round(s.duration, 4),
            "category": s.category,
            "attempt": f"attempt {s.attempt}",
            "strip": s.strip,
            "what": s.kind,
            "step": s.step,
        }
        for s in segs
    ]
    order = list(dict.fromkeys(s.strip for s in segs))  # attempts in time order; a torchft job's replicas in order
    scale = category_scale(present(rows) if categories is None else categories)
    bars = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar(height={"band": 0.8})
        .encode(
            x=alt.X("start:Q", title="wall time (s)", scale=alt.Scale(domain=[0, ledger.wall_s])),
            x2="end:Q",
            y=alt.Y("strip:N", sort=order, title=None),
            color=alt.Color("category:N", scale=scale, legend=alt.Legend(title="category")),
            tooltip=["category:N", "what:N", "attempt:N", "step:Q", "start:Q", "seconds:Q"],
        )
    )
    fails = [{"t": round(t, 4), "label": f"failure {i + 1}"} for i, t in enumerate(ledger.failure_times)]
    rules = (
        alt.Chart(alt.InlineData(values=fails or [{"t": None, "label": ""}]))
        .mark_rule(color="#d62728", strokeDash=[4, 3], strokeWidth=1.5)
        .encode(x="t:Q", tooltip=["label:N", "t:Q"])
    )
    chart = alt.layer(bars, rules).properties(
        width=width,
        height=max(60, 22 * len(order)),
        title=title or f"timeline: goodput {ledger.goodput:.1%}, {len(ledger.failure_times)} failures",
    )
    return chart


def breakdown(runs: Mapping[str, Mapping[str, Any]] | Mapping[str, Any], width: int = 680) -> alt.Chart:
    """Where the wall time went, as stacked shares: one bar per run.

    ``runs`` is one summary (a dict with ``buckets`` and ``wall_s``) or a mapping
    ``label -> summary`` to compare several side by side.
    """
    if "buckets" in runs:
        runs = {"this run": runs}
    rows = []
    for label, s in runs.items():
        for cat in CATEGORIES:
            sec = s["buckets"][cat]
            rows.append(
                {
                    "run": label,
                    "category": cat,
                    "order": CATEGORIES.index(cat),
                    "seconds": round(sec, 4),
                    "share": sec / s["wall_s"] if s["wall_s"] > 0 else 0.0,
                }
            )
    shown = present(rows)
    rows = [r for r in rows if r["category"] in shown]
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("share:Q", stack="zero", title="share of wall time", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("run:N", title=None, sort=list(runs)),
            color=alt.Color("category:N", scale=category_scale(shown), legend=alt.Legend(title="category")),
            order=alt.Order("order:Q"),
            tooltip=["run:N", "category:N", alt.Tooltip("seconds:Q", format=".3f"), alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=width, height=max(40, 28 * len(runs)), title="where the time went")
    )


def loss_curve(per_step_rows: Iterable[Mapping[str, Any]], width: int = 680) -> alt.Chart:
    """Training loss by step; rolled-back executions drawn faintly."""
    rows = [
        {"step": r["step"], "loss": r["loss"], "attempt": r["attempt"], "kept": "kept" if r["survived"] else "rolled back"}
        for r in per_step_rows
        if r["loss"] is not None
    ]
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_circle(size=12)
        .encode(
            x=alt.X("step:Q"),
            y=alt.Y("loss:Q", title="training loss (nats)"),
            color=alt.Color(
                "kept:N",
                scale=alt.Scale(domain=["kept", "rolled back"], range=[COLORS["productive"], COLORS["lost_work"]]),
                title=None,
            ),
            tooltip=["step:Q", "attempt:Q", alt.Tooltip("loss:Q", format=".3f"), "kept:N"],
        )
        .properties(width=width, height=180, title="loss")
    )
