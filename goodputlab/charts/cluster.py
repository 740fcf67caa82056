"""Charts of clusters: failures by cause, the job MTBF against the cluster's size, goodput over two costs.

Plain functions returning Altair charts built from tidy rows, like
:mod:`goodputlab.charts.theory`; every param and selection has an explicit name.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import altair as alt
import numpy as np

from .. import theory


def cause_chart(rows: Iterable[Mapping[str, Any]] | None = None, width: int = 520) -> alt.Chart:
    """Llama 3's unexpected interruptions by root cause (Table 5), coloured by component.

    ``rows`` default to :data:`goodputlab.theory.LLAMA3_INTERRUPTION_CAUSES`
    (``cause``, ``component``, ``count``, ``share``). Clicking a legend entry
    highlights one component (selection ``component_pick``).
    """
    rows = list(rows if rows is not None else theory.LLAMA3_INTERRUPTION_CAUSES)
    total = sum(r["count"] for r in rows)
    pick = alt.selection_point(name="component_pick", fields=["component"], bind="legend")
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("count:Q", title="interruptions in 54 days"),
            y=alt.Y("cause:N", sort="-x", title=None),
            color=alt.Color("component:N", title="component", scale=alt.Scale(scheme="tableau10")),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=["cause:N", "component:N", "count:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .add_params(pick)
        .properties(width=width, height=18 * len(rows), title=f"Llama 3: {total} unexpected interruptions by cause")
    )


def cluster_mtbf_rows(device_mtbf_s: float, sizes: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """Job MTBF (hours) and failures per day over cluster sizes for one per-device MTBF (seconds)."""
    if sizes is None:
        sizes = sorted({int(round(n)) for n in np.geomspace(1, 131_072, 69)})
    rows = []
    for n in sizes:
        mtbf = theory.cluster_mtbf(n, device_mtbf_s)
        rows.append(
            {
                "devices": n,
                "job_mtbf_h": mtbf / theory.SECONDS_PER_HOUR,
                "failures_per_day": theory.SECONDS_PER_DAY / mtbf,
                "device_mtbf_years": device_mtbf_s / (365.0 * theory.SECONDS_PER_DAY),
            }
        )
    return rows


def cluster_mtbf_chart(
    device_mtbf_s: float | Sequence[float],
    highlight_devices: int | None = None,
    width: int = 520,
    height: int = 280,
) -> alt.LayerChart:
    """Job MTBF falls as 1/N: hours between failures against devices, log-log.

    One line per per-device MTBF in ``device_mtbf_s`` (seconds). Llama 3's
    cluster (16,384 GPUs, one failure every ~2.8 h) is marked;
    ``highlight_devices`` adds a point at that size on every line. A
    nearest-point hover (selection ``size_hover``) shows the values.
    """
    mtbfs = [device_mtbf_s] if isinstance(device_mtbf_s, (int, float)) else list(device_mtbf_s)
    rows = [r for m in mtbfs for r in cluster_mtbf_rows(m)]
    for r in rows:
        r["device MTBF"] = f"device MTBF {r['device_mtbf_years']:.3g} y"
    hover = alt.selection_point(name="size_hover", fields=["devices"], nearest=True, on="pointerover", empty=False)
    x = alt.X("devices:Q", scale=alt.Scale(type="log"), title="devices in the job (log)")
    y = alt.Y("job_mtbf_h:Q", scale=alt.Scale(type="log"), title="job MTBF (hours, log)")
    color = alt.Color("device MTBF:N", title=None)
    lines = alt.Chart(alt.InlineData(values=rows)).mark_line().encode(x=x, y=y, color=color)
    points = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_point(filled=True)
        .encode(
            x=x,
            y=y,
            color=color,
            opacity=alt.condition(hover, alt.value(1.0), alt.value(0.0)),
            tooltip=[
                alt.Tooltip("devices:Q", format=","),
                alt.Tooltip("job_mtbf_h:Q", title="job MTBF (h)", format=".3g"),
                alt.Tooltip("failures_per_day:Q", title="failures per day", format=".3g"),
                "device MTBF:N",
            ],
        )
        .add_params(hover)
    )
    llama_mtbf_h = theory.LLAMA3_DURATION_S / theory.LLAMA3_INTERRUPTIONS / theory.SECONDS_PER_HOUR
    llama = [{"devices": theory.LLAMA3_GPUS, "job_mtbf_h": llama_mtbf_h, "label": "Llama 3: 16,384 GPUs, 466 in 54 days"}]
    llama_mark = (
        alt.Chart(alt.InlineData(values=llama))
        .mark_point(shape="cross", size=160, color="#d62728", filled=True)
        .encode(x=x, y=y, tooltip=["label:N", alt.Tooltip("job_mtbf_h:Q", title="job MTBF (h)", format=".2f")])
    )
    llama_text = (
        alt.Chart(alt.InlineData(values=llama))
        .mark_text(align="right", dx=-8, dy=-8, color="#d62728")
        .encode(x=x, y=y, text="label:N")
    )
    layers = [lines, points, llama_mark, llama_text]
    if highlight_devices is not None:
        chosen = [r for m in mtbfs for r in cluster_mtbf_rows(m, [highlight_devices])]
        layers.append(
            alt.Chart(alt.InlineData(values=chosen))
            .mark_point(size=140, filled=True, color="black")
            .encode(x=x, y=y, tooltip=[alt.Tooltip("devices:Q", format=","), alt.Tooltip("job_mtbf_h:Q", format=".3g")])
        )
    return alt.layer(*layers).properties(width=width, height=height, title="job MTBF falls as 1/N")


def goodput_grid_chart(rows: Iterable[Mapping[str, Any]], threshold: float = 0.9, width: int = 420) -> alt.LayerChart:
    """A heatmap of goodput over two costs, with the cells at or above ``threshold`` outlined.

    ``rows`` have ``x_label``, ``y_label`` (the two settings, as text in order)
    and ``goodput``, as :func:`goodputlab.theory.llama3_cost_grid` returns them
    (x: checkpoint interval, y: restart time).
    """
    rows = [dict(r, meets=r["goodput"] >= threshold) for r in rows]
    xs = list(dict.fromkeys(r["x_label"] for r in rows))
    ys = list(dict.fromkeys(r["y_label"] for r in rows))
    base = alt.Chart(alt.InlineData(values=rows)).encode(
        x=alt.X("x_label:N", sort=xs, title=rows[0].get("x_title", "") if rows else "", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("y_label:N", sort=ys, title=rows[0].get("y_title", "") if rows else ""),
    )
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("goodput:Q", scale=alt.Scale(scheme="redyellowgreen", domain=[0.6, 1.0], clamp=True), title="goodput"),
        tooltip=["x_label:N", "y_label:N", alt.Tooltip("goodput:Q", format=".1%")],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("goodput:Q", format=".0%"),
        color=alt.condition("datum.meets", alt.value("black"), alt.value("#555555")),
    )
    outline = (
        base.transform_filter("datum.meets")
        .mark_rect(fill=None, stroke="black", strokeWidth=2)
    )
    return alt.layer(cells, outline, text).properties(
        width=width, height=30 * max(1, len(ys)), title=f"goodput (outlined: >= {threshold:.0%})"
    )
