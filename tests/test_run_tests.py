"""make test's plan (tools/run_tests.py): every test file runs in some job, and no named file runs twice."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import MEASURING_FILES, ROOT

sys.path.insert(0, str(ROOT / "tools"))
import run_tests  # noqa: E402  (tools/run_tests.py)


def _files(job) -> list[str]:
    return [a for a in job.args if a.startswith("tests/") and a.endswith(".py")]


def _ignored(job) -> set[str]:
    return {a.split("=", 1)[1] for a in job.args if a.startswith("--ignore=")}


def test_every_job_has_its_own_name_and_the_named_files_measure():
    jobs = run_tests.plan([])
    assert len({job.name for job in jobs}) == len(jobs)
    names = [job.name for job in jobs]
    assert names[:len(run_tests.ORDER)] == list(run_tests.ORDER) and names[-1] == "nbval"
    assert {*run_tests.MEASURING_JOBS, *run_tests.NOTEBOOK_JOBS} <= set(names)  # a named job always runs
    # a named measuring file that is not marked `measures` would select nothing, and pytest's "no test" passes
    for files in run_tests.MEASURING_JOBS.values():
        assert {Path(f).name for f in files} <= MEASURING_FILES, files
        assert all((ROOT / f).is_file() for f in files), files


def test_the_two_halves_of_the_rest_cover_every_file_once():
    jobs = {job.name: job for job in run_tests.plan(["-x"])}
    first = jobs[f"the rest: files before {run_tests.REST_CUT[5:]}"]
    other = jobs["the rest: the other files"]
    named = _files(first)
    assert named and all(Path(f).name < run_tests.REST_CUT for f in named)
    assert set(named) <= _ignored(other)  # the catch-all leaves them to the first half
    every = {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")} - set(run_tests.BROWSER_TESTS)
    assert every - set(named) - _ignored(other) == {f for f in every if Path(f).name >= run_tests.REST_CUT}
    assert "tests" in other.args and first.args[-1] == other.args[-1] == "-x"  # PYTEST_ARGS reach both
