"""End to end with real processes: kills, restarts, exact resume, closure of the ledger."""

import time
from pathlib import Path

import pytest

from goodputlab import categories as C
from goodputlab.checkpoints.store import CheckpointStore, CheckpointWarning
from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import read_events
from goodputlab.measure.ledger import surviving_samples
from goodputlab.engine.supervisor import run_supervised

from conftest import KILLS, RESUME_SETTINGS, real_run


def test_killed_run_ends_bit_identical_to_the_uninterrupted_one(clean_run, killed_run):
    clean, _ = clean_run
    killed, _ = killed_run
    assert clean["completed"] and killed["completed"]
    assert clean["failures"] == 0
    assert killed["failures"] == len(KILLS) >= 3
    assert killed["final_state_sha256"] == clean["final_state_sha256"]
    assert killed["final_loss"] == clean["final_loss"]
    assert killed["steps_executed"] > clean["steps_executed"] == RESUME_SETTINGS["steps"]


def test_no_sample_is_repeated_or_skipped(clean_run, killed_run):
    _, clean_events = clean_run
    _, killed_events = killed_run
    clean_samples = surviving_samples(clean_events)
    killed_samples = surviving_samples(killed_events)
    assert len(killed_samples) == RESUME_SETTINGS["steps"]
    assert killed_samples == clean_samples
    flat = [i for batch in killed_samples for i in batch]
    assert len(flat) == len(set(flat))  # 90 x 16 samples < one epoch of 8192: all distinct


def test_ledger_closes_and_books_failures(killed_run):
    summary, events = killed_run
    total = sum(summary["buckets"].values())
    assert abs(total - summary["wall_s"]) / summary["wall_s"] < 0.01
    b = summary["buckets"]
    assert b[C.LOST_WORK] > 0 and b[C.RESTART] > 0 and b[C.CHECKPOINT_RESTORE] > 0
    assert b[C.STARTUP] > 0 and b[C.PRODUCTIVE] > 0 and b[C.CHECKPOINT_SAVE] > 0
    assert summary["goodput"] == pytest.approx(b[C.PRODUCTIVE] / summary["wall_s"])
    restored = [e for e in events if e["kind"] == "restored"]
    assert len(restored) == len(KILLS)
    assert all(e["ckpt_step"] % RESUME_SETTINGS["ckpt_every"] == 0 for e in restored)


def test_clean_run_has_nothing_lost(clean_run):
    summary, _ = clean_run
    b = summary["buckets"]
    assert b[C.LOST_WORK] == 0 and b[C.RESTART] == 0 and b[C.CHECKPOINT_RESTORE] == 0
    assert summary["checkpoints"] == RESUME_SETTINGS["steps"] // RESUME_SETTINGS["ckpt_every"] + 1  # + the final save


def test_summary_has_the_documented_keys(clean_run):
    summary, _ = clean_run
    for key in (
        "goodput wall_s buckets failures checkpoints steps_completed steps_executed "
        "final_loss final_state_sha256 config"
    ).split():
        assert key in summary
    assert list(summary["buckets"]) == list(C.CATEGORIES)
    assert summary["config"]["kill_at_steps"] == []


def test_wall_time_matches_an_outside_clock(tmp_path):
    t = time.monotonic()
    summary, _ = real_run(tmp_path, steps=30, ckpt_every=10, kill_at_steps=(15,), restart_delay=0.2)
    outside = time.monotonic() - t
    assert summary["failures"] == 1
    assert summary["wall_s"] <= outside
    assert summary["wall_s"] == pytest.approx(outside, abs=0.25)  # the rest is reading the log afterwards


def test_poisson_failures_are_seeded_and_real(tmp_path):
    from goodputlab.engine.supervisor import poisson_failure_rng

    draws = poisson_failure_rng(0).exponential(20.0, size=3)
    # seed 0: the first two workers die within 1.5 s of training (the failure clock starts at a worker's
    # first step), the third has ~20 s to finish; 600 steps train for about 6 s on a 2-core CPU, so both land
    assert draws[0] < 1.5 and draws[1] < 1.5 and draws[2] > 15
    summary, events = real_run(tmp_path, steps=600, ckpt_every=20, mtbf=20.0, seed=0, restart_delay=0.0, max_failures=100)
    assert summary["completed"]
    assert summary["failures"] >= 2  # those two kills land whatever the machine's speed
    pids = [e["pid"] for e in events if e["kind"] == "worker_info"]
    assert len(set(pids)) == len(pids)  # every attempt was a new process
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie_or_other(pid)


def _is_zombie_or_other(pid):
    try:
        return "goodputlab.engine.worker" not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True


def test_failure_budget_stops_the_run_cleanly(tmp_path):
    summary, _ = real_run(tmp_path, steps=2000, ckpt_every=100, mtbf=0.3, max_failures=2, restart_delay=0.0, seed=1)
    assert not summary["completed"]
    assert summary["failures"] == 3
    assert "--max-failures 2" in summary["stop_reason"]
    assert summary["final_state_sha256"] is None
    assert abs(sum(summary["buckets"].values()) - summary["wall_s"]) / summary["wall_s"] < 0.01


def test_damaged_newest_checkpoint_is_skipped_on_restart(tmp_path, clean_run):
    """Kill after the step-40 save, damage that save; the restart must fall back to step 20 and still end exact."""
    settings = dict(RESUME_SETTINGS)
    out = tmp_path / "run"
    # first leg: killed after step 65 with no failure budget left (checkpoints 20, 40, 60 on disk)
    first = run_supervised(RunConfig(**settings, kill_at_steps=(65,), max_failures=0), out)
    assert not first["completed"] and first["steps_completed"] == 60
    store = CheckpointStore(out / "ckpt")
    for step in (60, 40):
        f = store.path_for(step) / "state.pt"
        data = bytearray(f.read_bytes())
        data[-50] ^= 0xFF
        f.write_bytes(bytes(data))
    # second leg resumes the same directory to step 90
    with pytest.warns(CheckpointWarning) as caught:  # what the CLI prints, one line per skipped checkpoint
        summary = run_supervised(RunConfig(**settings), out, resume=True)
    assert [str(w.message).split(" (")[0] for w in caught] == [
        "skipped damaged checkpoint of step 60",
        "skipped damaged checkpoint of step 40",
    ]
    events = read_events(out / "events.jsonl")
    invalid = [e["ckpt_step"] for e in events if e["kind"] == "ckpt_invalid"]
    restored = [e["ckpt_step"] for e in events if e["kind"] == "restored"]
    assert invalid == [60, 40] and restored == [20]
    assert summary["checkpoints_skipped_invalid"] == 2
    # CPU bits depend on torch's thread count (its sums split among threads): every worker of both
    # runs must have used the same count, or a mismatch below says nothing about the resume
    threads = {e["threads"] for evs in (events, clean_run[1]) for e in evs if e["kind"] == "worker_info"}
    assert threads == {1} == {summary["threads"], clean_run[0]["threads"]}
    assert summary["final_state_sha256"] == clean_run[0]["final_state_sha256"]


def test_resume_refuses_a_different_batch_size(tmp_path):
    out = tmp_path / "run"
    run_supervised(RunConfig(steps=20, ckpt_every=10), out)
    from goodputlab.errors import ConfigError

    events_before = (out / "events.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="batch_size=8 is invalid: 16, the value of the run being resumed"):
        run_supervised(RunConfig(steps=30, ckpt_every=10, batch_size=8), out, resume=True)
    assert (out / "events.jsonl").read_bytes() == events_before  # refused before anything started
