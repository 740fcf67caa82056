"""Restore: the newest valid training state, from the RAM tier when it is newest, else from disk."""

from __future__ import annotations

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
