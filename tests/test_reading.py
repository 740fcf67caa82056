"""The reading apparatus of the chapters: a diagram a chapter, self-checks inside the sections, chart captions,
an "Under the hood" link, and tools/apply_reading.py, which puts them in and changes nothing the second time."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import nbformat
import pytest

from conftest import ROOT
from goodputlab import captions, self_checks
from goodputlab.charts import diagrams, svg_draw

sys.path.insert(0, str(ROOT / "tools"))
import apply_reading  # noqa: E402
import reading_plan  # noqa: E402

CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
SVG_NS = "{http://www.w3.org/2000/svg}"


# --- the diagrams ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", diagrams.DIAGRAMS, ids=lambda d: d.name)
def test_a_diagram_is_legible_on_a_phone_and_described(d):
    root = ET.fromstring(d.svg())
    width = float(root.get("width"))
    assert width == svg_draw.WIDTH and root.get("viewBox").startswith("0 0 ")
    assert root.find(f"{SVG_NS}title").text == d.alt and len(d.alt.split()) >= 15
    sizes = [float(t.get("font-size")) for t in root.iter(f"{SVG_NS}text")]
    sizes += [float(t.get("font-size")) for t in root.iter(f"{SVG_NS}tspan")]
    assert sizes, "a diagram without words"
    # shown at most WIDTH px wide, at least NARROWEST_PX on a phone: its smallest text stays >= 10 px
    assert min(sizes) * svg_draw.NARROWEST_PX / width >= 10 - 1e-9
    for t in root.iter(f"{SVG_NS}text"):  # every line of text inside the drawing (estimated width)
        text = "".join(t.itertext())
        size, x = float(t.get("font-size")), float(t.get("x"))
        w = svg_draw.text_width(text, size)
        left = {"start": x, "middle": x - w / 2, "end": x - w}[t.get("text-anchor")]
        assert left >= 0 and left + w <= width + 2, f"{d.name}: {text!r} runs off the drawing"


def test_every_chapter_has_a_diagram_and_its_file_is_the_code_s():
    assert {d.chapter for d in diagrams.DIAGRAMS} == set(range(1, len(CHAPTERS) + 1))
    for d in diagrams.DIAGRAMS:
        path = ROOT / "book" / d.path
        assert path.is_file() and path.read_text() == d.svg(), f"{d.path}: run tools/apply_reading.py"
        assert d.name in reading_plan.DIAGRAMS, f"{d.name}: not placed in tools/reading_plan.py"


def test_a_font_below_the_floor_is_refused():
    with pytest.raises(ValueError, match="below"):
        svg_draw.Drawing(10).text(0, 0, "tiny", svg_draw.MIN_FONT - 1)


# --- the self-checks -----------------------------------------------------------------------------------
def test_two_or_three_self_checks_a_chapter_each_placed():
    for chapter in range(1, len(CHAPTERS) + 1):
        assert 2 <= len(self_checks.for_chapter(chapter)) <= 3, chapter
    assert set(reading_plan.SELF_CHECKS) == set(self_checks.BY_KEY)
    answers = {q.answer for q in self_checks.QUESTIONS}
    assert len(answers) >= 3, "the right answer always has the same letter"


def test_a_bad_question_is_refused():
    with pytest.raises(ValueError, match="answer 3"):
        self_checks.Question("1-x", 1, "?", ("a", "b"), 3, "why", "hint")
    with pytest.raises(KeyError, match="no self-check"):
        self_checks.question("99-none")


@pytest.mark.parametrize("q", self_checks.QUESTIONS, ids=lambda q: q.key)
def test_the_widget_says_right_or_not_yet(q):
    import goodputlab as gl

    w = gl.widgets.self_check(q.key)
    assert w.check() is None and "Pick" in w.feedback.value
    wrong = next(i for i in range(len(q.options)) if i != q.answer)
    w.choice.value = wrong
    assert w.check() is False and "Not yet" in w.feedback.value and q.explanation[:30] not in w.feedback.value
    w.choice.value = q.answer
    assert w.check() is True and "Right" in w.feedback.value
    data, _ = w._repr_mimebundle_()
    static = data["text/markdown"]
    assert "<details><summary>Answer</summary>" in static and static.index(q.prompt) < static.index("<details>")
    assert f"**{self_checks.LETTERS[q.answer]}.** {q.explanation}" in static.split("<details>")[1]


# --- the chapters ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_a_chapter_carries_its_apparatus(path):
    nb = json.loads(path.read_text())
    chapter = apply_reading.chapter_of(path)
    cells = nb["cells"]
    text = "\n".join("".join(c["source"]) for c in cells)
    for d in diagrams.by_chapter(chapter):
        assert f"]({d.path})" in text, f"{path.name}: no {d.path}"
    for q in self_checks.for_chapter(chapter):
        assert f'gl.widgets.self_check("{q.key}")' in text
    found = captions.numbers(cells)
    assert len(found) >= len(reading_plan.CAPTIONS.get(chapter, [])) + len(diagrams.by_chapter(chapter))
    assert reading_plan.UNDER_THE_HOOD[chapter][0] in text
    headings = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## ")]
    for i, c in enumerate(cells):  # a self-check sits inside the chapter, before its closing sections
        if "self_check(" in "".join(c["source"]):
            assert headings[0] < i < headings[-1], f"{path.name}: a self-check at cell {i} is outside the sections"


def test_apply_reading_is_idempotent_and_the_chapters_are_applied(tmp_path):
    """The committed chapters are as apply_reading leaves them; on a copy, twice changes nothing more."""
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "apply_reading.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, f"run tools/apply_reading.py:\n{result.stdout}{result.stderr}"
    copy = tmp_path / CHAPTERS[2].name
    shutil.copy(CHAPTERS[2], copy)
    nb = nbformat.read(copy, as_version=4)
    nb.cells = [c for c in nb.cells if not apply_reading.is_inserted(c)]  # as a chapter before the script
    outputs = [c.get("outputs") for c in nb.cells if c.cell_type == "code"]
    apply_reading.apply(nb, copy)
    once = nbformat.writes(nb)
    apply_reading.apply(nb, copy)
    assert nbformat.writes(nb) == once
    assert [c.get("outputs") for c in nb.cells if c.cell_type == "code" and not apply_reading.is_inserted(c)] == outputs


def test_a_missing_anchor_is_reported_by_name(tmp_path):
    copy = tmp_path / CHAPTERS[0].name
    nb = nbformat.read(CHAPTERS[0], as_version=4)
    nb.cells = [c for c in nb.cells if "## A real run with failures" not in c.source]
    with pytest.raises(apply_reading.AnchorError, match="A real run with failures"):
        apply_reading.apply(nb, copy)


def test_prose_cells_are_folded_away():
    import execute_notebooks as EN

    assert EN.renders_prose("x = 1\ndef f():\n    pass\ngl.say('{x}', x=x)")
    assert not EN.renders_prose("print(1)\ngl.say('a')") and not EN.renders_prose("gl.say('a')\nx = 1")
    for path in CHAPTERS:
        for i, c in enumerate(json.loads(path.read_text())["cells"]):
            if c["cell_type"] == "code" and EN.renders_prose("".join(c["source"])):
                tags = c["metadata"].get("tags", [])
                assert {"remove-input", "hide-input"} & set(tags), (path.name, i)
                assert c["metadata"].get("jupyter", {}).get("source_hidden"), (path.name, i)


def test_the_run_caption_points_at_nothing_the_site_removes():
    for path in CHAPTERS:
        cell = next(c for c in json.loads(path.read_text())["cells"] if "run-caption" in c["metadata"].get("tags", []))
        text = "".join(cell["source"])
        assert "collapsed cell below" not in text and "parameters cell" in text, path.name
        assert not re.search(r"\b(hover|click)\b", text, re.I)


def test_every_reference_links_to_its_source():
    """book/references.md: each entry carries at least one link to where the work can be read."""
    text = (ROOT / "book" / "references.md").read_text()
    entries = re.split(r'(?=<a id=")', text)[1:]
    assert len(entries) >= 30
    for entry in entries:
        key = re.match(r'<a id="([^"]+)"', entry).group(1)
        assert re.search(r"\]\(https?://[^)]+\)|<https?://[^>]+>", entry), f"{key}: no link to its source"
        assert not re.search(r"(?<![<(/])\bhttps?://", entry), f"{key}: an address that is not a link"


def test_an_executed_self_check_keeps_its_static_form():
    """After a real execution the output holds the widget view and the question as Markdown; the committed
    notebook keeps the Markdown (tools/execute_notebooks.py drops the view, which draws nothing without a kernel)."""
    import execute_notebooks as EN
    import goodputlab as gl

    data, _ = gl.widgets.self_check("3-young")._repr_mimebundle_()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('gl.widgets.self_check("3-young")')]
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", data=data, execution_count=1)]
    EN.static_outputs(nb)
    kept = nb.cells[0].outputs[0]["data"]
    assert EN.WIDGET_VIEW not in kept and kept["text/markdown"] == self_checks.static_markdown(self_checks.question("3-young"))
