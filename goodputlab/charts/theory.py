"""Charts of the theory: the goodput-versus-interval U-curve, clusters, causes, breakdowns.

Every chart is a plain function returning an Altair chart built from tidy
rows, so widgets can redraw it by assigning ``JupyterChart.chart``. Every
param and selection has an explicit name (stable specs, testable in the
widget tests). Times on axes are in the unit the title says.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import altair as alt
import numpy as np

from .. import theory
from ..categories import CATEGORIES
from ..errors import check
from . import CATEGORY_SCALE

#: Colours of the models, identical in every chart of the theory.
MODEL_COLORS: dict[str, str] = {
    "first-order": "#ff7f0e",
    "Daly (exact)": "#1f77b4",
    "lab model": "#2ca02c",
    "measured": "#000000",
    "simulated": "#9467bd",
}
_OPTIMA_COLORS = {"Young": "#d62728", "Daly": "#17becf", "lab model": "#2ca02c"}


def _model_scale(names: Sequence[str]) -> alt.Scale:
    return alt.Scale(domain=list(names), range=[MODEL_COLORS[n] for n in names])


# ---------------------------------------------------------------------------
# goodput versus checkpoint interval


def interval_curve_rows(
    save_s: float,
    restart_s: float,
    mtbf_s: float,
    interval_range_s: tuple[float, float] | None = None,
    points: int = 121,
    data_stall_fraction: float = 0.0,
) -> list[dict[str, Any]]:
    """The first-order and Daly goodput over a log-spaced range of intervals (seconds).

    One row per (interval, model): ``interval_s``, ``interval_min``, ``model``
    (``"first-order"`` or ``"Daly (exact)"``), ``goodput``. The default range
    runs from a tenth of Young's interval (at least 1 s) to twice the MTBF.
    """
    young = theory.young_interval(save_s, mtbf_s)
    lo, hi = interval_range_s or (max(1.0, young / 10.0) if young > 0 else 1.0, 2.0 * mtbf_s)
    check(0 < lo < hi, "interval_range_s", (lo, hi), "two interval lengths in seconds, 0 < low < high")
    check(isinstance(points, int) and points >= 2, "points", points, "an integer >= 2")
    rows = []
    compute_share = 1.0 - data_stall_fraction
    for tau in np.geomspace(lo, hi, points):
        tau = float(tau)
        first = theory.expected_goodput(tau, save_s, restart_s, mtbf_s, data_stall_fraction)
        daly = compute_share * theory.daly_goodput(tau, save_s, restart_s, mtbf_s)
        for model, g in (("first-order", first), ("Daly (exact)", daly)):
            rows.append({"interval_s": tau, "interval_min": tau / 60.0, "model": model, "goodput": g})
    return rows


def optima_rows(save_s: float, mtbf_s: float, unit_s: float = 60.0) -> list[dict[str, Any]]:
    """Young's and Daly's optimum intervals as rule rows: ``name``, ``interval_s``, ``x`` (in ``unit_s``), ``label``.

    Empty when saves are free (both optima are 0: checkpoint continuously).
    """
    rows = []
    for name, tau in (("Young", theory.young_interval(save_s, mtbf_s)), ("Daly", theory.daly_interval(save_s, mtbf_s))):
        if tau <= 0:  # free saves: checkpoint continuously; nothing to mark on a log axis
            continue
        rows.append(
            {"name": name, "interval_s": tau, "x": tau / unit_s, "label": f"{name}: {theory.human_duration(tau)}"}
        )
    return rows


def goodput_curve(
    save_s: float,
    restart_s: float,
    mtbf_s: float,
    *,
    interval_range_s: tuple[float, float] | None = None,
    data_stall_fraction: float = 0.0,
    chosen_interval_s: float | None = None,
    measured: Iterable[Mapping[str, Any]] | None = None,
    width: int = 560,
    height: int = 300,
    title: str | None = None,
) -> alt.LayerChart:
    """The U-shaped goodput-versus-interval curve, first-order and Daly, with the optima marked.

    x: checkpoint interval in minutes (log scale); y: goodput. Young's and
    Daly's optima are vertical rules; ``chosen_interval_s`` adds a point on
    each curve at that interval; ``measured`` adds points from rows with
    ``interval_s`` and ``goodput`` (e.g. a simulation per interval). Hovering
    the legend highlights one model (selection ``model_pick``).
    """
    rows = interval_curve_rows(save_s, restart_s, mtbf_s, interval_range_s, data_stall_fraction=data_stall_fraction)
    names = ["first-order", "Daly (exact)"]
    pick = alt.selection_point(name="model_pick", fields=["model"], bind="legend")
    lo_min, hi_min = rows[0]["interval_min"], rows[-1]["interval_min"]
    x = alt.X(
        "interval_min:Q",
        title="checkpoint interval (minutes, log)",
        scale=alt.Scale(type="log", domain=[lo_min, hi_min], nice=False),
    )
    y = alt.Y("goodput:Q", title="goodput", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]))
    lines = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(strokeWidth=2.5)
        .encode(
            x=x,
            y=y,
            color=alt.Color("model:N", scale=_model_scale(names), title="model"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                "model:N",
                alt.Tooltip("interval_min:Q", title="interval (min)", format=".1f"),
                alt.Tooltip("goodput:Q", format=".1%"),
            ],
        )
        .add_params(pick)
    )
    optima = optima_rows(save_s, mtbf_s)
    rules = (
        alt.Chart(alt.InlineData(values=optima))
        .mark_rule(strokeDash=[5, 3], strokeWidth=1.5)
        .encode(
            x="x:Q",
            color=alt.Color(
                "name:N",
                scale=alt.Scale(domain=["Young", "Daly"], range=[_OPTIMA_COLORS["Young"], _OPTIMA_COLORS["Daly"]]),
                title="optimum",
            ),
            tooltip=["label:N"],
        )
    )
    labels = (
        alt.Chart(alt.InlineData(values=optima))
        .mark_text(align="left", dx=4, dy=-4, fontSize=11)
        .encode(x="x:Q", y=alt.Y("ypos:Q", scale=alt.Scale(domain=[0, 1])), text="label:N")
        .transform_calculate(ypos="datum.name == 'Young' ? 0.12 : 0.05")
    )
    layers = [lines, rules, labels] if optima else [lines]
    if chosen_interval_s is not None:
        chosen = [
            {
                "model": "first-order",
                "interval_min": chosen_interval_s / 60.0,
                "goodput": theory.expected_goodput(chosen_interval_s, save_s, restart_s, mtbf_s, data_stall_fraction),
            },
            {
                "model": "Daly (exact)",
                "interval_min": chosen_interval_s / 60.0,
                "goodput": (1 - data_stall_fraction) * theory.daly_goodput(chosen_interval_s, save_s, restart_s, mtbf_s),
            },
        ]
        layers.append(
            alt.Chart(alt.InlineData(values=chosen))
            .mark_point(size=110, filled=True, stroke="white")
            .encode(
                x=x,
                y=y,
                color=alt.Color("model:N", scale=_model_scale(names), legend=None),
                tooltip=["model:N", alt.Tooltip("goodput:Q", format=".1%")],
            )
        )
    if measured is not None:
        points = [
            {"interval_min": r["interval_s"] / 60.0, "goodput": r["goodput"], "label": r.get("label", "simulated")}
            for r in measured
        ]
        layers.append(
            alt.Chart(alt.InlineData(values=points))
            .mark_point(shape="diamond", size=80, filled=True, color=MODEL_COLORS["simulated"])
            .encode(x=x, y=y, tooltip=["label:N", alt.Tooltip("goodput:Q", format=".1%")])
        )
    return alt.layer(*layers).resolve_scale(color="independent").properties(
        width=width,
        height=height,
        title=title
        or f"goodput vs checkpoint interval: save {theory.human_duration(save_s)}, "
        f"restart {theory.human_duration(restart_s)}, MTBF {theory.human_duration(mtbf_s)}",
    )


def lab_curve_rows(
    timings: theory.RunTimings, steps: int, mtbf_s: float, intervals: Iterable[int] | None = None
) -> list[dict[str, Any]]:
    """The lab model over checkpoint intervals in steps, with Daly's textbook formula beside it.

    One row per (interval, model): ``ckpt_every``, ``model`` (``"lab model"``
    or ``"Daly (exact)"``), ``goodput``, and for the lab model ``sd`` (one
    run's standard deviation). ``intervals`` default to ~60 log-spaced
    integers from 1 to ``steps``.
    """
    from ..measure import textbook_goodput

    if intervals is None:
        intervals = sorted({int(round(k)) for k in np.geomspace(1, steps, 60)})
    rows = []
    for k in intervals:
        p = theory.predict_run(timings, steps, k, mtbf_s)
        rows.append({"ckpt_every": k, "model": "lab model", "goodput": p.goodput, "sd": p.goodput_sd})
        daly = textbook_goodput(timings, steps, k, mtbf_s)["daly"]
        rows.append({"ckpt_every": k, "model": "Daly (exact)", "goodput": daly, "sd": 0.0})
    return rows


def lab_goodput_curve(
    timings: theory.RunTimings,
    steps: int,
    mtbf_s: float,
    measured: Iterable[Mapping[str, Any]] = (),
    runs_per_point: int = 1,
    width: int = 560,
    height: int = 300,
) -> alt.LayerChart:
    """A measured sweep over the theory: the lab model's curve (and Daly's) with the measured points.

    x: checkpoint interval in steps (log scale). The shaded band is the lab
    model +- 2 standard errors of a point pooled over ``runs_per_point`` runs:
    where a measurement should fall if the model is right. ``measured`` rows
    have ``ckpt_every`` and ``measured`` (pooled goodput), optionally
    ``measured_min`` and ``measured_max`` (drawn as a bar), as
    :func:`goodputlab.measure.pool_sweep` returns them. Young's and Daly's
    optima (in steps, from the measured save and step costs) are marked.
    """
    check(isinstance(runs_per_point, int) and runs_per_point >= 1, "runs_per_point", runs_per_point, "an integer >= 1")
    rows = lab_curve_rows(timings, steps, mtbf_s)
    root_n = math.sqrt(runs_per_point)
    for r in rows:
        r["lo"] = max(0.0, r["goodput"] - 2 * r["sd"] / root_n)
        r["hi"] = min(1.0, r["goodput"] + 2 * r["sd"] / root_n)
    names = ["lab model", "Daly (exact)"]
    x = alt.X(
        "ckpt_every:Q", title="checkpoint every (steps, log)", scale=alt.Scale(type="log", domain=[1, steps], nice=False)
    )
    y = alt.Y("goodput:Q", title="goodput", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]))
    band = (
        alt.Chart(alt.InlineData(values=[r for r in rows if r["model"] == "lab model"]))
        .mark_area(opacity=0.18, color=MODEL_COLORS["lab model"])
        .encode(x=x, y=alt.Y("lo:Q", scale=alt.Scale(domain=[0, 1])), y2="hi:Q")
    )
    lines = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(strokeWidth=2.5)
        .encode(
            x=x,
            y=y,
            color=alt.Color("model:N", scale=_model_scale(names), title="model"),
            strokeDash=alt.StrokeDash("model:N", legend=None, scale=alt.Scale(domain=names, range=[[1, 0], [6, 3]])),
            tooltip=["model:N", "ckpt_every:Q", alt.Tooltip("goodput:Q", format=".1%")],
        )
    )
    optima = [
        {"name": "Young", "x": theory.young_interval(timings.save_s, mtbf_s) / timings.step_s},
        {"name": "Daly", "x": theory.daly_interval(timings.save_s, mtbf_s) / timings.step_s},
        {"name": "lab model", "x": theory.optimal_ckpt_every(timings, steps, mtbf_s)},
    ]
    for o in optima:
        o["label"] = f"{o['name']}: {o['x']:.0f} steps"
    rules = (
        alt.Chart(alt.InlineData(values=optima))
        .mark_rule(strokeDash=[5, 3])
        .encode(
            x="x:Q",
            color=alt.Color(
                "name:N",
                scale=alt.Scale(domain=list(_OPTIMA_COLORS), range=list(_OPTIMA_COLORS.values())),
                title="optimum",
            ),
            tooltip=["label:N"],
        )
    )
    layers = [band, lines, rules]
    points = [
        {
            "ckpt_every": r["ckpt_every"],
            "goodput": r["measured"],
            "lo": r.get("measured_min", r["measured"]),
            "hi": r.get("measured_max", r["measured"]),
        }
        for r in measured
    ]
    if points:
        layers.append(
            alt.Chart(alt.InlineData(values=points))
            .mark_rule(color=MODEL_COLORS["measured"], strokeWidth=1)
            .encode(x=x, y=alt.Y("lo:Q", scale=alt.Scale(domain=[0, 1])), y2="hi:Q")
        )
        layers.append(
            alt.Chart(alt.InlineData(values=points))
            .mark_point(filled=True, size=90, color=MODEL_COLORS["measured"])
            .encode(
                x=x,
                y=y,
                tooltip=[
                    "ckpt_every:Q",
                    alt.Tooltip("goodput:Q", title="measured", format=".1%"),
                    alt.Tooltip("lo:Q", title="lowest run", format=".1%"),
                    alt.Tooltip("hi:Q", title="highest run", format=".1%"),
                ],
            )
        )
    return alt.layer(*layers).resolve_scale(color="independent").properties(
        width=width,
        height=height,
        title=f"measured goodput (points) over the lab model (band: +-2 s.e. of {runs_per_point} run(s)), MTBF {mtbf_s:g} s",
    )


# ---------------------------------------------------------------------------
# breakdowns side by side


def summary_rows(summary: Mapping[str, Any], run: str = "measured") -> list[dict[str, Any]]:
    """A measured run's summary (``buckets``, ``wall_s``) as tidy breakdown rows."""
    wall = summary["wall_s"]
    return [
        {"run": run, "category": c, "seconds": summary["buckets"][c], "share": summary["buckets"][c] / wall if wall else 0}
        for c in CATEGORIES
    ]


