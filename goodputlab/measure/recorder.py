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

The recorder writes the events the lab's worker writes (``goodputlab.measure.events``),
so the same ledger books every second of the job, and ``goodputlab report DIR``
and ``gl.load_run(DIR)`` give the same table and charts as a lab run. Pure: no
torch, so it works in any loop.

The rules (in full: docs/ARCHITECTURE.md, "Recording your own job"; docs/RECORDER.md):

* **Attempts.** Each ``Recorder`` on a folder that already holds a recording is a new
  attempt. The gap from the previous attempt's last event is ``restart``, as is a later
  attempt's start-up; an attempt that did not close cleanly (killed, or left by an
  exception) is a failure, a clean ``close()`` before a new attempt is not.
* **Lost work.** A step execution that a later attempt executes again is ``lost_work``,
  as are steps past the newest checkpoint of a run that stopped. Steps are global step
  numbers (increasing over the job), not per-epoch indices.
* **The clock.** Times are seconds since a wall-clock ``t0`` in ``recorder.json``; within
  an attempt they advance on the monotonic clock, never before the previous attempt's end.
* **Blocks.** The first batch of an attempt is start-up; a gap of more than
  :data:`SPLIT_GAP_S` after a ``data_wait`` or save block is ``other`` (the loop's code).
* **Ranks.** Under ``torchrun`` rank ``R`` records to ``events-rank{R}.jsonl``; the reader
  merges them (``goodputlab.measure.merge``). Create the ``Recorder`` before
  ``init_process_group``.
* **Completion.** ``close()`` completes the run when ``total_steps`` were reached, when
  ``completed=True``, or (without ``total_steps``) on any clean close.
* **Durability.** Each event is one ``O_APPEND`` write of a whole line, or (a step's events,
  by default) of a whole 40-byte record in ``events.steps.bin`` (``measure/step_records.py``);
  what was written before a SIGKILL survives it. Both are fsynced at every committed checkpoint and
  at ``close()``. One live Recorder per log (an ``flock`` on ``.events.jsonl.lock``), so its lines
  need no lock of their own; a write the disk cuts short is taken back before ``ENOSPC`` is raised,
  and a line or record a kill cut short (the write in progress, where it crosses a page) is
  dropped, with a warning, by the reader and the next attempt.
* **Files.** The log, ``recorder.json`` and the lock are opened without following links
  and only as regular files (``safe_io``): a planted link is refused, never written through.
"""

from __future__ import annotations

import errno
import fcntl
import operator
import os
import socket
import struct
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import events as E
from . import step_records as SR
from .events import event_line
from .logread import EventLogError, EventLogWarning  # noqa: F401 (re-exported: what a reader of a recording raises)
from .recorder_blocks import (
    _Block,
    _CustomBlock,
    _DataWaitBlock,
    _RestoreBlock,
    _SaveBlock,
    _StepBlock,
    cuda_synchronize,
    custom_name,
    step_number,
)
from .recorder_files import (
    FORMAT,
    META_FILE,
    RecorderError,
    _attempt_lock_path,
    _lexists,
    _load_or_create_t0,
    _repair_tail,
    check_own_log_before_start,
    count_lines,
    open_regular_rw,
    open_step_records,
)

EVENTS_FILE = "events.jsonl"  # one process
RANK_EVENTS_FILE = "events-rank{rank}.jsonl"  # rank R under torchrun
SPLIT_GAP_S = 50e-6  # a longer gap after a data_wait or save block is booked ``other``


class NotARunDirectory(FileNotFoundError):
    """The directory holds no run: no summary.json and no event log."""


def env_rank() -> int | None:
    """This process's rank under ``torchrun`` (``RANK`` when ``WORLD_SIZE`` > 1), else None."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ:
        return int(os.environ["RANK"])
    return None


def events_path(run_dir: Path | str, rank: int | None) -> Path:
    """The event log of ``rank`` (``None``: the only process) in ``run_dir``."""
    name = EVENTS_FILE if rank is None else RANK_EVENTS_FILE.format(rank=rank)
    return Path(run_dir) / name


class Recorder:
    """Records a training loop's phases to ``run_dir``'s event log (see the module's rules).

    Arguments:

    * ``run_dir``: the folder for the recording (created if needed). A folder that already
      holds one gets a new attempt.
    * ``total_steps``: the steps the job trains in all (optional; with it, ``close()`` knows
      whether the run completed).
    * ``rank``: the process's rank (default: ``RANK`` under ``torchrun``, else one process).
    * ``step_records``: write each step's events as 40-byte binary records in ``events.steps.bin``
      beside the JSON lines (default True: a report reads them several times faster;
      :mod:`goodputlab.measure.step_records`). False: every event is a JSON line, as before.

    * ``cuda_sync``: call ``torch.cuda.synchronize()`` before each step's end is written, so a CUDA
      step's asynchronous work is booked to that step rather than to the block that next waits for the
      GPU (docs/RECORDER.md, "On a GPU": when it is right and what it costs).

    Blocks (each a ``with``): :meth:`checkpoint_restore`, :meth:`data_wait` (or :meth:`data` around an
    iterable), :meth:`step`, :meth:`checkpoint_save`, :meth:`custom` (custom badput); then :meth:`close`
    (or leave a ``with Recorder(...)`` block). A framework's callbacks call :meth:`begin` and :meth:`end`,
    or :meth:`mark` with the times a hook reports after the fact.

    Raises :class:`RecorderError` when another live Recorder records to the same log, the
    folder holds a lab run, or a file the recorder would write is a link or not a regular file.
    """

    def __init__(self, run_dir: str | Path, *, total_steps: int | None = None, rank: int | None = None,
                 step_records: bool = True, cuda_sync: bool = False):
        """Start an attempt: ``run_dir`` (folder), ``total_steps`` (steps of the whole job, optional),
        ``rank`` (default from ``torchrun``'s ``RANK``), ``step_records`` (binary step records beside the
        JSON lines), ``cuda_sync`` (wait for the GPU at each step's end). See the class's docstring."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if _lexists(self.run_dir / "summary.json") and not _lexists(self.run_dir / META_FILE):
            raise RecorderError(f"{self.run_dir} holds a lab run (summary.json); record into another folder")
        self.rank = env_rank() if rank is None else int(rank)
        self.total_steps = None if total_steps is None else operator.index(total_steps)
        self.path = events_path(self.run_dir, self.rank)
        self._fd = self._rec_fd = self._lock_fd = -1
        check_own_log_before_start(self.path)
        t0_unix = _load_or_create_t0(self.run_dir)
        fd, prev, rec_fd = self._open(step_records)
        self.attempt = 0 if prev is None else prev["attempt"] + 1

        # Seconds since t0 on the wall clock at this attempt's start, then on the monotonic clock.
        base = time.time() - t0_unix
        if prev is not None:
            base = max(base, prev["t"])
        self._t0 = time.monotonic() - base
        self._at: float | None = None  # a time given by mark(), used instead of the clock's
        self._last_t = base  # the latest time written
        self._fd = fd
        self._formats(self.attempt)
        if rec_fd >= 0 and self.attempt <= SR.MAX_ATTEMPT:
            self._rec_fd = rec_fd
            self._line = self._record_line
        elif rec_fd >= 0:
            os.close(rec_fd)
        if prev is not None and prev["kind"] not in (E.SUP_FAILURE, E.SUP_RESTART_DELAY):
            self._close_previous(prev)
        self._emit(E.W_INIT, t0_unix=t0_unix, rank=self.rank, total_steps=self.total_steps, pid=os.getpid(),
                   host=socket.gethostname(), recorder=FORMAT, **({"step_records": SR.VERSION} if self._rec_fd >= 0 else {}))
        self._last_step: int | None = None  # the last step started in this attempt
        self._in_step: int | None = None  # the step whose block is open now
        self._done: int | None = None  # the last step completed in this attempt
        self._last_loss: float | None = None
        self._pending: float | None = None  # end of a data_wait/save block not yet followed by a phase
        self._warned_order = False
        self._restore = _RestoreBlock(self)
        self._data = _DataWaitBlock(self)
        self._step = _StepBlock(self)
        self._save = _SaveBlock(self)
        self._custom = _CustomBlock(self)
        self._sync = cuda_synchronize if cuda_sync else None  # called before a step's end is written

    def _open(self, step_records: bool) -> tuple[int, dict | None, int]:
        """Take the lock, open the log (its tail repaired) and the step records: ``(fd, the previous attempt's
        last event or None, records fd or -1)``. Holds an exclusive lock while this attempt lives (the kernel
        drops it when the process dies, even by SIGKILL): two live recorders would interleave their attempts.
        It is on a file of its own, so the log's own flock stays free for any other writer's use."""
        self._lock_fd = open_regular_rw(_attempt_lock_path(self.path), "the recorder's lock")
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise RecorderError(
                f"{self.path} is being recorded by a live Recorder (another process's, or one of this process that "
                "was not closed: call its close()); one Recorder per folder and rank"
            ) from None
        try:
            fd = open_regular_rw(self.path, "the event log")
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise
        try:
            prev = _repair_tail(fd, self.path)
            # the JSON lines: a record says how many precede it
            self._lines = count_lines(fd) if step_records or _lexists(SR.records_path(self.path)) else 0
            rec_fd, prev = open_step_records(self.path, prev, self._lines, step_records)
        except BaseException:
            os.close(fd)
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise
        return fd, prev, rec_fd

    def _close_previous(self, prev: dict) -> None:
        """What the supervisor would have written for the previous attempt, at its last event: ``restart_delay``
        after a clean close, else ``failure`` (so the gap between the attempts is ``restart``)."""
        if prev["kind"] == E.SUP_END and prev.get("completed"):
            warnings.warn(f"{self.run_dir} holds a completed run; recording attempt {self.attempt} after it", stacklevel=3)
        if prev["kind"] == E.SUP_END and prev.get("clean"):
            self._write(event_line(prev["t"], prev["attempt"], None, E.SUP_RESTART_DELAY, {}))
        else:
            cause = prev.get("reason") if prev["kind"] == E.SUP_END else "the attempt did not close (killed)"
            self._write(event_line(prev["t"], prev["attempt"], None, E.SUP_FAILURE, {"cause": cause}))

    def _formats(self, attempt: int) -> None:
        """The lines of a step, preformatted: bytes ``%`` fills in the time, the step and the loss. A time
        is written with 7 decimals, the value ``event_line`` writes (``round(t, 7)``)."""
        head = b'{"t":%.7f,"attempt":' + str(attempt).encode() + b',"step":%d,"kind":"'
        self._fmt_data_wait = head + E.W_DATA_WAIT.encode() + b'"}\n'
        self._fmt_compute = head + E.W_COMPUTE.encode() + b'"}\n'
        self._fmt_step_end = head + E.W_STEP_END.encode() + b'","loss":%r}\n'
        self._fmt_step_end_null = head + E.W_STEP_END.encode() + b'","loss":null}\n'
        self._fmt_loop = b'{"t":%.7f,"attempt":' + str(attempt).encode() + b',"step":null,"kind":"' + E.R_LOOP.encode() + b'"}\n'
        self._fmts = {SR.DATA_WAIT: self._fmt_data_wait, SR.COMPUTE: self._fmt_compute}
        self._pack = SR.RECORD.pack

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
        """``with rec.step(step) as s: ...``: the compute of global step ``step`` (a whole number >= 0).

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

    def custom(self, name: str) -> _Block:
        """``with rec.custom("eval"): evaluate()``: custom badput, time the job spends on something you name
        (evaluation, compilation). Booked ``other``; the report shows it by name (``summary["custom"]``). Inside
        a step it is that step's, and the step's compute resumes after it."""
        self._custom.name = custom_name(name)
        return self._custom

    def data(self, batches: Iterable[Any]) -> Iterator[Any]:
        """``for batch in rec.data(loader): ...``: each ``next`` on ``batches`` booked as a data wait (inside a
        step, that step's: gradient accumulation's micro-batches)."""
        it = iter(batches)
        while True:
            with self.data_wait():
                try:
                    batch = next(it)
                except StopIteration:
                    return
            yield batch

    # --- explicit calls, for a framework's callbacks ------------------------------------------
    def begin(self, kind: str, step: int | None = None, *, name: str | None = None) -> None:
        """Begin a block without ``with``: ``kind`` is ``"data_wait"``, ``"step"`` (``step`` required),
        ``"checkpoint_save"``, ``"checkpoint_restore"`` or ``"custom"`` (``name`` required). :meth:`end` ends it."""
        block = self._block(kind)
        if kind == "custom":
            block.name = custom_name(name)
        elif kind != "checkpoint_restore":
            block.step = step
        block.__enter__()

    def end(self, kind: str, *, loss: float | None = None, failed: bool = False) -> None:
        """End the block :meth:`begin` began. ``loss``: a step's loss; ``failed``: the block did not complete
        (a step that raised: no ``step_end``; a save that failed: no checkpoint)."""
        block = self._block(kind)
        if loss is not None:
            block.loss = loss
        block.__exit__(RuntimeError if failed else None, None, None)

    def mark(self, kind: str, start: float, end: float, step: int | None = None, *, name: str | None = None,
             loss: float | None = None) -> None:
        """A block that already happened, from ``start`` to ``end`` (``time.monotonic()`` readings, seconds): for
        a hook that fires after the work (Hugging Face's ``on_save``). ``start`` must not precede what was
        recorded last, nor ``end`` the present. Arguments as :meth:`begin` and :meth:`end`."""
        t_start, t_end, now = start - self._t0, end - self._t0, time.monotonic() - self._t0
        if not self._last_t <= t_start <= t_end <= now:
            raise ValueError(f"mark({kind!r}) from {start} to {end} is invalid: monotonic times in order, after the "
                             "last block recorded and not in the future")
        try:
            self._at = t_start
            self.begin(kind, step, name=name)
            self._at = t_end
            self.end(kind, loss=loss)
        finally:
            self._at = None

    def _block(self, kind: str) -> _Block:
        block = {"data_wait": self._data, "step": self._step, "checkpoint_save": self._save,
                 "checkpoint_restore": self._restore, "custom": self._custom}.get(kind)  # fmt: skip
        if block is None:
            raise ValueError(f"kind {kind!r} is invalid: data_wait, step, checkpoint_save, checkpoint_restore or custom")
        return block

    # --- writing --------------------------------------------------------------------------
    def _line(self, kind: int, step: int, loss: float | None = None) -> None:
        """Write one of the step's events (``step_records``' kind code) as its preformatted line, at the
        current time (after a pending ``loop``). With step records, :meth:`_record_line` instead."""
        if kind != SR.STEP_END:
            self._write(self._fmts[kind] % (self._begin(), step))
        elif loss is None:
            self._write(self._fmt_step_end_null % (self._begin(), step))
        else:
            self._write(self._fmt_step_end % (self._begin(), step, loss))

    def _record_line(self, kind: int, step: int, loss: float | None = None) -> None:
        """One of the step's events as one 40-byte record (the time its JSON line would hold)."""
        t = round(self._begin(), 7)
        try:
            rec = self._pack(t, step, 0.0 if loss is None else loss, self._lines, self.attempt, kind, loss is not None)
        except struct.error:  # a step past int64: a JSON line (the reader places it among the records)
            Recorder._line(self, kind, step, loss)
            return
        self._write_record(rec)

    def _loop(self, p: float) -> None:
        """The ``loop`` phase from ``p`` (the end of a data_wait or save block)."""
        if self._rec_fd >= 0:
            self._write_record(self._pack(round(p, 7), -1, 0.0, self._lines, self.attempt, SR.LOOP, 0))
        else:
            self._write(self._fmt_loop % p)

    def _write_record(self, rec: bytes) -> None:
        """One record, one ``write``: whole, or (the disk full) taken back before ``ENOSPC`` is raised."""
        n = os.write(self._rec_fd, rec)
        if n != SR.RECORD_BYTES:
            os.ftruncate(self._rec_fd, os.fstat(self._rec_fd).st_size - n)
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: a step record took {n} of {SR.RECORD_BYTES} bytes")

    def _phase(self, kind: str, step: int | None = None, **fields: Any) -> None:
        self._write(event_line(self._begin(), self.attempt, step, kind, fields))

    def _now(self) -> float:
        """Seconds on the log's clock now (or the time :meth:`mark` gives)."""
        t = self._at if self._at is not None else time.monotonic() - self._t0
        self._last_t = t
        return t

    def _begin(self) -> float:
        """The time a block begins; first the ``loop`` phase of a gap after a data_wait or save block."""
        if self._fd < 0:
            raise RecorderError("this Recorder is closed; a new attempt needs a new Recorder")
        t = self._now()
        p = self._pending
        if p is not None:
            self._pending = None
            if t - p > SPLIT_GAP_S:
                self._loop(p)
        return t

    def _emit(self, kind: str, step: int | None = None, t: float | None = None, **fields: Any) -> None:
        if t is None:
            t = self._now()
        self._write(event_line(t, self.attempt, step, kind, fields))

    def _write(self, line: bytes) -> None:
        """One line, one ``write``: whole, or (the disk full) taken back before ``ENOSPC`` is raised.
        No lock: this attempt is the log's only writer (its own lock says so)."""
        n = os.write(self._fd, line)
        if n != len(line):
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - n)
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: {self.path.name} took {n} of {len(line)} bytes")
        self._lines += 1

    def _warn_order(self, step: int, last: int) -> None:
        if not self._warned_order:
            self._warned_order = True
            warnings.warn(
                f"step {step} after step {last}: pass the global step (increasing over the whole job), "
                "or re-executions cannot be told apart",
                stacklevel=4,
            )

    def _saved(self, step: int | None, ok: bool) -> None:
        if self._fd < 0:
            return
        if ok:
            # resume point: the steps this process has completed (whatever the caller's convention for ``step``)
            if self._done is not None:
                resume = self._done + 1
            else:
                resume = 0 if step is None else step_number(step) + 1
            self._emit(E.M_CKPT_COMMIT, step, ckpt_step=resume, tier="user")
            self._fsync()  # the log up to a checkpoint survives a machine crash
        self._pending = self._now()

    # --- the end ---------------------------------------------------------------------------
    def close(self, completed: bool | None = None) -> None:
        """End this attempt. ``completed``: the job has finished (default: ``total_steps``
        reached, or True without ``total_steps``). Idempotent."""
        self._close(completed, clean=True, reason=None)

    def _close(self, completed: bool | None, clean: bool, reason: str | None) -> None:
        if self._fd < 0:
            return
        t = self._now()
        p, self._pending = self._pending, None
        if p is not None and t - p > SPLIT_GAP_S:
            self._loop(p)
        steps_done = None if self._done is None else self._done + 1
        if completed is None:
            completed = clean and (self.total_steps is None or (steps_done or 0) >= self.total_steps)
        if completed:
            self._emit(E.M_FINISH, steps_done, t=t, final_state_sha256=None, final_loss=self._last_loss)
        if reason is None:
            reason = "completed" if completed else f"closed after {steps_done or 0} of {self.total_steps or '?'} steps"
        self._emit(E.SUP_END, t=t, completed=bool(completed), clean=clean, reason=reason)
        try:
            self._fsync()
        finally:
            os.close(self._fd)
            self._fd = -1
            if self._rec_fd >= 0:
                os.close(self._rec_fd)
                self._rec_fd = -1
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1

    def __del__(self) -> None:
        # A Recorder dropped without close() (del in a notebook, then gc): its files close and its lock is
        # released, so a new Recorder can record here; the attempt reads as killed, as it would after a crash.
        for name in ("_fd", "_rec_fd", "_lock_fd"):
            fd = getattr(self, name, -1)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)

    def _fsync(self) -> None:
        if self._rec_fd >= 0:
            os.fsync(self._rec_fd)
        os.fsync(self._fd)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None or (exc_type is SystemExit and exc.code in (0, None)):
            self.close()
        else:
            self._close(False, clean=False, reason=f"error: {exc_type.__name__}")
        return False

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else "recording"
        return f"Recorder({str(self.run_dir)!r}, attempt={self.attempt}, rank={self.rank}, {state})"

