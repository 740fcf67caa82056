"""Shared fixtures: real runs are expensive (each worker imports torch), so the
reference runs that several tests inspect are made once per session."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import read_events
from goodputlab.engine.supervisor import run_supervised

ROOT = Path(__file__).resolve().parent.parent

# The stop-signal tests send Ctrl-C and SIGHUP to real processes. A suite started in the background
# (`cmd &` in a script, `nohup`) inherits SIGINT and SIGHUP ignored, and so would every process it
# starts: the tests would then see runs that cannot be interrupted. Give them the default actions.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_DFL)


def real_run(out: Path, **settings):
    """Run a real supervised experiment; returns (summary, events)."""
    summary = run_supervised(RunConfig(**settings), out)
    return summary, read_events(out / "events.jsonl")


# One experiment, two ways: uninterrupted, and killed three times (with a two-worker
# prefetching input pipeline, so batches are in flight when the kills land).
RESUME_SETTINGS = dict(steps=90, ckpt_every=20, seed=7, workers=2, prefetch=2, restart_delay=0.1)
KILLS = (25, 50, 72)


@pytest.fixture(scope="session")
def clean_run(tmp_path_factory):
    return real_run(tmp_path_factory.mktemp("clean"), **RESUME_SETTINGS)


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory):
    return real_run(tmp_path_factory.mktemp("killed"), kill_at_steps=KILLS, **RESUME_SETTINGS)


@pytest.fixture(scope="session")
def cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@pytest.fixture(scope="session")
def cli():
    """The ``goodputlab`` command as a user runs it (the installed entry point when there is one)."""
    exe = Path(sys.executable).parent / "goodputlab"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "goodputlab.cli"]


# --- a browser for the website's tests ------------------------------------------------------------
#: Debian's Chromium (`.ci/run` installs it)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium (playwright) for a module's tests of static pages. Without one the test
    is skipped, unless ``GOODPUTLAB_REQUIRE_BROWSER=1`` (CI), where a missing browser is a failure."""
    if CHROMIUM is None:
        if os.environ.get("GOODPUTLAB_REQUIRE_BROWSER") == "1":
            pytest.fail("GOODPUTLAB_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield b
        b.close()


# --- the suite's own torch threads -------------------------------------------------------------
def pytest_runtest_setup(item):
    """The tests' own process trains and saves tiny models in-process with one torch thread, as the
    runs' workers do (goodputlab/training/threads.py): a second thread only adds synchronisation, and
    beside other work its spin-waits make a tiny step tenfold slower. Runs, kernels and benchmarks
    choose their own (their tests pass ``--threads`` or read the run's choice)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


# --- which tests measure ------------------------------------------------------------------------
#: Files whose tests assert what real runs measured (their times, their ledger, their bits): `make test`
#: runs these in jobs of their own, apart from every notebook under papermill (any test that uses
#: ``executed_notebook``) and the others (pure units, charts, docs, lab checks, layout, bad input)
#: (tools/run_tests.py). A new file that trains and asserts what it measured belongs here.
MEASURING_FILES = frozenset({
    "test_torchft.py", "test_auto_interval.py", "test_benchmark_pipeline.py", "test_benchmark_serving.py", "test_benchmark_stall.py",
    "test_cheap_checkpoints.py", "test_cli.py", "test_distributed_runs.py", "test_efficiency_cli.py",
    "test_emulated_nodes.py", "test_scaling_runs.py",
    "test_efficiency_sweep.py", "test_gpu_suite.py", "test_measure.py", "test_pipeline_resume.py",
    "test_pipeline_runs.py", "test_recorder.py", "test_recovery.py", "test_run_safety.py", "test_serving_cli.py",
    "test_serving_server.py", "test_strategies.py", "test_supervisor.py", "test_torture.py",
    "test_validate_theory.py", "test_widgets.py", "test_widgets_checkpoints.py", "test_widgets_dashboard.py",
    "test_widgets_pipeline.py", "test_widgets_recovery_runs.py", "test_widgets_serving.py",
})  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """Mark ``measures`` (see :data:`MEASURING_FILES`), and ``notebook_runs`` (a notebook executed by
    papermill): `make test` (tools/run_tests.py) runs the notebooks, the other measuring tests and
    the rest in jobs of their own."""
    for item in items:
        runs_notebooks = "executed_notebook" in getattr(item, "fixturenames", ())
        if runs_notebooks:
            item.add_marker(pytest.mark.notebook_runs)
        if item.path.name in MEASURING_FILES or runs_notebooks:
            item.add_marker(pytest.mark.measures)


# --- notebooks --------------------------------------------------------------------------------
NOTEBOOKS = sorted(
    str(p.relative_to(ROOT))
    for folder in ("book", "labs")
    for p in (ROOT / folder).rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts  # book/_build: the website
)


def smoke_parameters(rel: str) -> dict:
    """What papermill injects into a notebook: ``SMOKE=True``, and for a lab's exercise notebook that
    offers it, ``USE_RECORDED=True``. Its solution trains for real, and every check passes on that;
    the exercise shows that the starter answers get hints, which the recordings show as well, and it
    runs the recorded path a Binder or a slow laptop takes (each recorded run is a real run, recorded)."""
    parameters = {"SMOKE": True}
    if rel.startswith("labs/") and rel.count("/") == 1:
        nb = json.loads((ROOT / rel).read_text())
        cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
        if "USE_RECORDED" in "".join(cell["source"]):
            parameters["USE_RECORDED"] = True
    return parameters


@pytest.fixture(scope="session")
def executed_notebook(tmp_path_factory):
    """Execute a notebook (path relative to the repo) once with papermill in SMOKE mode
    (:func:`smoke_parameters`).

    Returns ``(notebook, metrics, seconds)``; ``metrics`` is what its cells passed to
    ``goodputlab.notebook.record_metrics``. Where ``GOODPUTLAB_EXECUTED_DIR`` is set (``make test``
    sets it), the executed copy is saved there, and it serves every pytest of that ``make test``:
    the first to ask for a notebook executes it while it holds a lock on it, the others wait for the
    lock and read that execution (tools/run_tests.py runs the notebooks' tests in several jobs), and
    nbval compares its outputs instead of executing the chapter again (tools/nbval_shared.py).
    """
    import fcntl
    import time

    import nbformat
    import papermill as pm
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    from nbval_shared import ENV, save_execution, saved_name  # tools/nbval_shared.py

    from goodputlab.notebook import read_metrics

    cache = {}

    def run(rel: str) -> tuple[Path, float]:
        src = ROOT / rel
        out = tmp_path_factory.mktemp("notebooks") / src.name
        t = time.monotonic()
        pm.execute_notebook(
            str(src), str(out), parameters=smoke_parameters(rel), cwd=str(src.parent),
            kernel_name="python3", progress_bar=False,
        )
        seconds = time.monotonic() - t
        save_execution(rel, out)  # nbval compares this execution's outputs (tools/nbval_shared.py)
        return out, seconds

    def shared(rel: str, folder: Path) -> tuple[Path, float]:
        """The execution every pytest of this ``make test`` shares: made under the notebook's lock
        by the first to ask (its seconds beside it, written last), read by the others."""
        folder.mkdir(parents=True, exist_ok=True)
        saved, timing = folder / saved_name(rel), folder / (saved_name(rel) + ".seconds")
        with open(folder / (saved_name(rel) + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
            if not timing.exists():  # no execution yet, or the one before failed
                _, seconds = run(rel)
                timing.write_text(repr(seconds))
            return saved, float(timing.read_text())

    def execute(rel: str):
        if rel not in cache:
            folder = os.environ.get(ENV)
            out, seconds = shared(rel, Path(folder)) if folder else run(rel)
            nb = nbformat.read(out, as_version=4)
            cache[rel] = (nb, read_metrics(nb), seconds)
        return cache[rel]

    return execute


def chart_rows(chart) -> list[dict]:
    """Every data row of an Altair chart or Vega-Lite spec: named datasets (where Altair moves
    inline data) and inline values in any layer or concat member."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    rows = [row for values in spec.get("datasets", {}).values() for row in values]

    def collect(node):
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and "values" in data:
                rows.extend(data["values"])
            for key, value in node.items():
                if key not in ("data", "datasets"):
                    collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(spec)
    return rows


def widget_views(notebook) -> list[dict]:
    """The outputs of an executed notebook that display a widget (charts, panels, progress bars)."""
    return [
        o
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]


def committed_warnings(path: Path) -> list[str]:
    """The warnings a committed notebook's outputs hold (a ``RestartCostWarning``, any ``...Warning:`` line)."""
    nb = json.loads(Path(path).read_text())
    found = []
    for c in nb["cells"]:
        for o in c.get("outputs", []) if c["cell_type"] == "code" else []:
            text = "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
            found += [line for line in text.splitlines() if "Warning:" in line or "RestartCostWarning" in line]
    return found
