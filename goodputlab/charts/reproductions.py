"""The reproductions page's figure: each published figure's package value over the paper's, on a log axis.

A point at 1 is agreement; a point off 1 is a gap the row explains (:mod:`goodputlab.theory.reproductions`),
and a grey tick marks the ratio the row expects.
"""

from __future__ import annotations

from typing import Sequence

import altair as alt

KIND_COLORS = {"agrees": "#2ca02c", "gap": "#d62728", "at least": "#1f77b4"}


def ratio_chart(rows: Sequence[dict]) -> alt.LayerChart:
    """Package / published for every row of :func:`goodputlab.theory.reproductions.table_rows` (dicts),
    each labelled by its number in the page's table, its source and where the source prints it."""
    data = [{"label": f"{i}. {r['source']}, {r['where']}", "quantity": r["quantity"], "ratio": r["ratio"], "expected": r["expected_ratio"],
             "kind": r["kind"], "published": r["published_text"], "difference": r["difference"]} for i, r in enumerate(rows, 1)]
    order = [d["label"] for d in data]
    base = alt.Chart(alt.Data(values=data)).encode(
        y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=300)))
    scale = alt.Scale(type="log", domain=[0.5, 5.0], clamp=True)
    x = alt.X("ratio:Q", scale=scale, title="the package's value / the published value (log scale)")
    points = base.mark_point(filled=True, size=70).encode(
        x=x, color=alt.Color("kind:N", title="row", scale=alt.Scale(domain=list(KIND_COLORS), range=list(KIND_COLORS.values())),
                              legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("label:N", title="figure"), alt.Tooltip("quantity:N", title="quantity"),
                 alt.Tooltip("published:N", title="published"),
                 alt.Tooltip("difference:Q", title="difference", format="+.1%")])
    expected = base.mark_tick(color="#888", thickness=2, size=14).encode(x=alt.X("expected:Q", scale=scale))
    one = alt.Chart(alt.Data(values=[{"one": 1.0}])).mark_rule(color="#444", strokeDash=[4, 3]).encode(
        x=alt.X("one:Q", scale=scale))
    return alt.layer(one, expected, points).properties(width=300, height=alt.Step(18))
