"""Process plumbing: a child process that dies with its parent, so no process outlives a run.

Linux's ``PR_SET_PDEATHSIG`` asks the kernel to send a signal to a process when its parent dies,
however the parent dies (SIGKILL and the OOM killer included). Every process of a run asks for
SIGKILL, down the whole tree: the supervisor's direct children (the worker, torchrun's agents,
a torchft replica or lighthouse) through :func:`dies_with_this_process` before they run anything,
a rank for its agent and a DataLoader worker for its training process through
:func:`die_with_parent`. So a supervisor that is SIGKILLed takes every rank with it, and no
orphan goes on committing checkpoints into the run's folder. The request is not inherited across
``fork`` and is kept across ``execve`` (of a program that is not set-user-ID).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable

_prctl = None  # libc's prctl, looked up once in the parent: a child between fork and exec takes no lock


def _libc_prctl():
    """libc's ``prctl``, looked up once."""
    global _prctl
    if _prctl is None:
        import ctypes

        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    return _prctl


def _request_sigkill_on_parent_death() -> None:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)`` for the calling process (nothing off Linux)."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        _libc_prctl()(PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux), and exit now if it already has.

    The training worker calls it for its supervisor, each DataLoader worker for its
    training process, each rank for torchrun's agent: the request is not inherited across
    ``fork``, so each process makes it itself. Without it, a worker whose supervisor died
    (a restarted notebook kernel) would linger, for good when it is blocked.
    """
    _request_sigkill_on_parent_death()
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def dies_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child is SIGKILLed when this process dies.

    It runs in the child between ``fork`` and ``exec``, so the program started (torchrun's agent,
    ``ip netns exec`` and what it execs, a replica) carries the request from its first instruction.
    The kernel watches the *thread* that forked: call ``Popen`` from a thread that lives as long as
    the child should (the supervisor's).
    """
    parent = os.getpid()
    if sys.platform.startswith("linux"):
        _libc_prctl()  # looked up here, in the parent: the child only calls it
    return lambda: die_with_parent(parent)
