"""The hot spare: a worker that is ready before it is needed.

A cold restart pays for a new process after every failure: the interpreter, ``import
torch``, the model and optimizer, the data set, the input pipeline (about 3 s here, and
minutes on a cluster, where the scheduler must also find a node). A *hot spare* pays
for all of that beside the running job. The protocol (:mod:`goodputlab.recovery.control`):

1. The supervisor launches the standby with a control pipe (``--standby``); it does not
   give it an attempt number yet, and the standby writes nothing to the run's event log:
   its start-up happens beside the job, not in its way (:class:`DeferredEvents` keeps its
   markers, and drops its phases, until it is activated).
2. The standby sets itself up as a worker does (model, optimizer, data set, checkpoint
   store, the RAM tier mapped) and starts its DataLoader workers, then blocks on the pipe.
   While it waits it keeps up with the RAM tier (``idle``): it maps the slot files and
   touches the memory a restore will copy into, so a restore from RAM is a copy into
   warm memory.
3. At a failure the supervisor kills the failed worker and writes ``go <attempt>``.
   The standby opens the event log as that attempt, writes ``activate`` (with how long
   its start-up took, off the critical path), restores the newest valid checkpoint and
   trains on. The supervisor's failure clock for it starts at the handover.
4. The supervisor launches the next standby in the background.

The standby dies with the supervisor (``PR_SET_PDEATHSIG``, its own process group that
the supervisor kills at the end), and while it waits it runs at idle priority when it
can come back to normal priority at activation (:func:`enter_idle_priority`), so its
start-up takes spare CPU only, not the running job's. Idle priority is not enough when the
worker uses every core: on the 2-core lab machine a worker with two torch threads ran its
steps several times slower while a standby started beside it. Give the worker fewer threads
than the machine has cores (``--threads 1`` there; the chapters and tests do).
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any


class DeferredEvents:
    """What a standby writes before it is activated: kept in memory, not in the run's log.

    It has the :class:`~goodputlab.events.EventWriter` interface (``emit``, ``now``,
    ``attempt``). Markers (facts such as ``worker_info``) are kept and written to the
    real log by :meth:`replay` at activation; phases are not (the standby's start-up is
    not on the job's critical path), only their times are kept (:attr:`phases`) for the
    ``activate`` event's ``standby_startup_s``.
    """

    attempt = -1

    def __init__(self, t0: float, phases: frozenset[str]):
        self.t0 = t0
        self._phases = phases
        self.markers: list[tuple[str, int | None, dict[str, Any]]] = []
        self.phases: list[tuple[float, str]] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def emit(self, kind: str, step: int | None = None, t: float | None = None, **fields: Any) -> float:
        t = self.now() if t is None else t
        if kind in self._phases:
            self.phases.append((t, kind))
        else:
            self.markers.append((kind, step, fields))
        return t

    def replay(self, writer) -> None:
        """Write the kept markers to the real event log (stamped now: they are facts, not phases)."""
        for kind, step, fields in self.markers:
            writer.emit(kind, step=step, **fields)
        self.markers.clear()

    def close(self) -> None:
        pass


# --- priority: a standby's start-up should use spare CPU only ------------------------------------
def can_leave_idle_priority() -> bool:
    """Whether this process may return from ``SCHED_IDLE`` to normal scheduling.

    Linux lets a thread leave ``SCHED_IDLE`` only with ``CAP_SYS_NICE`` or an
    ``RLIMIT_NICE`` that allows nice 0 (``>= 20``); without it a spare that lowered its
    priority could never raise it again, so it keeps normal priority instead.
    """
    if not hasattr(os, "SCHED_IDLE"):
        return False
    if os.geteuid() == 0:
        return True
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    except (AttributeError, ValueError, OSError):
        return False
    return soft == resource.RLIM_INFINITY or soft >= 20


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def enter_idle_priority() -> bool:
    """Run every thread of this process at ``SCHED_IDLE`` if it can come back later; returns whether it did."""
    if not can_leave_idle_priority():
        return False
    try:
        for tid in _threads():
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:
        leave_idle_priority()
        return False
    return True


def leave_idle_priority() -> None:
    """Back to normal scheduling (``SCHED_OTHER``) for every thread of this process and of its children
    (the DataLoader worker processes a standby started while it waited inherited its idle priority).

    This process's own threads come back first, with nothing imported or computed before: at
    ``SCHED_IDLE`` beside busy neighbours a process gets a sliver of a core (beside two busy loops,
    importing numpy for :func:`~goodputlab.recovery.inject.children_of` first took over 30 s)."""
    _to_normal(os.getpid())
    from .inject import children_of

    for pid in children_of(os.getpid()):
        _to_normal(pid)


def to_normal_priority(pid: int) -> None:
    """Process ``pid``'s threads back to normal scheduling, from outside (needs the right to: root, say):
    a warm agent handed its job while still importing at idle priority must not finish the import there."""
    _to_normal(pid)


def _to_normal(pid: int) -> None:
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


def startup_seconds(deferred: DeferredEvents, launched_t: float | None, ready_t: float) -> float:
    """Seconds a standby spent starting up: from its launch (or its first event) to ready."""
    start = launched_t if launched_t is not None else (deferred.phases[0][0] if deferred.phases else ready_t)
    return max(0.0, ready_t - start)
