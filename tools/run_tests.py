"""Run the whole test suite in jobs (what ``make test`` and CI run), and say how long each took.

The suite is cut into jobs, each one pytest process over a few test files, and three workers run
them side by side on a 2-core machine: when a worker's job ends it takes the next job that is
ready, largest first. A worker that drew quick jobs, or a neighbour that left it more of the cores,
takes more of them, so the streams end within one job of each other whatever the load (fixed
streams of lanes ended up to 7 minutes apart beside two busy loops, the longest setting the time).

* Notebooks under papermill (the tests that use ``executed_notebook``, marked ``notebook_runs``),
  in three jobs: chapters 1-5, chapters 6-11, then the labs, solutions and every notebook's
  run-through. A notebook is executed once per ``make test``, by whichever job asks first; the
  others read that execution (tests/conftest.py: ``executed_notebook`` shares it through
  ``GOODPUTLAB_EXECUTED_DIR`` under a lock).
* nbval on the chapters, once every notebook job has ended: it compares those executions' outputs
  with the committed ones (tools/nbval_shared.py); it executes a chapter itself only where no copy
  was saved.
* The measuring tests (marked ``measures`` in tests/conftest.py: supervisors, torchrun, torchft,
  emulated nodes, the benchmarks' quick modes) in five jobs; the tests that share a session's runs
  (``clean_run`` and ``killed_run``, the efficiency sweep) stay in one job.
* The rest (pure units, charts, docs, lab checks, layout, bad input), in two jobs cut by file name.
* The browser tests: the chapters read in JupyterLab (each runs again in a kernel there, at SMOKE
  sizes); the labs, the dashboard and the website.

Every job's last catch-all takes the files no other job of its kind names, so a new test file
always runs. Three workers on two cores keep the cores full: a notebook's runs and the supervisors
wait on launches, sleeps and emulated storage as much as on the cores. Every assertion in the
measuring tests is a ratio measured in one run or a model bound, which holds beside two busy loops
(README: make test is measured both ways), and so beside the other jobs.

Every job's CPU time (its processes and the descendants they waited for) is printed beside its
wall time: on a shared machine it says how much work a job is, which its wall time cannot.

Python's bytecode is kept (``__pycache__``, ignored by git) even where the environment sets
``PYTHONDONTWRITEBYTECODE`` (this project's machines do): the suite starts hundreds of Python
processes (supervisors, workers, kernels, the jobs' pytests), and without the cache each compiled the
package again and pytest rewrote every test module's assertions again, about a tenth of a killed
run's CPU time and a third of collecting every test.

Every job runs even when another fails. Each job's output is printed whole when it ends, with its
exit status and time; the last line sums them up. Exit status: 0 when every job passed (or selected
no test, under a ``-k`` of PYTEST_ARGS), else 1.

    python tools/run_tests.py [--dry-run] [--workers N] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSER_TESTS = ["tests/test_browser.py", "tests/test_dashboard_browser.py", "tests/test_site.py"]
NOT_BROWSER = [f"--ignore={t}" for t in BROWSER_TESTS]
NBVAL_ARGS = ["-p", "nbval_shared", "--nbval-lax", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]


def nbval_notebooks() -> list[str]:
    """The notebooks that tag cells for nbval (cell tag ``nbval-check-output``: the chapters). The
    labs tag none, so nbval would only run them again (papermill runs every lab and solution, the
    browser test every lab)."""
    found = []
    for pattern in ("book/*.ipynb", "labs/*.ipynb", "labs/solutions/*.ipynb"):
        for path in sorted(glob.glob(str(ROOT / pattern))):
            if '"nbval-check-output"' in Path(path).read_text():
                found.append(str(Path(path).relative_to(ROOT)))
    return found


@dataclass
class Job:
    name: str
    args: list[str]
    after: tuple[str, ...] = ()  # the name prefixes of the jobs that must end first
    log: Path = field(default=None)  # type: ignore[assignment]
    proc: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0
    cpu: float = 0.0
    code: int | None = None


#: the chapters' reading in JupyterLab (tests/test_browser.py), apart from the other browser tests
CHAPTERS_READ = "jupyterlab and book/"

#: The notebook jobs before the catch-all (labs, solutions, every notebook's run-through).
NOTEBOOK_JOBS = {
    "notebooks: chapters 1-5": [f"tests/test_book_0{k}.py" for k in range(1, 6)],
    "notebooks: chapters 6-11": [*(f"tests/test_book_{k:02d}.py" for k in range(6, 12)), "tests/test_prose_numbers.py"],
}
#: The measuring jobs before the catch-all. Tests that share a session's real runs stay in one job
#: (tests/conftest.py's ``clean_run`` and ``killed_run``; efficiency_helpers' ``tiny_sweep``).
MEASURING_JOBS = {
    "runs: torchft and emulated nodes": ["tests/test_torchft.py", "tests/test_emulated_nodes.py"],
    "runs: supervisor, strategies, CLI": ["tests/test_supervisor.py", "tests/test_strategies.py",
                                          "tests/test_auto_interval.py", "tests/test_pipeline_resume.py",
                                          "tests/test_cli.py"],
    "runs: recovery, torture, torchrun": ["tests/test_torture.py", "tests/test_recovery.py",
                                          "tests/test_distributed_runs.py", "tests/test_run_safety.py"],
    "runs: benchmarks and serving": ["tests/test_validate_theory.py", "tests/test_benchmark_pipeline.py",
                                     "tests/test_benchmark_stall.py", "tests/test_benchmark_serving.py",
                                     "tests/test_serving_server.py", "tests/test_serving_cli.py"],
}
#: "the rest" (the tests that do not measure) in two jobs, cut by file name: the files named before
#: this, then every other file (the catch-all), so neither ends long after the other jobs
REST_CUT = "test_l"
#: the order the workers take the jobs in: the longest first (their times beside two busy loops)
ORDER = ("runs: torchft and emulated nodes", "browser: chapters", "notebooks: chapters 1-5",
         "runs: widgets, recorder, pipeline and the others", "browser: labs, dashboard, site",
         "notebooks: labs, solutions, run-throughs", "the rest: the other files", f"the rest: files before {REST_CUT[5:]}",
         "runs: recovery, torture, torchrun", "notebooks: chapters 6-11", "runs: supervisor, strategies, CLI",
         "runs: benchmarks and serving")


def _named_then_rest(jobs: dict[str, list[str]], rest: str, marks: str, py: list[str],
                     pytest_args: list[str]) -> list[Job]:
    """A job per entry of ``jobs`` (its files, the tests of them that ``marks`` selects), then
    ``rest``: every other test file's tests that ``marks`` selects."""
    out = [Job(name, py + [*files, "-m", marks, *pytest_args]) for name, files in jobs.items()]
    named = [f"--ignore={f}" for files in jobs.values() for f in files]
    out.append(Job(rest, py + ["tests", "-m", marks, *NOT_BROWSER, *named, *pytest_args]))
    return out


