"""Scratch folders: the files of a notebook's runs, kept while its kernel lives.

A chapter's runs write checkpoints (chapter 4's reach 1.5 GB); on Binder or a laptop they must not
pile up in the temporary directory run after run. :func:`scratch_dir` makes a fresh folder there
that is removed when the Python process that made it exits (a kernel's shutdown or restart), and
removes those left behind by processes that died without removing theirs (a kernel that was
killed).

Liveness is an ``flock``, not a process number: each folder holds a :data:`MARKER` file that its
owner locks for as long as it lives (the kernel drops the lock when the process dies, however it
dies, and a lock is seen from every PID namespace, where a pid would name another process or
none). :func:`sweep` removes only a folder whose marker it can lock itself. The temporary
directory is writable by everyone, so the marker is treated as planted until shown otherwise: it
is opened without following a link and without blocking, and a FIFO, a device or a link is never
read (no hang on a FIFO, no endless read of ``/dev/zero``); such a folder is left alone.

    >>> from goodputlab.engine.scratch import scratch_dir
    >>> work = scratch_dir("goodputlab-ch4-")   # /tmp/goodputlab-ch4-<pid>-xxxxxxxx/

Pass a folder of your own (``out=`` of :func:`goodputlab.run`, ``out_root=`` of a panel) to keep
a run's files.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..safe_io import hold_new_lock, try_lock_existing

MARKER = ".goodputlab-scratch"
_MARKER_MAX_BYTES = 4096  # {"pid": ..., "started": ...}: for people, and for folders made before the lock
_held: dict[Path, int] = {}  # this process's scratch folders -> the descriptor holding each marker's lock


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None where unknown."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return stat_line.rsplit(")", 1)[1].split()[19]
    except IndexError:
        return None


def _alive_by_pid(fd: int) -> bool:
    """A marker from before the lock (its owner never locked it): is the process it names alive here?
    Read from the locked descriptor, at most :data:`_MARKER_MAX_BYTES`."""
    try:
        mark = json.loads(os.pread(fd, _MARKER_MAX_BYTES, 0))
        pid, started = int(mark["pid"]), mark.get("started")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _started(pid)
    return started is None or now is None or now == started


def sweep(parent: Path) -> list[Path]:
    """Remove the scratch folders in ``parent`` whose owner has ended (their marker's lock is free);
    the ones removed. A folder whose marker is missing, a link, a FIFO, a device, or locked is left alone."""
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for d in entries:
        try:
            if not d.name.startswith("goodputlab") or not stat.S_ISDIR(os.lstat(d).st_mode) or d in _held:
                continue
        except OSError:
            continue
        fd = try_lock_existing(d / MARKER)  # None: missing, a link, not a regular file, or its owner lives
        if fd is None:
            continue
        try:
            if not _alive_by_pid(fd):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
        finally:
            os.close(fd)
    return removed


def private_folder(path: Path) -> Path:
    """``path``, made if missing (mode 0700), when it is a real folder of this user that nobody else can write;
    else a new private folder beside it (``<name>-xxxxxxxx``, made by :func:`tempfile.mkdtemp`).

    A parent with a fixed name in the temporary directory can be made first by someone else: its owner can
    then swap any folder in it for a link, and a run's files would land where that user chose."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022:
        return path
    return Path(tempfile.mkdtemp(prefix=f"{path.name}-", dir=path.parent))


def scratch_dir(prefix: str = "goodputlab-", parent: str | Path | None = None) -> Path:
    """A fresh folder ``<parent>/<prefix><pid>-xxxxxxxx`` (``parent``: the system's temporary
    directory; a ``parent`` given must be this user's alone, :func:`private_folder`), removed when this process exits; first removes the scratch folders of processes
    that have ended. Its :data:`MARKER` stays locked by this process until then."""
    if not prefix.startswith("goodputlab"):
        raise ValueError(f"a scratch folder's prefix starts with 'goodputlab' (got {prefix!r}): the sweep looks for that")
    root = private_folder(Path(parent)) if parent is not None else Path(tempfile.gettempdir())
    sweep(root)
    d = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))
    fd = hold_new_lock(d, MARKER)
    os.pwrite(fd, (json.dumps({"pid": os.getpid(), "started": _started(os.getpid())}) + "\n").encode(), 0)
    _held[d] = fd
    atexit.register(_remove, d, os.getpid())
    return d


def _remove(d: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, which exits through atexit too
        shutil.rmtree(d, ignore_errors=True)
        fd = _held.pop(d, None)
        if fd is not None:
            os.close(fd)
