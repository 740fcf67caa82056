"""Charts of scaling out (chapter 7): the ranks side by side, the straggler's cost, a sharded save per rank,
the simulator's job at any size.

Plain functions returning Altair charts built from tidy rows; every param and selection has an
explicit name; ledger categories keep their colours (:func:`~goodputlab.charts.base.category_scale`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import altair as alt

from ..categories import CATEGORIES, COLORS
from ..distributed.joblog import rank_events
from ..measure.ledger import build_ledger
from .base import category_scale, present


def rank_rows(result, start_s: float | None = None, span_s: float | None = None) -> list[dict[str, Any]]:
    """One bar per phase of every rank's own ledger and of the job's, within ``[start_s, start_s + span_s]``.

    Each rank's own log is booked like a one-process run (its ``sync_wait`` is ``straggler_wait``);
    the job's row is the run's ledger (the ranks merged). Default window: the whole run.
    """
    world = result.summary.get("world_size", 1)
    rows_by_track = {f"rank {r}": build_ledger(rank_events(result.out, r)).segments for r in range(world)}
    rows_by_track["job"] = result.ledger.segments
    lo = start_s if start_s is not None else 0.0
    hi = lo + span_s if span_s is not None else result.ledger.wall_s
    rows = []
    for track, segments in rows_by_track.items():
        for s in segments:
            if s.end <= lo or s.start >= hi:
                continue
            rows.append({"track": track, "start": round(max(s.start, lo), 5), "end": round(min(s.end, hi), 5),
                         "ms": round(1000 * s.duration, 3), "category": s.category, "what": s.kind, "step": s.step})
    return rows


def loop_window(result, steps: int = 6) -> tuple[float, float]:
    """``(start_s, span_s)`` around ``steps`` steps from the middle of the job's first attempt's loop."""
    computes = [s for s in result.ledger.segments if s.kind == "compute" and s.attempt == 0]
    if not computes:
        return 0.0, result.ledger.wall_s
    middle = computes[len(computes) // 2]
    after = [s for s in computes if s.step is not None and middle.step is not None and middle.step <= s.step < middle.step + steps]
    end = max(s.end for s in after) if after else middle.end
    return middle.start, end - middle.start


def rank_timelines(result, start_s: float | None = None, span_s: float | None = None, title: str | None = None,
                   width: int = 640) -> alt.Chart:
    """Every rank's own timeline above the job's, coloured by category: the healthy ranks' ``straggler_wait``
    (in the all-reduce) lines up with the slow rank's longer compute, and the job books it once."""
    rows = rank_rows(result, start_s, span_s)
    tracks = sorted({r["track"] for r in rows if r["track"] != "job"}) + ["job"]
    scale = category_scale({r["category"] for r in rows})
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar(height={"band": 0.75})
        .encode(
            x=alt.X("start:Q", title="wall time (s)", scale=alt.Scale(zero=False)),
            x2="end:Q",
            y=alt.Y("track:N", sort=tracks, title=None),
            color=alt.Color("category:N", scale=scale, legend=alt.Legend(title="category")),
            tooltip=["track:N", "category:N", "what:N", "step:Q", alt.Tooltip("ms:Q", format=".2f")],
        )
        .properties(width=width, height=26 * len(tracks), title=title or "each rank, and the job they make")
    )


