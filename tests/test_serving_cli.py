"""``goodputlab serve-bench`` as a user runs it: one-line errors, real measurements, no orphans."""

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from goodputlab import cli


def run_cli(cli_cmd, env, *args, timeout=180):
    return subprocess.run([*cli_cmd, "serve-bench", *args], capture_output=True, text=True, env=env, timeout=timeout)


SLOS = ["--ttft-ms", "250", "--tpot-ms", "25"]


@pytest.mark.parametrize(
    "args,flag,value",
    [
        (["--rate", "0", *SLOS], "--rate", "0"),
        (["--rate", "-3", *SLOS], "--rate", "-3"),
        ([*SLOS], "--rate", "missing"),  # neither --rate nor --search
        (["--rate", "5", "--ttft-ms", "0", "--tpot-ms", "25"], "--ttft-ms", "0"),
        (["--rate", "5", "--ttft-ms", "250", "--tpot-ms", "nan"], "--tpot-ms", "nan"),
        (["--rate", "5", *SLOS, "--mode", "split"], "--mode", "split"),
        (["--rate", "5", *SLOS, "--mix", "huge"], "--mix", "huge"),
        (["--rate", "5", *SLOS, "--mix", "200-250/30-40"], "--mix", "200-250/30-40"),  # longer than the context
        (["--rate", "5", *SLOS, "--model", "giant"], "--model", "giant"),
        (["--rate", "5", *SLOS, "--duration", "0"], "--duration", "0"),
        (["--rate", "5", *SLOS, "--seed", "-1"], "--seed", "-1"),
        (["--rate", "5", *SLOS, "--max-batch", "1"], "--max-batch", "1"),
        (["--search", *SLOS, "--target", "1.5"], "--target", "1.5"),
        (["--search", *SLOS, "--tolerance", "0"], "--tolerance", "0"),
        (["--search", *SLOS, "--max-probes", "0"], "--max-probes", "0"),
        (["--search", "--rate", "300", *SLOS], "--rate", "300"),  # above --max-rate
        (["--rate", "fast", *SLOS], "--rate", "fast"),  # argparse's own check
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_flag(args, flag, value, capsys):
    try:
        code = cli.main(["serve-bench", *args])
    except SystemExit as e:  # argparse's errors
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert flag in lines[0] and value in lines[0] and "Traceback" not in err


def test_bad_input_from_the_installed_command(cli, cli_env):
    r = run_cli(cli, cli_env, "--rate", "5", *SLOS, "--mode", "both", timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "goodputlab serve-bench: error: --mode both is invalid; allowed: colocated or disaggregated"


def test_one_rate_as_json(cli, cli_env):
    r = run_cli(cli, cli_env, "--rate", "40", "--ttft-ms", "5000", "--tpot-ms", "500", "--model", "tiny",
                "--mix", "8-40/4-16", "--duration", "0.5", "--mode", "disaggregated", "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = json.loads(r.stdout)
    assert out["mode"] == "disaggregated" and out["rate_rps"] == 40 and out["duration_s"] == 0.5
    assert out["requests"] >= 10 and out["attainment"] == 1.0  # SLOs loose enough for any machine
    assert 0 < out["ttft_p90_ms"] < 5000 and 0 < out["tpot_p90_ms"] < 500


def test_search_prints_the_probes_and_the_goodput(cli, cli_env):
    r = run_cli(cli, cli_env, "--search", "--ttft-ms", "5000", "--tpot-ms", "500", "--model", "tiny",
                "--mix", "8-40/4-16", "--duration", "0.3", "--rate", "16", "--max-rate", "64")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    probes = [line.split() for line in lines if re.match(r"^\s+\d+\s+[\d.]+\s+[\d.]+\s+\d+\s+[\d.]+\s+(yes|no)$", line)]
    assert [(p[1], p[-1]) for p in probes] == [("16", "yes"), ("32", "yes"), ("64", "yes")]
    assert "goodput_rps  64  (at least)" in lines
    for key in ("attainment", "ttft_p90_ms", "tpot_p90_ms", "requests"):
        assert any(line.startswith(key) for line in lines), key
    assert "3 rates measured" in r.stdout and "req/s for" in r.stderr  # a progress line per probe


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid``."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(p.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start_serving(cli_cmd, env):
    """A long serve-bench run, returned once its two workers are serving."""
    proc = subprocess.Popen([*cli_cmd, "serve-bench", "--rate", "20", *SLOS, "--model", "tiny", "--duration", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 90
    for line in proc.stderr:  # "starting...", then the server's description once every worker is ready
        if line.startswith("colocated:"):
            break
        if time.monotonic() > deadline:
            break
    workers = _children(proc.pid)
    assert len(workers) == 2, workers
    return proc, workers


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to look for orphans")
def test_ctrl_c_stops_the_server_and_leaves_no_process(cli, cli_env):
    proc, workers = _start_serving(cli, cli_env)
    time.sleep(0.3)  # mid-measurement
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    assert not any(_alive(w) for w in workers)


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to look for orphans")
def test_workers_die_with_a_killed_parent(cli, cli_env):
    proc, workers = _start_serving(cli, cli_env)
    proc.kill()  # SIGKILL: no handler runs; the kernel's parent-death signal must take the workers
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
