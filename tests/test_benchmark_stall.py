"""benchmarks/checkpoint_stall.py --quick runs, prints its table and finds no leak."""

import json
import subprocess
import sys

from conftest import ROOT


def test_stall_benchmark_quick(tmp_path, cli_env):
    out = tmp_path / "stall.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "checkpoint_stall.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, env=cli_env, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for word in ("memcpy floor", "blocking ms", "x floor", "peak extra MB", "consecutive saves", "aims"):
        assert word in r.stdout
    results = json.loads(out.read_text())
    rows = {row["strategy"]: row for row in results["states"]["small"]["rows"]}
    assert set(rows) == {"sync", "async", "dcp", "memory"}
    assert rows["async"]["blocking_s"] < rows["sync"]["blocking_s"]  # a memcpy against a write + fsync
    assert rows["memory"]["blocking_s"] < rows["sync"]["blocking_s"]
    assert rows["memory"]["restore_s"] < rows["sync"]["restore_cold_s"]
    assert rows["async"]["peak_extra_bytes"] > 0.5 * results["states"]["small"]["floor"]["state_bytes"]  # its buffers
    for leak in results["leaks"]:
        assert leak["start"]["fds"] == leak["end"]["fds"], leak
        assert leak["start"]["threads"] == leak["end"]["threads"], leak
        assert leak["end"]["rss"] - leak["start"]["rss"] < 16e6, leak
    assert len(results["aims"]) == 3
