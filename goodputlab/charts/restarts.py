"""Charts of recovery (chapter 6): the loss around a restart from an incomplete checkpoint, the samples
repeated and skipped, and the seconds from a failure to the first resumed step."""

from __future__ import annotations

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


def restart_bars(rows: Iterable[Mapping[str, Any]], width: int = 520) -> alt.Chart:
    """Seconds from a failure to the first resumed step (``{way, failure, seconds}``), one bar per failure."""
    rows = list(rows)
    return (
        alt.Chart(alt.InlineData(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("seconds:Q", title="seconds from the failure to the first resumed step"),
            y=alt.Y("way:N", title=None),
            yOffset="failure:N",
            color=alt.Color("way:N", title=None, scale=alt.Scale(range=["#8c564b", "#2ca02c"])),
            tooltip=["way:N", "failure:N", alt.Tooltip("seconds:Q", format=".3f")],
        )
        .properties(width=width, height=120, title="restart: a new process against a hot spare")
    )
