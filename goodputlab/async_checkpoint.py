"""The async strategy: snapshot while training waits, persist in the background.

``save`` does three things while the training loop waits (all of it booked to
``checkpoint_save``, because the worker emits the ``ckpt_save`` phase before
calling it):

1. wait for the previous save's persist, if it is still running: at most one
   save is in flight, so memory stays bounded and a slow disk shows up as save
   time instead of a growing queue;
2. copy the state into reusable host buffers (:class:`~goodputlab.snapshot.HostBuffers`:
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

import queue
import threading
import time
from typing import Any, Callable

from .checkpoint import CheckpointStore
from .snapshot import HostBuffers, flatten, unflatten


class BackgroundWriter:
    """One daemon thread that runs one job at a time: at most one save in flight.

    :meth:`submit` waits for the previous job first. An exception raised by a
    job is kept and re-raised by the next :meth:`wait` (so a failed persist
    stops training loudly instead of passing unnoticed).
    """

    def __init__(self, name: str):
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=1)
        self._idle = threading.Event()
        self._idle.set()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except BaseException as e:  # kept for the training thread, which decides what to do
                self._error = e
            finally:
                self._idle.set()

    @property
    def busy(self) -> bool:
        """A job is queued or running."""
        return not self._idle.is_set()

    def wait(self) -> float:
        """Block until no job is in flight; returns the seconds waited. Re-raises a job's error."""
        t = time.perf_counter()
        self._idle.wait()
        waited = time.perf_counter() - t
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(f"a background checkpoint write failed: {err}") from err
        return waited

    def submit(self, job: Callable[[], None]) -> float:
        """Run ``job`` in the background after the previous one; returns the seconds waited for it."""
        waited = self.wait()
        self._idle.clear()
        self._jobs.put(job)
        return waited

    def close(self) -> None:
        """Finish the job in flight and stop the thread."""
        self._idle.wait()
        self._jobs.put(None)
        self._thread.join()


class AsyncCheckpointer:
    """Snapshot into reusable host buffers, persist in a background thread.

    ``on_commit(step, tier="disk")`` is called from the background thread once
    a checkpoint is durable. Timing of the latest save, in seconds:
    ``last_wait_s`` (waiting for the previous persist), ``last_snapshot_s``
    (the copy), ``last_blocking_s`` (their sum: what training waited) and
    ``last_persist_s`` (serialise + write + fsync + commit, in the background).
    """

    name = "async"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None], pin_memory: bool = True):
        self.store = store
        self.on_commit = on_commit
        self.buffers = HostBuffers(pin=pin_memory)
        self.writer = BackgroundWriter("goodputlab-async-ckpt")
        self.saves = 0
        self.last_wait_s = self.last_snapshot_s = self.last_blocking_s = 0.0
        self.last_persist_s = 0.0

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

    @property
    def in_flight(self) -> bool:
        """A persist is still running."""
        return self.writer.busy

    def finalize(self) -> None:
        """Wait until the newest save is durable."""
        self.writer.wait()

    def close(self) -> None:
        """Finish the save in flight, stop the writer thread and free the buffers."""
        self.writer.close()
        self.buffers.release()
