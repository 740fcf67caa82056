"""Recovery end to end: every failure mode, the hot spare, --resume and --ckpt-omit, on real runs.

Each run is the same small training job (tiny preset, one torch thread, a checkpoint every 10 steps);
the failures fire at given steps (``kill_at_steps``), not at random, and every run that must end
bit-exact is compared with one failure-free run made once for the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from goodputlab import categories as C
from goodputlab.checkpoints.store import CheckpointStore
from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import read_events
from goodputlab.measure.ledger import build_ledger, per_step, surviving_samples
from goodputlab.engine.supervisor import run_supervised
from goodputlab.recovery import disk_full
from goodputlab.recovery.omit import sample_accounting

JOB = dict(steps=60, seed=7, threads=1, ckpt_every=10, restart_delay=0.0)


def job(out: Path, **settings) -> tuple[dict, list[dict]]:
    summary = run_supervised(RunConfig(**{**JOB, **settings}), out)
    return summary, read_events(out / "events.jsonl")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The failure-free run every recovered run must match."""
    return job(tmp_path_factory.mktemp("reference"))


def closes(summary: dict, events: list[dict]) -> None:
    """The ledger books every second once: the buckets sum to the wall time."""
    assert sum(summary["buckets"].values()) == pytest.approx(summary["wall_s"], abs=1e-6)
    ledger = build_ledger(events)
    assert sum(s.duration for s in ledger.segments) == pytest.approx(ledger.wall_s, abs=1e-6)


def booked(events: list[dict], kind: str) -> set[str]:
    return {s.category for s in build_ledger(events).segments if s.kind == kind}


def seconds_of(events: list[dict], kind: str) -> float:
    return sum(s.duration for s in build_ledger(events).segments if s.kind == kind)


def run_processes(out: Path) -> list[int]:
    """Processes alive whose command line names the run folder (a worker, a standby, a loader)."""
    alive = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if str(out).encode() in (d / "cmdline").read_bytes():
                    state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        alive.append(int(d.name))
            except (OSError, IndexError):
                continue
    return alive


# --- the failure modes ---------------------------------------------------------------------------
def test_a_hang_is_caught_by_the_watchdog_booked_restart_and_recovered(reference, tmp_path):
    summary, events = job(tmp_path / "hang", failure_mode="hang", hang_timeout=1.0, kill_at_steps=(25,))
    assert summary["completed"] and summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    assert summary["failures"] == 1 and summary["recovery"]["injected"] == {"hang": 1}
    failure = next(e for e in events if e["kind"] == "failure")
    assert failure["cause"] == "hang" and failure["trigger"] == "kill_at_step 25"
    (detection,) = summary["recovery"]["hang_detection_s"]
    assert 1.0 <= detection < 10.0  # the timeout, plus the poll that noticed it
    assert booked(events, "hang") == {C.RESTART}  # from the last sign of progress to the verdict
    assert seconds_of(events, "hang") == pytest.approx(detection, abs=0.05)
    closes(summary, events)


def test_an_error_in_a_step_ends_the_worker_and_the_job_restarts(reference, tmp_path):
    summary, events = job(tmp_path / "exc", failure_mode="exception", kill_at_steps=(25,))
    assert summary["completed"] and summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    assert summary["failures"] == 1 and summary["recovery"]["injected"] == {"exception": 1}
    crash = next(e for e in events if e["kind"] == "crash")
    assert "InjectedFailure" in crash["error"] and booked(events, "crash") == {C.RESTART}
    assert next(e for e in events if e["kind"] == "failure")["cause"] == "exception"
    log = (tmp_path / "exc" / "logs" / "attempt-000.log").read_text()
    assert "Traceback" in log and "injected failure (--failure-mode exception)" in log
    closes(summary, events)


def test_a_dead_loader_worker_is_replaced_in_place_without_a_restart(reference, tmp_path):
    summary, events = job(tmp_path / "loader", failure_mode="loader-death", workers=2, kill_at_steps=(20, 40))
    assert summary["completed"] and summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    r = summary["recovery"]
    assert r["injected"] == {"loader-death": 2} and r["loader_rebuilds"] >= 1
    assert summary["failures"] == 0 and summary["attempts"] == 1  # the job never restarted
    assert summary["buckets"][C.LOST_WORK] == 0.0  # nothing was rolled back
    assert booked(events, "loader_rebuild") == {C.RESTART}
    assert surviving_samples(events) == surviving_samples(reference[1])  # nothing repeated, nothing skipped
    closes(summary, events)


