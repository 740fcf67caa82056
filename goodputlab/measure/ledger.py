"""The time ledger: every second of a run's wall time booked to exactly one category.

The event log (``goodputlab.measure.events``) is a sequence of phase changes. Between two
consecutive phase events the run was in the earlier one's phase, so the phases
partition the wall clock by construction: the buckets always sum to the wall time.
What needs judgement is which category a phase belongs to:

* a step's compute is ``productive`` when that execution survives into the
  final model, and ``lost_work`` when a later attempt executes the same step
  again (it was rolled back by a failure) or the run stopped before saving it
  (the rule: :mod:`goodputlab.measure.steps`);
* start-up phases (process launch, imports, first batch) are ``startup`` in the
  first attempt and ``restart`` in every later one, together with the time
  between the kill and the next launch;
* loading a checkpoint is ``checkpoint_restore``; the blocking part of a save is
  ``checkpoint_save``; a blocked ``next(batch)`` is ``data_wait``; bookkeeping
  between steps and process teardown are ``other``;
* in a distributed job, waiting in the gradient all-reduce for the slowest rank
  (``sync_wait``) is ``straggler_wait``. A step's compute may then come in two parts,
  before and after the all-reduce; both count as that step's execution.

One pass: :class:`LedgerFold` reads the events in time order and keeps what the
attempts and checkpoints need, never a record per step. Whether a step's compute
survives is known only at the end (a later attempt may redo it), so the fold adds the
compute of completed steps up per attempt in *chunks* of steps that start at each
checkpoint's resume point; at the end each chunk is wholly productive or wholly lost
when the restarts resumed from checkpoints the log recorded (or from step 0). When one
did not (a loop that resumed elsewhere), :func:`fold` reads the events a second time
with chunks cut where survival changes: exact either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .. import categories as C
from . import events as E
from .fold import Folded, LedgerFold, OutOfOrder, fold, sorted_tuples

__all__ = [
    "Segment", "Ledger", "TimelineBins", "coalesce", "LedgerFold", "Folded", "OutOfOrder", "fold", "build_ledger", "summarize",
    "summary_of", "per_step", "surviving_executions", "surviving_samples",
]  # fmt: skip


@dataclass(frozen=True)
class Segment:
    """A stretch of wall time in one category (seconds since the run started)."""

    start: float
    end: float
    category: str
    attempt: int
    kind: str
    step: int | None = None
    #: the timeline strip it belongs to: "" for its attempt's; a torchft job's are its replica groups'
    #: (``"replica R"``, :func:`goodputlab.distributed.replica_ledger.job_ledger`)
    lane: str = ""

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def strip(self) -> str:
        """The timeline strip it is drawn in: its ``lane``, else ``"attempt N"``."""
        return self.lane or f"attempt {self.attempt}"


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
        """Adjacent segments of the same strip, attempt and category merged (for timelines)."""
        return coalesce(self.segments)

    def rows(self) -> list[dict[str, Any]]:
        """The breakdown as tidy rows: category, seconds, share."""
        return [
            {"category": k, "seconds": v, "share": (v / self.wall_s if self.wall_s > 0 else 0.0)}
            for k, v in self.buckets.items()
        ]


def coalesce(segments: Iterable[Segment]) -> list[Segment]:
    """Adjacent segments of the same strip, attempt and category merged (the first one's kind and step)."""
    out: list[Segment] = []
    for s in segments:
        prev = out[-1] if out else None
        if prev and prev.category == s.category and prev.attempt == s.attempt and prev.lane == s.lane and prev.end == s.start:
            out[-1] = Segment(prev.start, s.end, s.category, s.attempt, prev.kind, prev.step, prev.lane)
        else:
            out.append(s)
    return out


class TimelineBins:
    """A timeline's segments, those shorter than ``min_s`` (a chart's resolution) merged by bins.

    Consecutive short segments of one strip and attempt gather in a bin until the next one would take
    its span past ``min_s``, or a segment of ``min_s`` or more, a gap or another attempt comes. A bin
    is drawn as one segment per category it holds, side by side in the order of
    :data:`~goodputlab.categories.CATEGORIES`, each as long as the time booked to it in the bin (its
    kind and step: that category's longest piece's); a wide segment is kept as it is and never merged
    into. So every category's drawn time equals its booked time, a strip holds about wall / ``min_s``
    bins however many steps it ran, and nothing inside a bin is moved by more than ``min_s``.
    (Merging into the segment before, a chain of tiny steps took the colour of whatever came first;
    drawing a bin in its largest category alone hid a step's data wait.)

    A piece's category may be None (a step's compute: productive or lost once survival is known);
    :meth:`segments` decides it with ``survives(attempt, step)``. Memory: one entry per wide
    segment or bin, never one per step.
    """

    def __init__(self, min_s: float = 0.0):
        self.min_s = min_s
        self.out: list = []  # a kept segment: [start, end, category, attempt, kind, step, lane]; a bin: _Bin
        self.open: dict[tuple[str, int], _Bin] = {}  # (lane, attempt) -> the bin still gathering
        self.last: _Bin | None = None  # the bin opened last

    def add(self, start: float, end: float, category: str | None, attempt: int, kind: str,
            step: int | None = None, lane: str = "") -> None:  # fmt: skip
        if end - start >= self.min_s:
            if self.open:
                self.open.pop((lane, attempt), None)
            self.out.append([start, end, category, attempt, kind, step, lane])
            return
        b = self.open.get((lane, attempt))
        if b is not None and b.end == start and end - b.start <= self.min_s:
            b.add(start, end, category, kind, step)
            return
        b = self.open[(lane, attempt)] = self.last = _Bin(start, attempt, lane)
        b.add(start, end, category, kind, step)
        self.out.append(b)

    def visit(self, ev: tuple, start: float, end: float | None, category: str | None) -> None:
        """:meth:`add` a fold's phase (a fold's ``visit``): the bin it extends found without a look-up."""
        if end is None or end <= start:
            return
        b = self.last
        if b is not None and b.end == start and end - b.start <= self.min_s and b.attempt == ev[1] and not b.lane:
            b.add(start, end, category, ev[3], ev[2])  # short (the bin's span holds it) and next to it
            return
        self.add(start, end, category, ev[1], ev[3], ev[2])

    def segments(self, survives: Callable[[int, int], bool] | None = None, t0: float = 0.0) -> list[Segment]:
        """The segments, times less ``t0``; ``survives(attempt, step)`` decides a compute's category."""
        out = []
        for e in self.out:
            if type(e) is list:
                start, end, cat, attempt, kind, step, lane = e
                if cat is None:
                    cat = C.PRODUCTIVE if survives(attempt, step) else C.LOST_WORK
            else:  # a bin: its categories side by side, each as long as its time in the bin
                parts = e.parts(survives)
                at = e.start
                for i, (cat, secs, kind, step) in enumerate(parts):
                    end = e.end if i == len(parts) - 1 else min(at + secs, e.end)
                    out.append(Segment(at - t0, end - t0, cat, e.attempt, kind, step, e.lane))
                    at = end
                continue
            out.append(Segment(start - t0, end - t0, cat, attempt, kind, step, lane))
        return out


class _Bin:
    """Short segments gathered into one of a :class:`TimelineBins`' bins."""

    __slots__ = ("start", "end", "attempt", "lane", "cats", "runs")

    def __init__(self, start: float, attempt: int, lane: str):
        self.start = self.end = start
        self.attempt, self.lane = attempt, lane
        self.cats: dict[str, list] = {}  # category -> [seconds, its longest piece's seconds, kind, step]
        self.runs: list[list] = []  # compute of consecutive steps: [first step, last step, seconds, longest, kind, step]

    def add(self, start: float, end: float, category: str | None, kind: str, step: int | None) -> None:
        self.end = end
        d = end - start
        if category is None:
            r = self.runs[-1] if self.runs else None
            if r is not None and step is not None and r[1] is not None and r[1] <= step <= r[1] + 1:
                r[1] = step
                r[2] += d
                if d > r[3]:
                    r[3], r[4], r[5] = d, kind, step
            else:
                self.runs.append([step, step, d, d, kind, step])
            return
        c = self.cats.get(category)
        if c is None:
            self.cats[category] = [d, d, kind, step]
        else:
            c[0] += d
            if d > c[1]:
                c[1], c[2], c[3] = d, kind, step

    def parts(self, survives: Callable[[int, int], bool] | None) -> list[tuple[str, float, str, int | None]]:
        """(category, seconds, kind, step) of each category in the bin, in the order of ``CATEGORIES``
        (kind and step: its longest piece's)."""
        cats = {k: list(v) for k, v in self.cats.items()}
        a = self.attempt
        for lo, hi, secs, longest, kind, step in self.runs:
            own = survives(a, step)
            if survives(a, lo) == survives(a, hi) == own:
                parts = [(own, secs, longest, kind, step)]
            else:  # survival changes inside the run: its seconds split by the steps on each side
                n = hi - lo + 1
                kept = sum(1 for s in range(lo, hi + 1) if survives(a, s))
                mine = kept if own else n - kept
                other = next(s for s in (lo, hi) if survives(a, s) != own)
                parts = [(own, secs * mine / n, longest, kind, step), (not own, secs * (n - mine) / n, 0.0, kind, other)]
            for surv, sec, lng, k, st in parts:
                cat = C.PRODUCTIVE if surv else C.LOST_WORK
                c = cats.get(cat)
                if c is None:
                    cats[cat] = [sec, lng, k, st]
                else:
                    c[0] += sec
                    if lng > c[1]:
                        c[1], c[2], c[3] = lng, k, st
        order = {c: i for i, c in enumerate(C.CATEGORIES)}
        return [(cat, v[0], v[2], v[3]) for cat, v in sorted(cats.items(), key=lambda kv: order.get(kv[0], len(order)))
                if v[0] > 0]


class _Segments:
    """Collects a fold's phases as segments; compute's category is decided once survival is known.

    ``min_s``: segments shorter than this are merged by bins of a chart's resolution
    (:class:`TimelineBins`): a million-step run draws as a few thousand segments."""

    def __init__(self, min_s: float = 0.0):
        self.min_s = min_s
        self.bins = TimelineBins(min_s)

    def reset(self) -> None:
        self.bins = TimelineBins(self.min_s)

    def __call__(self, ev: tuple, start: float, end: float | None, category: str | None) -> None:
        self.bins.visit(ev, start, end, category)

    def segments(self, done: Folded) -> list[Segment]:
        return self.bins.segments(done.survival.survives, done.t_start)


def segment_collector(min_s: float = 0.0) -> _Segments:
    """A fold's ``visit`` that collects the ledger's segments (see :class:`_Segments`)."""
    return _Segments(min_s)


def step_rows() -> _StepRows:
    """A fold's ``visit`` that collects one row per step execution (see :func:`per_step`)."""
    return _StepRows()


def build_ledger(events: Iterable[dict]) -> Ledger:
    """Turn an event log into a :class:`Ledger` (every segment kept). Events may be in any order."""
    tuples = sorted_tuples(events)
    seg = _Segments()
    done = fold(lambda: [tuples], visit=seg)
    return ledger_of(done, seg.segments(done))


def ledger_of(done: Folded, segments: list[Segment]) -> Ledger:
    """The :class:`Ledger` of a fold, with ``segments`` (for charts)."""
    return Ledger(segments, done.wall_s, done.buckets, done.failure_times, done.completed)


def summarize(events: Iterable[dict], config: dict[str, Any]) -> dict[str, Any]:
    """The run's summary: goodput, wall time, the buckets (one per category) and the run's facts.

    Keys: ``goodput, wall_s, buckets, failures, checkpoints, steps_completed,
    steps_executed, final_loss, initial_loss, final_state_sha256, completed,
    stop_reason, attempts, auto_interval, recovery, config`` and details of the worker;
    ``recovery`` is :func:`goodputlab.recovery.booking.recovery_facts` (failures injected by
    mode, hang detection times, straggler time, failed saves, loader rebuilds, handovers).
    """
    tuples = sorted_tuples(events)
    return summary_of(fold(lambda: [tuples]), config)


def summary_of(done: Folded, config: dict[str, Any]) -> dict[str, Any]:
    """The summary (see :func:`summarize`) of a finished fold."""
    end = done.end or {}
    wall = done.wall_s
    steps_completed = config["steps"] if done.completed else int(end.get("resume_step") or 0)
    auto, info, finish = done.auto_interval, done.worker_info or {}, done.finish
    return {
        "goodput": done.buckets[C.PRODUCTIVE] / wall if wall > 0 else 0.0,
        "wall_s": wall,
        "buckets": done.buckets,
        "shares": {k: (v / wall if wall > 0 else 0.0) for k, v in done.buckets.items()},
        "failures": done.failures,
        "checkpoints": done.checkpoints,
        "checkpoints_skipped_invalid": done.checkpoints_invalid,
        "steps_completed": steps_completed,
        "steps_executed": done.steps_executed,
        "initial_loss": done.initial_loss,
        "final_loss": done.final_loss,
        "final_state_sha256": finish.get("final_state_sha256") if finish else None,
        "completed": done.completed,
        "stop_reason": end.get("reason", "unknown"),
        "attempts": done.attempts,
        "device": info.get("device"),
        "model_params": info.get("params"),
        "state_bytes": info.get("state_bytes"),
        "torch_version": info.get("torch"),
        # --ckpt-every auto: the last interval the run chose and the estimates behind it
        "auto_interval": (
            {k: auto[k] for k in ("interval_s", "save_s", "mtbf_s", "failures_seen") if k in auto} if auto else None
        ),
        "recovery": done.recovery,
        "config": config,
        # custom badput (rec.custom("eval")): seconds by name, a part of ``other``
        **({"custom": dict(done.custom)} if done.custom else {}),
    }


class _StepRows:
    """Collects one row per step execution from a fold's phases (see :func:`per_step`)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, int], dict[str, Any]] = {}
        self.losses: dict[tuple[int, int], Any] = {}
        self.samples: dict[tuple[int, int], Any] = {}
        self.ends: dict[tuple[int, int], float] = {}  # each execution's step_end: seconds on the log's clock

    def reset(self) -> None:
        self.__init__()

    _FIELD = {E.W_DATA_WAIT: "data_wait_s", E.W_COMPUTE: "compute_s", E.W_SYNC_WAIT: "sync_wait_s"}

    def __call__(self, ev: tuple, start: float, end: float | None, category: str | None) -> None:
        t, attempt, step, kind, fields = ev
        if kind == E.W_STEP_END:
            self.losses[(attempt, step)] = fields.get("loss")
            self.ends[(attempt, step)] = t
            if "samples" in fields:
                self.samples[(attempt, step)] = fields["samples"]
            return
        name = self._FIELD.get(kind)
        if name is None or end is None:
            return
        row = self.rows.get((attempt, step))
        if row is None:
            row = self.rows[(attempt, step)] = {"data_wait_s": 0.0, "compute_s": 0.0, "sync_wait_s": 0.0}
        row[name] += end - start

    def table(self, done: Folded) -> list[dict[str, Any]]:
        survives = done.survival.survives
        return [
            {"attempt": a, "step": s, **r, "loss": self.losses.get((a, s)), "survived": survives(a, s),
             "t_end_s": self.ends.get((a, s))}
            for (a, s), r in sorted(self.rows.items())
        ]


def per_step(events: Iterable[dict] | Callable[[], Iterable[list[tuple]]]) -> list[dict[str, Any]]:
    """One row per step execution: attempt, step, data wait, compute and sync wait seconds, loss, survived.

    ``events``: a list of events, or a function giving a fresh stream of event batches each time it is
    called (a recording read from its files, see :mod:`goodputlab.measure.recording`)."""
    source = events if callable(events) else (lambda tuples=sorted_tuples(events): [tuples])
    rows = _StepRows()
    return rows.table(fold(source, visit=rows))


def surviving_executions(events: Iterable[dict]) -> set[tuple[int, int]]:
    """``(attempt, step)`` of every step execution that is part of the final model."""
    tuples = sorted_tuples(events)
    done = fold(lambda: [tuples])
    return {(a, s) for a in done.survival.done for lo, hi in done.survival.surviving(a) for s in range(lo, hi + 1)}


def surviving_samples(events: Iterable[dict]) -> list[list[int]]:
    """The sample indices of every step of the final model, in step order."""
    tuples = sorted_tuples(events)
    rows = _StepRows()
    done = fold(lambda: [tuples], visit=rows)
    by_step = {s: v for (a, s), v in rows.samples.items() if done.survival.survives(a, s)}
    return [by_step[s] for s in sorted(by_step)]


