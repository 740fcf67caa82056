"""A running job, followed: ``goodputlab report DIR --follow`` and ``gl.watch(DIR)`` on real
gl.Recorder jobs in other processes, reading only what each job appended since the last look."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import goodputlab as gl
from goodputlab.measure.follow import Follower

# A job without torch: sleeps stand for the work. argv: run_dir total step_s [kill_at]
JOB = r"""
import os, signal, sys, time
import goodputlab as gl
run_dir, total, step_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else -1
with gl.Recorder(run_dir, total_steps=total) as rec:
    for step in range(total):
        with rec.data_wait():
            time.sleep(step_s / 3)
        with rec.step(step) as s:
            time.sleep(step_s)
            s.loss = 1.0 / (1 + step)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if (step + 1) % 20 == 0:
            with rec.checkpoint_save(step):
                time.sleep(step_s)
"""


def start_job(run_dir: Path, total: int, step_s: float = 0.01, kill_at: int = -1) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", JOB, str(run_dir), str(total), str(step_s), str(kill_at)])


def wait_for_log(run_dir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (run_dir / "events.jsonl").exists() or (run_dir / "events.jsonl").stat().st_size < 200:
        assert time.monotonic() < deadline, "the job wrote nothing"
        time.sleep(0.02)


def test_follow_redraws_a_live_job_until_it_completes(tmp_path, cli, cli_env):
    run_dir = tmp_path / "job"
    job = start_job(run_dir, total=150)
    wait_for_log(run_dir)
    follow = subprocess.run(
        [*cli, "report", str(run_dir), "--follow", "--interval", "0.2", "--json"],
        capture_output=True, text=True, env=cli_env, timeout=120,
    )  # fmt: skip
    assert job.wait(timeout=60) == 0
    assert follow.returncode == 0, follow.stderr
    updates = [json.loads(line) for line in follow.stdout.splitlines()]
    assert len(updates) >= 3  # it updated while the job ran
    steps = [u["summary"]["steps_completed"] for u in updates]
    assert steps == sorted(steps) and steps[0] < 150 == steps[-1]
    # before the last: running, or ended in the log while the job still held it (exiting): not yet finished
    assert all("running" in u["summary"]["stop_reason"] or u["summary"]["completed"] for u in updates[:-1])
    assert not any(u["progress"].endswith("finished") for u in updates[:-1])
    assert updates[-1]["progress"].endswith("finished")
    final = subprocess.run([*cli, "report", str(run_dir), "--json"], capture_output=True, text=True, env=cli_env, timeout=60)
    # the same ledger as a report of the whole log (the follower sums its parts in another order)
    assert same_within_rounding(json.loads(final.stdout), updates[-1]["summary"])


def test_follow_stops_cleanly_on_ctrl_c(tmp_path, cli, cli_env):
    run_dir = tmp_path / "job"
    job = start_job(run_dir, total=2000)
    try:
        wait_for_log(run_dir)
        follow = subprocess.Popen(
            [*cli, "report", str(run_dir), "--follow", "--interval", "0.2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
        )  # fmt: skip
        first = follow.stdout.readline()
        assert first.startswith("goodput ")
        time.sleep(0.5)
        follow.send_signal(signal.SIGINT)
        out, err = follow.communicate(timeout=30)
        assert follow.returncode == 0 and err == "" and "Traceback" not in out
        assert "attempt 0, steps" in out  # the progress line under the table
        assert job.poll() is None  # the job itself goes on
    finally:
        job.kill()
        job.wait()


def same_within_rounding(a, b) -> bool:
    """Equal, but for floats that differ only in their last bits (sums taken in another order)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12, abs=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_within_rounding(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_within_rounding(x, y) for x, y in zip(a, b))
    return a == b


def test_an_update_reads_only_what_was_appended(tmp_path):
    run_dir = tmp_path / "job"
    job = start_job(run_dir, total=400, step_s=0.005)
    wait_for_log(run_dir)
    follower = Follower(run_dir)
    seen, looks = 0, []
    try:
        while True:
            update = follower.update()
            assert not update.whole
            seen += update.new_events
            assert update.events == seen  # nothing read twice
            looks.append(update)
            if update.finished:
                break
            time.sleep(0.1)
    finally:
        follower.close()
    assert job.wait(timeout=60) == 0
    records = (run_dir / "events.steps.bin").stat().st_size // 40 - 1  # 40-byte records after a 40-byte header
    lines = (run_dir / "events.jsonl").read_bytes().count(b"\n") + records
    assert seen == lines and len(looks) >= 3
    # the same ledger as one read of the whole log; seconds summed in another order (the updates cut
    # the log where the reads ended) may differ in the last bits
    assert same_within_rounding(looks[-1].summary, gl.load_run(run_dir).summary)


def test_a_killed_job_shows_its_failure_and_then_its_restart(tmp_path):
    run_dir = tmp_path / "job"
    assert start_job(run_dir, total=60, step_s=0.002, kill_at=45).wait(timeout=60) == -signal.SIGKILL
    follower = Follower(run_dir)
    down = follower.update()
    assert down.summary["failures"] == 1 and not down.finished
    assert down.summary["steps_completed"] == 40  # its newest checkpoint
    assert start_job(run_dir, total=60, step_s=0.002).wait(timeout=60) == 0
    up = follower.update()
    assert up.new_events > 0 and not up.whole
    assert up.finished and up.summary["failures"] == 1 and up.summary["attempts"] == 2
    assert up.summary == gl.load_run(run_dir).summary
    follower.close()


def test_watch_redraws_the_breakdown_while_the_job_runs(tmp_path):
    run_dir = tmp_path / "job"
    w = gl.watch(run_dir, interval=0.1)  # before the job starts: it waits for the first events
    assert isinstance(w.widget, __import__("ipywidgets").VBox)
    job = start_job(run_dir, total=150)
    drawn = set()
    deadline = time.monotonic() + 60
    while w.running:
        drawn.add(w.table.value)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert job.wait(timeout=60) == 0
    assert w.updates >= 3 and len(drawn) >= 3  # redrawn as it ran
    assert w.last.finished and "goodput" in w.table.value and "finished" in w.progress.value
    assert same_within_rounding(w.last.summary, gl.load_run(run_dir).summary)
    w.stop()


def test_watch_refuses_a_bad_interval_and_says_why_it_stopped(tmp_path):
    with pytest.raises(gl.ConfigError, match="interval"):
        gl.watch(tmp_path, interval=0)
    (tmp_path / "events.jsonl").write_bytes(b'{"t":"x","attempt":0,"step":null,"kind":"init"}\n')
    w = gl.widgets.Watch(tmp_path, start=False)
    assert w.update() is None and "line 1" in w.progress.value
    w.stop()
