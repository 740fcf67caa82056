"""benchmarks/torture.py, bounded: every checkpoint strategy killed at random moments (inside saves and
restores among them), checkpoint files damaged between attempts; nothing may be lost."""

import json
import subprocess
import sys

from conftest import ROOT


def test_torture_loses_nothing(cli_env):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "torture.py"), "--kills", "8", "--damage-prob", "1", "--json"],
        capture_output=True, text=True, env=cli_env, timeout=600,
    )
    result = json.loads(r.stdout)
    runs = {run["strategy"]: run for run in result["runs"]}
    assert set(runs) == {"sync", "async", "dcp", "memory"}, r.stderr
    for name, run in runs.items():
        assert run["returncode"] == 0, (name, run["stderr_tail"])
        assert run["kills"] >= 1 and run["failures_recovered"] >= run["kills"], (name, run)
    assert result["kills"] >= 6
    assert result["kills_during_save"] + result["kills_during_restore"] >= 1
    assert result["damaged_files"] >= 1
    assert result["bit_exact"] is True  # every run ends with the failure-free final_state_sha256
    bad = {name: run["bad_resume_details"] for name, run in runs.items() if run["bad_resume_details"]}
    assert result["bad_resumes"] == 0, bad  # no resume from a damaged checkpoint
    assert result["leftover_tmp_files"] == 0  # no temporary file, no RAM tier left
    assert result["orphan_processes"] == 0  # no process outlives its run
    assert r.returncode == 0


def _torture_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("torture", ROOT / "benchmarks" / "torture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bad_resume_counts_a_damage_done_before_the_restore_began():
    torture = _torture_module()
    events = [
        {"t": 5.0, "attempt": 1, "step": None, "kind": "restore"},
        {"t": 5.4, "attempt": 1, "step": None, "kind": "restored", "ckpt_step": 8, "source": "disk"},
    ]
    before = [{"t": 4.9, "step": 8, "tier": "disk", "file": "state.pt", "how": "flip"}]
    during = [{"t": 5.2, "step": 8, "tier": "disk", "file": "state.pt", "how": "flip"}]
    other = [{"t": 4.9, "step": 6, "tier": "disk", "file": "state.pt", "how": "flip"},
             {"t": 4.9, "step": 8, "tier": "memory", "file": "slot-0.data", "how": "flip"}]
    assert torture.bad_resumes(events, before) == 1
    assert torture.damaged_while_restoring(events, before) == 0
    # finished while the restore was reading: it may have read the file whole; counted apart
    assert torture.bad_resumes(events, during) == 0
    assert torture.damaged_while_restoring(events, during) == 1
    assert torture.bad_resumes(events, other) == 0
    # written again after the damage and before the restore: a good checkpoint
    rewritten = [{"t": 4.95, "attempt": 0, "step": 8, "kind": "ckpt_commit", "ckpt_step": 8, "tier": "disk"}, *events]
    assert torture.bad_resumes(rewritten, before) == 0
