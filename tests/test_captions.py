"""Numbered figures (goodputlab.captions): numbers computed from the captions' order, references kept in step."""

from __future__ import annotations

import json

import nbformat
import pytest

from conftest import ROOT
from goodputlab import captions


def _caption(label: str, text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text, metadata={"tags": [captions.CAPTION_TAG],
                                                         captions.META_KEY: {captions.FIGURE_KEY: label}})


def _notebook(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 3. How often to checkpoint\n\nText."), *cells]
    return nb


def test_figures_are_numbered_in_order_and_references_follow():
    nb = _notebook(
        nbformat.v4.new_markdown_cell("As [Figure 9.9](#fig-curve) and [figure](#fig-diagram) show, ..."),
        _caption("fig-diagram", "![a diagram](figures/x.svg)\n\n**Figure 7.** The idea."),
        nbformat.v4.new_code_cell("chart()"),
        _caption("fig-curve", "The curve, without a number yet."),
    )
    assert captions.number_figures(nb) == {"fig-diagram": "3.1", "fig-curve": "3.2"}
    assert nb.cells[1].source == "As [Figure 3.2](#fig-curve) and [figure 3.1](#fig-diagram) show, ..."
    assert nb.cells[2].source.endswith('<a id="fig-diagram"></a>**Figure 3.1.** The idea.')
    assert nb.cells[4].source == '<a id="fig-curve"></a>**Figure 3.2.** The curve, without a number yet.'
    before = json.dumps(nb)
    captions.number_figures(nb)  # twice: nothing changes
    assert json.dumps(nb) == before


def test_a_figure_added_in_front_renumbers_the_rest():
    nb = _notebook(_caption("fig-curve", "**Figure 3.1.** The curve."),
                   nbformat.v4.new_markdown_cell("See [Figure 3.1](#fig-curve)."))
    captions.number_figures(nb)
    nb.cells.insert(1, _caption("fig-new", "A new diagram."))
    captions.number_figures(nb)
    assert nb.cells[2].source == '<a id="fig-curve"></a>**Figure 3.2.** The curve.'
    assert nb.cells[3].source == "See [Figure 3.2](#fig-curve)."


def test_bad_labels_and_dangling_references_are_refused():
    with pytest.raises(ValueError, match="fig-Bad"):
        captions.number_figures(_notebook(_caption("fig-Bad", "x")))
    with pytest.raises(ValueError, match="two figures"):
        captions.number_figures(_notebook(_caption("fig-a", "x"), _caption("fig-a", "y")))
    with pytest.raises(ValueError, match="fig-gone"):
        captions.number_figures(_notebook(nbformat.v4.new_markdown_cell("[Figure 3.1](#fig-gone)")))


def test_a_notebook_without_a_chapter_number_counts_from_one():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Lab: the interval"), _caption("fig-a", "x")]
    assert captions.number_figures(nb) == {"fig-a": "1"}


@pytest.mark.parametrize("path", sorted((ROOT / "book").glob("[0-9]*.ipynb")), ids=lambda p: p.name)
def test_committed_chapters_are_numbered(path):
    """Every chapter's figures carry the numbers their order gives (numbering again changes nothing)."""
    nb = nbformat.read(path, as_version=4)
    before = json.dumps(nb.cells)
    found = captions.number_figures(nb)
    assert json.dumps(nb.cells) == before, f"{path.name}: a figure's number is out of step (tools/apply_reading.py)"
    chapter = captions.chapter_number(nb.cells)
    assert list(found.values()) == [f"{chapter}.{k}" for k in range(1, len(found) + 1)]
