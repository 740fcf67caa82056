"""Charts of the capstone: your cluster's goodput against the interval, its breakdown, the lab's ratios beside it."""

from __future__ import annotations

import math

from typing import Any, Iterable, Mapping

import altair as alt
import numpy as np

from ..errors import ConfigError
from ..theory import capstone
from .theory import breakdown_side_by_side


def interval_rows(scenario: capstone.ClusterScenario, optimum_s: float, points: int = 40) -> list[dict]:
    """Rows ``{interval_s, minutes, goodput, ettr}``: the scenario evaluated at intervals around its optimum (/30 to x30).

    Intervals too short for a RAM tier's storage copies to keep up (one write in flight) are left out.
    """
    grid = np.logspace(np.log10(optimum_s / 30.0), np.log10(optimum_s * 30.0), points)
    rows = []
    for tau in grid:
        try:
            r = capstone.evaluate(scenario, interval_s=float(tau))
        except ConfigError:
            continue
        rows.append({"interval_s": float(tau), "minutes": float(tau) / 60.0, "goodput": r.goodput, "ettr": r.ettr})
    return rows


def interval_chart(rows: list[dict], optimum: Mapping[str, float], width: int = 520) -> alt.LayerChart:
    """Goodput and ETTR against the checkpoint interval (minutes, log scale), the optimum as a diamond."""
    long = [{"minutes": r["minutes"], "value": r[k], "metric": name}
            for r in rows for k, name in (("goodput", "goodput (ledger)"), ("ettr", "effective training time (ETTR)"))]
    x = alt.X("minutes:Q", scale=alt.Scale(type="log"), title="checkpoint interval (minutes of compute)")
    y = alt.Y("value:Q", axis=alt.Axis(format="%"), scale=alt.Scale(zero=False), title=None)
    color = alt.Color("metric:N", legend=alt.Legend(title=None, orient="bottom"))
    lines = alt.Chart(alt.InlineData(values=long)).mark_line().encode(
        x=x, y=y, color=color, tooltip=["metric:N", alt.Tooltip("minutes:Q", format=".3g"), alt.Tooltip("value:Q", format=".2%")])
    best = alt.Chart(alt.InlineData(values=[{"minutes": optimum["interval_s"] / 60.0, "value": optimum["goodput"],
                                             "metric": "goodput (ledger)", "what": "optimum"}])).mark_point(
        shape="diamond", size=120, filled=True).encode(
        x=x, y=y, color=color, tooltip=["what:N", alt.Tooltip("minutes:Q", format=".3g"), alt.Tooltip("value:Q", format=".2%")])
    return alt.layer(lines, best).properties(width=width, height=240, title="goodput against the checkpoint interval")


def breakdown(results: Mapping[str, capstone.ClusterResult], width: int = 560) -> alt.Chart:
    """Where the time goes (expected shares of wall time), one bar per named result."""
    rows = [row for name, r in results.items() for row in r.breakdown_rows(name)]
    return breakdown_side_by_side(rows, width=width, title="where a GPU-day goes (expected)")


def ratio_chart(rows: Iterable[Mapping[str, Any]], width: int = 420) -> alt.Chart:
    """The lab's ratios beside the cluster's (:func:`goodputlab.theory.capstone.lab_ratio_rows`), log scale."""
    data = [{"ratio": r["ratio"], "where": where, "value": r[key]}
            for r in rows if r["ratio"] != "goodput at that interval"
            for where, key in (("lab (measured)", "lab"), ("cluster (model)", "cluster"))]
    # a log scale has no zero for a bar to start from: the bars start at the decade below the smallest ratio
    values = [d["value"] for d in data if d["value"] > 0] or [1.0]
    lo, hi = 10.0 ** math.floor(math.log10(min(values))), 10.0 ** math.ceil(math.log10(max(values)))
    return (
        alt.Chart(alt.InlineData(values=data))
        .mark_bar()
        .encode(
            x=alt.X("value:Q", scale=alt.Scale(type="log", domain=[lo, hi]), title="ratio to the job's MTBF (log scale)"),
            x2=alt.datum(lo),
            y=alt.Y("where:N", title=None),
            row=alt.Row("ratio:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            color=alt.Color("where:N", legend=None),
            tooltip=["ratio:N", "where:N", alt.Tooltip("value:Q", format=".3g")],
        )
        .properties(width=width, height=40, title="what carries over: the ratios, not the seconds")
    )
