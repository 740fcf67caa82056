"""Static figures beside the live charts, so a notebook reads well without a kernel.

A live chart is an ``alt.JupyterChart`` widget: it draws only where a kernel holds its model, so
GitHub, nbviewer, the website, a printed page and JupyterLab before Run would show nothing. Every
chart the book displays therefore carries a PNG of itself (rendered offline by vl-convert) in the
same output bundle as the widget view:

- with a kernel, JupyterLab prefers the widget view: the live, interactive chart, as before;
- the committed notebook keeps the PNG and drops the widget view (``static_outputs`` in
  tools/execute_notebooks.py: without saved widget state the view could only show an error), so
  GitHub, nbviewer, the site (MyST-NB) and JupyterLab without a kernel all show the figure.

PNG, not SVG: JupyterLab refuses to show an SVG from a notebook it does not trust (any notebook the
reader did not run), and every viewer shows a PNG. This module is the one place the figures are
made: :func:`chart_bundle` for a chart, :func:`panel_png` for a panel of controls and charts.
"""

from __future__ import annotations

import base64
import html
import re
import struct
import textwrap
import zlib
from dataclasses import dataclass
from typing import Any, Iterable

import altair as alt
import traitlets

from .fit import MAX_WIDTH_PX

#: pixels per CSS pixel of the static figures: crisp on high-density screens and in print
SCALE = 1.5
PNG = "image/png"
#: the width of a character of the figures' text, as a share of its font size (an average, for wrapping)
CHAR_WIDTH_EM = 0.55


def chars_per_line(size: int) -> int:
    """How many characters of text at font size ``size`` fit the width of a chart (``charts.fit``)."""
    return max(20, int(MAX_WIDTH_PX / (size * CHAR_WIDTH_EM)))


def _spec(chart: alt.TopLevelMixin | dict) -> dict:
    return chart if isinstance(chart, dict) else chart.to_dict()


def svg(chart: alt.TopLevelMixin | dict) -> str:
    """The chart as an SVG document, fitted to the output area (:func:`goodputlab.charts.fit.fit`;
    vl-convert: no browser, no network)."""
    from .fit import fit

    return fit(_spec(chart))[1]


def png(chart: alt.TopLevelMixin | dict, scale: float = SCALE) -> bytes:
    """The chart as PNG bytes, fitted to the output area (:func:`goodputlab.charts.fit.fit`),
    ``scale`` pixels per CSS pixel (a small palette PNG: :func:`compact_png`)."""
    import vl_convert as vlc

    return compact_png(vlc.svg_to_png(svg(chart), scale=scale))


def _chunks(data: bytes):
    pos = 8
    while pos + 8 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        yield data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def compact_png(data: bytes, colors: int = 256) -> bytes:
    """The same picture as an 8-bit palette PNG on white, about a tenth of the size.

    vl-convert writes 32-bit RGBA with light compression (hundreds of kB for a chart), and the
    committed notebooks carry every figure. A chart has a few hundred colours, most of them the
    anti-aliased edges of a few: the ``colors`` most frequent become the palette and every other
    pixel takes the nearest of them. PNGs this does not understand are returned unchanged.
    """
    import numpy as np

    header = dict(_chunks(data)).get(b"IHDR", b"")
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(header) != 13:
        return data
    w, h, depth, color_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if (depth, color_type, interlace) != (8, 6, 0):
        return data
    raw = np.frombuffer(zlib.decompress(b"".join(body for kind, body in _chunks(data) if kind == b"IDAT")), np.uint8)
    rows = raw.reshape(h, 1 + 4 * w)
    pixels = np.empty((h, w, 4), np.uint8)
    previous = np.zeros((w, 4), np.uint8)
    for y in range(h):  # undo the row filters (uint8 arithmetic wraps modulo 256, as PNG's does)
        kind, row = rows[y, 0], rows[y, 1:].reshape(w, 4)
        if kind == 0:
            current = row
        elif kind == 1:  # Sub: each byte adds the one a pixel to its left
            current = np.cumsum(row, axis=0, dtype=np.uint8)
        elif kind == 2:  # Up: adds the byte above
            current = row + previous
        else:  # Average and Paeth depend on the reconstructed left pixel: not worth it here
            return data
        pixels[y] = previous = current
    alpha = pixels[..., 3:4].astype(np.uint32)
    rgb = (pixels[..., :3].astype(np.uint32) * alpha + 255 * (255 - alpha) + 127) // 255  # onto white
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    unique, inverse, counts = np.unique(packed.ravel(), return_inverse=True, return_counts=True)
    keep = np.sort(np.argsort(counts)[::-1][:colors])
    palette = np.stack([(unique[keep] >> 16) & 255, (unique[keep] >> 8) & 255, unique[keep] & 255], axis=1).astype(np.int64)
    every = np.stack([(unique >> 16) & 255, (unique >> 8) & 255, unique & 255], axis=1).astype(np.int64)
    nearest = ((every[:, None, :] - palette[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    index = nearest[inverse].reshape(h, w).astype(np.uint8)
    scan = np.concatenate([np.zeros((h, 1), np.uint8), index], axis=1).tobytes()  # filter 0 on every row
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0))
        + _chunk(b"PLTE", palette.astype(np.uint8).tobytes())
        + _chunk(b"IDAT", zlib.compress(scan, 9))
        + _chunk(b"IEND", b"")
    )


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels, from the PNG header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def image_entry(data: bytes, scale: float = SCALE) -> tuple[dict, dict]:
    """``({"image/png": base64}, {"image/png": {"width", "height"}})``: the PNG shown at its CSS size."""
    w, h = png_size(data)
    return {PNG: base64.b64encode(data).decode("ascii")}, {PNG: {"width": round(w / scale), "height": round(h / scale)}}


