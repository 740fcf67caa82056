"""What every chart shares: the ledger's colours, offline rendering in Jupyter, static PNGs.

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
    """Draw charts offline in Jupyter: Altair's ``jupyter`` renderer with vl-convert's JavaScript.

    With ``GOODPUTLAB_FIGURES`` set (``make figures``), every chart shown is also written as SVG
    and PNG (:mod:`goodputlab.charts.figures`).
    """
    from .figures import enable_from_environment

    alt.renderers.enable("jupyter", offline=True)
    enable_from_environment()


def save_png(chart: alt.TopLevelMixin, path, scale: float = 2.0) -> None:
    """Write a static PNG of ``chart`` (rendered offline by vl-convert)."""
    import vl_convert as vlc

    png = vlc.vegalite_to_png(chart.to_json(), scale=scale)
    with open(path, "wb") as f:
        f.write(png)
