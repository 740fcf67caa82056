"""The ledger on hand-written event logs, where every expected second is known."""

from collections import defaultdict

import pytest

import goodputlab as gl
from goodputlab import categories as C
from goodputlab.measure import events as E
from goodputlab.engine.api import TIMELINE_SEGMENTS
from goodputlab.measure.ledger import (
    TimelineBins, build_ledger, per_step, summarize, surviving_executions, surviving_samples,
)  # fmt: skip


def ev(t, kind, attempt=0, step=None, **kw):
    return {"t": t, "attempt": attempt, "step": step, "kind": kind, **kw}


# Two steps saved, two more run and the worker is killed in step 3; the second
# attempt restores step 2 and redoes steps 2 and 3.
ONE_FAILURE = [
    ev(0.0, "start"),
    ev(0.1, "spawn"),
    ev(0.3, "init"),
    ev(1.0, "warmup", step=0),
    ev(1.2, "compute", step=0),
    ev(1.5, "step_end", step=0, loss=4.0, samples=[1, 2]),
    ev(1.6, "data_wait", step=1),
    ev(1.7, "compute", step=1),
    ev(2.0, "step_end", step=1, loss=3.5, samples=[3, 4]),
    ev(2.1, "ckpt_save", step=1),
    ev(2.3, "ckpt_commit", ckpt_step=2),
    ev(2.3, "data_wait", step=2),
    ev(2.4, "compute", step=2),
    ev(2.7, "step_end", step=2, loss=3.0, samples=[5, 6]),
    ev(2.8, "data_wait", step=3),
    ev(2.9, "compute", step=3),
    ev(3.0, "failure", cause="poisson"),
    ev(3.05, "step_end", step=3, loss=9.9, samples=[7, 8]),  # stamped after the kill: ignored
    ev(3.2, "restart_delay"),
    ev(3.5, "spawn", attempt=1),
    ev(3.6, "init", attempt=1),
    ev(4.0, "restore", attempt=1),
    ev(4.4, "restored", attempt=1, ckpt_step=2),
    ev(4.5, "warmup", attempt=1, step=2),
    ev(4.6, "compute", attempt=1, step=2),
    ev(4.9, "step_end", attempt=1, step=2, loss=3.0, samples=[5, 6]),
    ev(5.0, "data_wait", attempt=1, step=3),
    ev(5.1, "compute", attempt=1, step=3),
    ev(5.4, "step_end", attempt=1, step=3, loss=2.5, samples=[7, 8]),
    ev(5.5, "ckpt_save", attempt=1, step=3),
    ev(5.7, "ckpt_commit", attempt=1, ckpt_step=4),
    ev(5.7, "finish", attempt=1, step=4, final_state_sha256="ab" * 32, final_loss=2.5),
    ev(5.7, "exit", attempt=1),
    ev(5.9, "teardown", attempt=1),
    ev(6.0, "end", attempt=1, completed=True, reason="completed", resume_step=4),
]

EXPECTED = {
    C.STARTUP: 0.1 + 0.2 + 0.7 + 0.2,
    C.PRODUCTIVE: 0.3 + 0.3 + 0.3 + 0.3,
    C.LOST_WORK: 0.3 + 0.1,
    C.OTHER: 0.1 * 5 + 0.2 + 0.1,
    C.DATA_WAIT: 0.1 * 4,
    C.CHECKPOINT_SAVE: 0.2 + 0.2,
    C.RESTART: 0.2 + 0.3 + 0.1 + 0.4 + 0.1,
    C.CHECKPOINT_RESTORE: 0.5,
    C.STRAGGLER_WAIT: 0.0,  # one process: nobody to wait for
    C.DEGRADED: 0.0,  # no replica groups
}


def test_every_second_is_booked_to_the_right_category():
    ledger = build_ledger(ONE_FAILURE)
    assert ledger.wall_s == pytest.approx(6.0)
    for cat in C.CATEGORIES:
        assert ledger.buckets[cat] == pytest.approx(EXPECTED[cat]), cat
    assert sum(ledger.buckets.values()) == pytest.approx(ledger.wall_s, abs=1e-9)
    assert ledger.goodput == pytest.approx(1.2 / 6.0)
    assert ledger.failure_times == [3.0]
    assert ledger.completed


