"""The ledger in one pass over an event log, in memory bounded by attempts and checkpoints (pure).

:class:`LedgerFold` takes events in time order, as tuples ``(t, attempt, step, kind,
fields)`` (``fields``: the event's other fields, a dict), and books each phase when the
next one starts. What it keeps: the buckets, the current phase, and per attempt the steps
it executed and completed as ranges (:class:`~goodputlab.measure.steps.StepSet`) and the
compute seconds of its completed steps in chunks that start at each checkpoint's resume
point. The rules it applies are the ledger's (``docs/ARCHITECTURE.md``, "The ledger"):

* the phases in time order partition the wall clock; a phase's category is its kind's
  (``startup`` for launching in attempt 0, ``restart`` after it);
* events a killed worker stamped after the supervisor's ``failure`` of its attempt are
  left out of the phases (a race of microseconds), as are the step executions they hold;
* a compute is ``productive`` when its execution survives (:class:`~goodputlab.measure.steps.Survival`),
  else ``lost_work``; the counts of the summary (failures, checkpoints, executions,
  recovery's facts) are over every event.

:func:`fold` runs it over a stream of batches, twice when a chunk is neither wholly
productive nor wholly lost (the second pass cuts the chunks where survival changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .. import categories as C
from ..recovery import booking
from . import events as E
from .fold_limits import _CHECK_EVERY, MAX_ATTEMPTS, MAX_CHUNKS, LogLimitError, check  # noqa: F401
from .logread import _NO_FIELDS, StepRun
from .attempt_state import _Attempt, _completed
from .steps import INF, Survival

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
_COMPUTE = None  # a compute phase's category: productive or lost_work, decided at the end
#: kind -> category of a phase, in attempt 0 and in later attempts (markers are absent)


class _Named(str):
    """A category whose phases also count by name: custom badput is ``other``, and its seconds per name."""


_CUSTOM = _Named(C.OTHER)  # equal to "other" (its bucket), told apart by identity
_STATIC[E.R_CUSTOM] = _CUSTOM
_CAT_FIRST = {k: (_COMPUTE if k == E.W_COMPUTE else C.STARTUP if k in _LAUNCH else _STATIC.get(k, C.OTHER)) for k in E.PHASES}
_CAT_LATER = {k: (_COMPUTE if k == E.W_COMPUTE else C.RESTART if k in _LAUNCH else _STATIC.get(k, C.OTHER)) for k in E.PHASES}
_MARKER = "marker"
_SPECIAL = frozenset({E.SUP_FAILURE, E.SUP_END, E.W_INIT, booking.W_STRAGGLE}) | booking.TALLIED

Visit = Callable[[tuple, float, "float | None", "str | None"], None]


class OutOfOrder(ValueError):
    """An event earlier than the one before it: the stream must be sorted by time first."""


@dataclass
class Folded:
    """What a fold found: the ledger's buckets and the summary's facts."""

    buckets: dict[str, float]
    wall_s: float
    t_start: float
    failure_times: list[float]
    completed: bool
    end: dict | None
    finish: dict | None
    worker_info: dict | None
    auto_interval: dict | None
    failures: int
    checkpoints: int
    checkpoints_invalid: int
    steps_executed: int
    initial_loss: Any
    final_loss: Any
    attempts: int
    recovery: dict
    survival: Survival
    partial: bool  # a chunk was neither wholly productive nor wholly lost: fold again with cuts
    last_t: float | None  # the last event's time
    max_step: int | None  # the highest step executed
    inits: list[dict] = field(default_factory=list)  # each attempt's ``init`` fields
    custom: dict[str, float] = field(default_factory=dict)  # custom badput's seconds by name (within ``other``)


class LedgerFold:
    """The ledger of a stream of events, one batch at a time (see the module's docstring).

    ``marks``: per attempt, steps at which to start a chunk (the second pass's cuts).
    ``visit(event, start, end, category)``: called for every phase when it ends (``end``
    None for the last phase of all, at :meth:`result`; ``category`` None for a compute);
    its ``reset()`` when :func:`fold` starts a second pass.
    """

    def __init__(self, marks: dict[int, list[int]] | None = None, visit: Visit | None = None):
        self.marks = marks or {}
        self.visit = visit
        self.buckets = C.empty_buckets()
        self.compute_s = 0.0
        self.attempts: dict[int, _Attempt] = {}
        self.killed: dict[int, float] = {}  # attempt -> time of its failure
        self.last_t = -INF
        self.max_attempt = -1
        self.t_start: float | None = None
        self.phase: tuple | None = None  # the current phase's event
        self.phase_cat: str | None = None
        self.slot: tuple[int, int] | None = None  # the execution computing now: (attempt, step)
        self.slot_s = 0.0  # its compute seconds not yet in a chunk
        self.slot_done = False  # it has completed
        self.failure_times: list[float] = []
        self.end: dict | None = None
        self.finish: dict | None = None
        self.worker_info: dict | None = None
        self.auto: dict | None = None
        self.inits: list[dict] = []
        self.failures = self.checkpoints = self.invalid = 0
        self.tally = booking.RecoveryTally()
        self.straggle_t: float | None = None  # a straggle phase began here (every event's order)
        self.extra_executed: set[tuple[int, int]] = set()  # executions stamped after their attempt's kill
        self.last_event: tuple | None = None
        self.max_done: int | None = None  # the highest step completed
        self.max_ckpt_step: int | None = None  # the newest checkpoint's resume point
        self.chunks = 0  # resume points kept as chunks (at most MAX_CHUNKS)
        self.custom: dict[str, float] = {}  # custom badput's seconds by name (a part of ``other``)
        self.unchecked = 0  # events fed since the limits were last checked

    def _attempt(self, a: int) -> _Attempt:
        A = self.attempts.get(a)
        if A is None:
            if len(self.attempts) >= MAX_ATTEMPTS:
                raise LogLimitError(f"more than {MAX_ATTEMPTS:,} attempts: not a log this ledger reads "
                                    "(docs/BAD_INPUT.md, report)")
            A = self.attempts[a] = _Attempt(self.marks.get(a, ()))
        return A

    def _counted(self, batch: Iterable[tuple]) -> list | tuple:
        """``batch`` as a sequence, its events counted towards the next check of the limits."""
        if not isinstance(batch, (list, tuple)):
            batch = list(batch)
        self.unchecked += len(batch)
        if self.unchecked > _CHECK_EVERY:
            self.check_limits()
        return batch

    def check_limits(self) -> None:
        """Raise :class:`LogLimitError` past a documented limit (:func:`~goodputlab.measure.fold_limits.check`)."""
        self.unchecked = 0
        check(self)

    def feed(self, batch: Iterable[tuple] | StepRun) -> None:
        """Take the next events (tuples ``(t, attempt, step, kind, fields)``, or a :class:`StepRun`), in time order."""
        if isinstance(batch, StepRun):
            self.feed_run(batch)
            return
        batch = self._counted(batch)
        buckets, visit, killed, attempts = self.buckets, self.visit, self.killed, self.attempts
        last_t, max_a = self.last_t, self.max_attempt
        phase, phase_cat = self.phase, self.phase_cat
        slot, slot_s, slot_done = self.slot, self.slot_s, self.slot_done
        cat_first, cat_later, special = _CAT_FIRST, _CAT_LATER, _SPECIAL
        compute_s = self.compute_s
        max_done = self.max_done
        ev = None
        try:
            for ev in batch:
                t, a, s, kind, f = ev
                if t < last_t:
                    raise OutOfOrder(f"an event at {t} s after one at {last_t} s")
                last_t = t
                if a > max_a:
                    max_a = a
                if killed and a in killed and t > killed[a] and kind not in _SUPERVISOR_KINDS:
                    self._dropped(ev)
                    continue
                cat = (cat_first if a == 0 else cat_later).get(kind, _MARKER)
                if cat is _MARKER:
                    self._marker(ev)
                    continue
                # a phase begins: the one before it ends now
                if self.straggle_t is not None:
                    self.tally.straggled(t - self.straggle_t)
                    self.straggle_t = None
                if phase is not None:
                    d = t - phase[0]
                    if phase_cat is _COMPUTE:
                        if d > 0:
                            compute_s += d
                            slot_s += d
                    elif d > 0:
                        buckets[phase_cat] += d
                        if phase_cat is _CUSTOM:
                            name = phase[4].get("name")
                            self.custom[name] = self.custom.get(name, 0.0) + d
                    if visit is not None:
                        visit(phase, phase[0], t, phase_cat)
                else:
                    self.t_start = t
                phase, phase_cat = ev, cat
                if cat is _COMPUTE:
                    A = attempts.get(a) or self._attempt(a)
                    A.computed.add(s)
                    if slot != (a, s):
                        if slot is not None and slot_s:
                            self._flush(slot, slot_s, slot_done)
                        slot, slot_s = (a, s), 0.0
                        his = A.done.his
                        slot_done = bool(his) and s <= his[-1] and s in A.done
                elif kind == E.W_STEP_END:
                    A = attempts.get(a) or self._attempt(a)
                    A.done.add(s)
                    if max_done is None or s > max_done:
                        max_done = s
                    if slot == (a, s):
                        _completed(A, s, f, slot_s)
                        slot_s, slot_done = 0.0, True
                    else:
                        _completed(A, s, f, 0.0)
                elif kind in special:
                    self._special(ev)
        finally:
            if ev is not None:
                self.last_event = ev
            self.max_done = max_done
            self.last_t, self.max_attempt = last_t, max_a
            self.phase, self.phase_cat = phase, phase_cat
            self.slot, self.slot_s, self.slot_done = slot, slot_s, slot_done
            self.compute_s = compute_s

    def feed_run(self, run: StepRun) -> None:
        """Consecutive steps of one attempt, booked at once: the first step as three events, the rest as
        sums of their columns (:meth:`StepRun.stat`: the same seconds in the same buckets as one event at a
        time). A run that is not plain (steps not consecutive, times out of order, an attempt already killed,
        a second pass's cuts, phases being visited) goes one event at a time."""
        plain, wait, other, done, s0, t1, t2, t3, s_end, t_end = run.stat()
        a = run.attempt
        self.unchecked += 1
        if self.unchecked > _CHECK_EVERY:
            self.check_limits()
        A = self.attempts.get(a)
        if not (plain and self.visit is None and not self.marks and self.straggle_t is None
                and not (self.killed and a in self.killed) and t1 >= self.last_t and (A is None or not A.pending)):
            self.feed(run.events())
            return
        losses = run.losses
        # closes the phase before, starts the slot, the chunk, the attempt's ranges
        self.feed([(t1, a, s0, E.W_DATA_WAIT, _NO_FIELDS), (t2, a, s0, E.W_COMPUTE, _NO_FIELDS),
                   (t3, a, s0, E.W_STEP_END, {"loss": StepRun.loss(losses[0])})])  # fmt: skip
        A = self.attempts[a]
        s0 += 1
        if A.starts and s0 < A.starts[-1]:  # the steps would fall in an earlier chunk: one at a time
            self.feed(run.events(1))
            return
        buckets = self.buckets
        buckets[C.DATA_WAIT] += wait
        buckets[C.OTHER] += other
        self.compute_s += done
        if self.slot is not None and self.slot_s:
            self._flush(self.slot, self.slot_s, self.slot_done)
        A.computed.add_range(s0, s_end)
        A.done.add_range(s0, s_end)
        i = A.chunk(s0)
        A.sums[i] += done
        loss = StepRun.loss(losses[-1])
        if A.top[i] is None or s_end >= A.top[i]:
            A.top[i], A.top_loss[i] = s_end, loss
        if self.max_done is None or s_end > self.max_done:
            self.max_done = s_end
        last = (t_end, a, s_end, E.W_STEP_END, {"loss": loss})
        self.slot, self.slot_s, self.slot_done = (a, s_end), 0.0, True
        self.phase, self.phase_cat = last, _CAT_LATER[E.W_STEP_END]
        self.last_t, self.last_event = t_end, last
        if a > self.max_attempt:
            self.max_attempt = a

    def _flush(self, slot: tuple[int, int], seconds: float, done: bool) -> None:
        """An execution's compute seconds, once another execution begins."""
        a, s = slot
        A = self.attempts[a]
        if done:
            A.sums[A.chunk(s)] += seconds
        else:
            A.pending[s] = A.pending.get(s, 0.0) + seconds

    def _special(self, ev: tuple) -> None:
        t, a, s, kind, f = ev
        if kind == E.SUP_FAILURE:
            self.killed.setdefault(a, t)
            self.failures += 1
            self.failure_times.append(t)
        elif kind == E.SUP_END:
            self.end = f
        elif kind == booking.W_STRAGGLE:
            self.straggle_t = t
        elif kind == E.W_INIT:
            self.inits.append(f)
        if kind in booking.TALLIED:
            self.tally.see(t, a, kind, f)

    def _marker(self, ev: tuple) -> None:
        t, a, s, kind, f = ev
        if kind == E.M_CKPT_COMMIT:
            self.checkpoints += 1
            m = f["ckpt_step"]
            A = self._attempt(a)
            if self.chunks < MAX_CHUNKS and A.mark(m):  # past the cap, the second pass cuts where survival changes
                self.chunks += 1
            if self.max_ckpt_step is None or m > self.max_ckpt_step:
                self.max_ckpt_step = m
        elif kind == E.M_CKPT_INVALID:
            self.invalid += 1
        elif kind == E.M_FINISH:
            self.finish = f
        elif kind == E.M_WORKER_INFO:
            if self.worker_info is None:
                self.worker_info = f
        elif kind == E.M_CKPT_INTERVAL:
            self.auto = f
        if kind in booking.TALLIED:
            self.tally.see(t, a, kind, f)

    def _dropped(self, ev: tuple) -> None:
        """An event a killed worker stamped after its kill: counted, but no phase."""
        t, a, s, kind, f = ev
        if kind in E.PHASES:
            if self.straggle_t is not None:
                self.tally.straggled(t - self.straggle_t)
                self.straggle_t = None
            if kind == booking.W_STRAGGLE:
                self.straggle_t = t
            if kind == E.W_COMPUTE and s not in self._attempt(a).computed:
                self.extra_executed.add((a, s))
            if kind in booking.TALLIED:
                self.tally.see(t, a, kind, f)
        else:
            self._marker(ev)

    def result(self, final: bool = True, resume_step: int | None = None) -> Folded:
        """The ledger so far. ``final``: the stream has ended (the last phase is visited);
        otherwise the fold can go on with more events after it. ``resume_step``: where a run
        that stopped resumes, when its ``end`` does not say (a recording: its newest checkpoint)."""
        self.check_limits()
        buckets = dict(self.buckets)
        phase = self.phase
        if final and self.visit is not None and phase is not None:
            self.visit(phase, phase[0], None, self.phase_cat)
        end = self.end
        if resume_step is not None and end is not None:
            end = {**end, "resume_step": resume_step}
        limit = None
        if end is not None and not end.get("completed", False):
            limit = end.get("resume_step", 0)
        survival = Survival(
            {a: A.computed for a, A in self.attempts.items()}, {a: A.done for a, A in self.attempts.items()}, limit
        )
        productive, partial, best = 0.0, False, None
        for a, A in self.attempts.items():
            for i, whole in enumerate(survival.chunks_survive(a, A.starts)):
                if whole is None:
                    partial = True
                elif whole:
                    productive += A.sums[i]
                    if A.top[i] is not None and (best is None or A.top[i] > best[0]):
                        best = (A.top[i], A.top_loss[i])
        if self.slot is not None and self.slot_done and self.slot_s and survival.survives(*self.slot):
            productive += self.slot_s
        buckets[C.PRODUCTIVE] += productive
        buckets[C.LOST_WORK] += self.compute_s - productive
        initial = next((A.loss0 for a, A in self.attempts.items() if survival.survives(a, 0)), None)
        t_start = self.t_start if self.t_start is not None else 0.0
        wall = (phase[0] - t_start) if phase is not None else 0.0
        executed = sum(len(A.computed) for A in self.attempts.values()) + len(self.extra_executed)
        return Folded(
            buckets=buckets,
            wall_s=wall,
            t_start=t_start,
            failure_times=[t - t_start for t in self.failure_times],
            completed=bool(end and end.get("completed")),
            end=end,
            finish=self.finish,
            worker_info=self.worker_info,
            auto_interval=self.auto,
            failures=self.failures,
            checkpoints=self.checkpoints,
            checkpoints_invalid=self.invalid,
            steps_executed=executed,
            initial_loss=initial,
            final_loss=best[1] if best else None,
            attempts=1 + max(self.max_attempt, 0),
            recovery=self.tally.facts(),
            survival=survival,
            partial=partial,
            last_t=None if self.last_t == -INF else self.last_t,
            max_step=max((A.computed.his[-1] for A in self.attempts.values() if A.computed), default=None),
            inits=self.inits,
            custom=dict(self.custom),
        )


def fold(source: Callable[[], Iterable[Iterable[tuple]]], visit: Visit | None = None) -> Folded:
    """The ledger of the events ``source()`` yields (batches of tuples, in time order).

    One pass; a second (``source`` called again) only when a chunk of steps is partly
    productive (a restart resumed at a step no checkpoint of the log recorded). ``visit``
    sees the phases of the pass whose result is returned.
    """
    first = LedgerFold(visit=visit)
    for batch in source():
        first.feed(batch)
    done = first.result()
    if not done.partial:
        return done
    if visit is not None:
        visit.reset()
    cuts = {a: done.survival.bounds(a) for a in done.survival.done}
    second = LedgerFold(marks=cuts, visit=visit)
    for batch in source():
        second.feed(batch)
    again = second.result()
    assert not again.partial, "cut at every bound of survival, no chunk can be partial"
    return again


def sorted_tuples(events: Iterable[dict]) -> list[tuple]:
    """Event dicts as the fold's tuples, sorted by time (stable: equal times keep their order)."""
    out = [(e["t"], e["attempt"], e.get("step"), e["kind"], e) for e in events]
    out.sort(key=lambda x: x[0])
    return out
