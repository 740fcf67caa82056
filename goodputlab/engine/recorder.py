"""Measure your own job: record any training loop into the lab's event log.

::

    rec = gl.Recorder("runs/mine")            # a new attempt when the folder already holds one
    with rec.checkpoint_restore():
        step0 = load_my_checkpoint()
    for step in range(step0, total):
        with rec.data_wait():
            batch = next(it)
        with rec.step(step):
            train_step(batch)
        if step % 100 == 0:
            with rec.checkpoint_save(step):
                save_my_checkpoint(step)
    rec.close()

The recorder writes the events the lab's worker writes (``goodputlab.engine.events``),
so the same ledger books every second of the job, and ``goodputlab report DIR``
and ``gl.load_run(DIR)`` give the same table and charts as a lab run. Pure: no
torch, so it works in any loop.

The rules (also in docs/ARCHITECTURE.md):

* **Attempts.** Each ``Recorder`` on a folder that already holds a recording is a
  new attempt (a restart). The gap from the previous attempt's last event to this
  one's start is ``restart``; so is everything of a later attempt before its first
  step (as ``startup`` in the first attempt), except ``checkpoint_restore``.
  An attempt that did not close cleanly (killed, or left by an exception) counts
  as a failure; a clean ``close()`` followed by a new attempt does not.
* **Lost work.** An execution of a step that a later attempt executes again is
  ``lost_work``; so are steps past the newest checkpoint of a run whose last
  attempt did not complete. Steps must be global step numbers (increasing over
  the job), not per-epoch indices.
* **The clock.** A job's attempts are separate processes, possibly on another
  boot, so the monotonic clock (which the lab's supervisor can use because it
  outlives its workers) cannot compare them. Times are seconds since a wall-clock
  ``t0`` saved in ``recorder.json`` by the first attempt; within an attempt they
  advance with the monotonic clock from the wall-clock reading at its start (a
  clock step mid-run moves nothing), and never before the previous attempt's last
  event.
* **The first batch** of an attempt (a ``data_wait`` before its first step) is
  start-up, as in the lab's worker. A gap of more than :data:`SPLIT_GAP_S` between
  the end of a ``data_wait`` or ``checkpoint_save`` block and the next block is
  booked ``other`` (the loop's own code: logging, evaluation); shorter gaps stay
  with the block before (it saves a write per step).
* **Ranks.** Under ``torchrun`` (``WORLD_SIZE`` > 1) rank ``R`` records to
  ``events-rank{R}.jsonl``; the reader merges the ranks (``goodputlab.engine.merge``),
  matching the ranks' attempts by time. Create the ``Recorder`` before
  ``init_process_group``: the rendezvous then keeps every rank's attempt open
  until all ranks have started theirs.
* **Completion.** ``close()`` marks the run completed when ``total_steps`` (if
  given) were reached, or when ``completed=True``; without ``total_steps`` a clean
  ``close()`` ends the run as completed. Leaving a ``with Recorder(...)`` block by
  an exception closes the attempt as failed.
* **Durability.** Each event is one ``O_APPEND`` write (it survives a SIGKILL); the
  log is fsynced at every committed checkpoint and at ``close()``. A live attempt
  holds an ``flock`` on ``.events.jsonl.lock`` beside its log: one Recorder per
  log. A line cut short by a kill is dropped, with a warning, by the reader and by
  the next attempt.
"""

from __future__ import annotations

import fcntl
import json
import operator
import os
import socket
import time
import warnings
from pathlib import Path
from typing import Any

from . import events as E
from .events import EventWriter

META_FILE = "recorder.json"  # {"format", "t0_unix"}: written once, by the first attempt
EVENTS_FILE = "events.jsonl"  # one process
RANK_EVENTS_FILE = "events-rank{rank}.jsonl"  # rank R under torchrun
FORMAT = 1
SPLIT_GAP_S = 50e-6  # a longer gap after a data_wait or save block is booked ``other``
_TAIL_BYTES = 1 << 16


class RecorderError(RuntimeError):
    """The recorder cannot record here (another live recorder, a lab run's folder, a damaged recorder.json)."""


class NotARunDirectory(FileNotFoundError):
    """The directory holds no run: no summary.json and no event log."""


