"""A small SVG drawing: boxes, text that wraps, lines and arrows, for the book's conceptual diagrams.

The diagrams (:mod:`goodputlab.charts.diagrams`) are drawn in a fixed coordinate space :data:`WIDTH`
units wide and shown at most that many CSS pixels wide, shrinking with a narrow screen. So that their
text stays legible on a phone (10 px at least in a column of :data:`NARROWEST_PX`), no text is smaller
than :data:`MIN_FONT`. The output is deterministic (numbers rounded, attributes in a fixed order), so
the committed files change only when a drawing does.
"""

from __future__ import annotations

import html
import re
import textwrap

#: the drawings' width in user units, and their largest width on a page (CSS pixels)
WIDTH = 440
#: the narrowest column a drawing is shown in (a 400 px phone screen less the page's margins)
NARROWEST_PX = 340
#: the smallest font size, in user units: 13 x 340 / 440 = 10 px on the narrowest screen
MIN_FONT = 13
FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"
#: the width of an average character as a share of the font size (for wrapping and centring)
CHAR_EM = 0.6
INK = "#222222"
MUTED = "#555555"


def _n(x: float) -> str:
    return f"{round(x, 1):g}"


_SUB = re.compile(r"_\{([^}]*)\}")


def _markup(text: str, size: float) -> str:
    """``text`` escaped, with ``M_{dev}`` written as a subscript."""
    out, pos = [], 0
    for m in _SUB.finditer(text):
        out.append(html.escape(text[pos:m.start()], quote=False))
        sub = max(MIN_FONT, round(size * 0.8))
        out.append(f'<tspan baseline-shift="sub" font-size="{sub}">{html.escape(m.group(1), quote=False)}</tspan>')
        pos = m.end()
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def text_width(text: str, size: float) -> float:
    """About how wide ``text`` is at font ``size`` (user units)."""
    return len(_SUB.sub(r"\1", text)) * size * CHAR_EM


