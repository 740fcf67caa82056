"""The control pipe: how the supervisor talks to a worker it launched.

Each worker inherits the read end of a pipe (``--control-fd``); the supervisor keeps
the write end. Messages are lines of text:

* ``go <attempt>``: a hot spare becomes the job's worker, as attempt ``<attempt>``
  (it has been waiting for this line; see :mod:`goodputlab.recovery.standby`);
* ``replica <r>``, sent just before ``go``: the replica group a hot spare of a torchft run takes
  over (:mod:`goodputlab.distributed.ft_worker`; it learns which one only when one fails);
* ``inject``: fail now, in the run's ``--failure-mode`` (``hang``: stop making
  progress; ``exception``: raise inside the step). The worker reads the pipe at each
  step, so the failure strikes at the next step it starts.

A pipe and not a signal: a signal that arrives before the worker installed its handler
kills it (the default action of ``SIGUSR1``), and a signal can interrupt any line of
Python; a pipe is read only where the worker chooses, and its buffer keeps a message
sent before the reader looks. The worker reads it without blocking during training
(:meth:`ControlChannel.requests`), and blocks on it only as a standby
(:meth:`ControlChannel.wait_for_activation`). The supervisor closes the write end when
the worker is gone; a standby then sees end-of-file and exits.
"""

from __future__ import annotations

import os
import select
import time
from typing import Callable

GO = "go"
INJECT = "inject"
REPLICA = "replica"


class ControlClosed(EOFError):
    """The supervisor closed the control pipe (it is gone, or this worker is no longer wanted)."""


class WorkerControl:
    """The supervisor's end of one worker's control pipe."""

    def __init__(self):
        self.child_fd, self._write = os.pipe()
        os.set_inheritable(self.child_fd, True)
        os.set_inheritable(self._write, False)
        self.closed = False

    def launched(self) -> None:
        """The worker holds its end now: close ours of it (so the worker sees EOF when we close)."""
        if self.child_fd >= 0:
            os.close(self.child_fd)
            self.child_fd = -1

    def _send(self, line: str) -> bool:
        if self.closed:
            return False
        try:
            os.write(self._write, (line + "\n").encode())
            return True
        except (BrokenPipeError, OSError):  # the worker is gone
            return False

    def activate(self, attempt: int) -> bool:
        """Tell a standby to take the job as ``attempt``; False if it is gone."""
        return self._send(f"{GO} {attempt}")

    def assign(self, replica: int) -> bool:
        """Tell a torchft standby which replica group it will take over (before :meth:`activate`); False if it is gone."""
        return self._send(f"{REPLICA} {replica}")

    def inject(self) -> bool:
        """Ask the worker to fail in the run's failure mode; False if it is gone."""
        return self._send(INJECT)

    def close(self) -> None:
        self.launched()
        if not self.closed:
            os.close(self._write)
            self.closed = True


class ControlChannel:
    """The worker's end: reads the supervisor's lines."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self._buffer = b""
        self._eof = False

    def _read_available(self) -> None:
        while not self._eof:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                return
            if not chunk:
                self._eof = True
                return
            self._buffer += chunk

    def _lines(self) -> list[str]:
        *complete, self._buffer = self._buffer.split(b"\n")
        return [line.decode(errors="replace").strip() for line in complete if line.strip()]

    def requests(self) -> list[str]:
        """The lines sent since the last call (never blocks)."""
        self._read_available()
        return self._lines()

    def injection_requested(self) -> bool:
        """Whether the supervisor asked for a failure since the last call (never blocks)."""
        return any(line == INJECT for line in self.requests())

    def wait_for_activation(self, idle: Callable[[], None] | None = None, idle_every_s: float = 0.5) -> int:
        """Block until ``go <attempt>`` arrives; returns the attempt.

        ``idle()`` is called about every ``idle_every_s`` seconds while waiting (a standby
        keeps its copy of the RAM tier mapped there). Raises :class:`ControlClosed` when
        the pipe is closed first. An ``inject`` that arrives before ``go`` is kept for
        :meth:`injection_requested` (it cannot happen: a standby is not exposed).
        """
        pending: list[str] = []
        next_idle = time.monotonic() + idle_every_s
        while True:
            lines = self.requests()
            for i, line in enumerate(lines):
                parts = line.split()
                if len(parts) == 2 and parts[0] == GO and parts[1].isdigit():
                    keep = pending + lines[i + 1 :]  # whatever else came stays for later reads
                    if keep:
                        self._buffer = ("\n".join(keep) + "\n").encode() + self._buffer
                    return int(parts[1])
                pending.append(line)
            if self._eof:
                raise ControlClosed("the supervisor closed the control pipe before activating this standby")
            timeout = max(0.0, next_idle - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready and idle is not None and time.monotonic() >= next_idle:
                idle()
                next_idle = time.monotonic() + idle_every_s

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def replica_named(lines: list[str]) -> int:
    """The replica group of the last ``replica <r>`` line among ``lines``; ``ValueError`` when none names one."""
    named = [int(parts[1]) for parts in (line.split() for line in lines)
             if len(parts) == 2 and parts[0] == REPLICA and parts[1].isdigit()]
    if not named:
        raise ValueError(f"a torchft standby was activated without a '{REPLICA} <r>' line (got {lines!r})")
    return named[-1]
