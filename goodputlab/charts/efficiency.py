"""Charts of statistical efficiency: throughput, efficiency and their product (goodput) against batch size,
loss curves, the gradient noise scale as training goes on, learning-rate rules, adaptivity.

Every chart is a plain function of a sweep's results (:mod:`goodputlab.efficiency.analysis`)
returning an Altair chart, so the panel redraws it by assigning ``JupyterChart.chart``.
Batch sizes are on a log-2 axis. Measured figures are dots joined by a line; what the
noise scale predicts is a dashed line. Batch sizes that missed the target are crosses
on the axis.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import altair as alt
import numpy as np

from ..efficiency.noise import statistical_efficiency

if TYPE_CHECKING:  # pragma: no cover
    from ..efficiency.analysis import SweepAnalysis, SweepResult

MEASURED = "#1f77b4"
PREDICTED = "#ff7f0e"
#: One colour per learning-rate rule, identical in every chart.
RULE_COLORS = {"linear": "#d62728", "sqrt": "#1f77b4", "adascale": "#2ca02c"}
SOURCE_COLORS = {"measured": MEASURED, "predicted from the noise scale": PREDICTED}
_SOURCE_SCALE = alt.Scale(domain=list(SOURCE_COLORS), range=list(SOURCE_COLORS.values()))


def _batch_axis(sizes: Sequence[int], title: str = "batch size (sequences per step)") -> alt.X:
    return alt.X(
        "batch_size:Q",
        title=title,
        scale=alt.Scale(type="log", base=2, domain=[min(sizes) / 1.3, max(sizes) * 1.3], nice=False),
        axis=alt.Axis(values=list(sizes), format="d"),
    )


def _r(x: Any, digits: int = 4) -> Any:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return round(float(x), digits)


def _dense(sizes: Sequence[int], points: int = 60) -> np.ndarray:
    return np.geomspace(min(sizes), max(sizes), points)


def _selected_rule(batch_size: int | None) -> list[alt.Chart]:
    if batch_size is None:
        return []
    return [
        alt.Chart(alt.InlineData(values=[{"batch_size": batch_size}]))
        .mark_rule(color="#888", strokeDash=[2, 2])
        .encode(x="batch_size:Q")
    ]


def _missed_marks(analysis: SweepAnalysis) -> list[alt.Chart]:
    missed = [{"batch_size": r["batch_size"], "y": 0.0, "note": f"missed the target ({r['stopped'].replace('_', ' ')})"} for r in analysis.rows if not r["reached"]]
    if not missed:
        return []
    return [
        alt.Chart(alt.InlineData(values=missed))
        .mark_point(shape="cross", size=120, color="#d62728", filled=True)
        .encode(x="batch_size:Q", y="y:Q", tooltip=["batch_size:Q", "note:N"])
    ]


def throughput_chart(analysis: SweepAnalysis, selected: int | None = None, width: int = 260, height: int = 200) -> alt.LayerChart:
    """Measured samples per second against batch size, with the fitted ``M / (alpha + beta M)``."""
    sizes = [r["batch_size"] for r in analysis.rows]
    fit = analysis.throughput_fit
    points = [{"batch_size": r["batch_size"], "samples_per_s": _r(r["samples_per_s"], 1), "source": "measured"} for r in analysis.rows]
    model = [{"batch_size": _r(m, 3), "samples_per_s": _r(float(fit.samples_per_s(m)), 1)} for m in _dense(sizes)]
    x = _batch_axis(sizes)
    y = alt.Y("samples_per_s:Q", title="throughput (samples/s)", scale=alt.Scale(zero=True))
    line = alt.Chart(alt.InlineData(values=model)).mark_line(color="#999", strokeDash=[4, 3]).encode(x=x, y=y)
    dots = (
        alt.Chart(alt.InlineData(values=points))
        .mark_line(point=True, color=MEASURED)
        .encode(x=x, y=y, tooltip=["batch_size:Q", alt.Tooltip("samples_per_s:Q", format=",.0f")])
    )
    return alt.layer(line, dots, *_selected_rule(selected)).properties(
        width=width, height=height, title=f"throughput (knee {fit.knee:.0f} sequences)"
    )


def efficiency_chart(analysis: SweepAnalysis, selected: int | None = None, width: int = 260, height: int = 200) -> alt.LayerChart:
    """Statistical efficiency against batch size: measured (samples at the reference / samples here)
    and Pollux's ``(B_noise + M0) / (B_noise + M)`` from the measured noise scale."""
    sizes = [r["batch_size"] for r in analysis.rows]
    x = _batch_axis(sizes)
    y = alt.Y("efficiency:Q", title="statistical efficiency", scale=alt.Scale(domain=[0, 1.1]))
    measured = [
        {"batch_size": r["batch_size"], "efficiency": _r(r["statistical_efficiency"]), "source": "measured"}
        for r in analysis.rows
        if r["reached"]
    ]
    layers = []
    if analysis.noise_scale is not None and analysis.reference_batch_size is not None:
        predicted = [
            {"batch_size": _r(m, 3), "efficiency": _r(float(statistical_efficiency(m, analysis.noise_scale, analysis.reference_batch_size))), "source": "predicted from the noise scale"}
            for m in _dense(sizes)
        ]
        layers.append(alt.Chart(alt.InlineData(values=predicted)).mark_line(strokeDash=[5, 3]).encode(x=x, y=y, color=alt.Color("source:N", scale=_SOURCE_SCALE, title=None)))
    layers.append(
        alt.Chart(alt.InlineData(values=measured))
        .mark_line(point=True)
        .encode(x=x, y=y, color=alt.Color("source:N", scale=_SOURCE_SCALE, title=None), tooltip=["batch_size:Q", alt.Tooltip("efficiency:Q", format=".2f")])
    )
    title = "statistical efficiency" + ("" if analysis.noise_scale is None else f" (B_noise {analysis.noise_scale:.0f})")
    return alt.layer(*layers, *_missed_marks(analysis), *_selected_rule(selected)).properties(width=width, height=height, title=title)