def test_stragglers_slow_a_seeded_share_of_steps_and_the_slowdown_is_booked_apart(reference, tmp_path):
    from goodputlab.recovery.inject import StragglerSchedule

    summary, events = job(tmp_path / "slow", straggler_prob=0.25, straggler_factor=3.0)
    assert summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    r = summary["recovery"]
    assert r["straggler_steps"] == len(StragglerSchedule(7, 0.25, 3.0).slowed_steps(60)) > 0
    assert booked(events, "straggle") == {C.OTHER}
    assert r["straggler_s"] == pytest.approx(seconds_of(events, "straggle"))
    compute = {row["step"]: row["compute_s"] for row in per_step(events)}
    slowed = set(StragglerSchedule(7, 0.25, 3.0).slowed_steps(60))
    straggle = {s.step: s.duration for s in build_ledger(events).segments if s.kind == "straggle"}
    assert set(straggle) == slowed
    measured = {e["step"]: e["compute_s"] for e in events if e["kind"] == "straggle"}
    for step, extra in straggle.items():
        # a slowed step takes 3 x its compute: 2 x more, as a straggle (a wait, which never ends early),
        # of the compute the worker measured (the ledger's segment also holds the moments before the event)
        assert extra >= 2 * measured[step]
        assert 0 < measured[step] <= compute[step]
    closes(summary, events)


def _small_disk_run(tmp_path: Path, cli, cli_env, args: list[str]) -> tuple[int, str, dict]:
    """Run the CLI with --out on a 32 MB tmpfs (mounted here as root, else inside a user and mount
    namespace); returns (exit code, stderr, what the run folder held)."""
    report_code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from goodputlab.checkpoints.store import CheckpointStore\n"
        "from goodputlab.measure.events import read_events\n"
        "out = Path(sys.argv[1]); store = CheckpointStore(out / 'ckpt')\n"
        "valid = [c.step for c in store.list() if store.verify(c.path)]\n"
        "print(json.dumps({'names': sorted(str(p.relative_to(out)) for p in out.rglob('*')),\n"
        "  'summary': json.loads((out / 'summary.json').read_text()), 'events': read_events(out / 'events.jsonl'),\n"
        "  'valid': valid, 'log': (out / 'logs' / 'attempt-000.log').read_text()}))\n"
    )
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "run"
    cmd = [*cli, "run", *args, "--out", str(out), "--quiet"]
    if disk_full.can_mount():
        with disk_full.small_filesystem(disk, 32 << 20):
            r = subprocess.run(cmd, capture_output=True, text=True, env=cli_env, timeout=300)
            rep = subprocess.run([sys.executable, "-c", report_code, str(out)], capture_output=True, text=True, env=cli_env)
        return r.returncode, r.stderr, json.loads(rep.stdout)
    try:
        ok = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("no size-limited file system here: not root, and user namespaces are disabled")
    script = (
        f"mount -t tmpfs -o size=32m tmpfs {disk} && {' '.join(cmd)} 2>{tmp_path}/err; echo $? >{tmp_path}/rc; "
        f"{sys.executable} -c \"$REPORT\" {out} >{tmp_path}/report"
    )
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                   env={**cli_env, "REPORT": report_code}, timeout=300)
    return int((tmp_path / "rc").read_text()), (tmp_path / "err").read_text(), json.loads((tmp_path / "report").read_text())


@pytest.mark.parametrize("strategy", ["sync", "async"])
def test_a_full_disk_during_a_save_fails_that_save_cleanly_and_training_goes_on(reference, tmp_path, cli, cli_env, strategy):
    args = ["--steps", "60", "--seed", "7", "--threads", "1", "--ckpt-every", "10", "--ckpt", strategy,
            "--failure-mode", "disk-full", "--kill-at-steps", "15,35", "--restart-delay", "0"]
    rc, err, rep = _small_disk_run(tmp_path, cli, cli_env, args)
    summary, events = rep["summary"], rep["events"]
    assert rc == 0, err
    assert summary["completed"] and summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    r = summary["recovery"]
    # each failure at steps 15 and 35 fills the disk, unless it is still full from the last one: the
    # disk is given back once a save has failed on it, and an async save's failure is reported when its
    # background write ends, which a loaded machine can put after step 35 (1 injection in make test
    # beside two busy loops); a sync save fails inside step 20
    injected = r["injected"]["disk-full"]
    assert injected == 2 if strategy == "sync" else injected in (1, 2)
    assert set(r["injected"]) == {"disk-full"} and r["ckpt_failed"] >= 1
    failed = [e for e in events if e["kind"] == "ckpt_failed"]
    assert all("No space left on device" in e["reason"] for e in failed)
    assert sum(1 for e in events if e["kind"] == "disk_freed") == injected  # the space came back each time
    assert "was not saved (No space left on device" in rep["log"]  # the worker's log says so
    assert rep["valid"] and 60 in rep["valid"]  # every checkpoint left verifies, the final one included
    assert not [n for n in rep["names"] if ".tmp" in Path(n).name or Path(n).name in (disk_full.BALLAST,)]
    closes(summary, events)


