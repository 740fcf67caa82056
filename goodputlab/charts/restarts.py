"""Charts of recovery (chapter 6): the loss around a restart from an incomplete checkpoint, the samples
repeated and skipped, and the seconds from each failure to the first resumed step."""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

import altair as alt

from ..experiments.recovery import checkpoint_label

_VARIANT_COLORS = {"reference": "#7f7f7f", "complete": "#2ca02c", "optimizer": "#d62728", "data": "#ff7f0e", "rng": "#9467bd"}


def _checkpoint(row: Mapping[str, Any]) -> str:
    """The row's checkpoint in words (``without the optimizer's state``, not ``optimizer``)."""
    return row.get("checkpoint") or checkpoint_label(row["variant"])


def loss_around_restart(rows: Iterable[Mapping[str, Any]], restart_step: int | None = None, width: int = 680) -> alt.LayerChart:
    """Loss against step, one line per variant (``{variant, step, loss}``; the legend names each by its
    checkpoint in words), a rule at the restart."""
    rows = [{**r, "checkpoint": _checkpoint(r)} for r in rows]
    colors = {r["checkpoint"]: _VARIANT_COLORS.get(r["variant"], "#1f77b4") for r in rows}
    names = list(colors)
    color = alt.Color("checkpoint:N", sort=names, title="checkpoint", scale=alt.Scale(domain=names, range=list(colors.values())))
    pick = alt.selection_point(name="variant_pick", fields=["checkpoint"], bind="legend")
    lines = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_line(strokeWidth=1.6)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("loss:Q", title="training loss", scale=alt.Scale(zero=False)),
            color=color,
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
            tooltip=["checkpoint:N", "step:Q", alt.Tooltip("loss:Q", format=".4f")],
        )
        .add_params(pick)
    )
    layers = [lines]
    if restart_step is not None:
        layers.append(
            alt.Chart(alt.InlineData(values=[{"step": restart_step, "what": "restart"}]))
            .mark_rule(color="#d62728", strokeDash=[4, 3])
            .encode(x="step:Q", tooltip=["what:N", "step:Q"])
        )
    return alt.layer(*layers).properties(width=width, height=260, title="loss: failure-free and restarted runs")


def samples_chart(effects: Iterable[Mapping[str, Any]], width: int = 420) -> alt.Chart:
    """Sample uses repeated and skipped per variant (rows of :func:`goodputlab.experiments.recovery.omit_effects`),
    each named by its checkpoint in words."""
    effects = list(effects)
    rows = [
        {"variant": e["variant"], "checkpoint": _checkpoint(e), "what": what, "samples": e[what]}
        for e in effects
        for what in ("repeated", "skipped")
    ]
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("samples:Q", title="sample uses"),
            y=alt.Y("checkpoint:N", title=None, sort=[_checkpoint(e) for e in effects]),
            yOffset="what:N",
            color=alt.Color("what:N", scale=alt.Scale(domain=["repeated", "skipped"], range=["#ff7f0e", "#1f77b4"]), title=None),
            tooltip=["checkpoint:N", "what:N", "samples:Q"],
        )
        .properties(width=width, height=160, title="samples seen twice, and never, against the failure-free run")
    )


def restart_strip(rows: Iterable[Mapping[str, Any]], width: int = 520) -> alt.LayerChart:
    """Seconds from each failure to the first resumed step (``{way, failure, seconds}``): a tick per failure,
    and each way's median, on a log scale (a cold restart and a hot spare differ by orders of magnitude)."""
    rows = list(rows)
    ways = list(dict.fromkeys(r["way"] for r in rows))
    medians = [{"way": w, "median": statistics.median(r["seconds"] for r in rows if r["way"] == w)} for w in ways]
    color = alt.Color("way:N", title=None, sort=ways, scale=alt.Scale(domain=ways, range=["#8c564b", "#2ca02c", "#1f77b4"][:len(ways)]))
    x = alt.X("seconds:Q", title="seconds from a failure to the first resumed step (log scale)", scale=alt.Scale(type="log"))
    ticks = (
        alt.Chart(alt.InlineData(values=rows))
        .mark_tick(thickness=2, size=22, opacity=0.6)
        .encode(x=x, y=alt.Y("way:N", title=None, sort=ways), color=color,
                tooltip=["way:N", "failure:N", alt.Tooltip("seconds:Q", format=".3f")])
    )
    middle = (
        alt.Chart(alt.InlineData(values=medians))
        .mark_point(shape="diamond", size=160, filled=True, color="black")
        .encode(x=alt.X("median:Q"), y=alt.Y("way:N", sort=ways), tooltip=["way:N", alt.Tooltip("median:Q", format=".3f")])
    )
    return alt.layer(ticks, middle).properties(width=width, height=40 * len(ways) + 20,
                                               title="restart: a new process against a hot spare (median: diamond)")
