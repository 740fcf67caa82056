"""Restore: the newest valid training state, from the RAM tier when it is newest, else from disk."""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Callable

from .store import Checkpoint, CheckpointStore, CheckpointWarning


def load_newest(
    store: CheckpointStore,
    memory_tier=None,
    on_invalid: Callable[[Checkpoint, str], None] | None = None,
    device=None,
    accept: Callable[[Checkpoint, dict[str, Any]], None] | None = None,
) -> tuple[Checkpoint, dict[str, Any]] | None:
    """The newest valid state: the RAM tier's snapshot when there is one at least as new
    as the newest disk checkpoint, else the newest valid disk checkpoint.

    ``device``: where the RAM tier puts back the tensors that were saved from a device
    of that type (see :meth:`MemoryTier.load`); disk checkpoints load onto the CPU.

    A damaged RAM snapshot is reported like a damaged disk checkpoint
    (``on_invalid`` and a :class:`CheckpointWarning`) and restore falls back to disk.
    Restoring from RAM reads no checkpoint file on disk (it only lists the directory).
    ``accept`` refuses a loaded state as in :meth:`CheckpointStore.load_newest_valid`.
    """
    if memory_tier is not None and memory_tier.has_snapshot():
        listed = store.list()
        candidate = memory_tier.checkpoint()
        # step -1: current.json is unreadable; load() reports the damage
        if candidate is not None and (candidate.step < 0 or not listed or candidate.step >= listed[0].step):
            try:
                found = memory_tier.load(device)
                if found is not None and accept is not None:
                    accept(*found)
            except Exception as e:  # damaged in any way
                reason = str(e) or type(e).__name__
                warnings.warn(f"skipping damaged RAM snapshot {candidate.path.name}: {reason}", CheckpointWarning, stacklevel=2)
                if on_invalid:
                    on_invalid(candidate, reason)
            else:
                if found is not None:
                    return found
    return store.load_newest_valid(on_invalid, accept)


def checkpoint_identity(ckpt: Checkpoint) -> tuple | None:
    """What a checkpoint folder is on disk now: its name and each file's name, inode, size and
    modification time. Any rewrite, truncation or replacement of a file changes it. None if unreadable."""
    try:
        with os.scandir(ckpt.path) as entries:
            files = sorted((e.name, *_stamp(e.stat(follow_symlinks=False))) for e in entries)
    except OSError:
        return None
    return (ckpt.path.name, tuple(files))


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


class Preload:
    """A hot spare's copy of the newest disk checkpoint, read while it waits.

    Between :meth:`start` and :meth:`take`, a thread of the standby reads each newly committed
    checkpoint and verifies it (at the standby's idle priority: spare CPU only), as a spare machine
    that streams the job's checkpoints would. At activation :meth:`take` hands over that copy if the
    newest checkpoint is still the one it read and no file of it has changed since; otherwise restore
    reads from disk as a cold worker does. So the copy never replaces a damage check: a checkpoint
    damaged after it was read is read again, and found damaged.

    ``accept`` is :func:`load_newest`'s; a checkpoint that fails to load or is refused is not kept
    (restore meets it again and reports it).
    """

    def __init__(self, store: CheckpointStore, accept: Callable[[Checkpoint, dict[str, Any]], None] | None = None):
        self.store = store
        self.accept = accept
        self._identity: tuple | None = None
        self._found: tuple[Checkpoint, dict[str, Any]] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, every_s: float = 0.05) -> None:
        """Look for a new checkpoint every ``every_s`` seconds, in a thread, until :meth:`take`."""

        def watch() -> None:
            while not self._stop.is_set():
                self.refresh()
                self._stop.wait(every_s)

        self._thread = threading.Thread(target=watch, name="goodputlab-preload", daemon=True)
        self._thread.start()

    def refresh(self) -> None:
        """Read the newest checkpoint if it is not the one already held."""
        try:
            listed = self.store.list()
        except OSError:
            return
        if not listed:
            return
        newest = listed[0]
        identity = checkpoint_identity(newest)
        if identity is None or identity == self._identity:
            return
        self._identity, self._found = identity, None
        try:
            state = self.store.load(newest.path)
            if self.accept is not None:
                self.accept(newest, state)
        except Exception:  # damaged or refused: restore will find it and say so
            return
        if checkpoint_identity(newest) == identity:  # unchanged while it was read
            self._found = (newest, state)

    def take(self) -> tuple[Checkpoint, dict[str, Any]] | None:
        """Stop reading (a read in progress is finished) and hand over the copy, if the newest checkpoint
        is still exactly the one read; else None."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        found, self._found = self._found, None
        if found is None:
            return None
        listed = self.store.list()
        if not listed or listed[0].path != found[0].path or checkpoint_identity(listed[0]) != self._identity:
            return None
        return found
