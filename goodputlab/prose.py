"""Sentences rendered from the data: how a chapter states a number a run or a model produced.

A chapter never types a measured or modelled number into its text: a re-execution would leave the
words contradicting the figures. It renders the sentence from the values instead::

    gl.say("The run kept {goodput:.1%} of its wall time, {verdict} the model's {model:.1%}.",
           goodput=result.goodput, model=predicted,
           verdict=gl.prose.relation(result.goodput, predicted, abs_tol=0.02, more="above", less="below", same="close to"))

:func:`say` fills a Markdown template (``str.format`` fields) and returns a :class:`Prose`, which
displays as Markdown (JupyterLab, MyST-NB: links and emphasis as in a markdown cell) and as HTML
(GitHub and nbviewer, which draw HTML outputs everywhere), with the same words in plain text.
``tools/execute_notebooks.py`` hides the source of a cell that is one ``gl.say(...)`` call, so the
reader sees the sentence and not the template. A comparison in words ("above", "the biggest
lever", "within 20%") comes from the numbers it compares, through the helpers below.

Pure: no torch, no IPython needed (a :class:`Prose` is a plain object with display methods).
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Iterable, Mapping


class Prose:
    """A rendered Markdown sentence or paragraph (``markdown``); displays itself as Markdown and HTML."""

    def __init__(self, markdown: str) -> None:
        self.markdown = markdown.strip()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/markdown": self.markdown, "text/html": to_html(self.markdown), "text/plain": self.markdown}

    def __str__(self) -> str:
        return self.markdown

    def __repr__(self) -> str:
        return self.markdown


def say(template: str, **values: Any) -> Prose:
    """The Markdown ``template`` with its ``{name:format}`` fields filled from ``values``.

    A field without a value raises ``KeyError`` naming it (a sentence is never shown half-filled).
    Literal braces are doubled, as in ``str.format``; LaTeX braces belong in a markdown cell, not here.
    """
    return Prose(template.format(**values))


# --- words from numbers ------------------------------------------------------------------------


def relation(a: float, b: float, *, abs_tol: float | None = None, rel_tol: float | None = None,
             more: str = "above", less: str = "below", same: str = "close to") -> str:
    """``more`` when ``a`` exceeds ``b``, ``less`` when it falls short, ``same`` when they are within
    ``abs_tol`` (for shares, 0.02 is two points) or ``rel_tol`` (relative to ``b``) of each other."""
    if (abs_tol is None) == (rel_tol is None):
        raise ValueError("relation needs one tolerance: abs_tol= or rel_tol=")
    tolerance = abs_tol if abs_tol is not None else abs(b) * float(rel_tol)  # type: ignore[arg-type]
    if abs(a - b) <= tolerance:
        return same
    return more if a > b else less


def points(a: float, b: float, digits: int = 1) -> str:
    """The distance between two shares in percentage points, in words: ``"3.4 points"``."""
    value = abs(a - b) * 100
    text = f"{value:.{digits}f}"
    return f"{text} point" + ("" if text in ("1", "1.0") else "s")


def times(a: float, b: float, digits: int = 1) -> str:
    """How many times ``a`` is ``b``, in words: ``"2.3 times"``; ``"twice"`` for 2 at that precision."""
    ratio = a / b
    text = f"{ratio:.{digits}f}"
    if float(text) == 2:
        return "twice"
    return f"{text} times"


def ranked(values: Mapping[str, float], descending: bool = True) -> list[str]:
    """The keys of ``values`` from the largest value to the smallest (or the reverse)."""
    return sorted(values, key=lambda k: values[k], reverse=descending)


def spread(values: Iterable[float]) -> tuple[float, float]:
    """The smallest and largest of ``values`` (a range to state: "between 0.3 and 1.4 points")."""
    values = list(values)
    return min(values), max(values)


def listing(items: Iterable[str], conjunction: str = "and") -> str:
    """``"a, b and c"``."""
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


def number(value: float, digits: int = 0) -> str:
    """A number with thousands separators: ``number(35840) == "35,840"``."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.{digits}f}"


# --- sentences, as a reader counts them ------------------------------------------------------------

#: the longest sentence the book allows, in words (the guide's style rule)
MAX_WORDS = 40

_CODE_BLOCK = re.compile(r"```.*?```", re.S)
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
_INLINE_MATH = re.compile(r"\$[^$\n]+\$")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_ITEM = re.compile(r"^\s*(?:[*-]|\d+\.)\s+")
#: a sentence ends at . ! ? : or ; followed by a space and a capital, a parenthesis or emphasis; a run-in
#: heading in bold or italics ("**Two failure clocks.** A cluster's ...") ends at its closing asterisks
_END = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z(*])|(?<=[.!?:;]\*\*)\s+|(?<=[.!?:;]\*)\s+")


def sentences(markdown: str) -> list[str]:
    """The sentences of ``markdown`` as a reader meets them: code and display maths left out, a formula in the
    text one word, links as their text, an image (its alt text is not shown) and table rows left out, each list
    item on its own; a sentence ends at ``.``, ``!``, ``?``, ``:`` or ``;`` before a capital letter."""
    text = _CODE_BLOCK.sub(" ", markdown)
    text = _DISPLAY_MATH.sub(" ", text)
    text = _INLINE_MATH.sub("X", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", _TAG.sub(" ", text))
    found = []
    for block in re.split(r"\n\s*\n", text):
        pieces: list[list[str]] = []
        for line in block.splitlines():
            if line.lstrip().startswith("|"):
                continue
            if _ITEM.match(line):
                pieces.append([_ITEM.sub("", line).strip()])
            elif pieces:
                pieces[-1].append(line.strip())
            else:
                pieces.append([line.strip()])
        for piece in pieces:
            found += [s for s in _END.split(" ".join(piece)) if s.split()]
    return found


def word_count(sentence: str) -> int:
    """The words of ``sentence``: what stands between spaces."""
    return len(sentence.split())


def long_sentences(markdown: str, limit: int = MAX_WORDS) -> list[str]:
    """The sentences of ``markdown`` (:func:`sentences`) over ``limit`` words."""
    return [s for s in sentences(markdown) if word_count(s) > limit]


# --- Markdown to HTML, for the subset the rendered sentences use ---------------------------------

_INLINE = [
    (re.compile(r"`([^`]+)`"), lambda m: f"<code>{m.group(1)}</code>"),
    (re.compile(r"\*\*([^*]+)\*\*"), lambda m: f"<strong>{m.group(1)}</strong>"),
    (re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])"), lambda m: f"<em>{m.group(1)}</em>"),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>'),
]


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    for pattern, replace in _INLINE:
        out = pattern.sub(replace, out)
    return out


def to_html(markdown: str) -> str:
    """HTML for the Markdown a sentence uses: paragraphs, ``*`` or ``-`` bullet lists, ``**bold**``,
    ``*italic*``, ``code`` and links. Anything else stays as text (escaped)."""
    blocks = [b for b in re.split(r"\n\s*\n", markdown.strip()) if b.strip()]
    parts = []
    for block in blocks:
        lines = block.splitlines()
        if all(re.match(r"\s*[*-]\s", line) or (i and line.startswith("  ")) for i, line in enumerate(lines)):
            items: list[str] = []
            for line in lines:
                if re.match(r"\s*[*-]\s", line):
                    items.append(re.sub(r"^\s*[*-]\s+", "", line))
                else:
                    items[-1] += " " + line.strip()
            parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
        else:
            parts.append(f"<p>{_inline(' '.join(line.strip() for line in lines))}</p>")
    return "\n".join(parts)
