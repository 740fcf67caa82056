"""Charts of serving goodput: attainment against rate, latencies, what each request felt, worker timelines.

The row-building functions (``*_rows``) are separate from the charts so the widget and the
tests can use the figures without drawing them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import altair as alt

from ..categories import COLORS

if TYPE_CHECKING:  # pragma: no cover
    from ..serving.search import GoodputSearch
    from ..serving.slo import SLO, RateMeasurement

MODE_COLORS = {"colocated": "#1f77b4", "disaggregated": "#ff7f0e"}
MODE_SCALE = alt.Scale(domain=list(MODE_COLORS), range=list(MODE_COLORS.values()))
#: What a worker was doing: prefill (orange), decode (green, the ledger's productive colour), hand-over.
KIND_COLORS = {"prefill": "#fd8d3c", "decode": COLORS["productive"], "handoff": "#9467bd"}
KIND_SCALE = alt.Scale(domain=list(KIND_COLORS), range=list(KIND_COLORS.values()))


def _finite(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def rate_rows(measurements: Iterable[RateMeasurement], slo: SLO | None = None) -> list[dict[str, Any]]:
    """One row per measured rate: attainment (under ``slo`` if given), p90 latencies, throughput."""
    rows = []
    for m in measurements:
        if slo is not None:
            m = m.rescore(slo)
        rows.append({
            "mode": m.mode,
            "rate_rps": round(m.rate_rps, 4),
            "attainment": _finite(m.attainment, 4),
            "ttft_p90_ms": _finite(m.ttft_ms(90), 2),
            "tpot_p90_ms": _finite(m.tpot_ms(90), 2),
            "arrived_rps": round(m.requests / m.duration_s, 3) if m.duration_s > 0 else None,
            "throughput_rps": round(m.throughput_rps, 3),
            "requests": m.requests,
            "duration_s": round(m.duration_s, 3),
            "exact": m.exact_for,
        })
    return sorted(rows, key=lambda r: (r["mode"], r["rate_rps"]))


def attainment_vs_rate(rows: Iterable[Mapping[str, Any]], target: float = 0.9, goodput: Mapping[str, float] | None = None,
                       width: int = 520) -> alt.LayerChart:
    """SLO attainment against request rate, a line per mode, the target as a rule and each mode's goodput marked.

    ``rows`` need ``mode``, ``rate_rps``, ``attainment`` (from :func:`rate_rows`); ``goodput``
    maps a mode to its goodput (req/s). Click a legend entry to pick a mode.
    """
    data = [dict(r) for r in rows if r.get("attainment") is not None]
    pick = alt.selection_point(name="serving_mode", fields=["mode"], bind="legend")
    base = alt.Chart(alt.InlineData(values=data)).encode(
        x=alt.X("rate_rps:Q", title="request rate (req/s)"),
        y=alt.Y("attainment:Q", title="SLO attainment (share of requests)", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("mode:N", scale=MODE_SCALE, title=None),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
    )
    lines = base.mark_line(point=alt.OverlayMarkDef(size=70)).encode(
        tooltip=["mode:N", alt.Tooltip("rate_rps:Q", title="req/s"), alt.Tooltip("attainment:Q", format=".1%"),
                 "requests:Q", alt.Tooltip("duration_s:Q", title="seconds of arrivals")],
    ).add_params(pick)
    layers: list[alt.Chart] = [lines]
    layers.append(
        alt.Chart(alt.InlineData(values=[{"target": target}])).mark_rule(color="#d62728", strokeDash=[4, 3])
        .encode(y="target:Q", tooltip=[alt.Tooltip("target:Q", format=".0%", title="attainment target")])
    )
    if goodput:
        marks = [{"mode": mode, "goodput_rps": g, "label": f"goodput {g:.3g} req/s"} for mode, g in goodput.items() if g > 0]
        rule = alt.Chart(alt.InlineData(values=marks)).encode(
            x="goodput_rps:Q", color=alt.Color("mode:N", scale=MODE_SCALE, title=None),
        )
        layers.append(rule.mark_rule(strokeDash=[2, 2], strokeWidth=2).encode(tooltip=["mode:N", "label:N"]))
        layers.append(rule.mark_text(angle=270, align="left", dy=-4, baseline="bottom").encode(y=alt.value(252), text="label:N"))
    return alt.layer(*layers).properties(width=width, height=260, title="attainment against rate")


def latency_vs_rate(rows: Iterable[Mapping[str, Any]], slo: SLO, width: int = 300) -> alt.HConcatChart:
    """p90 TTFT and p90 TPOT against rate, a line per mode, each with its objective as a rule (log scale)."""
    data = [dict(r) for r in rows]
    panels = []
    for key, objective, title in (("ttft_p90_ms", slo.ttft_ms, "p90 time to first token (ms)"),
                                  ("tpot_p90_ms", slo.tpot_ms, "p90 time per output token (ms)")):
        points = [r for r in data if r.get(key) is not None]
        line = alt.Chart(alt.InlineData(values=points)).mark_line(point=True).encode(
            x=alt.X("rate_rps:Q", title="request rate (req/s)"),
            y=alt.Y(f"{key}:Q", title=title, scale=alt.Scale(type="log")),
            color=alt.Color("mode:N", scale=MODE_SCALE, title=None),
            tooltip=["mode:N", "rate_rps:Q", alt.Tooltip(f"{key}:Q", format=".1f")],
        )
        rule = alt.Chart(alt.InlineData(values=[{"slo": objective}])).mark_rule(color="#d62728", strokeDash=[4, 3]).encode(
            y="slo:Q", tooltip=[alt.Tooltip("slo:Q", title="objective (ms)")])
        panels.append(alt.layer(line, rule).properties(width=width, height=220))
    return alt.hconcat(*panels).properties(title="latency against rate (missing points: more than 10% unfinished)")


def throughput_vs_rate(rows: Iterable[Mapping[str, Any]], width: int = 300) -> alt.LayerChart:
    """Requests served per second against requests arrived per second, with the diagonal.

    Arrived: the requests that came during the window over its length (a Poisson draw, so a
    little off the nominal rate). Throughput keeps close to the diagonal long after the
    latencies have blown through the SLOs: it says the server is busy, not that anyone was
    served in time.
    """
    data = [dict(r) for r in rows]
    top = max([1.0] + [max(r["arrived_rps"] or 0.0, r["throughput_rps"]) for r in data])
    diagonal = alt.Chart(alt.InlineData(values=[{"v": 0.0}, {"v": top}])).mark_line(color="#999", strokeDash=[4, 3]).encode(
        x=alt.X("v:Q"), y=alt.Y("v:Q"))
    line = alt.Chart(alt.InlineData(values=data)).mark_line(point=True).encode(
        x=alt.X("arrived_rps:Q", title="arrived (req/s)"),
        y=alt.Y("throughput_rps:Q", title="served (req/s)"),
        color=alt.Color("mode:N", scale=MODE_SCALE, title=None),
        tooltip=["mode:N", alt.Tooltip("rate_rps:Q", title="rate (req/s)"), alt.Tooltip("arrived_rps:Q", format=".2f"),
                 alt.Tooltip("throughput_rps:Q", format=".2f"), alt.Tooltip("attainment:Q", format=".0%")],
    )
    return alt.layer(diagonal, line).properties(width=width, height=220, title="throughput against rate")


def request_rows(m: RateMeasurement) -> list[dict[str, Any]]:
    """One row per finished request: TTFT and TPOT in ms, and whether it met the measurement's SLO."""
    return [
        {"id": r.id, "mode": m.mode, "ttft_ms": round(1000 * r.ttft_s, 3), "tpot_ms": round(1000 * r.tpot_s, 3),
         "prompt_len": r.prompt_len, "output_len": r.output_len, "meets": "meets both" if r.meets(m.slo) else "misses"}
        for r in m.records if r.finished
    ]