def test_order_of_the_log_does_not_matter():
    shuffled = list(reversed(ONE_FAILURE))
    assert build_ledger(shuffled).buckets == pytest.approx(build_ledger(ONE_FAILURE).buckets)


def test_rolled_back_steps_are_lost_and_redone_steps_survive():
    assert surviving_executions(ONE_FAILURE) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    rows = {(r["attempt"], r["step"]): r for r in per_step(ONE_FAILURE)}
    assert not rows[(0, 2)]["survived"] and not rows[(0, 3)]["survived"]
    assert rows[(1, 3)]["compute_s"] == pytest.approx(0.3)
    assert rows[(0, 3)]["compute_s"] == pytest.approx(0.1)  # cut short by the kill
    assert rows[(0, 3)]["loss"] is None  # its late step_end was dropped


def test_surviving_samples_follow_the_final_lineage():
    assert surviving_samples(ONE_FAILURE) == [[1, 2], [3, 4], [5, 6], [7, 8]]


def test_summary_fields():
    s = summarize(ONE_FAILURE, {"steps": 4})
    assert s["failures"] == 1
    assert s["checkpoints"] == 2
    assert s["steps_executed"] == 6
    assert s["steps_completed"] == 4
    assert s["initial_loss"] == 4.0 and s["final_loss"] == 2.5
    assert s["final_state_sha256"] == "ab" * 32
    assert s["attempts"] == 2
    assert set(s["buckets"]) == set(C.CATEGORIES)


def test_a_run_stopped_by_its_failure_budget_loses_what_it_did_not_save():
    events = ONE_FAILURE[:17] + [
        ev(3.1, "teardown"),
        ev(3.2, "end", completed=False, reason="failure budget exhausted", resume_step=2),
    ]
    ledger = build_ledger(events)
    assert not ledger.completed
    assert ledger.buckets[C.PRODUCTIVE] == pytest.approx(0.6)  # steps 0 and 1, saved at step 2
    assert ledger.buckets[C.LOST_WORK] == pytest.approx(0.4)
    s = summarize(events, {"steps": 4})
    assert s["steps_completed"] == 2 and s["final_state_sha256"] is None
    assert sum(ledger.buckets.values()) == pytest.approx(ledger.wall_s)


def test_coalesced_segments_keep_the_total():
    ledger = build_ledger(ONE_FAILURE)
    merged = ledger.coalesced()
    assert len(merged) < len(ledger.segments)
    assert sum(s.duration for s in merged) == pytest.approx(ledger.wall_s)


def _tiny_steps_log(path, steps=8_000, kill_at=5_200, every=2_000):
    """A recorder's log: 1 s start-up, then steps of 0.1 ms data wait, 0.3 ms compute and 0.05 ms
    bookkeeping, a 20 ms save every ``every`` steps, killed after step ``kill_at``; the restart (1 s)
    resumes from the last save. Every phase of a step is far shorter than a timeline's resolution."""
    lines = []

    def emit(t, attempt, step, kind, **f):
        lines.append(E.event_line(t, attempt, step, kind, f))

    emit(0.0, 0, None, E.W_INIT, total_steps=steps)
    t, resume = 1.0, 0
    for attempt, (first, last) in enumerate([(0, kill_at), (None, steps - 1)]):
        if attempt:
            emit(t, 0, None, E.SUP_FAILURE, cause="killed")
            emit(t + 0.001, 1, None, E.W_INIT, total_steps=steps)
            t, first = t + 1.0, resume
        emit(t, attempt, first, E.W_WARMUP)
        t += 0.0005
        for s in range(first, last + 1):
            emit(t, attempt, s, E.W_DATA_WAIT)
            emit(t + 0.0001, attempt, s, E.W_COMPUTE)
            emit(t + 0.0004, attempt, s, E.W_STEP_END, loss=1.0)
            t += 0.00045
            if (s + 1) % every == 0 and s < last:
                emit(t, attempt, s, E.W_CKPT_SAVE)
                emit(t + 0.02, attempt, s, E.M_CKPT_COMMIT, ckpt_step=s + 1)
                t, resume = t + 0.02, s + 1
    emit(t, 1, None, E.SUP_END, completed=True, clean=True, reason="completed")
    path.mkdir()
    (path / "events.jsonl").write_bytes(b"".join(lines))


