"""Failures and the input pipeline: resume stays bit-exact, and every restart starts cold workers."""

import pytest

from goodputlab import categories as C
from goodputlab.data import read_latency_s
from goodputlab.ledger import build_ledger, surviving_samples

from conftest import KILLS, RESUME_SETTINGS, real_run

LATENCY_MS, JITTER, TRANSFORM_MS = 40.0, 0.5, 2.0


@pytest.fixture(scope="module")
def killed_slow_pipeline(tmp_path_factory):
    """The reference experiment, killed three times, with slow jittery storage and the device prefetcher."""
    return real_run(
        tmp_path_factory.mktemp("killed-pipeline"),
        kill_at_steps=KILLS,
        device_prefetch=True,
        persistent_workers=True,
        io_latency_ms=LATENCY_MS,
        io_jitter=JITTER,
        transform_ms=TRANSFORM_MS,
        **RESUME_SETTINGS,
    )


def test_resume_is_bit_exact_with_workers_device_prefetch_and_slow_storage(clean_run, killed_slow_pipeline):
    clean, clean_events = clean_run
    killed, killed_events = killed_slow_pipeline
    assert killed["completed"] and killed["failures"] == len(KILLS)
    assert killed["final_state_sha256"] == clean["final_state_sha256"]
    assert surviving_samples(killed_events) == surviving_samples(clean_events)


def test_every_restart_pays_for_cold_workers_and_is_booked_as_restart(killed_slow_pipeline):
    summary, events = killed_slow_pipeline
    ledger = build_ledger(events)
    warmups = [s for s in ledger.segments if s.kind == "warmup"]
    assert [s.attempt for s in warmups] == list(range(len(KILLS) + 1))  # one per attempt: workers start cold
    assert warmups[0].category == C.STARTUP
    seed = RESUME_SETTINGS["seed"]
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