def describe(chart: alt.TopLevelMixin | dict) -> str:
    """A one-line text stand-in for the chart (its title), for text-only viewers."""
    title = _spec(chart).get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return f"<chart: {title}>" if title else "<chart>"


def chart_bundle(widget_bundle: dict, chart: alt.TopLevelMixin | dict) -> tuple[dict, dict]:
    """A live chart's output bundle (the widget view) with the chart's PNG and a text stand-in."""
    data, metadata = image_entry(png(chart))
    return {**widget_bundle, **data, "text/plain": describe(chart)}, metadata


# --- panels: controls, headline numbers and charts, stacked into one figure --------------------------
_FONT = "font-family='Liberation Sans, DejaVu Sans, Arial, sans-serif'"


def _text_svg(lines: list[tuple[str, int, bool]], width: int) -> tuple[str, int]:
    """Lines of (text, font size, bold) as SVG, and their height."""
    out, y = [], 0
    for text, size, bold in lines:
        y += round(size * 1.45)
        weight = " font-weight='bold'" if bold else ""
        out.append(f"<text x='8' y='{y - round(size * 0.35)}' font-size='{size}' {_FONT}{weight}>{html.escape(text)}</text>")
    return "".join(out), y + (6 if lines else 0)


def _size(svg_doc: str) -> tuple[float, float]:
    m = re.search(r"<svg[^>]*?\bwidth=\"([\d.]+)\"[^>]*?\bheight=\"([\d.]+)\"", svg_doc)
    if not m:
        raise ValueError("an SVG without width and height")
    return float(m.group(1)), float(m.group(2))


@dataclass(frozen=True)
class Table:
    """Rows of ``(label, value, note)`` in a panel's static figure: the label plain, the value bold, the
    note small and grey after it (wrapped under the value when the line is full)."""

    rows: tuple[tuple[str, str, str], ...]
    size: int = 13


def _table_svg(table: Table) -> tuple[str, float, float]:
    """A table as SVG: (fragment, width, height). Labels in one column, values and notes in the next."""
    size, small = table.size, max(11, table.size - 1)
    label_w = min(MAX_WIDTH_PX * 0.45, max(len(label) for label, _, _ in table.rows) * size * CHAR_WIDTH_EM)
    x_value = 8 + label_w + 14
    room = MAX_WIDTH_PX - x_value
    out, y, width = [], 0.0, 0.0
    for label, value, note in table.rows:
        labels = textwrap.wrap(label, max(8, int(label_w / (size * CHAR_WIDTH_EM)))) or [""]
        values = textwrap.wrap(value, max(8, int(room / (size * CHAR_WIDTH_EM)))) or [""]  # a long value wraps too
        value_w = max(len(v) for v in values) * size * CHAR_WIDTH_EM
        notes = textwrap.wrap(note, max(8, int(room / (small * CHAR_WIDTH_EM)))) if note else []
        line = round(size * 1.45)
        top = y
        for i, text in enumerate(labels):
            out.append(f"<text x='8' y='{top + (i + 1) * line - round(size * 0.35)}' font-size='{size}' {_FONT} "
                       f"fill='#333'>{html.escape(text)}</text>")
        for i, text in enumerate(values):
            out.append(f"<text x='{x_value:.0f}' y='{top + (i + 1) * line - round(size * 0.35)}' font-size='{size}' "
                       f"{_FONT} font-weight='bold'>{html.escape(text)}</text>")
        below = top + len(values) * line  # the notes start under the value's last line
        for i, text in enumerate(notes):
            out.append(f"<text x='{x_value:.0f}' y='{below + (i + 1) * round(small * 1.4) - round(small * 0.35)}' "
                       f"font-size='{small}' {_FONT} fill='#666'>{html.escape(text)}</text>")
        y = max(top + len(labels) * line, below + len(notes) * round(small * 1.4)) + 4
        width = max(width, x_value + max([value_w] + [len(t) * small * CHAR_WIDTH_EM for t in notes]))
    out.append(f"<line x1='8' x2='{width:.0f}' y1='{y + 1:.0f}' y2='{y + 1:.0f}' stroke='#ddd'/>")
    return "".join(out), width + 8, y + 8


