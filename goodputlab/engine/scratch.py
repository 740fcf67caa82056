"""Scratch folders: the files of a notebook's runs, kept while its kernel lives.

A chapter's runs write checkpoints (chapter 4's reach 1.5 GB); on Binder or a laptop they must not
pile up in the temporary directory run after run. :func:`scratch_dir` makes a fresh folder there
that is removed when the Python process that made it exits (a kernel's shutdown or restart), and
removes those left behind by processes that died without removing theirs (a kernel that was
killed): each holds a marker naming its process and when that process started, so a folder whose
process is gone, or whose number now belongs to another process, is known to be garbage.

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
import tempfile
from pathlib import Path

MARKER = ".goodputlab-scratch"


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return stat.rsplit(")", 1)[1].split()[19]
    except IndexError:
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: leave its folder alone
    now = _started(pid)
    return started is None or now is None or now == started  # a different start: the number was reused


def sweep(parent: Path) -> list[Path]:
    """Remove the scratch folders in ``parent`` whose process has ended; the ones removed."""
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for d in entries:
        if not d.name.startswith("goodputlab") or d.is_symlink() or not d.is_dir():
            continue
        try:
            mark = json.loads((d / MARKER).read_text())
            pid, started = int(mark["pid"]), mark.get("started")
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a scratch folder, or not ours to judge
        if pid != os.getpid() and not _alive(pid, started):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def scratch_dir(prefix: str = "goodputlab-", parent: str | Path | None = None) -> Path:
    """A fresh folder ``<parent>/<prefix><pid>-xxxxxxxx`` (``parent``: the system's temporary
    directory), removed when this process exits; first removes the scratch folders of processes
    that have ended."""
    if not prefix.startswith("goodputlab"):
        raise ValueError(f"a scratch folder's prefix starts with 'goodputlab' (got {prefix!r}): the sweep looks for that")
    root = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    sweep(root)
    d = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))
    (d / MARKER).write_text(json.dumps({"pid": os.getpid(), "started": _started(os.getpid())}) + "\n")
    atexit.register(_remove, d, os.getpid())
    return d


def _remove(d: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, which exits through atexit too
        shutil.rmtree(d, ignore_errors=True)
