"""The theory-validation benchmark runs (its --quick variant) and prints what it promises."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


def test_validate_theory_quick(tmp_path, cli_env):
    out = tmp_path / "validate.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "validate_theory.py"), "--quick", "--json", str(out)],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for expected in ("ckpt every", "measured", "largest error, model (expected)", "largest error, model (replay)",
                     "best interval (steps): measured", "Young", "Daly", "CPU cores"):
        assert expected in text
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [r["ckpt_every"] for r in rows] == list(result["plan"]["intervals"])
    assert len(result["runs"]) == len(rows) * len(result["plan"]["seeds"])
    timings = result["timings"]
    assert timings["compute_s"] > 0 and timings["launch_s"] > 0.3 and timings["save_s"] > 0
    for r in rows:
        assert 0 < r["measured"] < 1 and 0 < r["expected"] < 1
        assert abs(r["replay_error_pts"]) < 8  # same failure times: mechanics, not luck
        assert abs(r["z"]) < 4
