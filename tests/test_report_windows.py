"""What Google's calculator has, locally, and the exports (issue 46, items 3 and 4): interval and rolling
goodput, step-time deviation, ``--fail-under``; TensorBoard scalars read back with TensorBoard's reader, a
Prometheus scrape over real HTTP, a pandas frame; ``gl.Follower``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

import goodputlab as gl

STEPS, SLOW = 40, {12, 27}  # two steps ten times slower than the rest


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A recorded job of 40 steps, killed after step 25 (checkpoint at 20), resumed, with two slow steps."""
    run_dir = tmp_path_factory.mktemp("windows") / "job"
    script = (
        "import os, signal, sys, time, goodputlab as gl\n"
        "run_dir, kill = sys.argv[1], sys.argv[2] == '1'\n"
        "start = int(open(os.path.join(run_dir, 'ckpt')).read()) if os.path.exists(os.path.join(run_dir, 'ckpt')) else 0\n"
        f"with gl.Recorder(run_dir, total_steps={STEPS}) as rec:\n"
        f"    for step in range(start, {STEPS}):\n"
        "        with rec.data_wait():\n"
        "            time.sleep(0.002)\n"
        "        with rec.step(step):\n"
        f"            time.sleep(0.06 if step in {SLOW} else 0.006)\n"
        "        if kill and step == 25:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        if step % 10 == 9:\n"
        "            with rec.checkpoint_save(step):\n"
        "                open(os.path.join(run_dir, 'ckpt'), 'w').write(str(step + 1))\n"
        "        if step == 30:\n"
        "            with rec.custom('eval'):\n"
        "                time.sleep(0.02)\n"
    )
    assert subprocess.run([sys.executable, "-c", script, str(run_dir), "1"], timeout=120).returncode == -9
    assert subprocess.run([sys.executable, "-c", script, str(run_dir), "0"], timeout=120).returncode == 0
    return run_dir


def test_rolling_windows_close_and_add_up_to_the_run(job):
    result = gl.load_run(job)
    s = result.summary
    windows = result.rolling(0.1)
    assert len(windows) == pytest.approx(s["wall_s"] / 0.1, abs=1)
    for w in windows:
        assert sum(w["buckets"].values()) == pytest.approx(w["end_s"] - w["start_s"], rel=1e-6, abs=1e-9)
    for category in ("data_wait", "checkpoint_save", "restart", "other"):
        assert sum(w["buckets"][category] for w in windows) == pytest.approx(s["buckets"][category], rel=1e-6, abs=1e-9)
    computed = s["buckets"]["productive"] + s["buckets"]["lost_work"]
    assert sum(w["buckets"]["productive"] + w["buckets"]["lost_work"] for w in windows) == pytest.approx(computed, rel=1e-6)
    assert sum(w["buckets"]["lost_work"] for w in windows) == pytest.approx(s["buckets"]["lost_work"], rel=0.05)
    whole = result.interval()
    assert whole["goodput"] == pytest.approx(s["goodput"], rel=0.01)


def test_step_time_deviation_flags_the_slow_steps(job):
    result = gl.load_run(job)
    windows = result.rolling(1000.0)  # one window: the whole run
    (w,) = windows
    assert w["steps"] == 26 + 20 - 2  # steps 0-25, then 20-39: a step time per step_end after each attempt's first
    assert w["median_step_s"] == pytest.approx(0.008, rel=0.5)  # 6 ms step + 2 ms wait + the loop's own
    assert w["p90_step_s"] < 0.05
    assert w["slow_steps"] >= len(SLOW)  # the two slow steps (and the checkpoint steps' longer gaps at most)
    slow_windows = [x for x in result.rolling(0.05) if x["slow_steps"]]
    assert slow_windows and all(x["slow_steps"] >= 1 for x in slow_windows)


def test_fail_under_and_the_interval_in_the_cli(job, cli, cli_env):
    s = gl.load_run(job).summary

    def report(*args):
        return subprocess.run([*cli, "report", str(job), *args], capture_output=True, text=True, env=cli_env, timeout=120)

    ok = report("--fail-under", f"{s['goodput'] * 0.9:.4f}")
    assert ok.returncode == 0 and ok.stderr == ""
    below = report("--fail-under", f"{min(1.0, s['goodput'] * 1.1):.4f}")
    assert below.returncode == 1 and below.stderr.count("\n") == 1 and "is under --fail-under" in below.stderr
    part = report("--since", "0.2", "--until", "0.4", "--json")
    summary = json.loads(part.stdout)
    assert summary["interval"] == {"since_s": 0.2, "until_s": pytest.approx(0.4)}
    assert summary["wall_s"] == pytest.approx(0.2) and sum(summary["buckets"].values()) == pytest.approx(0.2)
    assert summary["goodput"] == pytest.approx(summary["buckets"]["productive"] / 0.2)
    rolled = report("--window", "0.25", "--json")
    windows = json.loads(rolled.stdout)["windows"]
    assert windows[0]["start_s"] == 0 and windows[0]["end_s"] == pytest.approx(0.25)
    text = report("--window", "0.25")
    assert "median" in text.stdout and "p90" in text.stdout and "slow" in text.stdout
    bad = report("--window", "-1")
    assert bad.returncode == 2 and "--window -1 is invalid" in bad.stderr


