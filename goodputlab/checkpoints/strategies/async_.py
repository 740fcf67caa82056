"""async: snapshot while training waits, persist in the background.

``save`` does three things while the training loop waits (all of it booked to
``checkpoint_save``, because the worker emits the ``ckpt_save`` phase before
calling it):

1. wait for the previous save's persist, if it is still running: at most one
   save is in flight, so memory stays bounded and a slow disk shows up as save
   time instead of a growing queue;
2. copy the state into reusable host buffers (:class:`~goodputlab.checkpoints.snapshot.HostBuffers`:
   pinned, ``non_blocking`` device-to-host copies on CUDA; a memcpy on CPU);
3. hand the buffers to the background writer.

The background writer, one thread per run, serialises the snapshot with
``torch.save`` into the store's atomic commit (temporary directory, fsync,
manifest with sha256, rename) and emits ``ckpt_commit`` once the checkpoint is
durable. A kill while it writes leaves a temporary directory that no reader
sees, so only valid checkpoints survive.

Why a thread and not a process: the heavy parts of a persist (writing the
file, hashing it, fsync, and torch's record writer) release the GIL, so the
thread takes CPU time but does not hold the training loop's interpreter. The
stall benchmark (``benchmarks/checkpoint_stall.py``) measures both the
longest GIL hold by the writer and the training-step slowdown while it runs.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..background import BackgroundCheckpointer
from ..snapshot import HostBuffers, flatten, unflatten
from ..store import CheckpointStore


class AsyncCheckpointer(BackgroundCheckpointer):
    """Snapshot into reusable host buffers, persist in a background thread.

    ``on_commit(step, tier="disk")`` is called from the background thread once
    a checkpoint is durable; ``last_persist_s`` is serialise + write + fsync + commit.
    """

    name = "async"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None], pin_memory: bool = True):
        super().__init__(store, on_commit, "goodputlab-async-ckpt")
        self.buffers = HostBuffers(pin=pin_memory)

    def save(self, state: dict[str, Any], step: int) -> None:
        """Snapshot ``state`` (the state after ``step`` steps) and start persisting it."""
        t = time.perf_counter()
        self.last_wait_s = self.writer.wait()  # the buffers are free once the previous persist is done
        skeleton, tensors = flatten(state)  # new containers throughout: training cannot mutate the skeleton
        snapshot = unflatten(skeleton, self.buffers.copy_in(tensors))
        self.last_snapshot_s = time.perf_counter() - t - self.last_wait_s
        self.writer.submit(lambda: self._persist(snapshot, step))
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1

    def _persist(self, snapshot: dict[str, Any], step: int) -> None:
        t = time.perf_counter()
        self.store.save(snapshot, step)
        self.last_persist_s = time.perf_counter() - t
        self.on_commit(step, tier="disk")

    def close(self) -> None:
        """Finish the save in flight, stop the writer thread and free the buffers."""
        super().close()
        self.buffers.release()


def make(store: CheckpointStore, on_commit: Callable[..., None], tier=None) -> AsyncCheckpointer:
    """The async checkpointer (it has no tier and no options)."""
    return AsyncCheckpointer(store, on_commit)
