"""The light install: ``pip install goodputlab`` (no extras) gives the recorder, the report, the theory and the
command line with numpy alone (issue 46, item 6).

The package is installed for real into a fresh virtual environment (from a copy of its sources, so the
build writes nothing into the repository; pip reaches only the package registries and its cache). There a
job is recorded, killed with SIGKILL, restarted and reported, and ``goodputlab claim`` runs, while
``import torch`` fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

HEAVY = {"torch", "altair", "vl-convert-python", "ipywidgets", "anywidget", "tqdm", "jsonschema", "pandas"}

JOB = """
import os, signal, sys
import goodputlab as gl

run_dir, kill_at = sys.argv[1], int(sys.argv[2])
rec = gl.Recorder(run_dir, total_steps=12)
with rec.checkpoint_restore():
    start = int(open(os.path.join(run_dir, "ckpt")).read()) if os.path.exists(os.path.join(run_dir, "ckpt")) else 0
for step in range(start, 12):
    for batch in rec.data(iter([step])):
        pass
    with rec.step(step) as s:
        sum(i * i for i in range(20_000))
        s.loss = 1.0 / (step + 1)
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    if step % 4 == 3:
        with rec.checkpoint_save(step):
            with open(os.path.join(run_dir, "ckpt"), "w") as f:
                f.write(str(step + 1))
rec.close()
"""


def _copy_sources(dst: Path) -> Path:
    dst.mkdir()
    shutil.copytree(ROOT / "goodputlab", dst / "goodputlab", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, dst / name)
    return dst


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    """A fresh virtual environment with ``pip install goodputlab`` (no extras) in it: its python."""
    base = tmp_path_factory.mktemp("light")
    src = _copy_sources(base / "src")
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    python = base / "venv" / "bin" / "python"
    r = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(src)],
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return python


@pytest.mark.timeout(1200)
def test_the_light_install_has_numpy_and_no_torch(light_venv):
    r = subprocess.run([str(light_venv), "-c", "import torch"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "No module named 'torch'" in r.stderr
    listed = subprocess.run([str(light_venv), "-m", "pip", "list", "--format", "json"], capture_output=True,
                            text=True, timeout=120, check=True)  # fmt: skip
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "numpy" in names and "goodputlab" in names
    assert not names & HEAVY, names & HEAVY
    typed = subprocess.run([str(light_venv), "-c", "import goodputlab, pathlib; "
                            "print((pathlib.Path(goodputlab.__file__).parent / 'py.typed').is_file())"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert typed.stdout.strip() == "True", typed.stderr


@pytest.mark.timeout(1200)
def test_the_light_install_records_a_killed_job_reports_it_and_claims(light_venv, tmp_path):
    run_dir = tmp_path / "job"
    bin_dir = light_venv.parent
    killed = subprocess.run([str(light_venv), "-c", JOB, str(run_dir), "5"], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    resumed = subprocess.run([str(light_venv), "-c", JOB, str(run_dir), "-1"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    report = subprocess.run([str(bin_dir / "goodputlab"), "report", str(run_dir), "--json"], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["completed"] and summary["failures"] == 1 and summary["attempts"] == 2
    assert summary["steps_executed"] == 12 + 2  # steps 4 and 5 ran twice (the checkpoint after step 3)
    assert summary["buckets"]["lost_work"] > 0
    assert sum(summary["buckets"].values()) == pytest.approx(summary["wall_s"], rel=1e-9)
    text = subprocess.run([str(bin_dir / "goodputlab"), "report", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and "goodput" in text.stdout, text.stderr
    claim = subprocess.run([str(bin_dir / "goodputlab"), "claim", "--lever", "memory", "--before", "85", "--after", "95",
                            "--gpus", "8192", "--json"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert claim.returncode == 0, claim.stderr
    assert "plausible" in json.loads(claim.stdout)
    optimal = subprocess.run([str(bin_dir / "goodputlab"), "optimal", "--save-s", "60", "--mtbf-s", "3600"],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert optimal.returncode == 0 and optimal.stdout, optimal.stderr
    nopandas = subprocess.run([str(light_venv), "-c", f"import goodputlab as gl; gl.load_run({str(run_dir)!r}).to_pandas()"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert nopandas.returncode == 1 and "to_pandas() needs pandas" in nopandas.stderr.splitlines()[-1]
    run = subprocess.run([str(bin_dir / "goodputlab"), "run", "--steps", "5", "--out", str(tmp_path / "lab")],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2 and run.stderr == ("goodputlab run: error: a training run needs torch, which `pip install "
                                                  "goodputlab` leaves out: pip install 'goodputlab[lab]'\n")
    # the CLI loaded none of the heavy packages for these commands
    loaded = subprocess.run([str(light_venv), "-c", "import sys, goodputlab.cli as c\n"
                             f"c.main(['report', {str(run_dir)!r}])\n"
                             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                             "('torch', 'altair', 'ipywidgets', 'anywidget', 'vl_convert', 'pandas')))"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert loaded.returncode == 0 and loaded.stdout.strip().endswith("[]"), loaded.stdout + loaded.stderr
