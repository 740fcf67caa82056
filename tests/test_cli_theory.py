"""`goodputlab optimal` and `goodputlab simulate` as a user runs them: errors, --json, --help, examples."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shlex
import struct
import subprocess
import termios

import pytest

from goodputlab import theory
from goodputlab.cli import theory as cli_theory

from conftest import ROOT

SIM = ["simulate", "--devices", "64", "--device-mtbf-h", "2000", "--days", "3", "--interval-min", "20",
       "--save-s", "30", "--restart-s", "120", "--trials", "20"]


def run_cli(cli, env, *args, **kwargs):
    return subprocess.run([*cli, *args], capture_output=True, text=True, env=env, timeout=60, **kwargs)


def main_in_process(capsys, *args) -> subprocess.CompletedProcess:
    """``goodputlab ARGS`` through the command's own ``main`` in this process (the code the entry
    point runs; the entry point itself is run by the progress-bar tests below): exit code, stdout, stderr."""
    from goodputlab.cli import main

    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's own errors and --help
        code = e.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["goodputlab", *args], code, out, err)


def one_error_line(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and r.stdout == "", r.stderr
    return lines[0]


def test_optimal_json_has_the_inputs_and_every_optimum(capsys):
    assert cli_theory.main(["optimal", "--save-s", "60", "--mtbf-s", "10000", "--restart-s", "30", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inputs"] == {"save_s": 60.0, "mtbf_s": 10000.0, "restart_s": 30.0, "queue_s": 0.0}
    assert set(data["definitions"]) == {"goodput", "ettr"}
    young = data["optima"]["young"]
    assert young["interval_s"] == pytest.approx(theory.young_interval(60, 10000))
    assert young["daly_goodput"] == pytest.approx(theory.daly_goodput(young["interval_s"], 60, 30, 10000))
    assert young["first_order_goodput"] == pytest.approx(theory.expected_goodput(young["interval_s"], 60, 30, 10000))
    assert data["optima"]["daly"]["interval_s"] == pytest.approx(theory.daly_interval(60, 10000))
    assert data["optima"]["numeric"]["interval_s"] == pytest.approx(theory.optimal_interval_numeric(60, 30, 10000))


def test_optimal_warns_when_a_save_costs_more_than_the_mtbf(capsys):
    assert cli_theory.main(["optimal", "--save-s", "120", "--mtbf-s", "60"]) == 0
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()  # one line, beside the table
    assert line.startswith("goodputlab optimal: warning: a save (120 s (2m 0s)) costs more than the MTBF (60 s (1m 0s))")
    assert "Young (1974)" in out
    assert cli_theory.main(["optimal", "--save-s", "120", "--mtbf-s", "60", "--json"]) == 0
    assert "costs more than the MTBF" in json.loads(capsys.readouterr().out)["warning"]
    assert cli_theory.main(["optimal", "--save-s", "60", "--mtbf-s", "60"]) == 0  # equal: no warning
    assert capsys.readouterr().err == ""


def test_optimal_explains_its_goodput_and_ettr_columns(capsys):
    assert cli_theory.main(["optimal", "--save-s", "60", "--mtbf-s", "10000"]) == 0
    out = capsys.readouterr().out
    assert "first order: goodput 1 - save/interval - (interval/2 + restart)/MTBF" in out
    assert "Daly: Daly's (2006) complete model" in out
    assert "ETTR: effective training time ratio" in out and "goodput: productive compute" in out
    header = next(line for line in out.splitlines() if "interval" in line and "ETTR" in line)
    assert "goodput" in header  # both, side by side


def test_optimal_prints_ettr_beside_goodput_and_takes_a_queue(capsys):
    """Llama 3's rate with a 60 s save: no interval reaches 90% goodput, but ETTR does."""
    assert cli_theory.main(["optimal", "--save-s", "60", "--mtbf-s", str(theory.llama3_mtbf_s()), "--json"]) == 0
    numeric = json.loads(capsys.readouterr().out)["optima"]["numeric"]
    assert numeric["daly_goodput"] < 0.90 < numeric["daly_ettr"]
    assert cli_theory.main(["optimal", "--save-s", "60", "--mtbf-s", "10000", "--queue-s", "1000", "--json"]) == 0
    queued = json.loads(capsys.readouterr().out)["optima"]["numeric"]
    assert queued["daly_goodput"] == pytest.approx(theory.daly_goodput(queued["interval_s"], 60, 0, 10000) / 1.1)
    assert queued["first_order_ettr"] == pytest.approx(
        theory.first_order_ettr(queued["interval_s"], 0, 10000, queue_s=1000, save_s=60))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["optimal", "--save-s", "-1", "--mtbf-s", "100"],
         "goodputlab optimal: error: --save-s -1 is invalid; allowed: a finite number of seconds >= 0"),
        (["optimal", "--save-s", "60", "--mtbf-s", "0"],
         "goodputlab optimal: error: --mtbf-s 0 is invalid; allowed: a finite number of seconds > 0"),
        (["optimal", "--save-s", "1e400", "--mtbf-s", "100"],
         "goodputlab optimal: error: --save-s 1e400 is invalid; allowed: a finite number of seconds >= 0"),
        ([*SIM[:2], "x", *SIM[3:]],
         "goodputlab simulate: error: --devices 'x' is invalid; allowed: a whole number >= 1"),
        ([*SIM, "--trials", "2.5"],
         "goodputlab simulate: error: --trials '2.5' is invalid; allowed: a whole number >= 1"),
        ([*SIM, "--restore-s", "-0.50"],
         "goodputlab simulate: error: --restore-s -0.50 is invalid; allowed: a finite number of seconds >= 0"),
        ([*SIM, "--days", "0"], "goodputlab simulate: error: --days 0 is invalid; allowed: a number of days > 0"),
    ],
)
def test_errors_echo_the_value_as_typed_in_one_style(capsys, args, expected):
    assert one_error_line(main_in_process(capsys, *args)) == expected


