"""What every chart shares: the ledger's colours, offline rendering in Jupyter, static PNGs.

In a notebook call :func:`setup_notebook` once: Altair then draws offline (the
Vega JavaScript comes from vl-convert-python, not a CDN), and every chart's output
also carries a static PNG (:mod:`goodputlab.charts.static`). :func:`save_png`
writes that PNG to a file.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import altair as alt

from ..categories import CATEGORIES, COLORS

#: The colour of each ledger category, identical in every chart.
CATEGORY_SCALE = alt.Scale(domain=list(CATEGORIES), range=[COLORS[c] for c in CATEGORIES])


def present(rows: Iterable[Mapping[str, Any]], value: str = "seconds") -> list[str]:
    """The categories that hold time in ``rows`` (tidy rows with ``category`` and ``value``), in the
    ledger's order: what a legend lists (one that names a category no bar shows teaches it too early)."""
    held = {r["category"] for r in rows if (r.get(value) or 0) > 0}
    return [c for c in CATEGORIES if c in held]


def category_scale(categories: Iterable[str]) -> alt.Scale:
    """The ledger's colours for ``categories`` only (in the ledger's order), so a chart's legend lists
    the categories it shows, each in the colour it has in every chart."""
    shown = [c for c in CATEGORIES if c in set(categories)] or [CATEGORIES[0]]
    return alt.Scale(domain=shown, range=[COLORS[c] for c in shown])


def setup_notebook() -> None:
    """Draw charts offline in Jupyter: a live chart (Altair's ``jupyter`` renderer with vl-convert's
    JavaScript) that also carries a static PNG for places without a kernel (:mod:`.static`).

    With ``GOODPUTLAB_FIGURES`` set (``make figures``), every chart shown is also written as SVG
    and PNG (:mod:`goodputlab.charts.figures`).
    """
    from . import static
    from .figures import enable_from_environment

    if "goodputlab" not in alt.renderers.names():
        alt.renderers.register("goodputlab", static.render)
    alt.renderers.enable("goodputlab")
    enable_from_environment()


def save_png(chart: alt.TopLevelMixin, path, scale: float = 2.0) -> None:
    """Write a static PNG of ``chart`` (rendered offline by vl-convert; the same picture the
    notebooks carry beside their live charts, :func:`goodputlab.charts.static.png`)."""
    from . import static

    with open(path, "wb") as f:
        f.write(static.png(chart, scale=scale))