def goodput_chart(analysis: SweepAnalysis, selected: int | None = None, width: int = 260, height: int = 200) -> alt.LayerChart:
    """Goodput = throughput x efficiency against batch size: measured, and predicted from the
    noise scale (measured throughput x predicted efficiency); the measured best is a solid rule."""
    sizes = [r["batch_size"] for r in analysis.rows]
    x = _batch_axis(sizes)
    y = alt.Y("goodput:Q", title="goodput (samples/s at the reference's worth)", scale=alt.Scale(zero=True))
    color = alt.Color("source:N", scale=_SOURCE_SCALE, title=None)
    rows = [{"batch_size": r["batch_size"], "goodput": _r(r["goodput"], 1), "source": "measured"} for r in analysis.rows if r["reached"]]
    rows += [
        {"batch_size": r["batch_size"], "goodput": _r(r["predicted_goodput"], 1), "source": "predicted from the noise scale"}
        for r in analysis.rows
        if r["predicted_goodput"] is not None
    ]
    lines = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(point=True)
        .encode(x=x, y=y, color=color, strokeDash=alt.StrokeDash("source:N", legend=None, scale=alt.Scale(domain=list(SOURCE_COLORS), range=[[1, 0], [5, 3]])),
                tooltip=["batch_size:Q", "source:N", alt.Tooltip("goodput:Q", format=",.0f")])
    )
    layers = [lines]
    if analysis.best_batch_size is not None:
        layers.append(
            alt.Chart(alt.InlineData(values=[{"batch_size": analysis.best_batch_size, "label": f"best measured: {analysis.best_batch_size}"}]))
            .mark_rule(color=MEASURED, opacity=0.5, size=2)
            .encode(x="batch_size:Q", tooltip=["label:N"])
        )
    return alt.layer(*layers, *_missed_marks(analysis), *_selected_rule(selected)).properties(
        width=width, height=height, title="goodput = throughput x efficiency"
    )


def factors_chart(analysis: SweepAnalysis, selected: int | None = None, width: int = 230) -> alt.HConcatChart:
    """The two factors and their product side by side: throughput, efficiency, goodput."""
    return alt.hconcat(
        throughput_chart(analysis, selected, width=width),
        efficiency_chart(analysis, selected, width=width),
        goodput_chart(analysis, selected, width=width),
    ).resolve_scale(color="shared", strokeDash="independent")


