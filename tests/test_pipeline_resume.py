"""Failures and the input pipeline: resume stays bit-exact, and every restart starts cold workers."""

import os
import signal
import subprocess
import sys
import time

import pytest

from goodputlab import categories as C
from goodputlab.pipeline.loader import read_latency_s
from goodputlab.measure.events import read_events
from goodputlab.measure.ledger import build_ledger, surviving_samples

from conftest import real_run

LATENCY_MS, JITTER, TRANSFORM_MS = 40.0, 0.5, 2.0
# One torch thread keeps these runs fast on a busy 2-core machine (two threads spin against
# other processes); a two-worker pipeline, so batches are in flight when the kills land.
SETTINGS = dict(steps=60, ckpt_every=15, seed=7, workers=2, prefetch=2, restart_delay=0.1, threads=1)
KILLS = (20, 38, 50)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """The reference: uninterrupted, storage in memory, no device prefetcher."""
    return real_run(tmp_path_factory.mktemp("clean-pipeline"), **SETTINGS)


@pytest.fixture(scope="module")
def killed_slow_pipeline(tmp_path_factory):
    """The same experiment killed three times, with slow jittery storage and the device prefetcher."""
    return real_run(
        tmp_path_factory.mktemp("killed-pipeline"),
        kill_at_steps=KILLS,
        device_prefetch=True,
        persistent_workers=True,
        io_latency_ms=LATENCY_MS,
        io_jitter=JITTER,
        transform_ms=TRANSFORM_MS,
        **SETTINGS,
    )


def test_resume_is_bit_exact_with_workers_device_prefetch_and_slow_storage(clean_run, killed_slow_pipeline):
    clean, clean_events = clean_run
    killed, killed_events = killed_slow_pipeline
    assert clean["completed"] and clean["failures"] == 0
    assert killed["completed"] and killed["failures"] == len(KILLS)
    assert killed["steps_executed"] > clean["steps_executed"]  # rolled-back steps were redone
    assert killed["final_state_sha256"] == clean["final_state_sha256"]
    assert surviving_samples(killed_events) == surviving_samples(clean_events)


def test_every_restart_pays_for_cold_workers_and_is_booked_as_restart(killed_slow_pipeline):
    summary, events = killed_slow_pipeline
    ledger = build_ledger(events)
    warmups = [s for s in ledger.segments if s.kind == "warmup"]
    assert [s.attempt for s in warmups] == list(range(len(KILLS) + 1))  # one per attempt: workers start cold
    assert warmups[0].category == C.STARTUP
    seed = SETTINGS["seed"]
    for seg in warmups[1:]:
        assert seg.category == C.RESTART
        # the new workers read the resume step's batch from storage before the first step can run
        first_batch_s = read_latency_s(LATENCY_MS / 1000, JITTER, seed, seg.step) + TRANSFORM_MS / 1000
        assert seg.duration >= first_batch_s
    restart_warmup = sum(s.duration for s in warmups[1:])
    assert summary["buckets"][C.RESTART] > restart_warmup > 0
    # persistent workers cannot outlive the process that owned them: each attempt forked its own
    infos = [e for e in events if e["kind"] == "pipeline_info"]
    assert len(infos) == len(KILLS) + 1 and all(i["persistent_workers"] and i["workers"] == 2 for i in infos)


def _children(pid):
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_loader_workers_die_with_a_supervisor_killed_outright(cli, cli_env, tmp_path):
    """A kernel restart kills the supervisor with no chance to clean up: nothing may linger."""
    out = tmp_path / "r"
    sup = subprocess.Popen(
        [*cli, "run", "--steps", "5000", "--workers", "3", "--io-latency-ms", "30", "--quiet", "--out", str(out)],
        env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        worker, loaders = None, []
        while time.monotonic() < deadline and not loaders:
            time.sleep(0.2)
            events = read_events(out / "events.jsonl") if (out / "events.jsonl").exists() else []
            if any(e["kind"] == "data_wait" for e in events):  # the loop runs: the workers exist
                worker = next(e["pid"] for e in events if e["kind"] == "worker_info")
                loaders = _children(worker)
        assert worker is not None and len(loaders) >= 3, "the run never got going"
    finally:
        sup.kill()
        sup.wait()
    time.sleep(3)
    survivors = [pid for pid in [worker, *loaders] if _alive(pid)]
    for pid in survivors:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    assert survivors == []
