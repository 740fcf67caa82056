"""sync: serialise and persist while training waits (the baseline the others are measured against)."""

from __future__ import annotations

import time
from typing import Any, Callable

from ..store import CheckpointStore


class SyncCheckpointer:
    """The baseline: serialise and persist while training waits.

    ``on_commit(step, tier="disk")`` is called once the checkpoint is durable.
    """

    name = "sync"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None]):
        self.store = store
        self.on_commit = on_commit
        self.saves = 0
        self.last_blocking_s = 0.0

    def save(self, state: dict[str, Any], step: int) -> None:
        t = time.perf_counter()
        self.store.save(state, step)
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1
        self.on_commit(step, tier="disk")

    @property
    def in_flight(self) -> bool:
        return False

    def finalize(self) -> None:
        """Wait for saves in flight (none: sync saves finish before returning)."""

    def close(self) -> None:
        pass


def make(store: CheckpointStore, on_commit: Callable[..., None], tier=None) -> SyncCheckpointer:
    """The sync checkpointer (it has no tier and no options)."""
    return SyncCheckpointer(store, on_commit)