def loss_curves(result: SweepResult, target_loss: float | None = None, width: int = 560, height: int = 260) -> alt.LayerChart:
    """Held-out loss against samples seen, one line per batch size, with the target as a rule."""
    target = result.config.target_loss if target_loss is None else target_loss
    rows = [
        {"batch": f"{m:>4}", "batch_size": m, "samples": s, "step": st, "loss": _r(loss)}
        for m, t in sorted(result.trajectories.items())
        for st, s, loss in zip(t.steps, t.samples, t.losses)
        if s > 0 and math.isfinite(loss)
    ]
    lines = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line()
        .encode(
            x=alt.X("samples:Q", title="samples seen (sequences)", scale=alt.Scale(type="log")),
            y=alt.Y("loss:Q", title="held-out loss (nats/token)", scale=alt.Scale(zero=False)),
            color=alt.Color("batch:N", title="batch size", scale=alt.Scale(scheme="viridis")),
            tooltip=["batch_size:Q", "step:Q", "samples:Q", alt.Tooltip("loss:Q", format=".3f")],
        )
    )
    rule = alt.Chart(alt.InlineData(values=[{"loss": target, "label": f"target {target:g}"}])).mark_rule(color="#d62728", strokeDash=[4, 3]).encode(y="loss:Q", tooltip=["label:N"])
    return alt.layer(lines, rule).properties(width=width, height=height, title="the same progress costs more samples at bigger batches")


def noise_scale_chart(result: SweepResult, width: int = 560, height: int = 240) -> alt.Chart:
    """The gradient noise scale each run estimated, against its held-out loss (training goes left to right)."""
    rows = [
        {"batch": f"{m:>4}", "batch_size": m, "loss": _r(loss), "noise_scale": _r(b, 2), "step": st}
        for m, t in sorted(result.trajectories.items())
        for st, loss, b in zip(t.steps, t.losses, t.noise_scales)
        if st >= 4 and math.isfinite(b) and math.isfinite(loss)  # the first steps' estimates are a handful of draws
    ]
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("loss:Q", title="held-out loss (nats/token), falling as training goes on", scale=alt.Scale(reverse=True, zero=False)),
            y=alt.Y("noise_scale:Q", title="gradient noise scale (sequences)"),
            color=alt.Color("batch:N", title="run at batch", scale=alt.Scale(scheme="viridis")),
            tooltip=["batch_size:Q", "step:Q", alt.Tooltip("loss:Q", format=".3f"), alt.Tooltip("noise_scale:Q", format=".1f")],
        )
        .properties(width=width, height=height, title="the noise scale grows as the loss falls")
    )


def tradeoff_chart(analysis: SweepAnalysis, width: int = 320, height: int = 260) -> alt.LayerChart:
    """Steps against samples to the target (McCandlish's trade-off), with the fitted
    ``(S / S_min - 1)(E / E_min - 1) = 1``."""
    rows = [
        {"batch_size": r["batch_size"], "steps": r["steps_to_target"], "samples": r["samples_to_target"]}
        for r in analysis.rows
        if r["reached"]
    ]
    layers = []
    crit = analysis.critical_batch
    if crit is not None:
        curve = [
            {"steps": _r(crit["s_min"] * (1 + crit["b_crit"] / m), 2), "samples": _r(crit["e_min"] * (1 + m / crit["b_crit"]), 1)}
            for m in np.geomspace(min(r["batch_size"] for r in rows) / 2, max(r["batch_size"] for r in rows) * 2, 60)
        ]
        layers.append(alt.Chart(alt.InlineData(values=curve)).mark_line(color="#999", strokeDash=[4, 3]).encode(x="samples:Q", y="steps:Q", order=alt.Order("samples:Q")))
    layers.append(
        alt.Chart(alt.InlineData(values=rows))
        .mark_point(filled=True, size=60, color=MEASURED)
        .encode(
            x=alt.X("samples:Q", title="samples to the target", scale=alt.Scale(type="log")),
            y=alt.Y("steps:Q", title="steps to the target", scale=alt.Scale(type="log")),
            tooltip=["batch_size:Q", "steps:Q", "samples:Q"],
        )
    )
    layers.append(alt.Chart(alt.InlineData(values=rows)).mark_text(dx=14, dy=-8, fontSize=10).encode(x="samples:Q", y="steps:Q", text="batch_size:Q"))
    title = "steps against samples" + ("" if crit is None else f" (B_crit {crit['b_crit']:.0f})")
    return alt.layer(*layers).properties(width=width, height=height, title=title)


