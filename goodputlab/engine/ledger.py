"""The time ledger: every second of a run's wall time booked to exactly one category.

The event log (``goodputlab.engine.events``) is a sequence of phase changes. Between two
consecutive phase events the run was in the earlier one's phase, so the phases
partition the wall clock by construction: the buckets always sum to the wall time.
What needs judgement is which category a phase belongs to:

* a step's compute is ``productive`` when that execution survives into the
  final model, and ``lost_work`` when a later attempt executes the same step
  again (it was rolled back by a failure) or the run stopped before saving it;
* start-up phases (process launch, imports, first batch) are ``startup`` in the
  first attempt and ``restart`` in every later one, together with the time
  between the kill and the next launch;
* loading a checkpoint is ``checkpoint_restore``; the blocking part of a save is
  ``checkpoint_save``; a blocked ``next(batch)`` is ``data_wait``; bookkeeping
  between steps and process teardown are ``other``;
* in a distributed job, waiting in the gradient all-reduce for the slowest rank
  (``sync_wait``) is ``straggler_wait``. A step's compute may then come in two parts,
  before and after the all-reduce; both count as that step's execution.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from .. import categories as C
from ..recovery import booking
from . import events as E

_SUPERVISOR_KINDS = frozenset(
    {E.SUP_START, E.SUP_SPAWN, E.SUP_FAILURE, E.SUP_RESTART_DELAY, E.SUP_END, E.SUP_TEARDOWN}
) | booking.SUPERVISOR_PHASES
_STATIC = {
    **booking.PHASE_CATEGORIES,  # recovery's phases: hang, handover, resume, activate, crash, loader_rebuild, straggle
    E.SUP_START: C.STARTUP,
    E.SUP_FAILURE: C.RESTART,
    E.SUP_RESTART_DELAY: C.RESTART,
    E.W_RESTORE: C.CHECKPOINT_RESTORE,
    E.W_DATA_WAIT: C.DATA_WAIT,
    E.W_CKPT_SAVE: C.CHECKPOINT_SAVE,
    E.W_SYNC_WAIT: C.STRAGGLER_WAIT,
    E.W_STEP_END: C.OTHER,
    E.W_EXIT: C.OTHER,
    E.SUP_TEARDOWN: C.OTHER,
}
_LAUNCH = frozenset({E.SUP_SPAWN, E.W_INIT, E.W_WARMUP})  # startup, or restart after a failure


@dataclass(frozen=True)
class Segment:
    """A stretch of wall time in one category (seconds since the run started)."""

    start: float
    end: float
    category: str
    attempt: int
    kind: str
    step: int | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Ledger:
    """Where a run's wall time went."""

    segments: list[Segment]
    wall_s: float
    buckets: dict[str, float]
    failure_times: list[float]
    completed: bool

    @property
    def goodput(self) -> float:
        """productive / wall time (0 for an empty run)."""
        return self.buckets[C.PRODUCTIVE] / self.wall_s if self.wall_s > 0 else 0.0

    def shares(self) -> dict[str, float]:
        """Each category's share of the wall time."""
        return {k: (v / self.wall_s if self.wall_s > 0 else 0.0) for k, v in self.buckets.items()}

    def coalesced(self) -> list[Segment]:
        """Adjacent segments of the same attempt and category merged (for timelines)."""
        out: list[Segment] = []
        for s in self.segments:
            if out and out[-1].category == s.category and out[-1].attempt == s.attempt and out[-1].end == s.start:
                prev = out[-1]
                out[-1] = Segment(prev.start, s.end, s.category, s.attempt, prev.kind, prev.step)
            else:
                out.append(s)
        return out

    def rows(self) -> list[dict[str, Any]]:
        """The breakdown as tidy rows: category, seconds, share."""
        return [
            {"category": k, "seconds": v, "share": (v / self.wall_s if self.wall_s > 0 else 0.0)}
            for k, v in self.buckets.items()
        ]


