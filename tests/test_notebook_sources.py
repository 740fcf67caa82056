"""A committed notebook records the code it ran on, and a change to that code is caught.

``tools/execute_notebooks.py`` logs, from every process of an execution, the package's modules
imported and the repository's files read (``tools/source_log/sitecustomize.py``), and keeps their
digests in the notebook's metadata; ``tools/notebook_sources.py`` compares them with the files now.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import execute_notebooks as EN  # noqa: E402
import notebook_sources as NS  # noqa: E402

MACHINE = {"cpu_cores": 2, "gpu": None, "torch": "none", "python": "3"}  # skips the torch probe


def test_a_digest_ignores_comments_and_blank_lines_and_sees_code(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Doc."""\nX = 1  # one\n\ndef f():\n    return "# not a comment"\n')
    before = NS.digest(f)
    f.write_text('"""Doc."""\n# a new comment\nX = 1   # one, re-worded\n\n\ndef f():\n    return "# not a comment"\n')
    assert NS.digest(f) == before
    for changed in ('"""Doc."""\nX = 2\ndef f():\n    return "# not a comment"\n',   # code
                    '"""Doc."""\nX = 1\ndef f():\n    return "# not a comment!"\n',  # a string
                    '"""Docs."""\nX = 1\ndef f():\n    return "# not a comment"\n'):  # a docstring
        f.write_text(changed)
        assert NS.digest(f) != before
    data = tmp_path / "d.json"
    data.write_text('{"a": 1}  # not Python: every byte counts')
    before = NS.digest(data)
    data.write_text('{"a": 1}  # not Python: every byte counts ')
    assert NS.digest(data) != before
    assert NS.digest(tmp_path / "gone.py") == NS.MISSING


def _tree_copy(files: list[str], dest: Path) -> Path:
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)
    return dest


def test_an_execution_records_what_its_processes_used_and_a_changed_module_stales_it(tmp_path, capsys):
    # a real kernel that imports part of the package, reads a file of the book, and starts a Python
    # process that imports a module the kernel never does (as a supervisor starts its workers)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# probe"),
        nbformat.v4.new_code_cell("import goodputlab.theory.closed_forms as cf\nprint(round(cf.young_interval(60, 3600)))"),
        nbformat.v4.new_code_cell(f"len(open({str(ROOT / 'book/data/cited.json')!r}).read()) > 0"),
        nbformat.v4.new_code_cell("import subprocess, sys\n"
                                  "subprocess.run([sys.executable, '-c', 'import goodputlab.serving.slo'], check=True)\n"
                                  "import sys as s2\nassert 'goodputlab.serving.slo' not in s2.modules"),
    ]
    probe = tmp_path / "probe" / "probe.ipynb"
    probe.parent.mkdir()
    nbformat.write(nb, probe)
    EN.execute(probe, write=True, full=False, info=MACHINE)

    sources = nbformat.read(probe, as_version=4).metadata["goodputlab"]["sources"]
    assert "goodputlab/theory/closed_forms.py" in sources  # the kernel's import
    assert "goodputlab/serving/slo.py" in sources  # the child process's
    assert "book/data/cited.json" in sources  # a file read
    assert not any(p.startswith(("tests/", "docs/", "tools/", ".venv/")) or "__pycache__" in p or ".egg-info" in p
                   for p in sources)
    assert "goodputlab/serving/server.py" not in sources and "goodputlab/cli/run.py" not in sources  # never used
    assert all(v == NS.digest(ROOT / p) for p, v in sources.items())
    assert not NS.check(probe, ROOT).stale  # fresh against the code it just ran on

    # the same files in another tree: a module it used changed there, in code, then only in a comment;
    # and a module it did not use
    tree = _tree_copy([*sources, "goodputlab/cli/run.py"], tmp_path / "tree")
    assert not NS.check(probe, tree).stale
    slo = tree / "goodputlab/serving/slo.py"
    original = slo.read_text()
    slo.write_text(original + "\n# a comment at the end changes no output\n")
    assert not NS.check(probe, tree).stale
    (tree / "goodputlab/cli/run.py").write_text("RAISE = 1\n")
    assert not NS.check(probe, tree).stale
    slo.write_text(original + "\nNEW_CONSTANT = 1\n")
    found = NS.check(probe, tree)
    assert found.stale and found.changed == ["goodputlab/serving/slo.py"]
    assert "goodputlab/serving/slo.py" in found.reason()
    # the command line says so (exit 1), and --list gives the paths to re-execute
    assert NS.main([f"--root={tree}", str(probe)]) == 1
    assert "predates a change to goodputlab/serving/slo.py" in capsys.readouterr().out
    assert NS.main([f"--root={tree}", "--list", str(probe)]) == 0
    assert capsys.readouterr().out.strip() == str(probe)
    assert NS.main([str(probe)]) == 0  # against the repository itself: fresh
    slo.unlink()
    assert NS.check(probe, tree).changed == ["goodputlab/serving/slo.py"]  # a module gone: stale too


def test_a_notebook_without_a_record_is_stale(tmp_path):
    nb = nbformat.v4.new_notebook()
    path = tmp_path / "old.ipynb"
    nbformat.write(nb, path)
    found = NS.check(path)
    assert found.stale and not found.recorded and "no record" in found.reason()


def test_every_committed_notebook_ran_on_the_code_as_it_is():
    """The release check: re-execute the notebooks this lists (``make notebooks NB="..."``)."""
    cache: dict[str, str] = {}
    stale = [f for f in (NS.check(p, ROOT, cache) for p in NS.committed_notebooks(ROOT)) if f.stale]
    listing = "\n".join(f"{Path(f.notebook).relative_to(ROOT)}: {f.reason()}" for f in stale)
    assert not stale, (f"{len(stale)} committed notebooks predate the code they use; re-execute them with\n"
                       f"  make notebooks NB=\"$(.venv/bin/python tools/notebook_sources.py --list)\"\n{listing}")