def breakdown_side_by_side(rows: Iterable[Mapping[str, Any]], width: int = 560, title: str | None = None) -> alt.Chart:
    """Where the time went, one stacked bar per source (simulated, predicted, measured...).

    ``rows`` carry ``run``, ``category``, ``share`` and ``seconds``, as
    :meth:`goodputlab.simulate.SimResult.breakdown_rows`,
    :meth:`goodputlab.theory.RunPrediction.breakdown_rows` and
    :func:`summary_rows` return them. Colours are the ledger's
    (``CATEGORY_SCALE``); clicking a legend entry highlights one category
    (selection ``category_pick``).
    """
    rows = [dict(r, order=CATEGORIES.index(r["category"])) for r in rows]
    runs = list(dict.fromkeys(r["run"] for r in rows))
    pick = alt.selection_point(name="category_pick", fields=["category"], bind="legend")
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("share:Q", stack="zero", title="share of wall time", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("run:N", title=None, sort=runs),
            color=alt.Color("category:N", scale=CATEGORY_SCALE, legend=alt.Legend(title="category")),
            order=alt.Order("order:Q"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=["run:N", "category:N", alt.Tooltip("seconds:Q", format=",.1f"), alt.Tooltip("share:Q", format=".1%")],
        )
        .add_params(pick)
        .properties(width=width, height=max(50, 32 * len(runs)), title=title or "where the time went")
    )


# ---------------------------------------------------------------------------
# clusters and causes


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
