"""benchmarks/report_scale.py and benchmarks/vs_google_goodput.py run for real, small."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from conftest import ROOT


def test_report_scale_runs_a_small_recording_end_to_end():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "report_scale.py"), "--steps", "20000", "--rounds", "1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for row in ("read (floor)", "json.loads loop", "report --json", "report, JSON lines", "reader, records",
                "reader, JSON lines"):
        assert row in out
    assert "failures 1" in out and "buckets sum to the wall time: True" in out
    assert "the report of the step records is the report of the JSON lines: True" in out
    assert "update after    100 new events" in out  # the first size
    follow = out[out.index("--follow on the step records:"):]  # each form, its new events written in its form
    assert follow.index("--follow on the JSON lines:") > 0 and follow.count("update after    100 new events") == 2


def test_the_google_comparison_installs_nothing_and_explains_every_difference():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vs_google_goodput.py"), "--steps", "500", "--sizes"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    if importlib.util.find_spec("ml_goodput_measurement") is None:
        assert "not installed" in r.stdout and "Nothing was installed" in r.stdout
        return
    out = r.stdout
    assert "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION" in out and "WASTED_PROGRESS_FROM_DISRUPTION" in out
    for category in ("productive", "data_wait", "lost_work", "restart", "startup", "other"):
        assert f"  {category}: " in out
    assert "not explained by the definitions above" not in out  # every difference accounted for


def test_two_reports_agree_to_the_last_bits_of_their_floats_and_exactly_elsewhere():
    spec = importlib.util.spec_from_file_location("report_scale", ROOT / "benchmarks" / "report_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # what a run beside two busy loops gave: a bucket summed over runs cut at other places
    a = {"buckets": {"data_wait": 0.08276140000000089, "other": 0.10165200000000002}, "failures": 1, "completed": True}
    b = {"buckets": {"data_wait": 0.0827614000000009, "other": 0.10165200000000003}, "failures": 1, "completed": True}
    same, worst = mod.same_report(a, b)
    assert same and 0 < worst < 1e-15
    assert mod.same_report(a, a) == (True, 0.0)
    assert not mod.same_report(a, {**b, "failures": 2})[0]
    assert not mod.same_report(a, {**b, "completed": False})[0]
    assert not mod.same_report(a, {"buckets": {**b["buckets"], "data_wait": 0.0828}, "failures": 1, "completed": True})[0]
    assert not mod.same_report(a, {k: v for k, v in b.items() if k != "failures"})[0]
    assert not mod.same_report([1.0, 2.0], [1.0])[0]