def wrap(text: str, width: float, size: float) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` user units at font ``size``."""
    return textwrap.wrap(text, max(4, int(width / (size * CHAR_EM)))) or [""]


class Drawing:
    """An SVG document of :data:`WIDTH` x ``height`` user units, built shape by shape."""

    def __init__(self, height: float, width: float = WIDTH):
        self.width, self.height = width, height
        self.parts: list[str] = []
        self._markers: set[str] = set()

    # --- shapes ---------------------------------------------------------------------------------
    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str | None = None,
             rx: float = 0, dash: str | None = None, opacity: float | None = None) -> None:
        attrs = f'x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{fill}"'
        if rx:
            attrs += f' rx="{_n(rx)}"'
        if stroke:
            attrs += f' stroke="{stroke}" stroke-width="1.5"'
        if dash:
            attrs += f' stroke-dasharray="{dash}"'
        if opacity is not None:
            attrs += f' fill-opacity="{opacity:g}"'
        self.parts.append(f"<rect {attrs}/>")

    def circle(self, x: float, y: float, r: float, fill: str, stroke: str | None = None) -> None:
        extra = f' stroke="{stroke}" stroke-width="1.5"' if stroke else ""
        self.parts.append(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{_n(r)}" fill="{fill}"{extra}/>')

    def _marker(self, color: str) -> str:
        name = "arrow-" + color.lstrip("#")
        if name not in self._markers:
            self._markers.add(name)
        return name

    def line(self, x1: float, y1: float, x2: float, y2: float, color: str = INK, width: float = 1.5,
             dash: str | None = None, arrow: bool = False, arrow_start: bool = False) -> None:
        attrs = f'x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{color}" stroke-width="{width:g}"'
        if dash:
            attrs += f' stroke-dasharray="{dash}"'
        if arrow:
            attrs += f' marker-end="url(#{self._marker(color)})"'
        if arrow_start:
            attrs += f' marker-start="url(#{self._marker(color)})"'
        self.parts.append(f"<line {attrs}/>")

    def path(self, d: str, color: str = INK, width: float = 2, fill: str = "none", dash: str | None = None,
             arrow: bool = False) -> None:
        attrs = f'd="{d}" stroke="{color}" stroke-width="{width:g}" fill="{fill}"'
        if dash:
            attrs += f' stroke-dasharray="{dash}"'
        if arrow:
            attrs += f' marker-end="url(#{self._marker(color)})"'
        self.parts.append(f"<path {attrs}/>")

    def polyline(self, points: list[tuple[float, float]], color: str = INK, width: float = 2,
                 dash: str | None = None) -> None:
        d = "M" + " L".join(f"{_n(x)},{_n(y)}" for x, y in points)
        self.path(d, color=color, width=width, dash=dash)

    def cross(self, x: float, y: float, size: float = 7, color: str = "#d62728", width: float = 3) -> None:
        """A failure: an x centred on (x, y)."""
        self.line(x - size, y - size, x + size, y + size, color, width)
        self.line(x - size, y + size, x + size, y - size, color, width)

    # --- text -----------------------------------------------------------------------------------
    def text(self, x: float, y: float, text: str, size: float = 14, anchor: str = "start", bold: bool = False,
             color: str = INK, italic: bool = False) -> None:
        """One line of text with its baseline at ``y``; ``anchor`` start, middle or end."""
        if size < MIN_FONT:
            raise ValueError(f"font size {size} is below {MIN_FONT}: it would be under 10 px on a phone")
        attrs = f'x="{_n(x)}" y="{_n(y)}" font-size="{size:g}" text-anchor="{anchor}" fill="{color}"'
        if bold:
            attrs += ' font-weight="bold"'
        if italic:
            attrs += ' font-style="italic"'
        self.parts.append(f"<text {attrs}>{_markup(text, size)}</text>")

    def lines(self, x: float, y: float, lines: list[str], size: float = 14, anchor: str = "start",
              bold: bool = False, color: str = INK, leading: float = 1.25, italic: bool = False) -> float:
        """Several lines from baseline ``y`` down; returns the baseline of the last."""
        for i, line in enumerate(lines):
            self.text(x, y + i * size * leading, line, size, anchor, bold, color, italic)
        return y + (len(lines) - 1) * size * leading

    def wrapped(self, x: float, y: float, text: str, width: float, size: float = 14, anchor: str = "start",
                bold: bool = False, color: str = INK, italic: bool = False) -> float:
        """``text`` wrapped to ``width``; returns the baseline of its last line."""
        return self.lines(x, y, wrap(text, width, size), size, anchor, bold, color, italic=italic)

    def box(self, x: float, y: float, w: float, h: float, label: str, fill: str = "#f2f2f2",
            stroke: str = MUTED, size: float = 14, color: str = INK, bold: bool = False, rx: float = 6) -> None:
        """A rounded box with ``label`` wrapped and centred in it."""
        self.rect(x, y, w, h, fill, stroke, rx=rx)
        rows = wrap(label, w - 8, size)
        top = y + h / 2 - (len(rows) - 1) * size * 1.2 / 2 + size * 0.36
        self.lines(x + w / 2, top, rows, size, "middle", bold, color, leading=1.2)

    # --- the document ---------------------------------------------------------------------------
    def svg(self, alt: str) -> str:
        """The SVG document; ``alt`` is its title (what a screen reader says)."""
        markers = "".join(
            f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#{name[6:]}"/></marker>'
            for name in sorted(self._markers)
        )
        defs = f"<defs>{markers}</defs>" if markers else ""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(self.width)}" height="{_n(self.height)}" '
            f'viewBox="0 0 {_n(self.width)} {_n(self.height)}" role="img" font-family="{FONT}">'
            f"<title>{html.escape(alt, quote=False)}</title>{defs}"
            f'<rect width="100%" height="100%" fill="white"/>'
            + "\n".join(self.parts)
            + "</svg>\n"
        )