def request_scatter(m: RateMeasurement, width: int = 320, title: str | None = None) -> alt.LayerChart:
    """What each request felt: TTFT against TPOT, one point per finished request, the SLO as a box.

    Points inside the box (lower left) met both objectives."""
    rows = request_rows(m)
    unfinished = m.requests - m.finished
    box = alt.Chart(alt.InlineData(values=[{"x0": 0, "x1": m.slo.ttft_ms, "y0": 0, "y1": m.slo.tpot_ms}])).mark_rect(
        color="#2ca02c", opacity=0.12, stroke="#2ca02c").encode(x="x0:Q", x2="x1:Q", y="y0:Q", y2="y1:Q")
    points = alt.Chart(alt.InlineData(values=rows)).mark_circle(size=40, opacity=0.8).encode(
        x=alt.X("ttft_ms:Q", title="time to first token (ms)"),
        y=alt.Y("tpot_ms:Q", title="time per output token (ms)"),
        color=alt.Color("meets:N", scale=alt.Scale(domain=["meets both", "misses"], range=["#2ca02c", "#d62728"]), title=None),
        tooltip=["id:Q", alt.Tooltip("ttft_ms:Q", format=".1f"), alt.Tooltip("tpot_ms:Q", format=".1f"), "prompt_len:Q", "output_len:Q"],
    )
    note = f"{m.mode}, {m.rate_rps:g} req/s: {m.attainment:.0%} met both" + (f" ({unfinished} unfinished not shown)" if unfinished else "")
    return alt.layer(box, points).properties(width=width, height=240, title=title or note)


def trace_rows(m: RateMeasurement, start_s: float = 0.0, end_s: float | None = None) -> list[dict[str, Any]]:
    """The workers' spans of work between ``start_s`` and ``end_s`` (seconds since the measurement began)."""
    end_s = math.inf if end_s is None else end_s
    rows = []
    for worker, spans in m.info.get("traces", {}).items():
        for kind, a, b, size, waiting in spans:
            if b >= start_s and a <= end_s:
                rows.append({"worker": worker, "kind": kind, "start": round(max(a, start_s), 5), "end": round(min(b, end_s), 5),
                             "ms": round(1000 * (b - a), 3), "size": size, "waiting": waiting})
    return rows


