"""The supervisor's side of the hot spare: one standby worker, launched beside the job, handed the job
at a failure (the protocol: :mod:`goodputlab.recovery.standby`).

:class:`HotSpare` holds at most one standby. The supervisor calls :meth:`HotSpare.ensure` as soon
as a worker is live (the standby starts up beside it, at idle priority where the machine allows it,
so it takes spare CPU only), :meth:`HotSpare.take` at a failure (the standby, if it is still alive;
None means a cold launch), and :meth:`HotSpare.close` when the run ends, however it ends: the
standby's process group is killed and its control pipe closed, so none is left behind.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any, Callable

from . import booking
from .control import WorkerControl


@dataclass
class Standby:
    """A launched standby: its process, its log and its control pipe."""

    index: int
    proc: Any  # subprocess.Popen
    log: Any  # the supervisor's WorkerLog of its output
    control: WorkerControl

    def alive(self) -> bool:
        return self.proc.poll() is None


class HotSpare:
    """At most one standby worker, kept ready.

    ``launch(index, control) -> (proc, log)`` starts ``python -m goodputlab.engine.worker --standby``
    with the control pipe's read end (the supervisor's launcher; its own process group), or forks one
    from the run's fork server; it returns None when it cannot yet (the next :meth:`ensure` asks again).
    """

    def __init__(self, launch: Callable[[int, WorkerControl], tuple[Any, Any]], events):
        self._launch = launch
        self.events = events
        self.standby: Standby | None = None
        self.launched = 0
        self.lost = 0  # standbys that exited before they were needed (a crash: not relaunched forever)

    def ensure(self) -> None:
        """Launch a standby if there is none (and the last ones did not keep dying)."""
        if self.standby is not None:
            if self.standby.alive():
                return
            self._discard(self.standby)
            self.standby = None
            self.lost += 1
        if self.lost >= 3:
            return  # something is wrong with standbys: the run goes on with cold restarts
        control = WorkerControl()
        try:
            launched = self._launch(self.launched, control)
        finally:
            control.launched()
        if launched is None:  # not yet (its fork server is still starting): the next ensure() tries again
            control.close()
            return
        proc, log = launched
        self.standby = Standby(self.launched, proc, log, control)
        self.events.emit(booking.M_STANDBY_SPAWNED, standby=self.launched, pid=proc.pid)
        self.launched += 1

    def take(self) -> Standby | None:
        """The standby, handed over to the caller (who activates it), if it is alive; else None."""
        standby, self.standby = self.standby, None
        if standby is None:
            return None
        if not standby.alive():
            self._discard(standby)
            self.lost += 1
            return None
        return standby

    @staticmethod
    def _discard(standby: Standby) -> None:
        kill_group(standby.proc)
        standby.control.close()
        standby.log.drain()

    def close(self) -> None:
        """Kill the standby (if any) and its process group; close its pipe and log."""
        standby, self.standby = self.standby, None
        if standby is not None:
            self._discard(standby)


def kill_group(proc) -> None:
    """SIGKILL ``proc``'s process group (it leads its own session) and reap it; nothing if it has exited."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