def rules_chart(analyses: Mapping[str, SweepAnalysis], width: int = 420, height: int = 240) -> alt.LayerChart:
    """Time to the target against batch size, one line per learning-rate rule; missed targets as crosses."""
    rows, missed = [], []
    sizes = sorted({r["batch_size"] for a in analyses.values() for r in a.rows})
    top = max([r["time_to_target_s"] for a in analyses.values() for r in a.rows if r["reached"]] or [1.0])
    for rule, a in analyses.items():
        for r in a.rows:
            if r["reached"]:
                rows.append({"rule": rule, "batch_size": r["batch_size"], "time_s": _r(r["time_to_target_s"], 3), "efficiency": _r(r["statistical_efficiency"], 3)})
            else:
                missed.append({"rule": rule, "batch_size": r["batch_size"], "time_s": _r(top * 1.15, 3), "note": f"missed ({r['stopped'].replace('_', ' ')})"})
    color = alt.Color("rule:N", title="learning-rate rule", scale=alt.Scale(domain=list(RULE_COLORS), range=list(RULE_COLORS.values())))
    x = _batch_axis(sizes)
    y = alt.Y("time_s:Q", title="time to the target (s, at measured throughput)", scale=alt.Scale(type="log"))
    layers = [
        alt.Chart(alt.InlineData(values=rows)).mark_line(point=True).encode(x=x, y=y, color=color, tooltip=["rule:N", "batch_size:Q", alt.Tooltip("time_s:Q", format=".1f"), alt.Tooltip("efficiency:Q", format=".2f")])
    ]
    if missed:
        layers.append(alt.Chart(alt.InlineData(values=missed)).mark_point(shape="cross", size=120, filled=True).encode(x=x, y=y, color=color, tooltip=["rule:N", "batch_size:Q", "note:N"]))
    return alt.layer(*layers).properties(width=width, height=height, title="learning-rate rules: time to the target")


def adaptivity_chart(rows: Iterable[Mapping[str, Any]], batch_sizes: Sequence[int], width: int = 420, height: int = 240) -> alt.LayerChart:
    """The best batch size as the loss falls: measured over each stretch of training, predicted from
    the noise scale (best swept size, and the closed form ``sqrt(B_noise x knee)``)."""
    data = []
    for r in rows:
        for kind, key in (("measured (this stretch)", "measured"), ("predicted (swept sizes)", "predicted"), ("closed form", "optimal")):
            if r.get(key) is not None and math.isfinite(r[key]):
                data.append({"loss": _r(r["loss"]), "batch_size": _r(r[key], 2), "kind": kind, "noise_scale": _r(r.get("noise_scale"), 1)})
    kinds = ["measured (this stretch)", "predicted (swept sizes)", "closed form"]
    return (
        alt.Chart(alt.InlineData(values=data))
        .mark_line(point=True)
        .encode(
            x=alt.X("loss:Q", title="held-out loss reached (falling as training goes on)", scale=alt.Scale(reverse=True, zero=False)),
            y=alt.Y("batch_size:Q", title="best batch size", scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=list(batch_sizes), format="d")),
            color=alt.Color("kind:N", title=None, scale=alt.Scale(domain=kinds, range=[MEASURED, PREDICTED, "#999"])),
            tooltip=["kind:N", alt.Tooltip("loss:Q", format=".3f"), alt.Tooltip("batch_size:Q", format=".1f"), alt.Tooltip("noise_scale:Q", format=".1f")],
        )
        .properties(width=width, height=height, title="the best batch size grows as training goes on")
    )