def plan(pytest_args: list[str]) -> list[Job]:
    """Every job, in the order the workers take them when ready: the longest first (their times in
    make test beside two busy loops), the short ones filling in at the end."""
    py = [sys.executable, "-m", "pytest"]
    notebooks = _named_then_rest(NOTEBOOK_JOBS, "notebooks: labs, solutions, run-throughs",
                                 "measures and notebook_runs", py, pytest_args)
    runs = _named_then_rest(MEASURING_JOBS, "runs: widgets, recorder, pipeline and the others",
                            "measures and not notebook_runs", py, pytest_args)
    first = [f"tests/{p.name}" for p in sorted((ROOT / "tests").glob("test_*.py"))
             if p.name < REST_CUT and f"tests/{p.name}" not in BROWSER_TESTS]
    rest = [Job(f"the rest: files before {REST_CUT[5:]}", py + [*first, "-m", "not measures", *pytest_args]),
            Job("the rest: the other files", py + ["tests", "-m", "not measures", *NOT_BROWSER,
                                                    *(f"--ignore={f}" for f in first), *pytest_args])]
    jobs = {job.name: job for job in [
        Job("browser: chapters", py + ["tests/test_browser.py", "-k", CHAPTERS_READ, *pytest_args]),
        Job("browser: labs, dashboard, site", py + [*BROWSER_TESTS, "-k", f"not ({CHAPTERS_READ})", *pytest_args]),
        *notebooks, *runs, *rest]}
    ordered = [jobs.pop(name) for name in ORDER if name in jobs]
    # a job ORDER does not name (a new entry of MEASURING_JOBS or NOTEBOOK_JOBS) still runs, before nbval
    return [*ordered, *jobs.values(),
            Job("nbval", py + [*NBVAL_ARGS, *nbval_notebooks(), *pytest_args], after=("notebooks:",))]