def test_disk_full_refuses_a_large_file_system_before_anything_starts(tmp_path):
    from goodputlab.errors import ConfigError

    with pytest.raises(ConfigError, match="file system of at most"):
        run_supervised(RunConfig(**JOB, failure_mode="disk-full"), tmp_path / "big", progress=None)
    assert not (tmp_path / "big").exists()


# --- the hot spare ------------------------------------------------------------------------------
def test_a_hot_spare_takes_over_bit_exact_and_its_start_up_is_off_the_critical_path(reference, tmp_path):
    out = tmp_path / "spare"
    summary, events = job(out, hot_spare=True, kill_at_steps=(20, 45), io_latency_ms=10.0)
    assert summary["completed"] and summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    assert summary["failures"] == 2 and summary["recovery"]["handovers"] == 2
    later = [e for e in events if e["attempt"] > 0]
    assert not [e for e in later if e["kind"] in ("spawn", "init")]  # no process launched on the critical path
    assert booked(events, "handover") == {C.RESTART} and booked(events, "activate") == {C.RESTART}
    for a in (e for e in events if e["kind"] == "activate"):
        assert a["standby_startup_s"] > 0  # the start-up happened, and is reported, not booked
    assert sum(1 for e in events if e["kind"] == "standby_spawned") == 3  # one per worker that trained
    names = sorted(p.name for p in (out / "logs").iterdir())
    assert names == ["attempt-000.log", "attempt-001.log", "attempt-002.log", "fork-server.log", "standby-002.log"]
    assert run_processes(out) == []  # the unused standby died with the run
    closes(summary, events)


def test_no_standby_outlives_a_run_stopped_by_its_failure_budget(tmp_path):
    out = tmp_path / "budget"
    summary, events = job(out, hot_spare=True, kill_at_steps=(20, 30), max_failures=1, io_latency_ms=20.0)
    assert not summary["completed"] and "failure budget" in summary["stop_reason"]
    assert any(e["kind"] == "standby_spawned" for e in events)
    assert run_processes(out) == []


