"""Put the reading apparatus into the chapters: diagrams, chart captions, self-checks, "Under the hood".

    python tools/apply_reading.py                     # every chapter (book/NN_*.ipynb), in place
    python tools/apply_reading.py book/03_*.ipynb     # some
    python tools/apply_reading.py --check             # change nothing; exit 1 if a chapter would change

Idempotent: running it twice changes nothing. Each run first takes out every cell an earlier run put
in (they carry ``metadata.goodputlab.reading``), then puts them in again where ``tools/reading_plan.py``
says, so a chapter whose cells moved gets its apparatus at the new places. Only sources and metadata
change; the chapters' own outputs are kept. What it does to each chapter:

1. writes every diagram's SVG into ``book/figures/`` (``goodputlab/charts/diagrams.py``) and puts a
   markdown cell with a lead-in sentence, the image (with its alt text) and its caption before the
   heading the plan names;
2. puts a caption cell after every chart and panel the plan names (tag ``figure-caption``);
3. puts each self-check (``goodputlab/self_checks.py``) at the end of its section: a code cell
   ``gl.widgets.self_check(key)`` whose output is the question with its answer folded away (what a
   reader without a kernel sees), its source hidden (tag ``remove-input``, ``jupyter.source_hidden``);
4. puts one "Under the hood" line before the exercises, a link to a page of the docs on the site;
5. folds away the source of every cell that only renders prose (``execute_notebooks.hide_prose_sources``);
6. rewrites the run's caption under the title from the notebook's metadata (``execute_notebooks.caption``);
7. numbers the figures and the references to them (``goodputlab.captions``).

An anchor the plan names that a chapter no longer has is reported, and the script exits 2 without
writing anything: fix the anchor in ``tools/reading_plan.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import execute_notebooks as EN  # noqa: E402
import reading_plan as PLAN  # noqa: E402

from goodputlab import captions, self_checks  # noqa: E402
from goodputlab.charts import diagrams  # noqa: E402
from goodputlab.widgets.self_check import static_bundle  # noqa: E402

BOOK = ROOT / "book"
FIGURES = BOOK / "figures"
KEY = captions.META_KEY  # cell.metadata["goodputlab"]
MARK = "reading"  # cell.metadata["goodputlab"]["reading"]: which kind of inserted cell


class AnchorError(ValueError):
    """An anchor of the plan that the chapter does not have (or has twice)."""


def _cell_id(kind: str, key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"reading-{kind}-{key}")[:64]


def _meta(kind: str, figure: str | None = None, tags: tuple[str, ...] = (), hidden: bool = False) -> dict:
    meta: dict = {KEY: {MARK: kind}}
    if figure:
        meta[KEY][captions.FIGURE_KEY] = figure
    if tags:
        meta["tags"] = list(tags)
    if hidden:
        meta["jupyter"] = {"source_hidden": True}
    return meta


def _markdown(kind: str, key: str, text: str, **meta) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(text, metadata=_meta(kind, **meta))
    cell.id = _cell_id(kind, key)
    return cell


def chapter_of(path: Path) -> int:
    return int(path.name.split("_", 1)[0])


def _heading_cell(cells: list, heading: str, path: Path) -> int:
    found = [i for i, c in enumerate(cells)
             if c.cell_type == "markdown" and heading in (line.rstrip() for line in c.source.splitlines())]
    if len(found) != 1:
        raise AnchorError(f"{path.name}: the heading {heading!r} is in {len(found)} cells (need exactly 1)")
    return found[0]


def _code_cell(cells: list, snippet: str, path: Path) -> int:
    found = [i for i, c in enumerate(cells) if c.cell_type == "code" and snippet in c.source]
    if len(found) != 1:
        raise AnchorError(f"{path.name}: the code snippet {snippet!r} is in {len(found)} cells (need exactly 1)")
    return found[0]


def is_inserted(cell) -> bool:
    return bool(cell.get("metadata", {}).get(KEY, {}).get(MARK))


# --- the cells ------------------------------------------------------------------------------------------
def diagram_cell(d: diagrams.Diagram) -> nbformat.NotebookNode:
    lead = PLAN.DIAGRAMS[d.name][1].format(ref=f"[Figure](#{d.label})")
    alt = d.alt.replace("]", ")").replace("[", "(")
    text = f"{lead}\n\n![{alt}]({d.path})\n\n{captions.caption_text('0', d.label, d.caption)}"
    return _markdown("diagram", d.name, text, figure=d.label, tags=(captions.CAPTION_TAG,))


def caption_cell(label: str, text: str) -> nbformat.NotebookNode:
    return _markdown("caption", label, captions.caption_text("0", label, text), figure=label,
                     tags=(captions.CAPTION_TAG,))


def self_check_cell(key: str) -> nbformat.NotebookNode:
    q = self_checks.question(key)
    cell = nbformat.v4.new_code_cell(f'gl.widgets.self_check("{key}")',
                                     metadata=_meta("self-check", tags=("remove-input", "self-check"), hidden=True))
    cell.id = _cell_id("self-check", key)
    cell.outputs = [nbformat.v4.new_output("execute_result", data=static_bundle(q), execution_count=None)]
    return cell


def _keep_count(cell: nbformat.NotebookNode, executed: dict) -> nbformat.NotebookNode:
    """``cell`` with the execution count of the executed cell it replaces, where that cell's output is the same
    static form: an executed chapter stays as `make notebooks` left it (nbval reads a count-less cell with
    outputs as unrun)."""
    old = executed.get(cell.id)
    if old is not None and old.outputs and old.outputs[-1].get("data") == cell.outputs[0].data:
        cell.execution_count = old.execution_count
        cell.outputs[0].execution_count = old.outputs[-1].get("execution_count", old.execution_count)
    return cell


def under_the_hood_cell(chapter: int) -> nbformat.NotebookNode:
    href, words = PLAN.UNDER_THE_HOOD[chapter]
    return _markdown("under-the-hood", str(chapter), f"**Under the hood:** [{words}]({href}).")


# --- one chapter -------------------------------------------------------------------------------------------
def apply(nb: nbformat.NotebookNode, path: Path) -> None:
    """Put the apparatus into ``nb`` (the chapter at ``path``), in place; raises :class:`AnchorError`."""
    chapter = chapter_of(path)
    executed = {c.get("id"): c for c in nb.cells if is_inserted(c) and c.cell_type == "code" and c.execution_count}
    nb.cells = [c for c in nb.cells if not is_inserted(c)]
    # captions after their charts, last first so the indices found stay valid
    placed = sorted(((_code_cell(nb.cells, snippet, path), label, text)
                     for snippet, label, text in PLAN.CAPTIONS.get(chapter, [])), reverse=True)
    for i, label, text in placed:
        nb.cells.insert(i + 1, caption_cell(label, text))
    # before headings: the self-checks closing the section above, then the diagram opening the next
    before: dict[str, list] = {}
    for key, heading in PLAN.SELF_CHECKS.items():
        if self_checks.question(key).chapter == chapter:
            before.setdefault(heading, []).append(_keep_count(self_check_cell(key), executed))
    for d in diagrams.by_chapter(chapter):
        before.setdefault(PLAN.DIAGRAMS[d.name][0], []).append(diagram_cell(d))
    if chapter in PLAN.UNDER_THE_HOOD:
        before.setdefault(PLAN.UNDER_THE_HOOD_BEFORE, []).append(under_the_hood_cell(chapter))
    for heading, cells in sorted(before.items(), key=lambda kv: -_heading_cell(nb.cells, kv[0], path)):
        i = _heading_cell(nb.cells, heading, path)
        nb.cells[i:i] = cells
    EN.hide_prose_sources(nb)
    meta = nb.metadata.get("goodputlab")
    if meta:
        EN.set_caption(nb, EN.caption(meta, "chapter"))
    captions.number_figures(nb)


def write_diagrams(check: bool = False) -> list[Path]:
    """Write every diagram's SVG into book/figures/; returns the files that changed (or would)."""
    changed = []
    FIGURES.mkdir(exist_ok=True)
    for d in diagrams.DIAGRAMS:
        path = BOOK / d.path
        svg = d.svg()
        if not path.exists() or path.read_text() != svg:
            changed.append(path)
            if not check:
                path.write_text(svg)
    return changed


def main(args: list[str]) -> int:
    check = "--check" in args
    paths = [Path(a) for a in args if not a.startswith("--")] or sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
    changed = [p.relative_to(ROOT) for p in write_diagrams(check)]
    results = {}
    try:
        for path in paths:
            before = path.read_text()
            nb = nbformat.read(path, as_version=4)
            apply(nb, path)
            after = nbformat.writes(nb)
            after += "" if after.endswith("\n") else "\n"
            results[path] = after
            if after != before:
                changed.append(path.resolve().relative_to(ROOT))
    except (AnchorError, ValueError) as e:
        print(f"apply_reading: {e}", file=sys.stderr)
        return 2
    if check:
        for p in changed:
            print(f"would change {p}")
        return 1 if changed else 0
    for path, text in results.items():
        if text != path.read_text():
            path.write_text(text)
    for p in changed:
        print(f"changed {p}")
    print(json.dumps({"chapters": len(paths), "changed": len(changed)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
