"""Altair charts, one module per subject; everything is re-exported here.

In a notebook call :func:`setup_notebook` once: Altair then draws offline (the
Vega JavaScript comes from vl-convert-python, not a CDN). :func:`save_png`
writes a static image for places that run no kernel.
"""

from __future__ import annotations

import altair as alt

from ..categories import CATEGORIES, COLORS

#: The colour of each ledger category, identical in every chart.
CATEGORY_SCALE = alt.Scale(domain=list(CATEGORIES), range=[COLORS[c] for c in CATEGORIES])


def setup_notebook() -> None:
    """Draw charts offline in Jupyter: a live chart (Altair's ``jupyter`` renderer with vl-convert's
    JavaScript) that also carries a static PNG for places without a kernel (:mod:`.static`)."""
    from . import static

    if "goodputlab" not in alt.renderers.names():
        alt.renderers.register("goodputlab", static.render)
    alt.renderers.enable("goodputlab")


def save_png(chart: alt.TopLevelMixin, path, scale: float = 2.0) -> None:
    """Write a static PNG of ``chart`` (rendered offline by vl-convert)."""
    import vl_convert as vlc

    png = vlc.vegalite_to_png(chart.to_json(), scale=scale)
    with open(path, "wb") as f:
        f.write(png)


from .runs import breakdown, loss_curve, timeline  # noqa: E402

__all__ = ["CATEGORY_SCALE", "breakdown", "loss_curve", "save_png", "setup_notebook", "timeline"]
