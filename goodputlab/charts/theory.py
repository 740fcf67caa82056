"""Charts of the theory: the goodput-versus-interval U-curve, the lab model's curve, breakdowns side by side.

Every chart is a plain function returning an Altair chart built from tidy
rows, so widgets can redraw it by assigning ``JupyterChart.chart``. Every
param and selection has an explicit name (stable specs, testable in the
widget tests). Times on axes are in the unit the title says. Clusters and
failure causes are in :mod:`goodputlab.charts.cluster`.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import altair as alt
import numpy as np

from .. import theory, validate
from ..categories import CATEGORIES
from ..errors import check
from .base import category_scale, present

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
    validate.whole("points", points, 2)
    rows = []
    for tau in np.geomspace(lo, hi, points):
        tau = float(tau)
        for model, g in _model_goodputs(tau, save_s, restart_s, mtbf_s, data_stall_fraction).items():
            rows.append({"interval_s": tau, "interval_min": tau / 60.0, "model": model, "goodput": g})
    return rows


def _model_goodputs(tau: float, save_s: float, restart_s: float, mtbf_s: float, data_stall_fraction: float) -> dict[str, float]:
    """The first-order and Daly goodput at one interval (seconds), by model name."""
    return {
        "first-order": theory.expected_goodput(tau, save_s, restart_s, mtbf_s, data_stall_fraction),
        "Daly (exact)": theory.daly_goodput(tau, save_s, restart_s, mtbf_s, data_stall_fraction),
    }


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
    """The goodput-versus-interval curve (an upside-down U), first-order and Daly, with the optima marked.

    x: checkpoint interval in minutes (log scale); y: goodput. Young's and
    Daly's optima are vertical rules; ``chosen_interval_s`` adds a point on
    each curve at that interval; ``measured`` adds points from rows with
    ``interval_s`` and ``goodput`` (e.g. a simulation per interval). Hovering
    the legend highlights one model (selection ``model_pick``).
    """
    rows = interval_curve_rows(save_s, restart_s, mtbf_s, interval_range_s, data_stall_fraction=data_stall_fraction)
    x = alt.X(
        "interval_min:Q",
        title="checkpoint interval (minutes, log)",
        scale=alt.Scale(type="log", domain=[rows[0]["interval_min"], rows[-1]["interval_min"]], nice=False),
    )
    y = _GOODPUT_Y
    layers = [_interval_model_lines(rows, x, y), *_optima_rules(optima_rows(save_s, mtbf_s))]
    if chosen_interval_s is not None:
        chosen = [
            {"model": model, "interval_min": chosen_interval_s / 60.0, "goodput": g}
            for model, g in _model_goodputs(chosen_interval_s, save_s, restart_s, mtbf_s, data_stall_fraction).items()
        ]
        layers.append(
            alt.Chart(alt.InlineData(values=chosen))
            .mark_point(size=110, filled=True, stroke="white")
            .encode(
                x=x,
                y=y,
                color=alt.Color("model:N", scale=_model_scale(_INTERVAL_MODELS), legend=None),
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


_INTERVAL_MODELS = ["first-order", "Daly (exact)"]
_GOODPUT_Y = alt.Y("goodput:Q", title="goodput", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]))


def _interval_model_lines(rows: list[dict[str, Any]], x: alt.X, y: alt.Y) -> alt.Chart:
    """One line per model over the interval; hovering the legend highlights one (selection ``model_pick``)."""
    pick = alt.selection_point(name="model_pick", fields=["model"], bind="legend")
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(strokeWidth=2.5)
        .encode(
            x=x,
            y=y,
            color=alt.Color("model:N", scale=_model_scale(_INTERVAL_MODELS), title="model"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                "model:N",
                alt.Tooltip("interval_min:Q", title="interval (min)", format=".1f"),
                alt.Tooltip("goodput:Q", format=".1%"),
            ],
        )
        .add_params(pick)
    )


def _optima_rules(optima: list[dict[str, Any]]) -> list[alt.Chart]:
    """Young's and Daly's optima as dashed vertical rules with labels (none when saves are free)."""
    if not optima:
        return []
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
    return [rules, labels]


def lab_curve_rows(
    timings: theory.RunTimings, steps: int, mtbf_s: float, intervals: Iterable[int] | None = None
) -> list[dict[str, Any]]:
    """The lab model over checkpoint intervals in steps, with Daly's textbook formula beside it.

    One row per (interval, model): ``ckpt_every``, ``model`` (``"lab model"``
    or ``"Daly (exact)"``), ``goodput``, and for the lab model ``sd`` (one
    run's standard deviation). ``intervals`` default to ~60 log-spaced
    integers from 1 to ``steps``.
    """
    if intervals is None:
        intervals = sorted({int(round(k)) for k in np.geomspace(1, steps, 60)})
    rows = []
    for k in intervals:
        p = theory.predict_run(timings, steps, k, mtbf_s)
        rows.append({"ckpt_every": k, "model": "lab model", "goodput": p.goodput, "sd": p.goodput_sd})
        daly = theory.textbook_goodput(timings, steps, k, mtbf_s)["daly"]
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
    :func:`goodputlab.experiments.interval_sweep.pool_sweep` returns them. Young's and Daly's
    optima (in steps, from the measured save and step costs) are marked.
    """
    validate.whole("runs_per_point", runs_per_point, 1)
    rows = lab_curve_rows(timings, steps, mtbf_s)
    root_n = math.sqrt(runs_per_point)
    for r in rows:
        r["lo"] = max(0.0, r["goodput"] - 2 * r["sd"] / root_n)
        r["hi"] = min(1.0, r["goodput"] + 2 * r["sd"] / root_n)
    x = alt.X(
        "ckpt_every:Q", title="checkpoint every (steps, log)", scale=alt.Scale(type="log", domain=[1, steps], nice=False)
    )
    y = _GOODPUT_Y
    band = (
        alt.Chart(alt.InlineData(values=[r for r in rows if r["model"] == "lab model"]))
        .mark_area(opacity=0.18, color=MODEL_COLORS["lab model"])
        .encode(x=x, y=alt.Y("lo:Q", scale=alt.Scale(domain=[0, 1])), y2="hi:Q")
    )
    names = ["lab model", "Daly (exact)"]
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
    layers = [band, lines, _lab_optima_rules(timings, steps, mtbf_s), *_measured_sweep(measured, x, y)]
    return alt.layer(*layers).resolve_scale(color="independent").properties(
        width=width,
        height=height,
        title=f"measured goodput (points) over the lab model (band: +-2 s.e. of {runs_per_point} run(s)), MTBF {mtbf_s:g} s",
    )


def _lab_optima_rules(timings: theory.RunTimings, steps: int, mtbf_s: float) -> alt.Chart:
    """Young's, Daly's and the lab model's optimum interval, in steps, as dashed rules."""
    optima = [
        {"name": "Young", "x": theory.young_interval(timings.save_s, mtbf_s) / timings.step_s},
        {"name": "Daly", "x": theory.daly_interval(timings.save_s, mtbf_s) / timings.step_s},
        {"name": "lab model", "x": theory.optimal_ckpt_every(timings, steps, mtbf_s)},
    ]
    for o in optima:
        o["label"] = f"{o['name']}: {o['x']:.0f} steps"
    return (
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


def _measured_sweep(measured: Iterable[Mapping[str, Any]], x: alt.X, y: alt.Y) -> list[alt.Chart]:
    """The measured points of a sweep, each with a bar from its lowest to its highest run (none without points)."""
    points = [
        {
            "ckpt_every": r["ckpt_every"],
            "goodput": r["measured"],
            "lo": r.get("measured_min", r["measured"]),
            "hi": r.get("measured_max", r["measured"]),
        }
        for r in measured
    ]
    if not points:
        return []
    bars = (
        alt.Chart(alt.InlineData(values=points))
        .mark_rule(color=MODEL_COLORS["measured"], strokeWidth=1)
        .encode(x=x, y=alt.Y("lo:Q", scale=alt.Scale(domain=[0, 1])), y2="hi:Q")
    )
    dots = (
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
    return [bars, dots]


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
    :meth:`goodputlab.theory.SimResult.breakdown_rows`,
    :meth:`goodputlab.theory.RunPrediction.breakdown_rows` and
    :func:`summary_rows` return them. Colours are the ledger's
    (``category_scale``: the legend lists the categories that hold time); clicking a legend entry highlights one category
    (selection ``category_pick``).
    """
    rows = [dict(r, order=CATEGORIES.index(r["category"])) for r in rows]
    runs = list(dict.fromkeys(r["run"] for r in rows))
    shown = present(rows, "share")
    rows = [r for r in rows if r["category"] in shown]
    pick = alt.selection_point(name="category_pick", fields=["category"], bind="legend")
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("share:Q", stack="zero", title="share of wall time", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("run:N", title=None, sort=runs),
            color=alt.Color("category:N", scale=category_scale(shown), legend=alt.Legend(title="category")),
            order=alt.Order("order:Q"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=["run:N", "category:N", alt.Tooltip("seconds:Q", format=",.1f"), alt.Tooltip("share:Q", format=".1%")],
        )
        .add_params(pick)
        .properties(width=width, height=max(50, 32 * len(runs)), title=title or "where the time went")
    )
