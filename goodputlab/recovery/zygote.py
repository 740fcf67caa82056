"""The fork server's side of a hot spare: one process that has imported torch, forked into each standby.

A standby launched as a new process pays for the interpreter and ``import torch`` (about 2 s of CPU
here) before it is ready, so a failure that strikes within seconds of the last handover finds no
standby, and every failure costs the machine another import. The fork server pays once: the
supervisor launches it at the start of a run (:class:`~goodputlab.recovery.forkserver.ForkServer`),
it imports torch and the worker's modules, and then forks a standby whenever asked. A fork shares
the imported pages and is ready in a fraction of a second.

The protocol, over a ``SOCK_SEQPACKET`` socket pair (each message one datagram):

* supervisor -> server: ``fork`` (a standby) or ``fork <attempt>`` (a worker that starts training as
  that attempt at once: the run's first launch), with two descriptors attached (``SCM_RIGHTS``): the
  child's control pipe and its log. The child runs in a session of its own, its output in the log,
  and never returns;
* server -> supervisor: ``ready`` once it has imported what it forks with, ``pid <pid>`` for each fork, and ``exit <pid> <code>`` when a child exits
  (``code`` as :attr:`subprocess.Popen.returncode`: negative for a signal).

Nothing is built before the fork: no tensor, no thread pool, no CUDA context (neither survives a
fork). Each child builds its own model, as a new worker does, so it is what a cold start would be.
The server dies with the supervisor (``PR_SET_PDEATHSIG``), and each child with the server.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
from typing import Callable, NoReturn

from ..procs import die_with_parent

#: ``GOODPUTLAB_WARM_SPARES=0``: hot spares as they were before the fork server, launched as new processes and
#: reading the checkpoint only when activated (benchmarks/restart_costs.py sets them side by side)
WARM_SPARES_ENV = "GOODPUTLAB_WARM_SPARES"


def warm_spares() -> bool:
    """Whether standbys are forked from the fork server and read each new checkpoint while they wait."""
    return os.environ.get(WARM_SPARES_ENV, "1") != "0"


FORK = b"fork"
READY = b"ready"
MAX_MESSAGE = 64


def preimport() -> None:
    """Import what every worker imports before it trains: the worker's own modules, and torch with them."""
    from ..checkpoints import restore, state, store, strategies  # noqa: F401
    from ..pipeline import loader, prefetch  # noqa: F401
    from ..training import eager, model, objects, step  # noqa: F401
    from . import hooks, omit, standby  # noqa: F401


def serve_forks(sock_fd: int, parent_pid: int, become: Callable[[int | None, int], NoReturn]) -> NoReturn:
    """Serve ``fork`` requests on ``sock_fd`` until the supervisor closes it; never returns.

    ``become(attempt, control_fd)`` runs in each child: a standby's life (``attempt`` None) or a worker's,
    ending in ``os._exit``. The server runs at normal priority: the first launch waits for its imports;
    a standby lowers its own priority while it waits.
    """
    die_with_parent(parent_pid)
    preimport()
    sock = socket.socket(fileno=sock_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up byte is written
    signal.set_wakeup_fd(wake_w)
    me = os.getpid()
    _send(sock, READY)
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            _drain(wake_r)
        _report_exits(sock)
        if sock not in ready:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        except OSError:
            message, fds = b"", []
        if not message:  # the supervisor closed its end: the run is over
            os._exit(0)
        attempt = _request(message)
        if attempt is False or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        control_fd, log_fd = fds
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sock.close()
            os.close(wake_r)
            os.close(wake_w)
            os.setsid()  # its own process group: one killpg takes it and its DataLoader workers
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(log_fd)
            die_with_parent(me)
            become(attempt, control_fd)
        os.close(control_fd)
        os.close(log_fd)
        _send(sock, f"pid {pid}".encode())


def _request(message: bytes) -> int | None | bool:
    """``fork`` -> None (a standby), ``fork <attempt>`` -> the attempt; anything else -> False."""
    parts = message.split()
    if parts == [FORK]:
        return None
    if len(parts) == 2 and parts[0] == FORK and parts[1].isdigit():
        return int(parts[1])
    return False


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _report_exits(sock: socket.socket) -> None:
    """Reap every child that has exited and tell the supervisor how."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, f"exit {pid} {os.waitstatus_to_exitcode(status)}".encode())


def _send(sock: socket.socket, message: bytes) -> None:
    try:
        sock.send(message)
    except OSError:  # the supervisor is gone; PR_SET_PDEATHSIG ends this process
        sys.exit(0)
