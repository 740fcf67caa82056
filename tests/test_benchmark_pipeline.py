"""benchmarks/pipeline.py --quick runs real experiments and prints the sweep table."""

import re
import subprocess
import sys

from conftest import ROOT


def test_quick_pipeline_benchmark_prints_its_table(cli_env, tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "pipeline.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, env=cli_env, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "calibration: S = " in out and "H = " in out
    assert re.search(r"L ms\s+W\s+p\s+supply\s+S ms\s+measured\s+a priori\s+err pp\s+replay", out)
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\.\d\s+\d\s+[\d-]\s", line)]
    assert [(row[1], row[2]) for row in rows] == [("0", "-"), ("1", "2"), ("4", "4")]
    measured = [float(row[5].rstrip("%")) for row in rows]
    replay = [float(row[8].rstrip("%")) for row in rows]
    # no workers: every step waits for a storage latency of twice the step the calibration measured
    # (two thirds of the wall on a quiet machine); a neighbour that stretches the steps after the
    # calibration shrinks that share (47.5% beside two busy loops in make test), the replay of the
    # run's own times does not miss it
    assert measured[0] > 30 and abs(measured[0] - replay[0]) < 10
    assert measured[0] > measured[2] + 20  # four workers four batches ahead hide most of it
    assert "model error, max over the sweep: replay" in out and "step time drift" in out
    assert len(list(tmp_path.iterdir())) == 6  # compute-only, hand-off, 3 sweep runs, compute-only again
