"""Figures for slides: every chart a notebook shows, also written as SVG and PNG (``make figures``).

When the environment variable ``GOODPUTLAB_FIGURES`` names a folder, :func:`~goodputlab.charts.setup_notebook`
enables the ``goodputlab-figures`` renderer: it draws each chart exactly as the book's ``goodputlab``
renderer does (:mod:`goodputlab.charts.static`: the live chart and its PNG), and also writes ``<folder>/<prefix>-NN.svg`` and ``.png`` (rendered offline by
vl-convert), numbered in the order the notebook shows them. ``GOODPUTLAB_FIGURES_PREFIX`` is the
prefix (``tools/make_figures.py`` sets it to the notebook's name). Nothing is listed by hand: a
chart a chapter shows is a chart on the slides. The live panels' charts are widgets the reader
drives; they are not written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import altair as alt

ENV_DIR = "GOODPUTLAB_FIGURES"
ENV_PREFIX = "GOODPUTLAB_FIGURES_PREFIX"
RENDERER = "goodputlab-figures"
PNG_SCALE = 2.0  # pixels per CSS pixel: sharp on a projector


class FigureWriter:
    """Writes each chart spec it is given as ``<prefix>-NN.svg`` and ``.png`` in ``folder``."""

    def __init__(self, folder: str | Path, prefix: str = "figure"):
        self.folder = Path(folder)
        self.prefix = re.sub(r"[^A-Za-z0-9_.-]+", "-", prefix) or "figure"
        self.count = 0

    def write(self, spec: dict) -> list[Path]:
        """Both files of one chart (a Vega-Lite spec as Altair's ``to_dict`` gives it)."""
        import vl_convert as vlc

        self.folder.mkdir(parents=True, exist_ok=True)
        self.count += 1
        stem = self.folder / f"{self.prefix}-{self.count:02d}"
        svg, png = stem.with_suffix(".svg"), stem.with_suffix(".png")
        from .fit import fit

        spec, doc = fit(spec)  # the picture the book shows (fitted to an output area)
        svg.write_text(doc)
        png.write_bytes(vlc.svg_to_png(doc, scale=PNG_SCALE))
        return [svg, png]


_writer: FigureWriter | None = None


def _render_and_write(spec: dict, **metadata):
    from .static import render

    if _writer is not None:
        try:
            _writer.write(spec)
        except Exception as e:  # a figure that cannot be converted must not stop the chapter
            print(f"goodputlab: figure {_writer.prefix}-{_writer.count:02d} not written ({type(e).__name__}: {e})")
    return render(spec, **metadata)


def enable_from_environment() -> FigureWriter | None:
    """If ``GOODPUTLAB_FIGURES`` is set, write every chart shown from now on; returns the writer (or None)."""
    global _writer
    folder = os.environ.get(ENV_DIR)
    if not folder:
        return None
    _writer = FigureWriter(folder, os.environ.get(ENV_PREFIX, "figure"))
    alt.renderers.register(RENDERER, _render_and_write)
    alt.renderers.enable(RENDERER)
    return _writer
