"""benchmarks/gpu_suite.py runs where CI runs (no GPU: its CPU smoke), keeps going past a failed
stage, and compares every killed strategy with the failure-free reference run."""

import json
import subprocess
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_suite  # noqa: E402


def test_a_failed_stage_is_recorded_and_the_suite_goes_on(tmp_path, capsys):
    results: dict = {}
    save_to = tmp_path / "gpu.json"

    def broken():
        raise RuntimeError("no such kernel")

    assert gpu_suite.guarded(results, "stall", save_to, broken) is None
    assert gpu_suite.guarded(results, "runs", save_to, lambda x: {"sync": x}, 7) == {"sync": 7}
    assert results["errors"] == {"stall": "RuntimeError: no such kernel"}
    assert results["runs"] == {"sync": 7}
    assert set(results["stage_seconds"]) == {"stall", "runs"}
    assert json.loads(save_to.read_text())["runs"] == {"sync": 7}  # written after every stage
    assert "[stall] FAILED: RuntimeError: no such kernel" in capsys.readouterr().out


def test_budget_skips_a_stage_that_does_not_fit(capsys):
    budget = gpu_suite.Budget(5.0)
    assert budget.allows("small", 1.0)
    assert not budget.allows("pipeline", 60.0)
    assert "[pipeline] SKIPPED" in capsys.readouterr().out


def test_cpu_smoke_runs_killed_strategy_against_reference(tmp_path, cli_env):
    out = tmp_path / "gpu.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--cpu-smoke", "--stages", "runs",
         "--strategies", "memory", "--json", str(out)],
        capture_output=True, text=True, env=cli_env, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "These are NOT GPU figures" in r.stdout
    results = json.loads(out.read_text())
    assert results["gpu"] is False and "errors" not in results
    assert set(results["runs"]) == {"memory"}
    memory = results["runs"]["memory"]
    assert memory["failures"] == 1 and memory["completed"]
    assert memory["restored_from"] == ["memory@10"]
    assert memory["same_as_reference"] and results["bit_exact"] is True
    assert "stall" not in results and "pipeline" not in results  # --stages chose the runs alone


def test_bad_stage_or_strategy_exits_2_naming_it(cli_env):
    for flag, value, allowed in (("--stages", "stall,gpu", "stall, runs, pipeline"),
                                 ("--strategies", "sync,zip", "sync, async, dcp, memory"),
                                 ("--run-steps", "8", "at least 16")):
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), flag, value],
                           capture_output=True, text=True, env=cli_env, timeout=60)
        assert r.returncode == 2
        assert f"{flag} {value}" in r.stderr and allowed in r.stderr
        assert "Traceback" not in r.stderr
