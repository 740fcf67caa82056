"""tools/nbval_shared.py: nbval compares the outputs of papermill's execution instead of executing
a chapter again, and it can still fail: a tagged cell whose output differs from the committed one,
a cell that raised. A saved copy of another notebook is not trusted: nbval executes for real."""

from __future__ import annotations

import os
import subprocess
import sys

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


def _nbval(folder, saved):
    env = dict(os.environ, GOODPUTLAB_EXECUTED_DIR=str(saved), PYTHONPATH=str(ROOT / "tools"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "nbval_shared", "-s", "--nbval-lax",
         "--rootdir", str(folder), str(folder / "chapter.ipynb")],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )


COMMITTED = [("print(6 * 7)", [_stream("42\n")], True), ("x = 1", [], False)]


@pytest.mark.parametrize(
    "executed, passes, says",
    [
        ([("print(6 * 7)", [_stream("42\n")], True), ("x = 1", [], False)], True, "replaying"),
        ([("print(6 * 7)", [_stream("41\n")], True), ("x = 1", [], False)], False, "Cell outputs differ"),
        ([("print(6 * 7)", [_stream("42\n")], True),
          ("x = 1", [nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=["boom"])], False)],
         False, "Cell execution caused an exception"),
        # another notebook's execution: nbval runs a real kernel, which prints 42
        ([("print(7 * 6)", [_stream("41\n")], True), ("x = 1", [], False)], True, "executing it"),
    ],
    ids=["same outputs", "a tagged output differs", "a cell raised", "another notebook: executed for real"],
)
def test_nbval_judges_the_saved_execution(tmp_path, executed, passes, says):
    saved = tmp_path / "executed"
    saved.mkdir()
    _notebook(tmp_path / "chapter.ipynb", COMMITTED)
    _notebook(saved / "chapter.ipynb", executed)  # the name papermill's copy gets: its path, / as __
    done = _nbval(tmp_path, saved)
    assert (done.returncode == 0) == passes, done.stdout[-3000:]
    assert says in done.stdout, done.stdout[-3000:]