def test_sigterm_leaves_no_standby_and_no_worker(tmp_path, cli, cli_env):
    out = tmp_path / "term"
    proc = subprocess.Popen([*cli, "run", "--steps", "5000", "--threads", "1", "--hot-spare", "--io-latency-ms", "5",
                             "--out", str(out), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until the standby has started beside the worker
            if (out / "events.jsonl").exists() and any(e["kind"] == "standby_spawned" for e in read_events(out / "events.jsonl")):
                break
            time.sleep(0.2)
        time.sleep(0.5)
        assert len(run_processes(out)) >= 2  # the worker and the standby
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    time.sleep(0.5)
    assert run_processes(out) == []
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "interrupted by SIGTERM"


# --- --resume -------------------------------------------------------------------------------------
def test_a_stopped_run_resumes_in_the_same_log_and_its_ledger_closes(reference, tmp_path, cli, cli_env):
    out = tmp_path / "resumed"
    first, first_events = job(out, kill_at_steps=(35,), max_failures=0)
    # the supervisor kills when it reads that step 35 is done: there, or on a loaded machine (two busy loops)
    # a few steps on, past the checkpoint at 40; the session stops at its last checkpoint
    last_ckpt = max(e["ckpt_step"] for e in first_events if e["kind"] == "ckpt_commit")
    assert not first["completed"] and first["steps_completed"] == last_ckpt and last_ckpt in (30, 40, 50)
    r = subprocess.run([*cli, "run", "--resume", str(out), "--json", "--quiet"], capture_output=True, text=True, env=cli_env, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    events = read_events(out / "events.jsonl")
    assert summary["completed"] and summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "start" and kinds.count("end") == 2 and kinds.count("resume") == 1
    assert summary["attempts"] == 2 and summary["failures"] == 1  # the kill at 35 did not strike again
    restored = next(e for e in events if e["kind"] == "restored")
    assert restored["attempt"] == 1 and restored["ckpt_step"] == last_ckpt
    assert booked(events, "resume") == {C.RESTART}
    # the steps the first session ran past its last checkpoint are lost work, once
    assert 0 < summary["buckets"][C.LOST_WORK]
    assert summary["wall_s"] == pytest.approx(events[-1]["t"] - events[0]["t"])  # no gap booked for the stop
    closes(summary, events)


def test_a_resumed_run_keeps_the_thread_count_it_started_with(tmp_path):
    """A different count adds the gradients in another order: a resume without a thread count takes the
    count in the run's config.json, not the default (which for the larger models follows the load). The
    CLI's --resume reads it with the rest of config.json; this is the Python API's resume."""
    out = tmp_path / "stopped"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(RunConfig(**{**JOB, "steps": 6, "threads": 2}).to_dict()))
    (out / "events.jsonl").write_text('{"t":0.0,"attempt":0,"step":null,"kind":"start"}\n')
    lines = []
    summary = run_supervised(RunConfig(**{**JOB, "steps": 6, "threads": None}), out, resume=True, announce=lines.append)
    assert summary["completed"] and summary["threads"] == 2
    assert any("the count the resumed run started with" in line for line in lines), lines
    assert json.loads((out / "config.json").read_text())["threads"] == 2


@pytest.mark.parametrize("flag,value,shown", [("--seed", "8", "7"), ("--model", "small", "tiny"), ("--batch-size", "4", "16")])
def test_resuming_with_another_model_batch_size_or_seed_is_refused(tmp_path, cli, cli_env, flag, value, shown):
    out = tmp_path / "stopped"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(RunConfig(**JOB).to_dict()))
    (out / "events.jsonl").write_text('{"t":0.0,"attempt":0,"step":null,"kind":"start"}\n')
    before = sorted(p.name for p in out.iterdir())
    r = subprocess.run([*cli, "run", "--resume", str(out), flag, value], capture_output=True, text=True, env=cli_env, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith(f"goodputlab run: error: {flag} {value} is invalid; allowed: {shown}, the value of the run being resumed")
    assert len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == before


# --- --ckpt-omit ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def omitted(tmp_path_factory):
    """The same job killed after step 25 (the restart resumes from the checkpoint of step 20), once per
    part left out of its checkpoints."""
    runs = {}
    for part in ("optimizer", "data", "rng"):
        runs[part] = job(tmp_path_factory.mktemp(f"omit-{part}"), ckpt_omit=(part,), kill_at_steps=(25,), hot_spare=True)
    return runs


def _losses(events):
    return {row["step"]: row["loss"] for row in per_step(events) if row["survived"]}


def test_a_complete_checkpoint_resumes_bit_exact(reference, killed_complete):
    summary, events = killed_complete
    assert summary["final_state_sha256"] == reference[0]["final_state_sha256"]
    assert _losses(events) == _losses(reference[1])


@pytest.fixture(scope="module")
def killed_complete(tmp_path_factory):
    return job(tmp_path_factory.mktemp("complete"), kill_at_steps=(25,), hot_spare=True)


def test_without_the_optimizer_state_the_loss_jumps_after_the_restart(reference, omitted):
    summary, events = omitted["optimizer"]
    ref = _losses(reference[1])
    got = _losses(events)
    assert summary["final_state_sha256"] != reference[0]["final_state_sha256"]
    assert all(got[s] == ref[s] for s in range(20))  # identical until the restart
    assert next(e for e in events if e["kind"] == "restored")["omitted"] == ["optimizer"]
    # AdamW restarts its moments from zero: the first update is as large as the learning rate allows
    assert got[21] > ref[21]
    assert surviving_samples(events) == surviving_samples(reference[1])


def test_without_the_data_position_samples_are_repeated_and_skipped(reference, omitted):
    summary, events = omitted["data"]
    counts = sample_accounting(surviving_samples(events), surviving_samples(reference[1]))
    batch = 16  # the tiny preset's
    # resumed at step 20 with the stream started over: batches 0-19 seen twice, 40-59 never
    assert counts == {"repeated": 20 * batch, "skipped": 20 * batch, "seen": 60 * batch, "expected": 60 * batch}
    assert summary["final_state_sha256"] != reference[0]["final_state_sha256"]


def test_without_the_rng_state_the_run_drifts(reference, omitted):
    summary, events = omitted["rng"]
    ref, got = _losses(reference[1]), _losses(events)
    assert all(got[s] == ref[s] for s in range(20))
    assert any(got[s] != ref[s] for s in range(20, 60))  # other dropout masks from the restart on
    assert surviving_samples(events) == surviving_samples(reference[1])  # the data is the same
    assert summary["final_state_sha256"] != reference[0]["final_state_sha256"]
