"""Run the whole test suite in lanes (what ``make test`` and CI run), and say how long each took.

The suite's parts differ in what they need from a 2-core machine. It runs in three streams side by
side, each a row of lanes one after another:

* Stream 1: the notebooks executed by papermill (chapters, labs, solutions: the tests marked
  ``notebook_runs``), then nbval on the chapters (on those executions: below), then the browser
  tests other than the chapters' (every lab and the dashboard in JupyterLab, the dashboard in
  Voila, the website).
* Stream 2: the other measuring tests (marked ``measures`` in tests/conftest.py: supervisors,
  torchrun, the benchmarks' quick modes).
* Stream 3: the rest (pure units, charts, docs, lab checks, layout, bad input), then the chapters
  read in JupyterLab (each runs again in a kernel there, at SMOKE sizes).

Three lanes on two cores keep the cores full: a notebook's runs and the supervisors wait on
launches, sleeps and emulated storage as much as on the cores, and on a machine shared with other
work the suite's share of the cores grows with the lanes that are ready to run. Every assertion in
the measuring tests is a ratio measured in one run or a model bound, which holds beside two busy
loops (README: make test is measured both ways), and so beside the other lanes. (The measuring
tests first ran alone as a phase; then in two streams, where the browser tests, the longest lane,
waited for the notebooks: 20-25 min quiet and 30 beside two busy loops.)

Each chapter is executed once under papermill (SMOKE) in stream 1, and nbval compares the outputs
of that execution with the committed ones (tools/nbval_shared.py: the executed copies are saved in
``GOODPUTLAB_EXECUTED_DIR``, a folder of this run); it executes a chapter itself only where no copy
was saved. Every lane's CPU time (its processes and the descendants they waited for) is printed
beside its wall time: on a shared machine it says how much work a lane is, which its wall time
cannot.

Every lane runs even when another fails. Each lane's output is printed whole when it ends, with its
exit status and time; the last line sums them up. Exit status: 0 when every lane passed, else 1.

    python tools/run_tests.py [--dry-run] [-- PYTEST_ARGS...]
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
class Lane:
    name: str
    args: list[str]
    log: Path = field(default=None)  # type: ignore[assignment]
    proc: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0
    cpu: float = 0.0
    code: int | None = None


#: the chapters' reading in JupyterLab (tests/test_browser.py), apart from the other browser tests
CHAPTERS_READ = "jupyterlab and book/"


def streams(pytest_args: list[str]) -> list[list[Lane]]:
    """The streams, run side by side; each a list of lanes run one after another."""
    py = [sys.executable, "-m", "pytest"]
    return [
        [
            Lane("measuring: notebooks", py + ["tests", "-m", "measures and notebook_runs", *NOT_BROWSER, *pytest_args]),
            Lane("nbval", py + [*NBVAL_ARGS, *nbval_notebooks(), *pytest_args]),
            Lane("browser: labs, dashboard, site", py + [*BROWSER_TESTS, "-k", f"not ({CHAPTERS_READ})", *pytest_args]),
        ],
        [
            Lane("measuring: runs", py + ["tests", "-m", "measures and not notebook_runs", *NOT_BROWSER, *pytest_args]),
        ],
        [
            Lane("the rest", py + ["tests", "-m", "not measures", *NOT_BROWSER, *pytest_args]),
            Lane("browser: chapters", py + ["tests/test_browser.py", "-k", CHAPTERS_READ, *pytest_args]),
        ],
    ]


def _start(lane: Lane, folder: Path, env: dict) -> None:
    lane.log = folder / f"lane-{lane.name.replace(' ', '_').replace(':', '')}.log"
    lane.started = time.monotonic()
    with open(lane.log, "wb") as out:
        lane.proc = subprocess.Popen(lane.args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _reap(lane: Lane) -> bool:
    """Whether the lane's pytest has ended; if so its exit status, wall and CPU seconds are set
    (``os.wait4`` gives the CPU time of the process and of the descendants it waited for)."""
    pid, status, usage = os.wait4(lane.proc.pid, os.WNOHANG)
    if pid == 0:
        return False
    lane.code = os.waitstatus_to_exitcode(status)
    lane.proc.returncode = lane.code
    lane.seconds = time.monotonic() - lane.started
    lane.cpu = usage.ru_utime + usage.ru_stime
    return True


def run_streams(streams: list[list[Lane]], folder: Path) -> None:
    """Run the streams side by side (each stream's lanes one after another), print each lane's log
    when it ends, return when every lane has."""
    env = dict(os.environ, GOODPUTLAB_SMOKE="1", GOODPUTLAB_EXECUTED_DIR=str(folder / "executed"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tools"), os.environ.get("PYTHONPATH")])))
    queues = [list(stream) for stream in streams]
    running = []
    for queue in queues:
        lane = queue.pop(0)
        _start(lane, folder, env)
        running.append((lane, queue))
    while running:
        for lane, queue in list(running):
            if not _reap(lane):
                continue
            running.remove((lane, queue))
            print(f"\n=== {lane.name}: exit {lane.code} in {lane.seconds:.0f} s (cpu {lane.cpu:.0f} s) ===", flush=True)
            sys.stdout.write(lane.log.read_text(errors="replace"))
            sys.stdout.flush()
            if queue:
                following = queue.pop(0)
                _start(following, folder, env)
                running.append((following, queue))
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print each lane's command, run nothing")
    p.add_argument("pytest_args", nargs="*", help="passed to every pytest (after --)")
    args = p.parse_args(argv)
    plan = streams(args.pytest_args)
    lanes = [lane for stream in plan for lane in stream]
    if args.dry_run:
        for k, stream in enumerate(plan, 1):
            for lane in stream:
                print(f"stream {k}, {lane.name}: {shlex.join(lane.args)}")
        return 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="goodputlab-test-lanes-") as tmp:
        run_streams(plan, Path(tmp))
    total = time.monotonic() - t0
    parts = " | ".join(", then ".join(f"{lane.name} exit {lane.code} in {lane.seconds:.0f} s, cpu {lane.cpu:.0f} s"
                                      for lane in stream) for stream in plan)
    cpu = sum(lane.cpu for lane in lanes)
    print(f"\nmake test: {parts}; total {int(total // 60)} min {int(total % 60)} s, cpu {cpu:.0f} s", flush=True)
    return 0 if all(lane.code == 0 for lane in lanes) else 1

if __name__ == "__main__":
    sys.exit(main())
