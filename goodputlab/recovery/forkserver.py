"""The supervisor's side of the fork server: standbys forked from a process that has imported torch.

:class:`ForkServer` launches the server (:mod:`goodputlab.recovery.zygote`) once per run and asks
it for a standby at every handover. A standby is then ready in a fraction of a second instead of
the seconds a new interpreter and ``import torch`` take, so a failure soon after the last one still
finds one, and the machine pays for the imports once. The standbys are the server's children, not
the supervisor's: :class:`ForkedProcess` gives the supervisor what it uses of a
:class:`subprocess.Popen` (``pid``, ``poll``, ``wait``, ``returncode``), from the exit statuses the
server reports.

When the server cannot serve (it died, or it is still importing at the handover), the caller
launches a standby the usual way: the fork server saves time, it is never needed for a run to go on.
"""

from __future__ import annotations

import queue
import socket
import subprocess
import threading
import time
from typing import Any, Callable

from .zygote import FORK, MAX_MESSAGE, warm_spares  # noqa: F401 (the supervisor's switch)

SPAWN_TIMEOUT_S = 10.0  # a fork answers in milliseconds; longer means the server is stuck


class ForkedProcess:
    """A process the fork server forked, as the supervisor sees it (the parts of ``Popen`` it uses)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"standby {self.pid}", timeout)
        return self.returncode


class ForkServer:
    """One fork server for a run: :meth:`spawn` a standby, :meth:`close` when the run ends.

    ``launch(child_fd) -> Popen`` starts ``python -m goodputlab.engine.worker --fork-server`` with the
    socket's other end (the supervisor's launcher: its environment, its own process group).
    """

    def __init__(self, launch: Callable[[int], Any]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs.set_inheritable(True)
        try:
            self.proc = launch(theirs.fileno())
        finally:
            theirs.close()
        self._sock = ours
        self._pids: queue.Queue[int] = queue.Queue()
        self._children: dict[int, ForkedProcess] = {}
        self._early: dict[int, int] = {}  # exit codes reported before the pid was claimed
        self._lock = threading.Lock()
        self._spawn_lock = threading.Lock()
        self._closed = False
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="goodputlab-fork-server", daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def ready(self) -> bool:
        """Whether the server has imported what it forks with (a spawn is then answered at once)."""
        return self._ready.is_set()

    def wait_ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for :meth:`ready`; False if the server died or took longer."""
        deadline = time.monotonic() + timeout
        while self.alive() and not self._ready.wait(0.05):
            if time.monotonic() > deadline:
                return False
        return self.alive() and self.ready()

    def spawn(self, control_fd: int, log_fd: int, attempt: int | None = None) -> ForkedProcess | None:
        """A new standby (or, with ``attempt``, a worker that trains as that attempt at once) with ``control_fd``
        and ``log_fd`` as its control pipe and output; None when the server cannot serve (the caller launches
        one the usual way). The descriptors stay the caller's."""
        request = FORK if attempt is None else FORK + b" %d" % attempt
        with self._spawn_lock:
            if not self.alive():
                return None
            try:
                socket.send_fds(self._sock, [request], [control_fd, log_fd])
                pid = self._pids.get(timeout=SPAWN_TIMEOUT_S)
            except (OSError, queue.Empty):
                self.close()
                return None
            if pid < 0:
                return None
            child = ForkedProcess(pid)
            with self._lock:
                self._children[pid] = child
                if pid in self._early:
                    child._exit(self._early.pop(pid))
            return child

    def _read(self) -> None:
        while True:
            try:
                message = self._sock.recv(MAX_MESSAGE)
            except OSError:
                message = b""
            if not message:
                break
            parts = message.decode(errors="replace").split()
            if parts == ["ready"]:
                self._ready.set()
            elif len(parts) == 2 and parts[0] == "pid":
                self._pids.put(int(parts[1]))
            elif len(parts) == 3 and parts[0] == "exit":
                pid, code = int(parts[1]), int(parts[2])
                with self._lock:
                    child = self._children.pop(pid, None)
                    if child is None:
                        self._early[pid] = code
                if child is not None:
                    child._exit(code)
        # the server is gone, and its children with it (PR_SET_PDEATHSIG): none will be reported
        self._pids.put(-1)
        with self._lock:
            orphans, self._children = list(self._children.values()), {}
        for child in orphans:
            _wait_gone(child.pid)
            child._exit(-9)

    def close(self) -> None:
        """End the server: its children die with it; every :class:`ForkedProcess` is then exited."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        self._reader.join(timeout=10)
        self._sock.close()


def _wait_gone(pid: int, timeout: float = 5.0) -> None:
    """Wait until process ``pid`` (not our child) has exited: gone, or a zombie its new parent has not reaped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.005)
