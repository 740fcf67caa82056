"""Charts of the input pipeline: the stall anatomy, zoomed timelines, model against measurement, depth."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

import altair as alt

from ..categories import COLORS
from .runs import held, timeline

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult
    from ..experiments.data_stall import StallAnatomy

#: Colours of the parts of a step period (compute and data wait as in the ledger's charts).
PART_COLORS = {
    "compute": COLORS["productive"],
    "prep stall": "#fdae6b",
    "fetch stall": "#a63603",
    "data wait (ledger)": COLORS["data_wait"],
}
PART_SCALE = alt.Scale(domain=list(PART_COLORS), range=list(PART_COLORS.values()))


def anatomy_chart(anatomy: StallAnatomy, width: int = 620) -> alt.Chart:
    """Milliseconds per step: the full run's period split by differencing, beside each variant's ledger.

    Top bar: compute-only period, then the prep stall and the fetch stall (DS-Analyzer's
    differences). Below: each variant's busy time and the data wait its ledger booked.
    """
    by_diff = "full run, by differencing"
    rows: list[dict[str, Any]] = [
        {"bar": by_diff, "part": "compute", "ms": 1000 * anatomy.compute_s, "order": 0},
        {"bar": by_diff, "part": "prep stall", "ms": 1000 * anatomy.prep_stall_s, "order": 1},
        {"bar": by_diff, "part": "fetch stall", "ms": 1000 * anatomy.fetch_stall_s, "order": 2},
    ]
    for name, loop in anatomy.loops.items():
        bar = f"{name.replace('_', '-')}, ledger"
        rows.append({"bar": bar, "part": "compute", "ms": 1000 * loop.busy_per_step_s, "order": 0})
        rows.append({"bar": bar, "part": "data wait (ledger)", "ms": 1000 * loop.wait_per_step_s, "order": 3})
    for r in rows:
        r["ms"] = round(max(0.0, r["ms"]), 3)  # a stall measured below noise shows as nothing
    order = [by_diff] + [f"{n.replace('_', '-')}, ledger" for n in anatomy.loops]
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", stack="zero", title="milliseconds per step"),
            y=alt.Y("bar:N", sort=order, title=None),
            color=alt.Color("part:N", scale=PART_SCALE, legend=alt.Legend(title=None)),
            order=alt.Order("order:Q"),
            tooltip=["bar:N", "part:N", alt.Tooltip("ms:Q", format=".2f")],
        )
        .properties(width=width, height=130, title="anatomy of a step: compute, prep stall, fetch stall")
    )


def loop_window(result: RunResult) -> tuple[float, float]:
    """Seconds since the run's start at which its first attempt's training loop begins and ends."""
    segs = [s for s in result.ledger.segments if s.attempt == 0]
    start = next(s.start for s in segs if s.kind == "compute")
    end = max(s.end for s in segs if s.kind == "compute")
    return start, end


def zoomed_timeline(result: RunResult, seconds: float, title: str | None = None, width: int = 620,
                    categories: Iterable[str] | None = None) -> alt.LayerChart:
    """:func:`goodputlab.charts.timeline` of ``result``, zoomed to the first ``seconds`` of its training loop.

    A whole run is mostly start-up at this scale; zoomed in, every data-wait stripe
    between two steps is visible.
    """
    start, end = loop_window(result)
    domain = [round(start, 4), round(min(end, start + seconds), 4)]
    chart = timeline(result.ledger, title=title, width=width, categories=categories)
    bars, rules = chart.layer
    bars.encoding.x.scale = alt.Scale(domain=domain)
    bars.mark.clip = True
    rules.mark.clip = True
    return chart.properties(height=60)


def timelines(results: Mapping[str, RunResult], seconds: float, width: int = 620) -> alt.VConcatChart:
    """One zoomed timeline per run (label -> result), stacked, each over the same loop duration."""
    charts = []
    categories = {c for result in results.values() for c in held(result.ledger)}  # one legend for the stack
    for label, result in results.items():
        share = result.summary["buckets"]["data_wait"] / result.summary["wall_s"]
        charts.append(zoomed_timeline(result, seconds, title=f"{label}: data wait {share:.0%} of the run", width=width,
                                      categories=categories))
    return alt.vconcat(*charts).resolve_scale(color="shared")


def model_vs_measured(rows: Iterable[Mapping[str, Any]], width: int = 360) -> alt.LayerChart:
    """Measured data-wait share against the model's, one point per run, with the diagonal.

    ``rows`` need ``label``, ``measured`` and ``predicted`` (shares, 0..1); ``workers``
    colours the points when present.
    """
    data = [
        {
            "label": r["label"],
            "measured": round(float(r["measured"]), 4),
            "predicted": round(float(r["predicted"]), 4),
            "workers": str(r.get("workers", "")),
        }
        for r in rows
    ]
    top = max([0.1] + [max(d["measured"], d["predicted"]) for d in data])
    top = min(1.0, 1.1 * top)
    diagonal = (
        alt.Chart(alt.InlineData(values=[{"v": 0.0}, {"v": top}]))
        .mark_line(color="#999", strokeDash=[4, 3])
        .encode(x=alt.X("v:Q"), y=alt.Y("v:Q"))
    )
    points = (
        alt.Chart(alt.InlineData(values=data))
        .mark_circle(size=90)
        .encode(
            x=alt.X("predicted:Q", title="model: data-wait share", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, top])),
            y=alt.Y("measured:Q", title="measured (ledger): data-wait share", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, top])),
            color=alt.Color("workers:N", title="workers"),
            tooltip=["label:N", alt.Tooltip("measured:Q", format=".1%"), alt.Tooltip("predicted:Q", format=".1%")],
        )
    )
    return alt.layer(diagonal, points).properties(width=width, height=width, title="model against measurement")


def depth_curve(rows: Iterable[Mapping[str, Any]], target_share: float | None = None, width: int = 520) -> alt.LayerChart:
    """Predicted data-wait share against pipeline depth, one line per worker count.

    ``rows`` need ``workers``, ``prefetch``, ``depth`` and ``share``; ``target_share``
    draws the target as a horizontal rule.
    """
    data = [
        {"workers": f"{r['workers']} workers", "prefetch": int(r["prefetch"]), "depth": int(r["depth"]), "share": round(float(r["share"]), 5)}
        for r in rows
    ]
    lines = (
        alt.Chart(alt.InlineData(values=data))
        .mark_line(point=True)
        .encode(
            x=alt.X("depth:Q", title="pipeline depth (workers x prefetch, batches)"),
            y=alt.Y("share:Q", title="predicted data-wait share", axis=alt.Axis(format="%")),
            color=alt.Color("workers:N", title=None),
            tooltip=["workers:N", "prefetch:Q", "depth:Q", alt.Tooltip("share:Q", format=".2%")],
        )
    )
    layers = [lines]
    if target_share is not None:
        layers.append(
            alt.Chart(alt.InlineData(values=[{"target": target_share}]))
            .mark_rule(color="#d62728", strokeDash=[4, 3])
            .encode(y="target:Q", tooltip=[alt.Tooltip("target:Q", format=".1%")])
        )
    return alt.layer(*layers).properties(width=width, height=220, title="how deep must the pipeline be")
