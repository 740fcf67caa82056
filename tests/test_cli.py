"""The CLI as a user runs it: real subprocesses, real exit codes."""

import dataclasses
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from goodputlab.cli import build_parser, main
from goodputlab.cli.run import config_from, flag_fields, flag_of
from goodputlab.engine.config import RunConfig


def run_cli(cli, env, *args, timeout=300):
    return subprocess.run([*cli, *args], capture_output=True, text=True, env=env, timeout=timeout)


def run_with_terminal_stderr(cli, env, *args, timeout=300) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (as in a shell): (exit code, stdout, what the terminal showed)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    try:
        r = subprocess.run([*cli, *args], stdout=subprocess.PIPE, stderr=terminal, text=True, env=env, timeout=timeout)
    finally:
        os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 1 << 16)
        except OSError:  # EIO: the terminal is closed and drained
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return r.returncode, r.stdout, shown.decode(errors="replace")


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--ckpt-every", "-5"], "--ckpt-every"),
        (["--prefetch", "2"], "--prefetch"),  # zero workers with prefetch
        (["--model", "huge"], "--model"),
        (["--steps", "0"], "--steps"),
        (["--steps", "many"], "--steps"),
        (["--mtbf", "-1"], "--mtbf"),
        (["--workers", "-2"], "--workers"),
        (["--io-latency-ms", "-4"], "--io-latency-ms"),
        (["--device", "tpu"], "--device"),
        (["--kill-at-steps", "3,x"], "--kill-at-steps"),
        (["--out", "/proc/goodputlab-cannot-write-here"], "--out"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, cli_env, args, flag, tmp_path):
    if "--out" not in args:
        args = [*args, "--out", str(tmp_path / "r")]
    r = run_cli(cli, cli_env, "run", *args, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert flag in lines[0] and args[args.index(flag) + 1].split(",")[-1] in lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_out_under_a_file_is_refused(cli, cli_env, tmp_path):
    (tmp_path / "file").write_text("x")
    r = run_cli(cli, cli_env, "run", "--out", str(tmp_path / "file" / "run"), timeout=60)
    assert r.returncode == 2 and "--out" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_run_prints_a_breakdown_and_writes_the_files(cli, cli_env, tmp_path):
    out = tmp_path / "r"
    code, stdout, terminal = run_with_terminal_stderr(
        cli, cli_env, "run", "--steps", "40", "--ckpt-every", "20", "--out", str(out), "--kill-at-steps", "30"
    )
    assert code == 0, terminal
    first, stdout = stdout.split("\n", 1)  # the run's first line: what trains, with how many torch threads
    assert first == f"goodputlab run: tiny model, 40 steps, 1 torch thread (the default for the tiny model), results in {out}/"
    for cat in ("productive", "data_wait", "checkpoint_save", "checkpoint_restore", "lost_work", "restart", "startup", "other"):
        assert cat in stdout
    assert "goodput" in stdout and "failures 1" in stdout
    # a legend says what each category's seconds were spent on
    assert "computing steps a failure later threw away" in stdout and "from the first launch to the first step" in stdout
    assert "--ckpt-every auto" not in stdout  # a fixed interval has no auto line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures"] == 1 and summary["completed"]
    assert (out / "events.jsonl").stat().st_size > 0
    assert "training" in terminal  # the progress bar, on a terminal
    # goodputlab report reads the lab run's directory back: the same table, the same summary
    rep = run_cli(cli, cli_env, "report", str(out), timeout=60)
    assert rep.returncode == 0 and rep.stdout.splitlines()[:12] == stdout.splitlines()[:12]
    rep = run_cli(cli, cli_env, "report", str(out), "--json", timeout=60)
    assert rep.returncode == 0 and json.loads(rep.stdout) == summary


def test_json_output_and_lr(cli, cli_env, tmp_path):
    r = run_cli(
        cli, cli_env, "run", "--steps", "10", "--ckpt-every", "5", "--lr", "0.002", "--out", str(tmp_path / "r"), "--json",
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["steps_completed"] == 10 and summary["config"]["ckpt_every"] == 5
    assert summary["config"]["lr"] == 0.002  # --lr reached the run
    assert r.stderr == ""  # no progress bar when stderr is not a terminal, even without --quiet


def test_failure_budget_exit_code(cli, cli_env, tmp_path):
    r = run_cli(
        cli, cli_env, "run", "--steps", "60", "--ckpt-every", "20", "--kill-at-steps", "30",
        "--max-failures", "0", "--out", str(tmp_path / "r"), "--quiet",
    )
    assert r.returncode == 3
    assert "NOT COMPLETED" in r.stdout and "--max-failures 0" in r.stdout


def _worker_processes(marker: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().decode(errors="replace")
                status = (p / "status").read_text()
            except OSError:
                continue
            if marker in cmd and "State:\tZ" not in status:
                pids.append(int(p.name))
    return pids


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to look for orphans")
def test_ctrl_c_stops_everything_and_leaves_no_orphan(cli, cli_env, tmp_path):
    out = tmp_path / "interrupted"
    proc = subprocess.Popen(
        [*cli, "run", "--steps", "5000", "--workers", "2", "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the worker trains
        ev = out / "events.jsonl"
        if ev.exists() and '"compute"' in ev.read_text():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the worker never started training")
    assert _worker_processes(str(out))  # the worker and its two loader processes
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    time.sleep(0.5)
    assert _worker_processes(str(out)) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and not summary["completed"]


@pytest.mark.slow
def test_the_issue_acceptance_commands(cli, cli_env, tmp_path):
    """`--mtbf 4` must see failures and still end bit-identical to `--mtbf 0`."""
    common = ["run", "--steps", "400", "--ckpt-every", "50", "--seed", "1", "--quiet"]
    r1 = run_cli(cli, cli_env, *common, "--mtbf", "4", "--out", str(tmp_path / "r1"))
    r0 = run_cli(cli, cli_env, *common, "--mtbf", "0", "--out", str(tmp_path / "r0"))
    assert r1.returncode == 0 and r0.returncode == 0, r1.stderr + r0.stderr
    s1 = json.loads((tmp_path / "r1" / "summary.json").read_text())
    s0 = json.loads((tmp_path / "r0" / "summary.json").read_text())
    assert s1["failures"] > 0
    assert abs(sum(s1["buckets"].values()) - s1["wall_s"]) / s1["wall_s"] < 0.01
    assert s1["final_state_sha256"] == s0["final_state_sha256"]
    assert s1["final_loss"] < s1["initial_loss"] - 1.0  # the loss falls measurably


# --- the run command's flags are generated from RunConfig's fields -------------------------------


def _run_help() -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["run"].format_help()


def test_every_run_config_field_is_a_flag_listed_in_help():
    help_text = " ".join(_run_help().split()).replace("- ", "-")  # argparse wraps lines, also after a hyphen
    listed = {f.name for f in flag_fields()}
    assert listed == {f.name for f in dataclasses.fields(RunConfig)} - {"extra"}  # extra: recorded, not a flag
    for f in flag_fields():
        assert flag_of(f.name) in help_text, f.name
        assert " ".join(f.metadata["help"].split()) in help_text, f.name
    assert "--lr RATE" in help_text and "--steps N" in help_text and "--mtbf SECONDS" in help_text
    assert "examples:" in help_text


def test_every_flag_reaches_its_field():
    """A value for every field, typed on the command line, arrives in the RunConfig unchanged
    (one process with recovery's settings, a job of several machines with a straggler rank, and
    one of torchft's replica groups, and a cluster of emulated nodes)."""
    one_process = RunConfig(
        steps=300, model="small", batch_size=4, lr=0.01, device="cpu", seed=7, threads=2, ckpt_every="auto",
        ckpt_every_s=2.5, ckpt="memory", memory_disk_every=2, keep=5, mtbf=3.0, failure_clock="wall", kill_at_steps=(10, 20),
        restart_delay=0.25, max_failures=9, workers=2, prefetch=3, io_latency_ms=5.0, io_jitter=0.5,
        transform_ms=1.5, pin_memory=True, persistent_workers=True, device_prefetch=True, overwrite=True,
        ckpt_omit=("optimizer", "rng"), failure_mode="loader-death", hang_timeout=2.5, straggler_prob=0.1,
        straggler_factor=3.0, hot_spare=True, ckpt_storage_mbps=120.0,
    )
    job = RunConfig(
        nproc=2, nnodes=2, node_rank=1, rdzv_endpoint="node0:29500", launcher="torchrun", ckpt="async",
        straggler_rank=1, straggler_prob=0.5, straggler_factor=2.5, rdzv_timeout=30.0, ckpt_jit=True, oversubscribe=True,
    )
    in_job_recovery = RunConfig(nproc=2, fault_tolerance="torchft", ckpt_every=0, group_size=2, ft_failed_step="recompute")
    emulated = RunConfig(emulate_nodes=4, kill_node_at_steps=(12, 30), node_mtbf=7.5, partition_at_steps=(20,), partition_s=2.5,
                         spare_nodes=2)
    given = set()
    for wanted in (one_process, job, in_job_recovery, emulated):
        argv = ["run"]
        for f in flag_fields():
            value = getattr(wanted, f.name)
            if value is None:  # None is the flag left out
                continue
            given |= {f.name} if value != f.default else set()
            if isinstance(value, bool):
                argv += [flag_of(f.name)] if value else []
            else:
                argv += [flag_of(f.name), ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]
        args = build_parser().parse_args(argv)
        assert config_from(args) == wanted
    assert given == {f.name for f in flag_fields()}  # every flag was given a value of its own in one of them
    assert config_from(build_parser().parse_args(["run"])) == RunConfig()  # no flag: every default


def test_help_lists_every_command_as_the_modules_add_them(capsys):
    from goodputlab.cli import COMMANDS

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == [c for commands in COMMANDS.values() for c in commands]
    with pytest.raises(SystemExit) as done:  # a help text with a % in it once broke this
        main(["--help"])
    assert done.value.code == 0
    assert "from B% to A%" in capsys.readouterr().out


def test_a_command_imports_only_its_own_module(tmp_path):
    """``goodputlab report`` loads neither the theory nor the other commands' modules (nor torch)."""
    import goodputlab as gl

    with gl.Recorder(tmp_path / "rec", total_steps=2) as rec:
        for step in range(2):
            with rec.step(step) as s:
                s.loss = 1.0
    code = (
        "import sys\nfrom goodputlab.cli import main\n"
        f"assert main(['report', {str(tmp_path / 'rec')!r}]) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('goodputlab.cli.', 'goodputlab.theory', 'torch')))\n"
        "assert loaded == ['goodputlab.cli.common', 'goodputlab.cli.report'], loaded\n"
        "from goodputlab.cli import FLAGS\nassert FLAGS['duration_s'] == '--days'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_bare_goodputlab_lists_the_commands(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    for command in ("run", "optimal", "simulate", "batch-sweep", "serve-bench", "report", "claim"):
        assert f"  {command} " in err
    assert "goodputlab COMMAND --help" in err