def test_tensorboard_reads_the_scalars_back(job, tmp_path, cli, cli_env):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    r = subprocess.run([*cli, "report", str(job), "--window", "0.25", "--tensorboard", str(logdir), "--json"],
                       capture_output=True, text=True, env=cli_env, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    windows = json.loads(r.stdout)["windows"]
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    rolling = acc.Scalars("goodput/rolling")
    assert [e.step for e in rolling] == list(range(len(windows)))
    assert [e.value for e in rolling] == pytest.approx([w["goodput"] for w in windows], rel=1e-6, abs=1e-7)
    assert acc.Scalars("goodput/total")[0].value == pytest.approx(gl.load_run(job).summary["goodput"], rel=1e-6)
    assert "share/lost_work" in acc.Tags()["scalars"] and "step_time/median_s" in acc.Tags()["scalars"]


def test_to_pandas_gives_the_steps_and_the_windows(job):
    result = gl.load_run(job)
    steps = result.to_pandas()
    assert len(steps) == len(result.per_step()) and {"attempt", "step", "compute_s", "survived", "t_end_s"} <= set(steps)
    assert steps.loc[~steps["survived"], "compute_s"].sum() == pytest.approx(result.summary["buckets"]["lost_work"], rel=1e-6)
    windows = result.to_pandas(window_s=0.1)
    assert {"goodput", "productive_s", "lost_work_s", "median_step_s"} <= set(windows)
    assert windows["productive_s"].sum() + windows["lost_work_s"].sum() == pytest.approx(
        result.summary["buckets"]["productive"] + result.summary["buckets"]["lost_work"], rel=1e-6)


@pytest.mark.timeout(120)
def test_prometheus_is_scraped_over_http_while_a_job_runs(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    run_dir = tmp_path / "live"
    script = ("import sys, time, goodputlab as gl\n"
              "with gl.Recorder(sys.argv[1], total_steps=100000) as rec:\n"
              "    for step in range(100000):\n"
              "        with rec.step(step):\n"
              "            time.sleep(0.01)\n")  # fmt: skip
    job = subprocess.Popen([sys.executable, "-c", script, str(run_dir)])
    follow = None
    try:
        deadline = time.monotonic() + 60
        while not (run_dir / "events.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        follow = subprocess.Popen([sys.executable, "-m", "goodputlab.cli", "report", str(run_dir), "--follow", "--json",
                                   "--interval", "0.2", "--prometheus", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        line = follow.stderr.readline()
        assert line.startswith("goodputlab report: serving metrics on http://127.0.0.1:"), line
        url = line.split()[-1]
        samples = {}
        for _ in range(50):
            time.sleep(0.2)
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            samples = {(s.name, s.labels.get("category")): s.value
                       for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip
            if samples.get(("goodputlab_steps_completed", None), 0) > 0:
                break
        assert samples[("goodputlab_goodput", None)] > 0
        assert samples[("goodputlab_category_seconds", "productive")] > 0
        assert samples[("goodputlab_completed", None)] == 0
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
        follow.send_signal(signal.SIGINT)
        assert follow.wait(timeout=30) == 0
    finally:
        job.kill()
        job.wait()
        if follow is not None and follow.poll() is None:
            follow.kill()


def test_follower_is_public(job):
    follower = gl.Follower(job)
    try:
        update = follower.update()
    finally:
        follower.close()
    assert update.finished and update.summary["goodput"] == pytest.approx(gl.load_run(job).summary["goodput"], rel=1e-9)


def test_windows_too_narrow_are_refused_in_one_line(job, cli, cli_env):
    r = subprocess.run([*cli, "report", str(job), "--window", "1e-9"], capture_output=True, text=True, env=cli_env, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "goodputlab report: error: windows of 1e-09 s: the run needs more than 100,000; choose a wider one\n"
