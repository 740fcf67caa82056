"""Process plumbing: a child process that dies with its parent, so no process outlives a run."""

from __future__ import annotations

import os
import signal
import sys


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux), and exit now if it already has.

    The training worker calls it for its supervisor, each DataLoader worker for its
    training process: the request is not inherited across ``fork``, so each process
    makes it itself. Without it, a worker whose supervisor died (a restarted notebook
    kernel) would linger, for good when it is blocked.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