class EventLogError(ValueError):
    """An event log has a damaged line before its last one (not a write cut short by a kill)."""


class EventLogWarning(UserWarning):
    """An event log's last line was cut short (a kill mid-write) and was left out."""


def env_rank() -> int | None:
    """This process's rank under ``torchrun`` (``RANK`` when ``WORLD_SIZE`` > 1), else None."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ:
        return int(os.environ["RANK"])
    return None


def events_path(run_dir: Path | str, rank: int | None) -> Path:
    """The event log of ``rank`` (``None``: the only process) in ``run_dir``."""
    name = EVENTS_FILE if rank is None else RANK_EVENTS_FILE.format(rank=rank)
    return Path(run_dir) / name


class _Block:
    """A reusable context manager, one per kind of block, so a step allocates nothing."""

    __slots__ = ("rec", "step", "loss")

    def __init__(self, rec: Recorder):
        self.rec = rec
        self.step = None
        self.loss = None


class _RestoreBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        self.rec._phase(E.W_RESTORE)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.rec._phase(E.W_WARMUP)  # until the first step: start-up (or restart)
        return False


class _DataWaitBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        rec = self.rec
        last = rec._last_step
        if last is None:  # the first batch of this attempt: start-up, as in the lab's worker
            rec._phase(E.W_WARMUP)
        else:
            rec._phase(E.W_DATA_WAIT, last + 1 if self.step is None else operator.index(self.step))
        return self

    def __exit__(self, exc_type, exc, tb):
        rec = self.rec
        if rec._last_step is not None and rec._writer is not None:
            rec._pending = rec._writer.now()
        return False


class _StepBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        rec = self.rec
        step = self.step = operator.index(self.step)
        last = rec._last_step
        if last is not None and step <= last:
            rec._warn_order(step, last)
        rec._last_step = step
        rec._phase(E.W_COMPUTE, step)
        return self

    def __exit__(self, exc_type, exc, tb):
        rec = self.rec
        w = rec._writer
        if w is None:
            return False
        if exc_type is None:
            loss = self.loss
            if loss is not None:
                loss = rec._last_loss = float(loss)
                self.loss = None
            w.emit(E.W_STEP_END, self.step, loss=loss)
            rec._done = self.step
        else:
            w.emit(E.R_LOOP, self.step)  # the step raised: it did not complete
            self.loss = None
        return False


class _SaveBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        rec = self.rec
        rec._phase(E.W_CKPT_SAVE, rec._done if self.step is None else operator.index(self.step))
        return self

    def __exit__(self, exc_type, exc, tb):
        self.rec._saved(self.step, exc_type is None)
        return False


class Recorder:
    """Records a training loop's phases to ``run_dir``'s event log (see the module's rules).

    ``run_dir``: the folder for the recording (created if needed). A folder that
    already holds one gets a new attempt. ``total_steps``: the steps the job
    trains in all (optional; with it, ``close()`` knows whether the run
    completed). ``rank``: the process's rank (default: ``RANK`` under
    ``torchrun``, else one process).

    Raises :class:`RecorderError` when another live process records to the same
    log, or the folder holds a lab run.
    """

    def __init__(self, run_dir: str | Path, *, total_steps: int | None = None, rank: int | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if (self.run_dir / "summary.json").exists() and not (self.run_dir / META_FILE).exists():
            raise RecorderError(f"{self.run_dir} holds a lab run (summary.json); record into another folder")
        self.rank = env_rank() if rank is None else int(rank)
        self.total_steps = None if total_steps is None else operator.index(total_steps)
        self.path = events_path(self.run_dir, self.rank)
        t0_unix = _load_or_create_t0(self.run_dir)

        # Hold an exclusive lock while this attempt lives (the kernel drops it when the process
        # dies, even by SIGKILL): two live recorders would interleave their attempts. It is on a
        # file of its own: the log's own flock belongs to its writers, one event at a time.
        self._lock_fd = os.open(_attempt_lock_path(self.path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise RecorderError(
                f"{self.path} is being recorded by another live process; one Recorder per folder and rank"
            ) from None
        self._log_fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)  # to repair and fsync
        prev = _repair_tail(self._log_fd, self.path)
        self.attempt = 0 if prev is None else prev["attempt"] + 1

        # Seconds since t0 on the wall clock at this attempt's start, then on the monotonic clock.
        base = time.time() - t0_unix
        if prev is not None:
            base = max(base, prev["t"])
        self._writer = w = EventWriter(self.path, time.monotonic() - base, self.attempt)
        if prev is not None and prev["kind"] not in (E.SUP_FAILURE, E.SUP_RESTART_DELAY):
            if prev["kind"] == E.SUP_END and prev.get("completed"):
                warnings.warn(
                    f"{self.run_dir} holds a completed run; recording attempt {self.attempt} after it",
                    stacklevel=2,
                )
            # the time between the attempts belongs to the previous attempt's end, as the supervisor writes it
            w.attempt = prev["attempt"]
            if prev["kind"] == E.SUP_END and prev.get("clean"):
                w.emit(E.SUP_RESTART_DELAY, t=prev["t"])
            else:
                cause = prev.get("reason") if prev["kind"] == E.SUP_END else "the attempt did not close (killed)"
                w.emit(E.SUP_FAILURE, t=prev["t"], cause=cause)
            w.attempt = self.attempt
        w.emit(
            E.W_INIT,
            t0_unix=t0_unix,
            rank=self.rank,
            total_steps=self.total_steps,
            pid=os.getpid(),
            host=socket.gethostname(),
            recorder=FORMAT,
        )
        self._last_step: int | None = None  # the last step started in this attempt
        self._done: int | None = None  # the last step completed in this attempt
        self._last_loss: float | None = None
        self._pending: float | None = None  # end of a data_wait/save block not yet followed by a phase
        self._warned_order = False
        self._restore = _RestoreBlock(self)
        self._data = _DataWaitBlock(self)
        self._step = _StepBlock(self)
        self._save = _SaveBlock(self)

    # --- the blocks -------------------------------------------------------------------
    def checkpoint_restore(self) -> _Block:
        """``with rec.checkpoint_restore(): ...``: loading state after a (re)start; ``checkpoint_restore``."""
        return self._restore

    def data_wait(self, step: int | None = None) -> _Block:
        """``with rec.data_wait(): batch = next(it)``: blocked on the next batch; ``data_wait``.

        ``step``: the step the batch is for (default: the step after the last one).
        Before the attempt's first step this is start-up (the first batch)."""
        self._data.step = step
        return self._data

    def step(self, step: int) -> _Block:
        """``with rec.step(step) as s: ...``: the compute of global step ``step``.

        ``productive`` if this execution survives, else ``lost_work``. Set
        ``s.loss`` inside the block to record the loss (a float). A step whose
        block raises did not complete."""
        self._step.step = step
        return self._step

    def checkpoint_save(self, step: int | None = None) -> _Block:
        """``with rec.checkpoint_save(step): ...``: the blocking part of a save; ``checkpoint_save``.

        ``step``: the step just trained (for the timeline). The checkpoint holds every
        step completed in this attempt so far; it counts once the block exits
        without an exception."""
        self._save.step = step
        return self._save

    # --- writing --------------------------------------------------------------------------
    def _phase(self, kind: str, step: int | None = None, **fields: Any) -> None:
        w = self._writer
        if w is None:
            raise RecorderError("this Recorder is closed; a new attempt needs a new Recorder")
        t = w.now()
        p = self._pending
        if p is not None:
            self._pending = None
            if t - p > SPLIT_GAP_S:
                w.emit(E.R_LOOP, t=p)
        w.emit(kind, step, t=t, **fields)

    def _warn_order(self, step: int, last: int) -> None:
        if not self._warned_order:
            self._warned_order = True
            warnings.warn(
                f"step {step} after step {last}: pass the global step (increasing over the whole job), "
                "or re-executions cannot be told apart",
                stacklevel=4,
            )

    def _saved(self, step: int | None, ok: bool) -> None:
        w = self._writer
        if w is None:
            return
        if ok:
            # resume point: the steps this process has completed (whatever the caller's convention for ``step``)
            if self._done is not None:
                resume = self._done + 1
            else:
                resume = 0 if step is None else operator.index(step) + 1
            w.emit(E.M_CKPT_COMMIT, step, ckpt_step=resume, tier="user")
            os.fsync(self._log_fd)  # the log up to a checkpoint survives a machine crash
        self._pending = w.now()

    # --- the end ---------------------------------------------------------------------------
    def close(self, completed: bool | None = None) -> None:
        """End this attempt. ``completed``: the job has finished (default: ``total_steps``
        reached, or True without ``total_steps``). Idempotent."""
        self._close(completed, clean=True, reason=None)

    def _close(self, completed: bool | None, clean: bool, reason: str | None) -> None:
        w = self._writer
        if w is None:
            return
        t = w.now()
        p, self._pending = self._pending, None
        if p is not None and t - p > SPLIT_GAP_S:
            w.emit(E.R_LOOP, t=p)
        steps_done = None if self._done is None else self._done + 1
        if completed is None:
            completed = clean and (self.total_steps is None or (steps_done or 0) >= self.total_steps)
        if completed:
            w.emit(E.M_FINISH, steps_done, t=t, final_state_sha256=None, final_loss=self._last_loss)
        if reason is None:
            reason = "completed" if completed else f"closed after {steps_done or 0} of {self.total_steps or '?'} steps"
        w.emit(E.SUP_END, t=t, completed=bool(completed), clean=clean, reason=reason)
        try:
            os.fsync(self._log_fd)
        finally:
            w.close()
            os.close(self._log_fd)
            os.close(self._lock_fd)  # releases the lock
            self._writer = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None or (exc_type is SystemExit and exc.code in (0, None)):
            self.close()
        else:
            self._close(False, clean=False, reason=f"error: {exc_type.__name__}")
        return False

    def __repr__(self) -> str:
        state = "closed" if self._writer is None else "recording"
        return f"Recorder({str(self.run_dir)!r}, attempt={self.attempt}, rank={self.rank}, {state})"


