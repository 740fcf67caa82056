"""The book tells the truth about its own figures: a number that a run or a model produced reaches a
chapter's text only through code (a sentence rendered from the data, ``gl.say``); the markdown
cells state only numbers cited from the literature, each listed with its reference in
``book/data/cited.json``.

A "number" here is what a figure looks like in prose: a decimal (``2.78``), a percentage (``64%``)
or a number with thousands separators (``16,384``, ``$16{,}384$``). Small whole numbers (a
10-minute restart, 8 GPUs, chapter 3) are settings and counts, not results, and are not checked.
The book's exercises state their own givens and work them through; their answers are checked against
the package in ``tests/test_textbook.py``. The labs' text is scanned too, exercises included: an
exercise states its givens by hand (the student computes from them), each listed for its lab in
``labs/givens.json``; anything else a lab's text states is cited or rendered by code.

The committed notebooks (full-size runs) are read as they are; the SMOKE executions (papermill,
shared with tests/test_notebooks.py) must render every sentence too.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import execute_notebooks as EN  # noqa: E402

CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
CITED = json.loads((ROOT / "book" / "data" / "cited.json").read_text())
#: every lab notebook, the exercise and its solution
LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb")) + sorted((ROOT / "labs" / "solutions").glob("[0-9][0-9]_*.ipynb"))
GIVENS = json.loads((ROOT / "labs" / "givens.json").read_text())["labs"]
REFERENCES = (ROOT / "book" / "references.md").read_text()

#: a decimal, a percentage, or a number with thousands separators (LaTeX's {,} too)
NUMBER = re.compile(r"(?<![\w.\\{-])(\d+(?:\.\d+){2,}|\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?|\d+\.\d+|\d+)(\s*\\?%)?")
NOT_PROSE = {"launch-link", "run-caption"}


def normalise(token: str) -> str:
    return token.replace("{,}", ",").replace("\\%", "%").replace(" ", "")


def figures(text: str) -> list[str]:
    """The numbers in ``text`` that look like figures (see the module's docstring)."""
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets: addresses, anchors
    text = re.sub(r"\b[Ff]igure \d+(?:\.\d+)?", "", text)  # a figure's number, computed (goodputlab.captions)
    found = []
    for m in NUMBER.finditer(text):
        if m.group(1).count(".") >= 2:
            continue  # a section of a paper (3.3.4), not a figure
        if m.group(2) or "." in m.group(1) or "," in m.group(1):
            found.append(normalise(m.group(0)))
    return found


def prose_cells(nb: dict) -> list[tuple[int, str]]:
    """(index, source) of the markdown cells a reader reads as the chapter's text: not the launch link,
    not the run's caption, not the exercises, not the references."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown" or NOT_PROSE & set(cell.get("metadata", {}).get("tags", [])):
            continue
        source = "".join(cell["source"])
        if source.lstrip().startswith(("## Exercises", "## References")):
            continue
        out.append((i, source))
    return out


def cited_values() -> set[str]:
    return {normalise(c["value"]) for c in CITED["constants"]}


def test_every_cited_constant_has_its_reference_and_is_used():
    book = "\n".join(src for path in CHAPTERS for _, src in prose_cells(json.loads(path.read_text())))
    used = set(figures(book))
    for c in CITED["constants"]:
        assert set(c) == {"value", "what", "ref"} and c["what"], c
        assert f'<a id="{c["ref"]}"></a>' in REFERENCES, f"{c['value']}: references.md has no entry {c['ref']}"
        assert normalise(c["value"]) in used, f"{c['value']} ({c['what']}) is cited but no chapter states it"
    assert len(CITED["constants"]) == len(cited_values()), "a value listed twice"


#: chapters whose text still types figures by hand: strict xfail, so each fails the suite as soon as it is
#: converted (then remove it from here)
NOT_YET_RENDERED: set[str] = set()  # every chapter renders its figures


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="figures still typed by hand")) if p.name in NOT_YET_RENDERED
    else p for p in CHAPTERS], ids=lambda p: p.name)
def test_the_text_states_no_figure_that_is_neither_computed_nor_cited(path):
    nb = json.loads(path.read_text())
    allowed = cited_values()
    stray = [(i, n) for i, src in prose_cells(nb) for n in figures(src) if n not in allowed]
    assert not stray, (
        f"{path.name}: figures typed into the text (cell, number): {stray}. A number a run or a model "
        "produced is rendered by code (gl.say); a number from the literature goes into book/data/cited.json "
        "with its reference."
    )


@pytest.mark.parametrize("path", LABS, ids=lambda p: str(p.relative_to(ROOT / "labs")))
def test_a_lab_states_only_cited_figures_and_its_exercises_givens(path):
    givens = {normalise(g["value"]) for g in GIVENS.get(path.stem, [])}
    stated = [(i, n) for i, src in prose_cells(json.loads(path.read_text())) for n in figures(src)]
    stray = [(i, n) for i, n in stated if n not in cited_values() | givens]
    assert not stray, (
        f"{path.relative_to(ROOT)}: figures typed into the text (cell, number): {stray}. A number a run or a model "
        "produced is rendered by code (gl.say); an exercise's given goes into labs/givens.json with what it is."
    )
    assert givens <= {n for _, n in stated}, f"{path.stem}: labs/givens.json lists givens its text no longer states"


def test_every_listed_given_says_what_it_is_and_names_a_lab():
    names = {p.stem for p in LABS}
    for lab, givens in GIVENS.items():
        assert lab in names, f"labs/givens.json: no lab {lab!r}"
        for g in givens:
            assert set(g) == {"value", "what"} and g["what"], (lab, g)


def test_the_scanner_finds_what_a_figure_looks_like():
    assert figures("0.35 ms, ~1,600 samples/s, 35,840 samples and 13 s; within 15%; $16{,}384$ GPUs; 64\\%") == [
        "0.35", "1,600", "35,840", "15%", "16,384", "64%"]
    assert figures("chapter 3, 8 GPUs, a 10-minute restart, [Young 1974](references.md#young-1974), section 3.3.4") == []
    assert figures("**Figure 3.2.** as [Figure 10.4](#fig-x) shows") == []


def _prose_outputs(nb: dict) -> list[tuple[int, str]]:
    """(index, rendered Markdown) of every sentence cell of an executed notebook."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and EN.is_prose("".join(cell["source"])):
            texts = [o["data"]["text/markdown"] for o in cell.get("outputs", []) if "text/markdown" in o.get("data", {})]
            out.append((i, "".join("".join(t) for t in texts)))
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_committed_sentences_are_rendered_and_hidden(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and EN.is_prose("".join(cell["source"])):
            assert "remove-input" in cell["metadata"].get("tags", []), (i, "the website would show the template")
            assert cell["metadata"].get("jupyter", {}).get("source_hidden"), (i, "JupyterLab would show the template")
    for i, text in _prose_outputs(nb):
        assert text.strip(), f"{path.name}: cell {i} rendered nothing"
        assert "{" not in text and "}" not in text, f"{path.name}: cell {i} left a field unfilled: {text!r}"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_smoke_run_renders_every_sentence(path, executed_notebook):
    nb, _, _ = executed_notebook(f"book/{path.name}")
    committed = json.loads(path.read_text())
    rendered = _prose_outputs(nb)
    assert len(rendered) == len(_prose_outputs(committed))
    for i, text in rendered:
        assert text.strip() and "{" not in text, f"{path.name}: cell {i} in SMOKE mode: {text!r}"
