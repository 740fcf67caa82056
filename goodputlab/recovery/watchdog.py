"""The heartbeat watchdog: a worker that shows no progress for too long is declared hung.

A hung worker is alive (``waitpid`` says it runs, its threads may still write), so
only a sign of *progress* tells it from a slow one. The signs are the events its
training loop writes: every phase change is a heartbeat, and the loop changes phase
at least twice a step. The watchdog is armed at the worker's first ``compute`` (start-up
and restore are not watched: their length depends on the machine, not on a fault),
and disarmed when the worker says it is leaving (``exit``, ``crash``).

Pure logic on times in seconds (the event log's clock); the supervisor feeds it the
events it reads and asks :meth:`HeartbeatWatchdog.expired` at each poll. Choose
``--hang-timeout`` longer than the slowest step, save or batch wait of the run.
"""

from __future__ import annotations

import math

ARMING_KINDS = frozenset({"compute"})  # the training loop has begun
DISARMING_KINDS = frozenset({"exit", "crash"})  # the worker is leaving on its own


class HeartbeatWatchdog:
    """Declares a worker hung after ``timeout_s`` seconds without a heartbeat (``None``: never)."""

    def __init__(self, timeout_s: float | None):
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds or None, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self.reset()

    def reset(self) -> None:
        """Forget the last worker (call when a new one is launched or activated)."""
        self.armed = False
        self.last_beat: float | None = None

    def beat(self, t: float, kind: str) -> None:
        """An event of the watched worker, written at ``t`` seconds."""
        if kind in DISARMING_KINDS:
            self.armed = False
        elif kind in ARMING_KINDS:
            self.armed = True
        if self.last_beat is None or t > self.last_beat:
            self.last_beat = t

    def silent_for(self, now: float) -> float:
        """Seconds since the last heartbeat (``inf`` before the first)."""
        return math.inf if self.last_beat is None else max(0.0, now - self.last_beat)

    def expired(self, now: float) -> bool:
        """Whether the worker is hung at ``now``: armed, and silent for ``timeout_s`` seconds."""
        return self.timeout_s is not None and self.armed and self.silent_for(now) >= self.timeout_s
