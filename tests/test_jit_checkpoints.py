"""Just-in-time checkpoints (``--ckpt-jit``, goodputlab/distributed/jit.py): a real job of two ranks
under torchrun, one rank SIGKILLed between two periodic checkpoints; the healthy rank saves the state
it holds before the group restarts, and the restart resumes from the step of the failure."""

from __future__ import annotations

import json
import subprocess

from goodputlab.measure.events import read_events


def test_a_restart_resumes_from_the_step_of_the_failure_not_the_last_periodic_checkpoint(tmp_path, cli, cli_env):
    out = tmp_path / "run"
    done = subprocess.run([*cli, "run", "--nproc", "2", "--threads", "1", "--steps", "80", "--ckpt-every", "40",
                           "--ckpt-jit", "--kill-at-steps", "60", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, env=cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] and summary["failures"] == 1
    restored = [e for e in read_events(out / "events.jsonl") if e["kind"] == "restored"]
    # the periodic checkpoint is at step 40; the just-in-time one at the step the survivor had done
    assert restored and all(e["ckpt_step"] >= 60 and e["written_by"] == 1 for e in restored), restored
    assert summary["steps_executed"] <= 80 + 5  # at most the steps in flight were run twice, not 20
    ranks = [read_events(p) for p in sorted((out / "ranks").glob("events-rank*.jsonl"))]
    jit = [e for evs in ranks for e in evs if e["kind"] == "ckpt_commit" and e.get("jit")]
    assert len(jit) == 1 and jit[0]["ckpt_step"] == restored[0]["ckpt_step"]  # one healthy rank saved