def test_a_long_run_of_tiny_steps_is_drawn_in_the_colours_of_its_steps(tmp_path):
    """A recording's timeline merges segments shorter than wall / TIMELINE_SEGMENTS by bins: each bin
    is drawn as its categories side by side, each as long as its time in the bin, so every category
    is drawn as long as it is booked (never in the colour of whatever came before a chain of tiny
    steps, the start-up or a save; nor a step's data wait hidden behind its compute)."""
    _tiny_steps_log(tmp_path / "run")
    run = gl.load_run(tmp_path / "run")
    ledger, booked = run.ledger, run.summary["buckets"]
    min_s = ledger.wall_s / TIMELINE_SEGMENTS
    assert booked[C.LOST_WORK] > 0 and booked[C.DATA_WAIT] > 0 and ledger.buckets == pytest.approx(booked)
    segs = ledger.segments
    assert sum(s.duration for s in segs) == pytest.approx(ledger.wall_s)
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))
    # bounded by the resolution, not the steps: 24,000 phases drawn as at most three segments a bin
    assert len(segs) < 24_000 / 2 and len([s for s in segs if s.duration >= min_s]) < 20
    drawn = defaultdict(float)
    for s in segs:
        drawn[s.category] += s.duration
    for cat in C.CATEGORIES:
        assert drawn[cat] == pytest.approx(booked[cat], abs=1e-9 * ledger.wall_s), cat
    # a compute is drawn where its step ran: a lost step never lands in a bin of surviving ones' time
    for s in segs:
        if s.category in (C.PRODUCTIVE, C.LOST_WORK) and s.duration < min_s:
            assert s.step is not None


def test_a_bin_is_drawn_as_its_categories_side_by_side():
    bins = TimelineBins(min_s=1.5)
    bins.add(0.0, 2.0, C.STARTUP, 0, "init")  # wide: kept, never merged into
    t = 2.0
    for i in range(10):  # steps 0..9 of 0.09 s compute with 0.01 s data wait: steps 0-2 survive
        bins.add(t, t + 0.01, C.DATA_WAIT, 0, "data_wait", i)
        bins.add(t + 0.01, t + 0.1, None, 0, "compute", i)
        t += 0.1
    bins.add(t, 5.0, C.CHECKPOINT_SAVE, 0, "ckpt_save", 9)  # wide
    bins.add(5.0, 5.1, C.OTHER, 1, "init")  # another attempt: a bin of its own
    segs = bins.segments(lambda a, s: s < 3)
    # the bin 2.0-3.0: its categories in the order of CATEGORIES, each as long as its time in it
    assert [(round(s.start, 9), round(s.end, 9), s.category) for s in segs] == [
        (0.0, 2.0, C.STARTUP), (2.0, 2.27, C.PRODUCTIVE), (2.27, 2.37, C.DATA_WAIT), (2.37, 3.0, C.LOST_WORK),
        (3.0, 5.0, C.CHECKPOINT_SAVE), (5.0, 5.1, C.OTHER),
    ]  # fmt: skip
    assert segs[3].end == t and segs[3].kind == "compute" and segs[1].step in (0, 1, 2) and segs[3].step >= 3
    split = TimelineBins(min_s=0.25)  # a bin ends before the next piece would take it past min_s
    for i in range(10):
        split.add(i / 10, (i + 1) / 10, C.DATA_WAIT if i % 2 else C.OTHER, 0, "x", i)
    segs = split.segments()
    assert [round(s.duration, 9) for s in segs] == [0.1] * 10  # five bins of 0.2 s, each two categories
    assert [s.category for s in segs] == [C.DATA_WAIT, C.OTHER] * 5  # in the order of CATEGORIES


def test_empty_log():
    ledger = build_ledger([])
    assert ledger.wall_s == 0 and ledger.goodput == 0
