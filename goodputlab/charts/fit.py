"""Every chart fits the output area it is drawn in: legend, axes and title included.

JupyterLab's output area is about 570 px wide in a 1000 px window with the file browser open (and
about 970 px at 1400 px). A chart wider than that is cut at the right edge, usually through its
legend. :func:`fit` makes a chart at most :data:`MAX_WIDTH_PX` wide, measuring the chart as Vega
lays it out (vl-convert's SVG, offline) and, only where it is too wide:

1. wraps a title longer than the space into lines;
2. stacks charts that stand side by side (``hconcat`` becomes ``vconcat``);
3. moves the legends below the plot, in as many columns as fit;
4. narrows the plots (every ``width`` in the spec, in proportion, their titles wrapped to the new
   width) until the whole fits.

A chart that fits is returned unchanged. The live charts (:class:`goodputlab.charts.static.LiveChart`),
their static PNGs and ``make figures`` all draw the fitted spec, so what a reader sees in JupyterLab,
on the website and on a slide is the same picture.
"""

from __future__ import annotations

import copy
import json
import re
from collections import OrderedDict

#: the widest a chart may be, in CSS pixels (legend, axes and title included)
MAX_WIDTH_PX = 560
#: average width of a title character, in em (bold sans-serif, generous so a wrapped line fits)
_TITLE_EM_PER_CHAR = 0.62
_DEFAULT_TITLE_PX = 13
_LEGEND_COLUMN_PX = 150  # one column of a legend below the plot: a swatch and a label of ~18 characters

_cache: OrderedDict[str, tuple[dict, str]] = OrderedDict()
_CACHE_SIZE = 64


def _svg(spec: dict) -> str:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(spec)


def svg_width(svg_doc: str) -> float:
    """The width (CSS pixels) of an SVG document vl-convert wrote."""
    m = re.search(r"<svg[^>]*?\bwidth=\"([\d.]+)\"", svg_doc)
    if not m:
        raise ValueError("an SVG without a width")
    return float(m.group(1))


