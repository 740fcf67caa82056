"""tools/nbval_shared.py: nbval compares the outputs of papermill's execution instead of executing
a chapter again, and it can still fail: a tagged cell whose output differs from the committed one,
a cell that raised. A saved copy of another notebook is not trusted: nbval executes for real."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import nbformat
import pytest

from conftest import ROOT


def _notebook(path, cells) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for source, outputs, tagged in cells:
        cell = nbformat.v4.new_code_cell(source, execution_count=1, outputs=outputs)
        if tagged:
            cell.metadata["tags"] = ["nbval-check-output"]
        nb.cells.append(cell)
    nbformat.write(nb, path)


def _stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def _nbval(folder, saved, notebooks):
    env = dict(os.environ, GOODPUTLAB_EXECUTED_DIR=str(saved), PYTHONPATH=str(ROOT / "tools"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "nbval_shared", "-s", "--nbval-lax",
         "--rootdir", str(folder), "--junitxml", str(folder / "junit.xml"), *map(str, notebooks)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )


COMMITTED = [("print(6 * 7)", [_stream("42\n")], True), ("x = 1", [], False)]
CASES = {  # name: (the saved execution, whether nbval passes, what it says)
    "same_outputs": ([("print(6 * 7)", [_stream("42\n")], True), ("x = 1", [], False)], True, "replaying"),
    "a_tagged_output_differs": ([("print(6 * 7)", [_stream("41\n")], True), ("x = 1", [], False)], False,
                                "Cell outputs differ"),
    "a_cell_raised": ([("print(6 * 7)", [_stream("42\n")], True),
                       ("x = 1", [nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=["boom"])],
                        False)], False, "Cell execution caused an exception"),
    # another notebook's execution: nbval runs a real kernel, which prints 42
    "another_notebook_executed_for_real": ([("print(7 * 6)", [_stream("41\n")], True), ("x = 1", [], False)], True,
                                           "executing it"),
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One nbval session over a committed notebook per case, each with its saved execution; for each
    case, the texts of its cells' results (junit XML) and whether every cell passed, and nbval's output."""
    folder = tmp_path_factory.mktemp("nbval")
    saved = folder / "executed"
    saved.mkdir()
    for name, (executed, _, _) in CASES.items():
        _notebook(folder / f"{name}.ipynb", COMMITTED)
        _notebook(saved / f"{name}.ipynb", executed)  # the name papermill's copy gets: its path, / as __
    done = _nbval(folder, saved, [folder / f"{name}.ipynb" for name in CASES])
    results = {name: [] for name in CASES}
    for case in ET.parse(folder / "junit.xml").iter("testcase"):
        results[case.get("classname").removesuffix(".ipynb")].append(case)  # classname: the notebook's file
    return results, done


@pytest.mark.parametrize("name", list(CASES))
def test_nbval_judges_the_saved_execution(judged, name):
    results, done = judged
    _, passes, says = CASES[name]
    cells = results[name]
    assert len(cells) == 2, done.stdout[-3000:]  # both cells were judged
    failures = [f for c in cells for f in [*c.iter("failure"), *c.iter("error")]]
    assert (not failures) == passes, done.stdout[-3000:]
    if passes:  # what nbval_shared says it did with this notebook
        assert f"nbval_shared: {name}.ipynb: {says}" in done.stdout, done.stdout[-3000:]
    else:
        assert any(says in (f.get("message", "") + (f.text or "")) for f in failures), done.stdout[-3000:]