def _start(job: Job, folder: Path, env: dict) -> None:
    job.log = folder / f"job-{''.join(ch if ch.isalnum() else '_' for ch in job.name)}.log"
    job.started = time.monotonic()
    with open(job.log, "wb") as out:
        job.proc = subprocess.Popen(job.args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _reap(job: Job) -> bool:
    """Whether the job's pytest has ended; if so its exit status, wall and CPU seconds are set
    (``os.wait4`` gives the CPU time of the process and of the descendants it waited for)."""
    pid, status, usage = os.wait4(job.proc.pid, os.WNOHANG)
    if pid == 0:
        return False
    job.code = os.waitstatus_to_exitcode(status)
    job.proc.returncode = job.code
    job.seconds = time.monotonic() - job.started
    job.cpu = usage.ru_utime + usage.ru_stime
    return True


def ready(job: Job, jobs: list[Job]) -> bool:
    """Whether every job that ``job`` waits for has ended."""
    return all(other.code is not None for other in jobs
               if other is not job and any(other.name.startswith(prefix) for prefix in job.after))


def run_jobs(jobs: list[Job], folder: Path, workers: int) -> None:
    """Run the jobs on ``workers`` workers, each taking the first ready job in ``jobs``' order when
    it is free; print each job's log when it ends; return when every job has."""
    env = dict(os.environ, GOODPUTLAB_SMOKE="1", GOODPUTLAB_EXECUTED_DIR=str(folder / "executed"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tools"), os.environ.get("PYTHONPATH")])))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # keep the bytecode (see the module's docstring)
    waiting, running, t0 = list(jobs), [], time.monotonic()
    while waiting or running:
        for job in list(running):
            if _reap(job):
                running.remove(job)
                print(f"\n=== {job.name}: exit {job.code} in {job.seconds:.0f} s (cpu {job.cpu:.0f} s), "
                      f"from {job.started - t0:.0f} s ===", flush=True)
                sys.stdout.write(job.log.read_text(errors="replace"))
                sys.stdout.flush()
        while len(running) < workers:
            nxt = next((job for job in waiting if ready(job, jobs)), None)
            if nxt is None:
                break
            waiting.remove(nxt)
            _start(nxt, folder, env)
            running.append(nxt)
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print each job's command, run nothing")
    p.add_argument("--workers", type=int, default=3, help="jobs run side by side (default 3, for 2 cores)")
    p.add_argument("pytest_args", nargs="*", help="passed to every pytest (after --)")
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error(f"--workers must be at least 1, not {args.workers}")
    jobs = plan(args.pytest_args)
    if args.dry_run:
        for job in jobs:
            after = f" (after every job named {', '.join(repr(a) for a in job.after)}...)" if job.after else ""
            print(f"{job.name}{after}: {shlex.join(job.args)}")
        return 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="goodputlab-test-jobs-") as tmp:
        run_jobs(jobs, Path(tmp), args.workers)
    total = time.monotonic() - t0
    parts = "; ".join(f"{job.name} exit {job.code} in {job.seconds:.0f} s, cpu {job.cpu:.0f} s" for job in jobs)
    cpu = sum(job.cpu for job in jobs)
    print(f"\nmake test ({args.workers} workers): {parts}; total {int(total // 60)} min {int(total % 60)} s, "
          f"cpu {cpu:.0f} s", flush=True)
    return 0 if all(passed(job) for job in jobs) else 1


def passed(job: Job) -> bool:
    """Exit 0, or pytest's 5 (no test selected: a ``-k`` in PYTEST_ARGS that leaves a job nothing;
    a file a job names that is gone is pytest's 4, a failure)."""
    return job.code in (0, 5)


if __name__ == "__main__":
    sys.exit(main())