def test_hot_spares_without_a_restart_time_says_what_to_add(capsys):
    line = one_error_line(main_in_process(capsys, *SIM, "--hot-spares", "2"))
    assert line.startswith("goodputlab simulate: error: --hot-spares 2 is invalid")
    assert "--spare-restart-s SECONDS" in line and "take over" in line
    assert "None" not in line and "hot_spares" not in line and "spare_restart_s" not in line


def test_help_shows_units_and_examples(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # the width a captured process gets
    sim_help = main_in_process(capsys, "simulate", "--help").stdout
    for shown in ("--devices N", "--device-mtbf-h HOURS", "--days DAYS", "--interval-min MINUTES", "--save-s SECONDS",
                  "--trials N", "--data-stall-fraction SHARE"):
        assert shown in sim_help
    assert not re.search(r"--[a-z-]+ [A-Z]+_[A-Z]", sim_help)  # no SAVE_S-style metavars
    assert "examples:" in sim_help
    optimal_help = main_in_process(capsys, "optimal", "--help").stdout
    assert "--save-s SECONDS" in optimal_help and "--mtbf-s SECONDS" in optimal_help and "examples:" in optimal_help


@pytest.mark.parametrize("examples, count", [(cli_theory.OPTIMAL_EXAMPLES, 2), (cli_theory.SIMULATE_EXAMPLES, 5)])
def test_every_example_in_help_runs(examples, count, capsys):
    commands = re.findall(r"^  goodputlab (.*?(?:\\\n.*?)*)$", examples, re.M)
    assert len(commands) == count
    for command in commands:
        assert cli_theory.main(shlex.split(command.replace("\\\n", " "))) == 0
    assert capsys.readouterr().out


def test_simulate_json_includes_the_configuration(capsys):
    assert cli_theory.main([*SIM, "--save-blocking-s", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    config = data["config"]
    assert config["devices"] == 64 and config["device_mtbf_s"] == 2000 * 3600.0 and config["duration_s"] == 3 * 86400.0
    assert config["interval_s"] == 1200.0 and config["save_s"] == 30.0 and config["save_blocking_s"] == 5.0
    assert config["trials"] == 20 and config["seed"] == 0
    assert theory.SimConfig(**config).expected_failures == pytest.approx(64 * 3 * 24 / 2000)  # a SimConfig again


def test_no_progress_bar_when_stderr_is_not_a_terminal(cli, cli_env):
    r = run_cli(cli, cli_env, *SIM)
    assert r.returncode == 0 and r.stderr == "" and "goodput" in r.stdout


def test_progress_bar_on_a_terminal(cli, cli_env):
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    try:
        r = subprocess.run([*cli, *SIM], stdout=subprocess.PIPE, stderr=terminal, env=cli_env, timeout=60)
    finally:
        os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the terminal is closed and drained
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    assert r.returncode == 0
    assert b"simulate" in seen and b"100%" in seen


def test_the_readme_simulate_example_gives_466_interruptions(capsys):
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"goodputlab (simulate .*?\n.*?)\n", readme)
    assert found, "README has a simulate example"
    args = shlex.split(found.group(1).replace("\\\n", " "))
    assert cli_theory.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    config = theory.SimConfig(**data["config"])
    assert config.expected_failures == pytest.approx(theory.LLAMA3_INTERRUPTIONS, abs=0.1)
    assert data["interruptions_mean"] == pytest.approx(theory.LLAMA3_INTERRUPTIONS, abs=3)  # 1,000 trials: s.e. 0.7


def test_simulate_takes_the_parameters_papers_use(capsys):
    """A rate per 1,000 node-days, a per-job part, a queue and just-in-time checkpoints; ETTR beside goodput."""
    args = ["simulate", "--devices", "1024", "--node-failures-per-1000-days", "6.5", "--job-failures-per-day", "0.5",
            "--days", "20", "--interval-min", "30", "--save-s", "60", "--restart-s", "300", "--queue-s", "600",
            "--jit-share", "0.8", "--jit-save-s", "20", "--step-s", "6", "--trials", "40"]
    assert cli_theory.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    config = data["config"]
    assert config["device_mtbf_s"] == pytest.approx(1000 * 86400 * 8 / 6.5)
    assert config["job_failure_rate_per_s"] == pytest.approx(0.5 / 86400)
    assert (config["queue_s"], config["jit_share"], config["jit_save_s"], config["step_s"]) == (600.0, 0.8, 20.0, 6.0)
    assert data["ettr_mean"] > data["goodput_mean"] and data["queue_s_mean"] > 0
    assert data["closed_form"]["goodput"] == pytest.approx(data["goodput_mean"], abs=0.01)
    assert cli_theory.main(args) == 0
    out = capsys.readouterr().out
    assert "ETTR           mean" in out and "goodput        mean" in out and "ETTR: effective training time ratio" in out
    assert "per 1,000 node-days" in out and "a queue of 600 s" in out and "just-in-time checkpoints cover 80%" in out


def test_simulate_in_job_stall_and_overhead(capsys):
    args = ["simulate", "--devices", "1024", "--device-mtbf-h", "20000", "--days", "10", "--interval-min", "30",
            "--save-s", "60", "--restart-s", "300", "--recovery", "in-job", "--heal-s", "60", "--replica-groups", "4",
            "--collective-timeout-s", "60", "--step-overhead", "0.02", "--trials", "40"]
    assert cli_theory.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["buckets"]["other"] > 0 and data["buckets"]["straggler_wait"] > 0
    assert data["closed_form"]["ettr"] is None and data["closed_form"]["goodput"] == pytest.approx(data["goodput_mean"], abs=0.01)
