"""benchmarks/serving.py --quick runs both modes' goodput searches for real and prints them side by side."""

import re
import subprocess
import sys

from conftest import ROOT


def test_quick_serving_benchmark_prints_both_searches(cli_env):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "serving.py"), "--quick"],
                       capture_output=True, text=True, env=cli_env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"machine: \d+ cores, (no GPU|GPU) .*torch \S+", out)
    assert re.findall(r"^search \d: (\w+)", out, re.M) == ["colocated", "disaggregated"]
    probes = re.findall(r"^\s+([\d.]+)\s+[\d.]+\s+(\d+)\s+([\d.]+)\s+\S+\s+\S+\s+(yes|no)$", out, re.M)
    assert len(probes) >= 2 and all(int(n) >= 10 for _, n, _, _ in probes)
    assert all((float(att) >= 0.9) == (meets == "yes") for _, _, att, meets in probes)
    means = dict(re.findall(r"^(colocated|disaggregated)\s+[\d., ]+?\s+([\d.]+)(?:\s|$)", out, re.M))
    assert set(means) == {"colocated", "disaggregated"}
    assert "disaggregated / colocated goodput:" in out
    assert "0 prefills kept running requests waiting" in out  # the disaggregated line of the interference summary
