"""The Hugging Face and Lightning callbacks, with the real libraries on CPU (issue 46, item 2).

Each test runs the example in examples/ for real: a tiny model built from its config (nothing is
downloaded), trained in a child process that SIGKILLs itself when a step begins, then run again, resuming
from its newest checkpoint. The report must book the saves as ``checkpoint_save``, count the failure, book
as ``lost_work`` exactly the steps trained twice, and close (its buckets add up to its wall time).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("transformers", reason="the test extra: pip install 'goodputlab[test]'")
pytest.importorskip("lightning", reason="the test extra: pip install 'goodputlab[test]'")

STEPS, SAVE_EVERY, KILL_AT = 24, 8, 19  # killed when step 19 begins: steps 16..18 completed past the checkpoint


def _train(example: str, run_dir, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / example), "--run-dir", str(run_dir),
                           "--steps", str(STEPS), "--save-every", str(SAVE_EVERY), *extra],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def _report(run_dir, cli, cli_env) -> tuple[dict, list[dict]]:
    r = subprocess.run([*cli, "report", str(run_dir), "--json", "--steps-csv", str(run_dir / "steps.csv")],
                       capture_output=True, text=True, env=cli_env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    import csv

    return json.loads(r.stdout), list(csv.DictReader((run_dir / "steps.csv").open()))


def _check_killed_and_resumed(summary: dict, rows: list[dict]) -> None:
    assert summary["completed"] and summary["attempts"] == 2 and summary["failures"] == 1
    assert summary["steps_completed"] == STEPS
    # saves booked as saves (not other): the checkpoints at 8 and 16, then 24 after the restart
    assert summary["checkpoints"] >= 3 and summary["buckets"]["checkpoint_save"] > 0
    assert summary["buckets"]["checkpoint_restore"] > 0
    # lost work: exactly the steps trained twice (16, 17, 18 completed, 19 begun; the restart resumed at 16)
    first = {int(r["step"]) for r in rows if r["attempt"] == "0"}
    second = {int(r["step"]) for r in rows if r["attempt"] == "1"}
    twice = first & second
    assert twice == set(range(2 * SAVE_EVERY, KILL_AT + 1)) and min(second) == 2 * SAVE_EVERY
    assert summary["steps_executed"] == STEPS + len(twice)
    lost = sum(float(r["compute_s"]) for r in rows if r["survived"] == "False")
    assert not any(r["survived"] == "False" for r in rows if r["attempt"] == "1")
    assert {int(r["step"]) for r in rows if r["survived"] == "False"} == twice
    assert summary["buckets"]["lost_work"] == pytest.approx(lost, rel=1e-6)
    # closure: every second of the wall clock booked once
    assert sum(summary["buckets"].values()) == pytest.approx(summary["wall_s"], rel=0.01)
    assert summary["buckets"]["restart"] > 0 and summary["buckets"]["data_wait"] > 0


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("example", ["hf_trainer.py", "lightning_trainer.py"], ids=["hugging-face", "lightning"])
def test_a_trainer_killed_and_resumed(example, tmp_path, cli, cli_env):
    run_dir = tmp_path / "job"
    killed = _train(example, run_dir, "--kill-at", str(KILL_AT), "--eval-every", "8")
    assert killed.returncode == -9, killed.stderr[-3000:]
    resumed = _train(example, run_dir, "--eval-every", "8")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary, rows = _report(run_dir, cli, cli_env)
    _check_killed_and_resumed(summary, rows)
    assert summary["custom"]["eval"] > 0  # the evaluations, as custom badput
    if example == "lightning_trainer.py":
        assert summary["final_loss"] is not None  # Lightning hands the step's loss to the callback