def _load_or_create_t0(run_dir: Path) -> float:
    """The recording's t0 (Unix seconds): read from ``recorder.json``, or saved there now.

    Created with a link from a complete temporary file, so ranks starting together agree
    on one t0 and no reader sees a half-written file."""
    meta = run_dir / META_FILE
    if not meta.exists():
        tmp = run_dir / f".{META_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"format": FORMAT, "t0_unix": time.time()}) + "\n")
        try:
            os.link(tmp, meta)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    try:
        return float(json.loads(meta.read_text())["t0_unix"])
    except (ValueError, KeyError, TypeError) as e:
        raise RecorderError(f"{meta} is damaged ({e}); move it away to start a new recording") from None


def _parse(raw: bytes) -> dict | None:
    try:
        e = json.loads(raw)
    except ValueError:
        return None
    return e if isinstance(e, dict) and "t" in e and "kind" in e and "attempt" in e else None


def _repair_tail(fd: int, path: Path) -> dict | None:
    """The log's last whole event; bytes after it (a write cut short) are cut off, with a warning."""
    size = os.fstat(fd).st_size
    chunk = min(size, _TAIL_BYTES)
    while True:
        base = size - chunk
        data = os.pread(fd, chunk, base)
        cut, last = len(data), None
        while True:
            nl = data.rfind(b"\n", 0, cut)
            if nl < 0:
                break
            if nl + 1 < cut:  # bytes after the last newline: not a whole line
                cut = nl + 1
                continue
            start = data.rfind(b"\n", 0, nl) + 1
            if start == 0 and base > 0:
                break  # the line may begin before this chunk
            last = _parse(data[start:nl])
            if last is not None:
                break
            cut = start
        if last is not None or base == 0:
            break
        chunk = min(size, chunk * 4)
    keep = base + cut if last is not None else 0
    if keep < size:
        warnings.warn(
            f"{path}: dropped {size - keep} bytes after the last whole event (a write cut short by a kill)",
            EventLogWarning,
            stacklevel=3,
        )
        os.ftruncate(fd, keep)
    return last


def _attempt_lock_path(log: Path) -> Path:
    """The file a live Recorder holds locked beside its log (``.events.jsonl.lock``)."""
    return log.with_name(f".{log.name}.lock")
