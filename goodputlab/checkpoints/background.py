"""Background persistence shared by the async, dcp and memory strategies (no torch import here:
the supervisor imports the memory tier, and must start fast)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

from .store import CheckpointStore


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


class BackgroundCheckpointer:
    """What every strategy that persists in a background thread shares: the writer thread
    (at most one save in flight), the commit callback and the timings of the latest save.

    Timing of the latest save, in seconds: ``last_wait_s`` (waiting for the previous
    persist), ``last_snapshot_s`` (the copy), ``last_blocking_s`` (their sum: what training
    waited) and ``last_persist_s`` (the background part).
    """

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None], thread_name: str):
        self.store = store
        self.on_commit = on_commit
        self.writer = BackgroundWriter(thread_name)
        self.saves = 0
        self.last_wait_s = self.last_snapshot_s = self.last_blocking_s = 0.0
        self.last_persist_s = 0.0

    @property
    def in_flight(self) -> bool:
        """A persist is still running."""
        return self.writer.busy

    def finalize(self) -> None:
        """Wait until the newest save is durable."""
        self.writer.wait()

    def close(self) -> None:
        """Finish the save in flight and stop the writer thread."""
        self.writer.close()
