"""Numbered figures: every figure of a notebook gets "Figure 3.2", computed from its place, never typed.

A figure's caption is a markdown cell tagged ``figure-caption`` whose metadata names the figure
(``{"goodputlab": {"figure": "fig-goodput-curve"}}``). The cell holds the caption itself, and for a
diagram the image above it; the chart a caption describes is the output of the code cell before it.
The caption's text starts with its number in bold and an anchor the text can link to::

    <a id="fig-goodput-curve"></a>**Figure 3.2.** Goodput against the checkpoint interval ...

The text refers to a figure by a link to that anchor, ``[Figure 3.2](#fig-goodput-curve)`` (or
``[Figure](#fig-goodput-curve)``, which gets its number): the link works in JupyterLab and on the site
(``book/conf.py`` registers the anchor as a label).

:func:`number_figures` renumbers a notebook in place: the figures in the order of their caption cells
("Figure {chapter}.{k}", the chapter from the title ``# 3. ...``), and every reference to a figure's
anchor, in markdown cells, to the figure's number. A figure added, moved or removed renumbers the rest
the next time it runs (``tools/execute_notebooks.py`` after every execution, ``tools/apply_reading.py``).

Pure: works on ``nbformat`` nodes or plain dicts, no IPython.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

#: The tag of a figure's caption cell.
CAPTION_TAG = "figure-caption"
#: Where a caption cell names its figure: ``cell.metadata[META_KEY][FIGURE_KEY]``.
META_KEY = "goodputlab"
FIGURE_KEY = "figure"

_LABEL = re.compile(r"^fig-[a-z0-9][a-z0-9-]*$")
_TITLE = re.compile(r"^#\s+(\d+)\.\s", re.M)
#: the caption's own number: an anchor, then the bold "Figure N.M." (or "Figure N.")
_OWN = re.compile(r'(<a id="(?P<label>fig-[a-z0-9-]+)"></a>)?\*\*Figure [0-9.]+?\.?\*\*')
#: a reference in the text: [Figure 3.2](#fig-label), or [Figure](#fig-label) before it has its number
_REF = re.compile(r"\[(?P<word>[Ff]igure)(?: [0-9.]*[0-9])?\]\(#(?P<label>fig-[a-z0-9-]+)\)")


def _source(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _set_source(cell: Any, text: str) -> None:
    cell["source"] = text


def figure_label(cell: Mapping[str, Any]) -> str | None:
    """The label of the figure whose caption ``cell`` is, or None when it is no caption cell."""
    if cell.get("cell_type") != "markdown" or CAPTION_TAG not in cell.get("metadata", {}).get("tags", []):
        return None
    return cell.get("metadata", {}).get(META_KEY, {}).get(FIGURE_KEY)


def check_label(label: str) -> str:
    """``label`` when it is a figure label (``fig-`` then lower-case letters, digits and hyphens)."""
    if not isinstance(label, str) or not _LABEL.match(label):
        raise ValueError(f"figure label {label!r}: must start with 'fig-' and hold only a-z, 0-9 and '-'")
    return label


def chapter_number(cells: list) -> int | None:
    """The chapter's number from its title cell (``# 3. How often to checkpoint``), or None."""
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            m = _TITLE.search(_source(cell))
            if m:
                return int(m.group(1))
    return None


def caption_text(number: str, label: str, text: str) -> str:
    """A caption's markdown: the anchor, the bold number, the text (``text`` without a number)."""
    return f'<a id="{check_label(label)}"></a>**Figure {number}.** {text.strip()}'


def numbers(cells: list) -> dict[str, str]:
    """Every figure's label -> its number ("3.2"; "2" in a notebook without a chapter number), in order."""
    chapter = chapter_number(cells)
    found: dict[str, str] = {}
    for cell in cells:
        label = figure_label(cell)
        if label is None:
            continue
        check_label(label)
        if label in found:
            raise ValueError(f"two figures are labelled {label!r}")
        k = len(found) + 1
        found[label] = f"{chapter}.{k}" if chapter is not None else str(k)
    return found


def number_figures(nb: Any) -> dict[str, str]:
    """Renumber ``nb``'s figures and the references to them, in place; returns label -> number.

    A caption cell's first ``**Figure ...**`` (with or without its anchor) becomes the anchor and the
    figure's number; a caption without one gets them in front. A reference to an unknown label raises
    ``ValueError`` naming it (a figure was removed but the text still points at it).
    """
    cells = nb["cells"]
    found = numbers(cells)
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        text = _source(cell)
        label = figure_label(cell)
        if label is not None:
            own = f'<a id="{label}"></a>**Figure {found[label]}.**'
            text, n = _OWN.subn(lambda m: own, text, count=1)
            if n == 0:
                text = f"{own} {text.lstrip()}"

        def ref(m: re.Match) -> str:
            if m.group("label") not in found:
                raise ValueError(f"a reference to figure {m.group('label')!r}, which this notebook does not have")
            return f"[{m.group('word')} {found[m.group('label')]}](#{m.group('label')})"

        text = _REF.sub(ref, text)
        if text != _source(cell):
            _set_source(cell, text)
    return found