def _drop_after_kill(events: list[dict]) -> list[dict]:
    """Remove worker events stamped after the supervisor killed that worker (a race of microseconds)."""
    killed_at: dict[int, float] = {}
    for e in events:
        if e["kind"] == E.SUP_FAILURE:
            killed_at[e["attempt"]] = e["t"]
    return [
        e
        for e in events
        if e["kind"] in _SUPERVISOR_KINDS or e["attempt"] not in killed_at or e["t"] <= killed_at[e["attempt"]]
    ]


def surviving_executions(events: Iterable[dict]) -> set[tuple[int, int]]:
    """``(attempt, step)`` of every step execution that is part of the final model.

    An execution survives when it completed, no later attempt executed the same
    step, and the step is covered by the end state: the whole run when it
    completed, else the newest valid checkpoint it left behind.
    """
    events = list(events)
    done = {(e["attempt"], e["step"]) for e in events if e["kind"] == E.W_STEP_END}
    last_attempt: dict[int, int] = {}
    for e in events:
        if e["kind"] == E.W_COMPUTE:
            last_attempt[e["step"]] = max(last_attempt.get(e["step"], -1), e["attempt"])
    end = next((e for e in reversed(events) if e["kind"] == E.SUP_END), None)
    limit = None
    if end is not None and not end.get("completed", False):
        limit = end.get("resume_step", 0)  # steps below this are in the newest valid checkpoint
    return {
        (a, s)
        for (a, s) in done
        if last_attempt.get(s) == a and (limit is None or s < limit)
    }


@dataclass(frozen=True)
class _Log:
    """An event log made ready to read: what every reading of it starts with, written once."""

    in_order: list[dict]  # every event, sorted by time
    events: list[dict]  # the same, less a killed worker's events stamped after its kill
    survivors: set[tuple[int, int]]  # the step executions that are part of the final model
    phases: list[dict]  # the phase events (each lasts until the next)


def _read(events: Iterable[dict]) -> _Log:
    """Sort by time, drop events after a kill, find the surviving step executions, pick the phases."""
    in_order = sorted(events, key=lambda e: e["t"])
    kept = _drop_after_kill(in_order)
    return _Log(in_order, kept, surviving_executions(kept), [e for e in kept if e["kind"] in E.PHASES])


def build_ledger(events: Iterable[dict]) -> Ledger:
    """Turn an event log into a :class:`Ledger`. Events may be in any order."""
    return _ledger(_read(events))


def _ledger(log: _Log) -> Ledger:
    phases, buckets = log.phases, C.empty_buckets()
    segments: list[Segment] = []
    if not phases:
        return Ledger([], 0.0, buckets, [], False)
    t_start = phases[0]["t"]
    for cur, nxt in zip(phases, phases[1:]):
        cat = _category(cur, log.survivors)
        seg = Segment(cur["t"] - t_start, nxt["t"] - t_start, cat, cur["attempt"], cur["kind"], cur.get("step"))
        if seg.duration > 0:
            segments.append(seg)
            buckets[cat] += seg.duration
    wall = phases[-1]["t"] - t_start
    end = next((e for e in reversed(log.events) if e["kind"] == E.SUP_END), None)
    failures = [e["t"] - t_start for e in log.events if e["kind"] == E.SUP_FAILURE]
    return Ledger(segments, wall, buckets, failures, bool(end and end.get("completed")))


def _category(event: dict, survivors: set[tuple[int, int]]) -> str:
    kind = event["kind"]
    if kind == E.W_COMPUTE:
        return C.PRODUCTIVE if (event["attempt"], event["step"]) in survivors else C.LOST_WORK
    if kind in _LAUNCH:
        return C.STARTUP if event["attempt"] == 0 else C.RESTART
    if kind in _STATIC:
        return _STATIC[kind]
    return C.OTHER


