"""Run the whole test suite in lanes (what ``make test`` and CI run), and say how long each took.

The suite's parts differ in what they need from a 2-core machine:

* Phase 1, the measuring tests (marked ``measures`` in tests/conftest.py), with no other work beside
  them, in two lanes: the end-to-end runs (supervisors, torchrun, benchmarks' quick modes), and the
  notebooks executed by papermill (chapters and labs). A notebook's runs wait on launches, sleeps
  and emulated storage as much as on the cores, so the two lanes share the machine well; every
  assertion in them is a ratio measured in one run or a model bound, which holds beside two busy
  loops as well (README: make test is measured both ways).
* Phase 2, the tests that assert no time, side by side in three lanes: the rest (pure units,
  charts, docs, lab checks, layout, bad input), nbval on the committed chapters, and the browser
  tests (JupyterLab, the dashboard in Voila, the website).

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
NBVAL_ARGS = ["--nbval-lax", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]


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
    code: int | None = None


def phases(pytest_args: list[str]) -> list[list[Lane]]:
    py = [sys.executable, "-m", "pytest"]
    return [
        [
            Lane("measuring: runs", py + ["tests", "-m", "measures and not notebook_runs", *NOT_BROWSER, *pytest_args]),
            Lane("measuring: notebooks", py + ["tests", "-m", "measures and notebook_runs", *NOT_BROWSER, *pytest_args]),
        ],
        [
            Lane("browser", py + [*BROWSER_TESTS, *pytest_args]),
            Lane("the rest", py + ["tests", "-m", "not measures", *NOT_BROWSER, *pytest_args]),
            Lane("nbval", py + [*NBVAL_ARGS, *nbval_notebooks(), *pytest_args]),
        ],
    ]


def run_phase(lanes: list[Lane], folder: Path) -> None:
    """Start every lane of a phase, print each one's log when it ends, return when all have."""
    env = dict(os.environ, GOODPUTLAB_SMOKE="1")
    for i, lane in enumerate(lanes):
        lane.log = folder / f"lane-{lane.name.replace(' ', '_').replace(':', '')}-{i}.log"
        lane.started = time.monotonic()
        with open(lane.log, "wb") as out:
            lane.proc = subprocess.Popen(lane.args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    waiting = list(lanes)
    while waiting:
        for lane in list(waiting):
            if lane.proc.poll() is None:
                continue
            lane.code, lane.seconds = lane.proc.returncode, time.monotonic() - lane.started
            waiting.remove(lane)
            print(f"\n=== {lane.name}: exit {lane.code} in {lane.seconds:.0f} s ===", flush=True)
            sys.stdout.write(lane.log.read_text(errors="replace"))
            sys.stdout.flush()
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print each lane's command, run nothing")
    p.add_argument("pytest_args", nargs="*", help="passed to every pytest (after --)")
    args = p.parse_args(argv)
    plan = phases(args.pytest_args)
    if args.dry_run:
        for n, lanes in enumerate(plan, 1):
            for lane in lanes:
                print(f"phase {n}, {lane.name}: {shlex.join(lane.args)}")
        return 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="goodputlab-test-lanes-") as tmp:
        times = []
        for n, lanes in enumerate(plan, 1):
            start = time.monotonic()
            run_phase(lanes, Path(tmp))
            times.append(time.monotonic() - start)
    total = time.monotonic() - t0
    parts = "; ".join(
        f"phase {n} in {times[n - 1]:.0f} s (" + ", ".join(f"{lane.name} exit {lane.code} in {lane.seconds:.0f} s" for lane in lanes) + ")"
        for n, lanes in enumerate(plan, 1)
    )
    print(f"\nmake test: {parts}; total {int(total // 60)} min {int(total % 60)} s", flush=True)
    return 0 if all(lane.code == 0 for lanes in plan for lane in lanes) else 1


if __name__ == "__main__":
    sys.exit(main())