def job_mtbf_chart(rank_mtbf_s: float, ranks: Iterable[int], measured: Iterable[Mapping[str, Any]] = (),
                   width: int = 420) -> alt.LayerChart:
    """The job's MTBF (seconds) against its ranks, each failing with MTBF ``rank_mtbf_s``: ``M / N``.
    ``measured`` rows (``ranks``, ``job_mtbf_s``, optionally ``lo`` and ``hi``: a band of one standard error)
    are drawn as points, with the band as a bar through each."""
    ranks = sorted(set(int(n) for n in ranks))
    measured = list(measured) or [{"ranks": None, "job_mtbf_s": None}]
    line_rows = [{"ranks": n, "job_mtbf_s": rank_mtbf_s / n} for n in ranks]
    line = (
        alt.Chart(alt.InlineData(values=line_rows))
        .mark_line(color="#444")
        .encode(
            x=alt.X("ranks:Q", scale=alt.Scale(type="log"), title="ranks"),
            y=alt.Y("job_mtbf_s:Q", scale=alt.Scale(type="log"), title="job MTBF (s)"),
            tooltip=["ranks:Q", alt.Tooltip("job_mtbf_s:Q", format=".3g")],
        )
    )
    points = (
        alt.Chart(alt.InlineData(values=measured))
        .mark_point(filled=True, size=90, color=COLORS["lost_work"])
        .encode(x="ranks:Q", y="job_mtbf_s:Q", tooltip=["ranks:Q", alt.Tooltip("job_mtbf_s:Q", format=".3g"), "label:N"])
    )
    layers = [line, points]
    banded = [r for r in measured if r.get("lo") is not None and r.get("hi") is not None]
    if banded:
        layers.append(
            alt.Chart(alt.InlineData(values=banded))
            .mark_rule(color=COLORS["lost_work"], strokeWidth=2)
            .encode(x="ranks:Q", y="lo:Q", y2="hi:Q", tooltip=["label:N", alt.Tooltip("lo:Q", format=".3g"),
                                                                alt.Tooltip("hi:Q", format=".3g")])
        )
    return alt.layer(*layers).properties(width=width, height=240,
                                         title=f"one failure stops every rank: M / N (M = {rank_mtbf_s:g} s)")


def straggler_chart(rows: Iterable[Mapping[str, Any]], width: int = 420) -> alt.Chart:
    """Measured against modelled straggler wait: rows ``label``, ``source`` (measured or model), ``seconds``."""
    rows = list(rows)
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort=None),
            yOffset=alt.YOffset("source:N"),
            x=alt.X("seconds:Q", title="time the healthy rank waited (s)"),
            color=alt.Color("source:N", scale=alt.Scale(domain=["measured", "model"], range=[COLORS["straggler_wait"], "#888"]),
                            title=None),
            tooltip=["label:N", "source:N", alt.Tooltip("seconds:Q", format=".3f")],
        )
        .properties(width=width, height=36 * max(1, len({r["label"] for r in rows})), title="the straggler: measured and modelled")
    )


def save_per_rank_chart(rows: Iterable[Mapping[str, Any]], width: int = 420) -> alt.Chart:
    """What each rank writes of a checkpoint (MB): rows ``ranks``, ``rank``, ``bytes`` (None for a one-process save)."""
    data = [{"job": f"{r['ranks']} rank{'s' if r['ranks'] > 1 else ''}", "rank": f"rank {r['rank']}",
             "MB": round(r["bytes"] / 1e6, 4)} for r in rows if r.get("bytes")]
    return (
        alt.Chart(alt.InlineData(values=data))
        .mark_bar(color=COLORS["checkpoint_save"])
        .encode(
            y=alt.Y("job:N", title=None),
            yOffset="rank:N",
            x=alt.X("MB:Q", title="MB written per checkpoint, per rank"),
            tooltip=["job:N", "rank:N", "MB:Q"],
        )
        .properties(width=width, height=40 * max(1, len(data)), title="a sharded save: each rank writes its share")
    )


def sweep_rows(results: Mapping[int, Any]) -> list[dict[str, Any]]:
    """Tidy rows of simulated jobs by size: ``{ranks: SimResult}`` -> ``ranks, category, share, goodput``."""
    rows = []
    for n, r in sorted(results.items()):
        duration = r.config.duration_s
        for cat in CATEGORIES:
            rows.append({"ranks": n, "category": cat, "order": CATEGORIES.index(cat),
                         "share": r.buckets[cat] / duration, "goodput": r.goodput_mean})
    return rows


def scale_sweep_chart(rows: Iterable[Mapping[str, Any]], width: int = 520) -> alt.Chart:
    """Where a job's time goes as it grows: one stacked bar per job size (simulated)."""
    rows = list(rows)
    sizes = sorted({r["ranks"] for r in rows})
    shown = present(rows, "share")
    rows = [r for r in rows if r["category"] in shown]
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("ranks:O", title="ranks (GPUs)", sort=sizes),
            y=alt.Y("share:Q", stack="zero", title="share of wall time", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("category:N", scale=category_scale(shown), legend=alt.Legend(title="category")),
            order=alt.Order("order:Q"),
            tooltip=["ranks:O", "category:N", alt.Tooltip("share:Q", format=".1%"), alt.Tooltip("goodput:Q", format=".1%")],
        )
        .properties(width=width, height=260, title="the same job at every size (simulated)")
    )
