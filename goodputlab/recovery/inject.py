"""Failure injection on the worker's side, and the helpers the supervisor uses to hit a worker.

* :class:`InjectedFailure` and :func:`raise_in_step`: ``--failure-mode exception``, an error
  raised inside a step (after the backward pass, before the optimizer step).
* :func:`hang_forever`: ``--failure-mode hang``, the main thread stops making progress;
  the process and its other threads (a background checkpoint writer, the DataLoader
  workers) live on, as in a deadlock, so only the heartbeat watchdog can tell.
* :class:`StragglerSchedule`: ``--straggler-prob P --straggler-factor F``, which steps are slowed
  and by how long (seeded, the same steps in every attempt).
* :func:`children_of` and :func:`kill_one_child`: ``--failure-mode loader-death``, the supervisor
  SIGKILLs one of the training process's DataLoader worker processes.
* :class:`LoaderWatch`: the training process notices that a DataLoader worker died, but only
  where it is safe to act on it (while it waits for a batch), so it can rebuild its loader
  from the current step and train on.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import numpy as np


class InjectedFailure(RuntimeError):
    """The error ``--failure-mode exception`` raises inside a step."""


def raise_in_step(step: int) -> NoReturn:
    raise InjectedFailure(f"injected failure (--failure-mode exception) in step {step}")


def hang_forever() -> NoReturn:
    """Stop making progress, for good: the main thread blocks; other threads live on."""
    never = threading.Event()
    while True:
        never.wait(3600.0)


class StragglerSchedule:
    """Which steps straggle: each step, independently, with probability ``prob``, seeded by ``seed``.

    A slowed step takes ``factor`` times its normal time: :meth:`extra_s` is the time to
    add after a step computed in ``compute_s`` seconds. The draw depends only on
    ``(seed, step)``, so a step that is re-executed after a failure straggles again
    (as a slow shard of data would), and the draws touch no RNG the training uses.
    """

    def __init__(self, seed: int, prob: float, factor: float):
        if not 0 <= prob <= 1:
            raise ValueError(f"prob must be between 0 and 1, got {prob!r}")
        if not factor >= 1:
            raise ValueError(f"factor must be >= 1, got {factor!r}")
        self.seed, self.prob, self.factor = seed, prob, factor

    @property
    def active(self) -> bool:
        return self.prob > 0 and self.factor > 1

    def slow(self, step: int) -> bool:
        if not self.active:
            return False
        return bool(np.random.default_rng([self.seed, step, 0x57A6]).random() < self.prob)

    def extra_s(self, compute_s: float) -> float:
        """Seconds to add to a step of ``compute_s`` seconds so it takes ``factor`` times as long."""
        return max(0.0, (self.factor - 1.0) * compute_s)

    def slowed_steps(self, steps: int) -> list[int]:
        """The steps below ``steps`` that straggle."""
        return [s for s in range(steps) if self.slow(s)]


def straggle(seconds: float) -> None:
    """Spend ``seconds`` as a straggler does: waiting (the slow part is elsewhere: another node, a slow link)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(left)


# --- DataLoader workers: killing one (the supervisor) and noticing it (the training process) -----
def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux ``/proc``), lowest pid first."""
    kids: set[int] = set()
    task = Path(f"/proc/{pid}/task")
    try:
        for t in task.iterdir():
            try:
                kids.update(int(c) for c in (t / "children").read_text().split())
            except (OSError, ValueError):
                continue
    except OSError:
        return []
    return sorted(k for k in kids if _alive(k))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_one_child(pid: int) -> int | None:
    """SIGKILL the lowest-pid live child of ``pid`` (a DataLoader worker); returns its pid, None if it has none."""
    for child in children_of(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            continue
        return child
    return None


class LoaderDied(RuntimeError):
    """A DataLoader worker process of this training process died; the loader must be rebuilt."""


def _died(pid: int) -> bool:
    """Whether child ``pid`` has exited (it is not reaped: the DataLoader reaps its own)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped: gone
    return info is not None


class LoaderWatch:
    """Notices the death of a DataLoader worker process, and says so only where it is safe.

    PyTorch's own ``SIGCHLD`` handler raises in the training process's main thread
    wherever it happens to be, halfway through an optimizer step included; after that
    the state cannot be trusted and only a restart from a checkpoint is safe. This
    watch replaces it: the handler only notes the death, and raises :class:`LoaderDied`
    when the main thread is waiting for a batch (inside :meth:`waiting`), where nothing
    of the training state is being changed. The loop then rebuilds its loader from the
    step it was waiting for; the batches are a pure function of the step, so nothing
    is repeated or skipped.

    :meth:`track` starts a loader (its iterator, which starts its workers) and watches
    the worker processes it started; call it each time a loader is (re)built.
    """

    def __init__(self):
        self.pids: tuple[int, ...] = ()
        self.dead: int | None = None
        self._waiting = False
        self._previous = None

    def install(self) -> None:
        """Take over ``SIGCHLD`` (main thread only; call after the first loader's iterator exists)."""
        self._previous = signal.signal(signal.SIGCHLD, self._on_sigchld)

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGCHLD, self._previous)
            self._previous = None

    def watch(self, pids) -> None:
        self.pids = tuple(pids)
        self.dead = None

    def track(self, start_loader):
        """Call ``start_loader()`` (it starts a loader's worker processes) and watch the processes it
        started: the children of this process that were not there before (the workers of a loader
        being shut down are not watched). Returns what ``start_loader`` returned."""
        before = set(children_of(os.getpid()))
        started = start_loader()
        self.watch(sorted(set(children_of(os.getpid())) - before))
        return started

    def _check(self) -> None:
        if self.dead is None:
            self.dead = next((p for p in self.pids if _died(p)), None)

    def _on_sigchld(self, signum, frame) -> None:
        self._check()
        if self.dead is not None and self._waiting:
            self._waiting = False
            raise LoaderDied(f"DataLoader worker (pid {self.dead}) died")

    def explains(self, error: BaseException, grace_s: float = 2.0) -> bool:
        """Whether ``error``, raised by ``next(batches)`` inside :meth:`waiting`, comes of a worker's death.

        Besides :func:`is_loader_death`'s errors: a worker killed just after it queued a batch
        leaves the batch's tensor behind a file descriptor that can no longer be fetched, and
        the queue raises ``EOFError`` (or a ``ConnectionError``). The kernel closes a dying
        process's files before it reports the exit, so PyTorch's own check may still find the
        worker alive and pass the error on. Such an error counts when a watched worker is seen
        dead within ``grace_s``; otherwise it is not the loader's doing and should propagate.
        """
        if is_loader_death(error):
            return True
        if not isinstance(error, (EOFError, ConnectionError)):
            return False
        deadline = time.monotonic() + grace_s
        while True:
            self._check()
            if self.dead is not None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    @contextmanager
    def waiting(self):
        """The region where a death may be reported: around ``next(batches)``."""
        self._check()
        if self.dead is not None:
            raise LoaderDied(f"DataLoader worker (pid {self.dead}) died")
        self._waiting = True
        try:
            yield
        finally:
            self._waiting = False


def is_loader_death(error: BaseException) -> bool:
    """Whether ``error`` says a DataLoader worker died (ours, or PyTorch's own check that got there first)."""
    if isinstance(error, LoaderDied):
        return True
    return isinstance(error, RuntimeError) and "DataLoader worker" in str(error)
