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

The failure clock (:class:`FailureClock`) runs while a worker is *exposed*: from each launch
of a cold worker, from the handover to a hot spare (a standby is not exposed before it
is active), and again after a failure that the worker survives (``loader-death``,
``disk-full``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KILL, HANG, EXCEPTION, LOADER_DEATH, DISK_FULL = "kill", "hang", "exception", "loader-death", "disk-full"


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


def poisson_failure_rng(seed: int) -> np.random.Generator:
    """The generator of a run's Poisson failure times: the ``i``-th exposure of a worker
    ends in a failure after the ``i``-th exponential draw (mean ``mtbf``). Public so a
    model can replay them (:mod:`goodputlab.experiments.interval_sweep`)."""
    return np.random.default_rng([seed, 0xFA11])


class FailureClock:
    """When the next failure strikes: a seeded Poisson process over exposed time, and given steps.

    :meth:`expose` starts a worker's exposure at ``now`` (seconds, any monotonic clock): it
    draws the time to failure (mean ``mtbf`` seconds; never with ``mtbf`` 0). :meth:`cover`
    ends it (no worker alive to fail). :meth:`due_now` says whether the drawn time has come;
    :meth:`due_at_step` whether a step of ``at_steps`` has been completed (each fires once:
    a restarted worker that completes the step again is not failed again).
    """

    def __init__(self, seed: int, mtbf: float, at_steps: tuple[int, ...] | list[int] = ()):
        self.mtbf = float(mtbf)
        self.rng = poisson_failure_rng(seed)
        self.pending_steps = sorted(at_steps)
        self.deadline = math.inf
        self.exposures = 0

    def expose(self, now: float) -> float:
        """Start an exposure at ``now``; returns its deadline (``inf`` without random failures)."""
        self.exposures += 1
        ttf = self.rng.exponential(self.mtbf) if self.mtbf > 0 else math.inf
        self.deadline = now + ttf
        return self.deadline

    def cover(self) -> None:
        """No worker is exposed (between a failure and the next launch or handover)."""
        self.deadline = math.inf

    def due_now(self, now: float) -> bool:
        return now >= self.deadline

    def seconds_left(self, now: float) -> float:
        return max(0.0, self.deadline - now)

    def continue_from(self, events) -> None:
        """Continue the clock of a run resumed from ``events`` (its event log): the failures at steps
        that already struck are not planned again, and the Poisson draws go on where they stopped
        (one per exposure: a launch, a handover, a failure a worker survived)."""
        struck = set()
        exposures = 0
        for e in events:
            for cause in (e.get("cause") or "", e.get("trigger") or ""):
                if e["kind"] in ("failure", "failure_injected") and cause.startswith("kill_at_step "):
                    struck.add(int(cause.split()[-1]))
            if e["kind"] in ("spawn", "handover") or (e["kind"] == "failure_injected" and e.get("mode") in (LOADER_DEATH, DISK_FULL)):
                exposures += 1
        self.pending_steps = [s for s in self.pending_steps if s not in struck]
        if self.mtbf > 0 and exposures:
            self.rng.exponential(self.mtbf, size=exposures)

    def due_at_step(self, done: int) -> int | None:
        """The step of ``at_steps`` that ``done`` completed steps reached (removed from the plan), or None."""
        if self.pending_steps and done >= self.pending_steps[0]:
            return self.pending_steps.pop(0)
        return None