def worker_timeline(m: RateMeasurement, start_s: float = 0.0, seconds: float = 0.5, width: int = 620) -> alt.Chart:
    """What each worker did, span by span, over ``seconds`` from ``start_s``: prefill, decode steps, hand-overs.

    On a colocated worker an orange prefill stops the green decode steps of every running
    request; on a disaggregated pair the decode worker never stops for a prefill."""
    rows = trace_rows(m, start_s, start_s + seconds)
    return (
        alt.Chart(alt.InlineData(values=rows)).mark_bar(height=22)
        .encode(
            x=alt.X("start:Q", title="seconds since the measurement began", scale=alt.Scale(domain=[start_s, start_s + seconds])),
            x2="end:Q",
            y=alt.Y("worker:N", title=None),
            color=alt.Color("kind:N", scale=KIND_SCALE, title=None),
            tooltip=["worker:N", "kind:N", alt.Tooltip("ms:Q", title="ms"), alt.Tooltip("size:Q", title="tokens (prefill) / batch (decode)"),
                     alt.Tooltip("waiting:Q", title="running sequences kept waiting")],
        )
        .properties(width=width, height=40 * max(1, len({r['worker'] for r in rows})), title=f"{m.mode} at {m.rate_rps:g} req/s")
    )


def gap_rows(measurements: Mapping[str, RateMeasurement], bins_ms: Iterable[float] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, math.inf)) -> list[dict[str, Any]]:
    """The gaps between consecutive output tokens of every request, counted in bins (ms), per label."""
    edges = list(bins_ms)
    rows = []
    for label, m in measurements.items():
        counts = [0] * len(edges)
        total = 0
        for r in m.records:
            for a, b in zip(r.token_times_s, r.token_times_s[1:]):
                gap = 1000 * (b - a)
                counts[next(i for i, e in enumerate(edges) if gap <= e)] += 1
                total += 1
        lower = 0.0
        for e, c in zip(edges, counts):
            name = f"> {lower:g} ms" if math.isinf(e) else f"{lower:g}-{e:g} ms"
            rows.append({"label": label, "bin": name, "upper_ms": None if math.isinf(e) else e, "gaps": c,
                         "share": round(c / total, 5) if total else 0.0})
            lower = e
    return rows


def token_gaps(measurements: Mapping[str, RateMeasurement], width: int = 520) -> alt.Chart:
    """How long readers waited between two tokens: the share of inter-token gaps in each bin, per mode.

    A decode step is a few milliseconds; the long gaps of a colocated worker are the prefills
    that ran while a request was waiting for its next token."""
    rows = [r for r in gap_rows(measurements)]
    order = list(dict.fromkeys(r["bin"] for r in rows))
    return (
        alt.Chart(alt.InlineData(values=rows)).mark_bar()
        .encode(
            x=alt.X("bin:N", sort=order, title="gap between two output tokens"),
            xOffset=alt.XOffset("label:N"),
            y=alt.Y("share:Q", title="share of gaps", axis=alt.Axis(format="%")),
            color=alt.Color("label:N", scale=MODE_SCALE, title=None),
            tooltip=["label:N", "bin:N", "gaps:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=width, height=220, title="time between tokens")
    )


def search_rows(searches: Mapping[str, GoodputSearch]) -> list[dict[str, Any]]:
    """Every probe of every search, in order: the table a reader checks the goodput against."""
    rows = []
    for mode, s in searches.items():
        for i, p in enumerate(s.probes, 1):
            rows.append({"mode": mode, "probe": i, "rate_rps": p.rate_rps, "duration_s": round(p.duration_s, 3),
                         "requests": p.requests, "attainment": _finite(p.attainment, 4), "meets_target": s.passed(p)})
    return rows


def search_path(searches: Mapping[str, GoodputSearch], width: int = 520) -> alt.LayerChart:
    """The order in which each search measured its rates: bracket upwards or downwards, then bisect."""
    rows = search_rows(searches)
    base = alt.Chart(alt.InlineData(values=rows)).encode(
        x=alt.X("probe:O", title="probe (in the order measured)"),
        y=alt.Y("rate_rps:Q", title="rate measured (req/s)"),
        color=alt.Color("mode:N", scale=MODE_SCALE, title=None),
    )
    line = base.mark_line(opacity=0.5)
    points = base.mark_point(size=90, filled=True).encode(
        shape=alt.Shape("meets_target:N", scale=alt.Scale(domain=[True, False], range=["circle", "cross"]), title="meets target"),
        tooltip=["mode:N", "probe:O", "rate_rps:Q", "requests:Q", alt.Tooltip("attainment:Q", format=".1%"), "duration_s:Q"],
    )
    return alt.layer(line, points).properties(width=width, height=220, title="the search, probe by probe")
