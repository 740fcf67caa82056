"""Failure modes: what each one does, who injects it, how it is noticed, how the ledger books it.

``--failure-mode`` picks one for a run; it is what happens at every failure time (the
seeded Poisson clock, ``--mtbf``) and at every step of ``--kill-at-steps``:

=================  ===========================================  ====================================
mode               what happens                                 noticed by, and booked as
=================  ===========================================  ====================================
``kill``           the supervisor SIGKILLs the worker's         at once; the time until the next
                   process group (a node dies)                  worker trains is ``restart``
``hang``           the worker's main loop stops making          the heartbeat watchdog, after
                   progress; the process and its threads live   ``--hang-timeout`` s without a sign
                   on (a deadlocked collective, a stuck read)   of progress: kill, restart; the
                                                                wait for the verdict is ``restart``
``exception``      an error is raised inside a step; the        its exit status; the unwinding is
                   worker exits with status 1                   ``restart``
``loader-death``   a DataLoader worker process is SIGKILLed     the training process (SIGCHLD); it
                   (the OOM killer, a bad sample)               rebuilds its loader from the current
                                                                step and trains on, no restart: the
                                                                rebuild is ``restart``
``disk-full``      the checkpoint file system is filled,        the save fails with ``ENOSPC``: it
                   leaving room for the log, not a checkpoint   is reported (``ckpt_failed``), the
                                                                previous checkpoint stays newest,
                                                                training goes on; the space is given
                                                                back after the failed save
=================  ===========================================  ====================================

Stragglers are not a failure mode: ``--straggler-prob P --straggler-factor F`` slows a share P
of the steps by a factor F in any run (see :mod:`goodputlab.recovery.inject`).

The failure clock (:class:`FailureClock`) runs while a worker is *exposed*. Two clocks
(``--failure-clock``):

- ``train`` (the default): from each worker's first step, as a cluster's failures come with the
  device-hours a job trains on. A slow launch or restore (``import torch`` on a busy machine) is
  not exposed, so it cannot use up the MTBF: failures strike the time the job could have been
  training. The MTBF is then a property of the training, the same on a fast machine and a slow one.
- ``wall``: from each launch of a cold worker (the old clock): start-up and restore are exposed
  too, so failures also strike while a worker starts; when a restart takes longer than the MTBF
  most attempts die before they train.

Either way a hot spare is exposed from its handover at the earliest (a standby is not exposed
before it is active), and a worker is exposed again after a failure it survives
(``loader-death``, ``disk-full``). The supervisor writes an ``exposed`` marker each time a
clock starts, so a model can replay the draws (:mod:`goodputlab.experiments.interval_sweep`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

KILL, HANG, EXCEPTION, LOADER_DEATH, DISK_FULL = "kill", "hang", "exception", "loader-death", "disk-full"
TRAIN_CLOCK, WALL_CLOCK = "train", "wall"
FAILURE_CLOCKS = (TRAIN_CLOCK, WALL_CLOCK)  # --failure-clock: from a worker's first step, or from its launch
#: restart / MTBF above which the run warns: failures then come faster than the job can come back
RESTART_MTBF_WARN = 0.5


@dataclass(frozen=True)
class FailureMode:
    """One way a run can fail (see the table in this module's docstring)."""

    name: str
    what: str
    injected_by: str  # "supervisor" (acts from outside) or "worker" (asked on its control pipe)
    fatal: bool  # the worker process dies and the job restarts from a checkpoint
    noticed_by: str
    booked: str


MODES: dict[str, FailureMode] = {
    m.name: m
    for m in (
        FailureMode(KILL, "SIGKILL to the worker's process group", "supervisor", True,
                    "the supervisor, at once", "restart from the kill until the next worker trains"),
        FailureMode(HANG, "the worker's main loop stops making progress", "worker", True,
                    "the heartbeat watchdog (--hang-timeout)",
                    "restart from the last sign of progress; then as a kill"),
        FailureMode(EXCEPTION, "an error raised inside a step; the worker exits 1", "worker", True,
                    "the worker's exit status", "restart from the raise"),
        FailureMode(LOADER_DEATH, "a DataLoader worker process is SIGKILLed", "supervisor", False,
                    "the training process (SIGCHLD)", "restart while the loader is rebuilt in place"),
        FailureMode(DISK_FULL, "the checkpoint file system is filled", "supervisor", False,
                    "the save's ENOSPC", "checkpoint_save for the failed save; ckpt_failed marker"),
    )
}

FAILURE_MODES: tuple[str, ...] = tuple(MODES)


def describe_modes() -> str:
    """``kill (SIGKILL ...), hang (...)``: the modes for ``--help``."""
    return ", ".join(MODES)


def restart_vs_mtbf(summary: dict, mtbf_s: float) -> dict | None:
    """How a run's restarts compare with its MTBF; ``None`` without random failures.

    ``restart_s`` is what one failure cost before the job trained again: the ``restart`` and
    ``checkpoint_restore`` seconds per failure, or, in a run without failures, its first launch
    (``startup``: a restart launches a worker too). Above :data:`RESTART_MTBF_WARN` the returned
    dict carries ``warning``, one line that says so and what helps (a hot spare, a longer MTBF):
    failures then come faster than the job can come back, and goodput collapses.
    """
    if not mtbf_s or mtbf_s <= 0:
        return None
    buckets, failures = summary.get("buckets", {}), summary.get("failures", 0) or 0
    if failures:
        restart_s = (buckets.get("restart", 0.0) + buckets.get("checkpoint_restore", 0.0)) / failures
    else:
        restart_s = buckets.get("startup", 0.0)
    ratio = restart_s / mtbf_s
    facts = {"restart_s": round(restart_s, 6), "mtbf_s": mtbf_s, "ratio": round(ratio, 4)}
    if ratio > RESTART_MTBF_WARN:
        facts["warning"] = (
            f"a restart takes {restart_s:.1f} s, {ratio:.2f} of the {mtbf_s:g} s MTBF (above {RESTART_MTBF_WARN}): "
            "failures come about as often as the job can come back, and goodput collapses; "
            "try a hot spare (--hot-spare) or a longer MTBF (--mtbf)"
        )
    return facts


def restart_warning(summary: dict) -> str | None:
    """The one-line warning a run's summary carries when a restart costs more than
    :data:`RESTART_MTBF_WARN` of the MTBF (what the CLI prints and chapter 1's panel shows), or None.
    A summary written before the check (a recorded run) is checked here, from its buckets and MTBF."""
    check = summary.get("restart_vs_mtbf")
    if check is None:
        check = restart_vs_mtbf(summary, (summary.get("config") or {}).get("mtbf", 0.0)) or {}
    return check.get("warning")


def poisson_failure_rng(seed: int) -> "np.random.Generator":
    """The generator of a run's Poisson failure times: the ``i``-th exposure of a worker
    ends in a failure after the ``i``-th exponential draw (mean ``mtbf``). Public so a
    model can replay them (:mod:`goodputlab.experiments.interval_sweep`)."""
    import numpy as np  # when asked: reading a run's config needs no numpy

    return np.random.default_rng([seed, 0xFA11])


class FailureClock:
    """When the next failure strikes: a seeded Poisson process over exposed time, and given steps.

    :meth:`launched` tells the clock a worker was launched (or handed the job), :meth:`trained`
    that it completed its first step's compute: with the ``wall`` clock the exposure starts at
    the launch, with the ``train`` clock at the first step (each draws the time to failure, mean
    ``mtbf`` seconds; never with ``mtbf`` 0). :meth:`expose` starts one at once (a failure the
    worker survived). :meth:`cover` ends it (no worker alive to fail). :meth:`due_now` says
    whether the drawn time has come; :meth:`due_at_step` whether a step of ``at_steps`` has been
    completed (each fires once: a restarted worker that completes the step again is not failed
    again). Times in seconds on any one monotonic clock.
    """

    def __init__(self, seed: int, mtbf: float, at_steps: tuple[int, ...] | list[int] = (), clock: str = TRAIN_CLOCK):
        if clock not in FAILURE_CLOCKS:
            raise ValueError(f"failure clock {clock!r}: one of {', '.join(FAILURE_CLOCKS)}")
        self.mtbf = float(mtbf)
        self.clock = clock
        self.rng = poisson_failure_rng(seed)
        self.pending_steps = sorted(at_steps)
        self.deadline = math.inf
        self.exposures = 0
        self.waiting_for_step = False  # a worker is live and the train clock waits for its first step

    def launched(self, now: float) -> float | None:
        """A worker was launched (or handed the job) at ``now``: with the wall clock its exposure
        starts (returns the time it started), with the train clock it waits for :meth:`trained`."""
        if self.clock == WALL_CLOCK:
            self.expose(now)
            return now
        self.deadline = math.inf
        self.waiting_for_step = True
        return None

    def trained(self, t: float) -> float | None:
        """The live worker's first step began computing at ``t``: the train clock's exposure starts
        there (returns ``t``); ``None`` when nothing started (the wall clock, or not its first step)."""
        if not self.waiting_for_step:
            return None
        self.waiting_for_step = False
        self.expose(t)
        return t

    def expose(self, now: float) -> float:
        """Start an exposure at ``now``; returns its deadline (``inf`` without random failures)."""
        self.exposures += 1
        self.waiting_for_step = False
        ttf = self.rng.exponential(self.mtbf) if self.mtbf > 0 else math.inf
        self.deadline = now + ttf
        return self.deadline

    def cover(self) -> None:
        """No worker is exposed (between a failure and the next launch or handover)."""
        self.deadline = math.inf
        self.waiting_for_step = False

    def due_now(self, now: float) -> bool:
        return now >= self.deadline

    def seconds_left(self, now: float) -> float:
        return max(0.0, self.deadline - now)

    def continue_from(self, events) -> None:
        """Continue the clock of a run resumed from ``events`` (its event log): the failures at steps
        that already struck are not planned again, and the Poisson draws go on where they stopped
        (one per exposure: its ``exposed`` marker; a log written before the markers: a launch, a
        handover, a failure a worker survived)."""
        struck = set()
        exposures = marked = 0
        for e in events:
            for cause in (e.get("cause") or "", e.get("trigger") or ""):
                if e["kind"] in ("failure", "failure_injected") and cause.startswith("kill_at_step "):
                    struck.add(int(cause.split()[-1]))
            if e["kind"] in ("spawn", "handover") or (e["kind"] == "failure_injected" and e.get("mode") in (LOADER_DEATH, DISK_FULL)):
                exposures += 1
            marked += e["kind"] == "exposed"
        if marked:
            exposures = marked
        self.pending_steps = [s for s in self.pending_steps if s not in struck]
        if self.mtbf > 0 and exposures:
            self.rng.exponential(self.mtbf, size=exposures)

    def due_at_step(self, done: int) -> int | None:
        """The step of ``at_steps`` that ``done`` completed steps reached (removed from the plan), or None."""
        if self.pending_steps and done >= self.pending_steps[0]:
            return self.pending_steps.pop(0)
        return None
