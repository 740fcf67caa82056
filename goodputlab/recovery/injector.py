"""The supervisor's side of ``--failure-mode``: at a failure time, hit the live worker the chosen way.

The supervisor decides *when* (the failure clock, :class:`~goodputlab.recovery.modes.FailureClock`);
an :class:`Injector` decides *how*, per mode (:mod:`goodputlab.recovery.modes`):

* ``kill``: the supervisor kills the worker's process group itself (:meth:`Injector.strike`
  returns the cause, and the supervisor handles the failure as it always has);
* ``hang`` and ``exception``: the worker is asked on its control pipe; the failure is seen later,
  by the watchdog or by the worker's exit status (:meth:`Injector.exit_cause`);
* ``loader-death``: one of the worker's DataLoader processes is SIGKILLed; the worker rebuilds
  its loader and trains on (deferred until the worker has loader processes);
* ``disk-full``: the checkpoint file system is filled (:mod:`goodputlab.recovery.disk_full`); the
  ballast is removed once the worker has reported the failed save (:meth:`Injector.follow`),
  or when the worker is gone.

Every injection is a ``failure_injected`` marker in the event log.
"""

from __future__ import annotations

from pathlib import Path

from . import booking
from .disk_full import FillRefused, fill, leave_for, release
from .inject import kill_one_child
from .modes import DISK_FULL, EXCEPTION, HANG, KILL, LOADER_DEATH


class Injector:
    """Injects ``config.failure_mode`` into the live worker; one per run."""

    def __init__(self, config, run_dir: Path, events, state_bytes: int):
        self.mode = config.failure_mode
        self.run_dir = Path(run_dir)
        self.events = events
        self.state_bytes = state_bytes
        self.ballast: Path | None = None
        self.asked: str | None = None  # a mode the live worker was asked to fail in (hang, exception)
        self.asked_cause = ""  # what made it due (poisson, kill_at_step N)
        self.deferred = False  # a loader death waiting for the worker's loader processes
        self.deferred_cause = ""

    def new_worker(self) -> None:
        """A new worker is live: nothing has been asked of it yet."""
        self.asked, self.asked_cause = None, ""
        self.deferred = False
        self.free_disk()

    def strike(self, cause: str, proc, control) -> str | None:
        """A failure is due (``cause``: ``poisson`` or ``kill_at_step N``).

        Returns the cause when the supervisor must kill the worker now (``kill``); None when
        the failure was handed to the worker (``hang``, ``exception``) or is one the worker
        survives (``loader-death``, ``disk-full``).
        """
        if self.mode == KILL:
            return cause
        if self.mode in (HANG, EXCEPTION):
            if self.asked is None and control is not None and control.inject():
                self.asked, self.asked_cause = self.mode, cause
            return None
        if self.mode == LOADER_DEATH:
            self.deferred, self.deferred_cause = True, cause
            self.poll(proc)
            return None
        if self.mode == DISK_FULL:
            self._fill(cause)
            return None
        return cause

    def poll(self, proc) -> bool:
        """Carry out a deferred loader death once the worker has loader processes; True when it struck."""
        if not self.deferred or proc is None or proc.poll() is not None:
            return False
        victim = kill_one_child(proc.pid)
        if victim is None:
            return False
        self.deferred = False
        self.events.emit(booking.M_FAILURE_INJECTED, mode=LOADER_DEATH, pid=victim, cause=self.deferred_cause)
        return True

    def _fill(self, cause: str) -> None:
        if self.ballast is not None:
            return  # still full from the last one
        try:
            ballast, written = fill(self.run_dir, leave_for(self.state_bytes), between_saves_of=self.run_dir / "ckpt")
        except FillRefused as e:
            raise RuntimeError(str(e)) from None
        self.ballast = ballast
        self.events.emit(booking.M_FAILURE_INJECTED, mode=DISK_FULL, cause=cause, filled_bytes=written)

    def follow(self, event: dict) -> None:
        """An event of the live worker: a failed save means the full disk has been seen: free it."""
        if event["kind"] == booking.M_CKPT_FAILED and self.ballast is not None:
            self.free_disk()

    def free_disk(self) -> None:
        if self.ballast is not None:
            freed = release(self.ballast)
            self.ballast = None
            self.events.emit(booking.M_DISK_FREED, bytes=freed)

    def exit_cause(self, returncode: int) -> str | None:
        """The worker exited by itself with ``returncode``: the failure cause if it was the injected
        exception, else None (a clean exit, or a real crash)."""
        if returncode != 0 and self.asked == EXCEPTION:
            return "exception"
        return None

    def close(self) -> None:
        """The run is over: give the disk back."""
        if self.ballast is not None:
            release(self.ballast)
            self.ballast = None