def stack_png(parts: Iterable[Any], scale: float = SCALE) -> bytes:
    """One PNG of ``parts`` from top to bottom: each a chart (Altair or spec), a :class:`Table`, or a line of
    text (``str``, or ``(text, font size, bold)``)."""
    import vl_convert as vlc

    blocks: list[tuple[str, float, float]] = []  # (svg fragment, width, height)
    pending: list[tuple[str, int, bool]] = []

    def flush():
        if pending:
            # text as wide as a chart at most (charts.fit): longer lines wrap at words
            # a bullet's later lines hang under its text
            pending[:] = [(line, size, bold) for text, size, bold in pending
                          for line in (textwrap.wrap(text, chars_per_line(size),
                                                     subsequent_indent="   " if text.startswith("• ") else "") or [""])]
            frag, h = _text_svg(pending, 0)
            blocks.append((frag, 8 + max(len(t) * s * CHAR_WIDTH_EM for t, s, _ in pending), h))
            pending.clear()

    for part in parts:
        if isinstance(part, str):
            pending.append((part, 13, False))
        elif isinstance(part, tuple):
            pending.append(part)
        elif isinstance(part, Table):
            flush()
            blocks.append(_table_svg(part))
        else:
            flush()
            doc = svg(part)
            w, h = _size(doc)
            blocks.append((re.sub(r"^<\?xml[^>]*>", "", doc.strip()), w, h))
    flush()
    width = max((w for _, w, _ in blocks), default=200)
    y, body = 0.0, []
    for frag, _, h in blocks:
        body.append(f"<g transform='translate(0,{y:g})'>{frag}</g>")
        y += h
    doc = (
        f"<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink' "
        f"width='{width:g}' height='{max(y, 1):g}' viewBox='0 0 {width:g} {max(y, 1):g}'>"
        f"<rect width='100%' height='100%' fill='white'/>{''.join(body)}</svg>"
    )
    return compact_png(vlc.svg_to_png(doc, scale=scale))


class LiveChart(alt.JupyterChart):
    """An offline ``alt.JupyterChart`` (update it in place by assigning ``.chart``) whose output
    also carries a PNG of the chart it shows when displayed, and a one-line text stand-in. The
    chart drawn is fitted to the output area (:mod:`goodputlab.charts.fit`): ``.spec`` is the
    fitted Vega-Lite spec, ``.chart`` the chart as given."""

    def __init__(self, chart: alt.TopLevelMixin | None = None, **kwargs: Any):
        from .offline_js import enable_offline

        enable_offline()  # the JavaScript from vl-convert, not a CDN (bundled once, kept on disk)
        # no "..." menu: it would sit on the legend and widen the chart by its margin, and its
        # "open in the Vega editor" needs the network (make figures writes every chart as SVG and PNG)
        kwargs["embed_options"] = {"actions": False, **(kwargs.get("embed_options") or {})}
        super().__init__(chart, **kwargs)

    @traitlets.validate("spec")
    def _fit_spec(self, proposal):
        from .fit import fitted

        spec = proposal["value"]
        return fitted(spec) if spec else spec

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if data is None or not self.spec:
            return bundle
        try:
            data, image_metadata = chart_bundle(data, self.spec)
        except Exception as e:  # the live chart still draws; the committed-notebook test catches a missing figure
            import warnings

            warnings.warn(f"no static figure for a chart: {e}", stacklevel=2)
            return bundle
        return data, {**(metadata or {}), **image_metadata}


def render(spec: dict, **metadata: Any):
    """Altair renderer ``goodputlab`` (:func:`goodputlab.charts.setup_notebook` enables it): the
    live chart of Altair's offline ``jupyter`` renderer, plus its static PNG."""
    return LiveChart(alt.Chart.from_dict(spec), embed_options=metadata.get("embed_options"))._repr_mimebundle_()
