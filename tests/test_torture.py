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
    assert result["bad_resumes"] == 0  # no resume from a damaged checkpoint
    assert result["leftover_tmp_files"] == 0  # no temporary file, no RAM tier left
    assert result["orphan_processes"] == 0  # no process outlives its run
    assert r.returncode == 0
