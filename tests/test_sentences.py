"""No sentence of a chapter runs over 40 words: its markdown and the sentences its code renders (gl.say, a
self-check, a panel's words in Markdown) alike. Counted as a reader meets them (goodputlab.prose.sentences):
code, maths and tables left out, a list item a sentence of its own."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from goodputlab import prose

CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def texts(nb: dict) -> list[tuple[int, str, str]]:
    """(cell index, "markdown" or "rendered", text) of everything a reader reads in a notebook."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            found.append((i, "markdown", "".join(cell["source"])))
        for out in cell.get("outputs", []) or []:
            markdown = out.get("data", {}).get("text/markdown")
            if markdown:
                found.append((i, "rendered", "".join(markdown)))
    return found


def test_the_counting_follows_a_reader():
    text = ("A short one. A list follows:\n\n* an item of four words\n* and $x + y$ counts one\n\n"
            "| a table | row |\n|---|---|\n\n```\ncode is not prose\n```\n\n$$\\frac{a}{b}$$\n\n"
            "See [a link with words](https://example.org). ![an image alt text](f.svg)")
    assert prose.sentences(text) == ["A short one.", "A list follows:", "an item of four words", "and X counts one",
                                     "See a link with words."]
    assert [prose.word_count(s) for s in prose.sentences(text)] == [3, 3, 5, 4, 5]
    assert prose.long_sentences(" ".join(["word"] * 41) + ".") and not prose.long_sentences(" ".join(["word"] * 40) + ".")
    assert prose.sentences("**A run-in heading.** then its text. *Another one:* more") == [
        "**A run-in heading.**", "then its text.", "*Another one:*", "more"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_sentence_runs_over_40_words(path):
    nb = json.loads(path.read_text())
    long = [(i, kind, prose.word_count(s), s) for i, kind, text in texts(nb) for s in prose.long_sentences(text)]
    listing = "\n".join(f"  cell {i} ({kind}, {n} words): {s[:160]}" for i, kind, n, s in long)
    assert not long, f"{path.name}: {len(long)} sentences over {prose.MAX_WORDS} words:\n{listing}"