def _wrap(text: str, chars: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > chars:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def _wrap_titles(node, max_px: float, font_px: float) -> None:
    """Wrap every title string of the spec that is wider than ``max_px`` into lines (in place)."""
    chars = max(12, int(max_px / (font_px * _TITLE_EM_PER_CHAR)))
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key == "title" and isinstance(value, str) and len(value) > chars:
                node[key] = _wrap(value, chars)
            elif key == "title" and isinstance(value, dict) and isinstance(value.get("text"), str):
                if len(value["text"]) > chars:
                    value["text"] = _wrap(value["text"], chars)
            elif key not in ("data", "datasets", "encoding"):  # axis and legend titles stay on one line
                _wrap_titles(value, max_px, font_px)
    elif isinstance(node, list):
        for value in node:
            _wrap_titles(value, max_px, font_px)


def _legends_below(spec: dict, max_px: float) -> None:
    legend = spec.setdefault("config", {}).setdefault("legend", {})
    legend.update(orient="bottom", direction="vertical", columns=max(1, int(max_px // _LEGEND_COLUMN_PX)))


def _widths(node, found: list) -> list:
    """Every numeric ``width`` of a view in the spec, as (dict holding it) entries."""
    if isinstance(node, dict):
        if isinstance(node.get("width"), (int, float)) and not isinstance(node.get("width"), bool):
            found.append(node)
        for key, value in node.items():
            if key not in ("data", "datasets", "config", "encoding", "mark"):
                _widths(value, found)
    elif isinstance(node, list):
        for value in node:
            _widths(value, found)
    return found


def _title_text(title):
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return title if isinstance(title, str) else None


def _scaled(spec: dict, original: list[tuple[float, str | None]], k: float, font_px: float) -> dict:
    """``spec`` with every plot ``k`` times its ``original`` width, each plot's title wrapped to it."""
    for holder, (width, title) in zip(_widths(spec, []), original):
        holder["width"] = max(40, round(width * k))
        if title is not None:
            chars = max(12, int(holder["width"] / (font_px * _TITLE_EM_PER_CHAR)))
            lines = _wrap(title, chars) if len(title) > chars else title
            if isinstance(holder["title"], dict):
                holder["title"]["text"] = lines
            else:
                holder["title"] = lines
    return spec


def fit(spec: dict, max_width: float = MAX_WIDTH_PX) -> tuple[dict, str]:
    """``(spec, svg)``: the Vega-Lite ``spec`` made at most ``max_width`` px wide, and its SVG.

    The input is not changed; a spec that already fits is returned as it is. Results are cached
    by the spec's JSON, so a panel that redraws the same chart pays for the layout once, and a
    fitted spec is cached as its own result (a live chart's PNG is drawn from its fitted spec).
    """
    key = _key(spec, max_width)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    doc = _svg(spec)
    width = svg_width(doc)
    if width > max_width + 0.5:
        spec, doc, width = _fit_too_wide(spec, max_width)
        if width <= max_width + 0.5:  # the fitted spec fits as it is: what fit() of it returns (a live
            _remember(_key(spec, max_width), (spec, doc))  # chart's PNG is drawn from its fitted spec)
    _remember(key, (spec, doc))
    return spec, doc


def _key(spec: dict, max_width: float) -> str:
    return json.dumps(spec, sort_keys=True, default=str) + f"|{max_width}"


def _remember(key: str, value: tuple[dict, str]) -> None:
    _cache[key] = value
    _cache.move_to_end(key)
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)


def _fit_too_wide(spec: dict, max_width: float) -> tuple[dict, str, float]:
    """Steps 1-4 of the module's docstring on a copy of a spec that is too wide: ``(spec, svg, width)``.
    Each layout costs a rendering (about 0.1 s), so steps 1-3 are taken together."""
    spec = copy.deepcopy(spec)
    title_px = float(spec.get("config", {}).get("title", {}).get("fontSize", _DEFAULT_TITLE_PX))
    _wrap_titles(spec, max_width - 20, title_px)
    if "hconcat" in spec:
        spec["vconcat"] = spec.pop("hconcat")
    if _has_legend(spec):
        _legends_below(spec, max_width)
    doc = _svg(spec)
    width = svg_width(doc)
    original = [(h["width"], _title_text(h.get("title"))) for h in _widths(spec, [])]
    if width <= max_width + 0.5 or not original:
        return spec, doc, width
    # the width is about a + b k when every plot is k times as wide: two layouts give a and b
    k0, w0 = 1.0, width
    k = max(0.1, 0.97 * max_width / w0)
    doc = _svg(_scaled(spec, original, k, title_px))
    width = svg_width(doc)
    if width > max_width + 0.5 and w0 > width:
        b = (w0 - width) / (k0 - k)
        k = max(0.1, min(k, 0.98 * (max_width - (w0 - b * k0)) / b))
        doc = _svg(_scaled(spec, original, k, title_px))
        width = svg_width(doc)
    for _ in range(3):  # axis labels may thin out or not: step down until it fits
        if width <= max_width + 0.5 or k <= 0.1:
            break
        k *= 0.92
        doc = _svg(_scaled(spec, original, k, title_px))
        width = svg_width(doc)
    return spec, doc, width


def _has_legend(node) -> bool:
    """Whether any encoding of the spec draws a legend (colour, shape, size, opacity, stroke dash)."""
    if isinstance(node, dict):
        encoding = node.get("encoding")
        if isinstance(encoding, dict):
            for channel in ("color", "fill", "stroke", "shape", "size", "opacity", "strokeDash"):
                enc = encoding.get(channel)
                if isinstance(enc, dict) and ("field" in enc or "condition" in enc) and enc.get("legend", {}) is not None:
                    return True
        return any(_has_legend(v) for k, v in node.items() if k not in ("data", "datasets"))
    if isinstance(node, list):
        return any(_has_legend(v) for v in node)
    return False


def fitted(chart, max_width: float = MAX_WIDTH_PX) -> dict:
    """The fitted Vega-Lite spec of an Altair chart or a spec (:func:`fit` without the SVG)."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    return fit(spec, max_width)[0]