def summarize(events: Iterable[dict], config: dict[str, Any]) -> dict[str, Any]:
    """The run's summary: goodput, wall time, the buckets (one per category) and the run's facts.

    Keys: ``goodput, wall_s, buckets, failures, checkpoints, steps_completed,
    steps_executed, final_loss, initial_loss, final_state_sha256, completed,
    stop_reason, attempts, auto_interval, recovery, config`` and details of the worker;
    ``recovery`` is :func:`goodputlab.recovery.booking.recovery_facts` (failures injected by
    mode, hang detection times, straggler time, failed saves, loader rebuilds, handovers).
    """
    log = _read(events)
    ledger, survivors, events = _ledger(log), log.survivors, log.in_order
    losses = {e["step"]: e["loss"] for e in events if e["kind"] == E.W_STEP_END and (e["attempt"], e["step"]) in survivors}
    finish = next((e for e in reversed(events) if e["kind"] == E.M_FINISH), None)
    end = next((e for e in reversed(events) if e["kind"] == E.SUP_END), {})
    info = next((e for e in events if e["kind"] == E.M_WORKER_INFO), {})
    steps_completed = config["steps"] if ledger.completed else int(end.get("resume_step", 0))
    auto = next((e for e in reversed(events) if e["kind"] == E.M_CKPT_INTERVAL), None)
    return {
        "goodput": ledger.goodput,
        "wall_s": ledger.wall_s,
        "buckets": ledger.buckets,
        "shares": ledger.shares(),
        "failures": sum(1 for e in events if e["kind"] == E.SUP_FAILURE),
        "checkpoints": sum(1 for e in events if e["kind"] == E.M_CKPT_COMMIT),
        "checkpoints_skipped_invalid": sum(1 for e in events if e["kind"] == E.M_CKPT_INVALID),
        "steps_completed": steps_completed,
        "steps_executed": len({(e["attempt"], e["step"]) for e in events if e["kind"] == E.W_COMPUTE}),
        "initial_loss": losses.get(0),
        "final_loss": losses[max(losses)] if losses else None,
        "final_state_sha256": finish["final_state_sha256"] if finish else None,
        "completed": ledger.completed,
        "stop_reason": end.get("reason", "unknown"),
        "attempts": 1 + max((e["attempt"] for e in events), default=0),
        "device": info.get("device"),
        "model_params": info.get("params"),
        "state_bytes": info.get("state_bytes"),
        "torch_version": info.get("torch"),
        # --ckpt-every auto: the last interval the run chose and the estimates behind it
        "auto_interval": (
            {k: auto[k] for k in ("interval_s", "save_s", "mtbf_s", "failures_seen") if k in auto} if auto else None
        ),
        "recovery": booking.recovery_facts(events, E.PHASES),
        "config": config,
    }


def per_step(events: Iterable[dict]) -> list[dict[str, Any]]:
    """One row per step execution: attempt, step, data wait, compute and sync wait seconds, loss, survived."""
    log = _read(events)
    events, survivors, phases = log.events, log.survivors, log.phases
    rows: dict[tuple[int, int], dict[str, Any]] = defaultdict(
        lambda: {"data_wait_s": 0.0, "compute_s": 0.0, "sync_wait_s": 0.0, "loss": None}
    )
    for cur, nxt in zip(phases, phases[1:]):
        if cur["kind"] == E.W_DATA_WAIT:
            rows[(cur["attempt"], cur["step"])]["data_wait_s"] += nxt["t"] - cur["t"]
        elif cur["kind"] == E.W_COMPUTE:
            rows[(cur["attempt"], cur["step"])]["compute_s"] += nxt["t"] - cur["t"]
        elif cur["kind"] == E.W_SYNC_WAIT:
            rows[(cur["attempt"], cur["step"])]["sync_wait_s"] += nxt["t"] - cur["t"]
    for e in events:
        if e["kind"] == E.W_STEP_END and (e["attempt"], e["step"]) in rows:
            rows[(e["attempt"], e["step"])]["loss"] = e["loss"]
    return [
        {"attempt": a, "step": s, **r, "survived": (a, s) in survivors}
        for (a, s), r in sorted(rows.items())
    ]


def surviving_samples(events: Iterable[dict]) -> list[list[int]]:
    """The sample indices of every step of the final model, in step order."""
    log = _read(events)
    events, survivors = log.events, log.survivors
    by_step = {
        e["step"]: e["samples"]
        for e in events
        if e["kind"] == E.W_STEP_END and (e["attempt"], e["step"]) in survivors
    }
    return [by_step[s] for s in sorted(by_step)]
