"""The raw event log: JSON lines of ``{"t", "attempt", "step", "kind", ...}``.

Both the supervisor and the worker append to one file. Each event is one
``os.write`` on a descriptor opened with ``O_APPEND``: lines never interleave,
and a line written before a SIGKILL is already in the kernel and survives it.
A write the disk cuts short (``ENOSPC``) is taken back before the writer raises,
under an advisory ``flock`` shared by every writer, so a full disk never leaves
half a line in the middle of the log; the supervisor also drops a line that a
killed writer left unfinished at the end before it appends its own.

:func:`read_events` is strict (:mod:`goodputlab.measure.logread`, which reads logs):
every line must be a JSON object with the fields and types the ledger relies on, or
it raises :class:`EventLogError` naming the file and the line. Only a last line cut
short (no newline at the end: a process killed mid-write) is skipped, with an
:class:`EventLogWarning`.

``t`` is seconds since the run started, on the machine's monotonic clock, which
all processes on one machine share.

Most kinds are *phases*: from the event's time until the next phase event the
process is doing that (waiting for data, computing step 7, saving...). The rest
are *markers* (a checkpoint committed, the run finished) that carry facts and
change no phase. The ledger (``goodputlab.measure.ledger``) turns phases into seconds.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..safe_io import flock_within
from .logread import MAX_LINE_BYTES, EventLogError, EventLogWarning, as_dict, event_batches, parse_event  # noqa: F401

# Phases written by the supervisor.
SUP_START = "start"  # the run begins: setting up directories and config
SUP_SPAWN = "spawn"  # launching a worker process (interpreter start-up)
SUP_FAILURE = "failure"  # the worker was just killed: detecting and cleaning up
SUP_RESTART_DELAY = "restart_delay"  # emulated rescheduling before the next launch
SUP_END = "end"  # the run is over (zero length: the last event)
SUP_TEARDOWN = "teardown"  # the final worker has exited; writing results

# Phases written by the worker.
W_INIT = "init"  # imports, model and optimizer construction, data files
W_RESTORE = "restore"  # finding, verifying and loading a checkpoint
W_WARMUP = "warmup"  # starting the input pipeline and waiting for its first batch
W_DATA_WAIT = "data_wait"  # blocked on the next batch
W_COMPUTE = "compute"  # forward, backward and optimizer step of ``step``
W_STEP_END = "step_end"  # bookkeeping after a step; carries {"loss", "samples"}
W_CKPT_SAVE = "ckpt_save"  # the blocking part of a checkpoint save
W_SYNC_WAIT = "sync_wait"  # a rank of a distributed job in the gradient all-reduce: its own backward is done,
# it waits for the slowest rank (and the transfer); between the step's compute and its optimizer step (a second compute)
W_EXIT = "exit"  # finished: releasing resources before the process exits

# Phase written by goodputlab.recorder (a user's own loop): the loop's code outside the
# recorded blocks (logging, evaluation). Booked ``other``.
R_LOOP = "loop"
# Custom badput (``rec.custom("eval")``): time the user names (evaluation, compilation); carries {"name"}.
# Booked ``other``, and shown by name in the summary's ``custom`` (a part of ``other``).
R_CUSTOM = "custom"

# Phases and markers of recovery (failure modes, the hot spare, --resume); what each is and
# where the ledger books it: goodputlab.recovery.booking.
from ..recovery.booking import (  # noqa: E402
    M_CKPT_FAILED,
    M_DISK_FREED,
    M_FAILURE_INJECTED,
    M_STANDBY_SPAWNED,
    SUP_HANDOVER,
    SUP_HANG,
    SUP_RESUME,
    W_ACTIVATE,
    W_CRASH,
    W_LOADER_REBUILD,
    W_STRAGGLE,
)

PHASES = frozenset(
    {
        SUP_START,
        SUP_SPAWN,
        SUP_FAILURE,
        SUP_RESTART_DELAY,
        SUP_END,
        SUP_TEARDOWN,
        W_INIT,
        W_RESTORE,
        W_WARMUP,
        W_DATA_WAIT,
        W_COMPUTE,
        W_STEP_END,
        W_CKPT_SAVE,
        W_SYNC_WAIT,
        W_EXIT,
        R_LOOP,
        R_CUSTOM,
        SUP_HANG,
        SUP_HANDOVER,
        SUP_RESUME,
        W_ACTIVATE,
        W_CRASH,
        W_LOADER_REBUILD,
        W_STRAGGLE,
    }
)

# Markers.
M_CKPT_COMMIT = "ckpt_commit"  # a checkpoint became durable and valid: {"ckpt_step", "tier"}
M_CKPT_INVALID = "ckpt_invalid"  # restore skipped a damaged checkpoint: {"ckpt_step", "tier", "reason"}
M_RESTORED = "restored"  # the worker resumed: {"ckpt_step", "source": "disk" or "memory", "path"}
M_CKPT_INTERVAL = "ckpt_interval"  # --ckpt-every auto re-tuned: {"interval_s", "save_s", "mtbf_s", "failures_seen"}
M_FINISH = "finish"  # the worker completed every step: {"final_state_sha256", "final_loss"}
M_WORKER_INFO = "worker_info"  # device, parameter count, state size
M_PIPELINE_INFO = "pipeline_info"  # the input pipeline as built: loader settings, device prefetch
M_MEMORY_TIER = "memory_tier"  # where the RAM tier went: {"path", "needed_bytes", "free_bytes", "fallback": why not /dev/shm, or ""}
M_CKPT_PART = "ckpt_part"  # a rank's part of a sharded checkpoint is written: {"ckpt_step", "bytes", "persist_s"}


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps builds an encoder per call
_RESERVED = frozenset({"t", "attempt", "step", "kind"})


def event_line(t: float, attempt: int, step: int | None, kind: str, fields: dict[str, Any]) -> bytes:
    """One event as a JSON line: the bytes of ``json.dumps(record, separators=(",", ":"))``.

    The common case (float time, int or no step, a plain kind) is formatted directly,
    which halves the cost of an event; anything else goes through the JSON encoder.
    """
    t = round(t, 7)
    if (
        type(t) is float
        and type(attempt) is int
        and (step is None or type(step) is int)
        and (kind in PHASES or (kind.isascii() and kind.isidentifier()))
        and (not fields or _RESERVED.isdisjoint(fields))
    ):
        head = f'{{"t":{t!r},"attempt":{attempt},"step":{"null" if step is None else step},"kind":"{kind}"'
        return (head + ("," + _ENCODE(fields)[1:] if fields else "}") + "\n").encode()
    record = {"t": t, "attempt": attempt, "step": step, "kind": kind}
    record.update(fields)
    return (_ENCODE(record) + "\n").encode()


_LOCK_WAIT_S = 0.5  # a writer that cannot get the log's lock this long (its holder is stopped) writes without it


class EventWriter:
    """Appends events to a JSON-lines file; safe across processes and threads.

    ``create``: the file must not exist yet (the supervisor starts a fresh log);
    otherwise it is appended to. Links are never followed. ``heal_tail``: before each
    write, drop an unfinished last line left by a writer that was killed mid-write
    (the supervisor's writer, which writes only while no other writer can be mid-line
    or after it has been killed).
    """

    def __init__(
        self,
        path: Path | str,
        t0: float,
        attempt: int,
        create: bool = False,
        heal_tail: bool = False,
        on_truncate: Callable[[int], None] | None = None,
    ):
        self.path = Path(path)
        self.t0 = t0
        self.attempt = attempt
        self.heal_tail = heal_tail
        self.on_truncate = on_truncate  # told the new size when an unfinished line is dropped
        flags = (os.O_RDWR if heal_tail else os.O_WRONLY) | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        if create:
            flags |= os.O_EXCL
        self._fd = os.open(self.path, flags, 0o644)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.t0

    def emit(self, kind: str, step: int | None = None, t: float | None = None, **fields: Any) -> float:
        """Write one event and return its time (seconds since the run started).

        Raises ``OSError`` (``ENOSPC``) when the disk cannot take the whole line; the
        part that was written is removed first, so the log stays whole lines.
        """
        if t is None:
            t = time.monotonic() - self.t0
        line = event_line(t, self.attempt, step, kind, fields)
        with self._lock:
            locked = _flock(self._fd)
            try:
                if self.heal_tail:
                    kept = _drop_unfinished_line(self._fd)
                    if kept is not None and self.on_truncate is not None:
                        self.on_truncate(kept)
                n = os.write(self._fd, line)
                if n != len(line):
                    # The disk took part of the line: take it back (we hold the lock, so our bytes are last).
                    os.ftruncate(self._fd, os.fstat(self._fd).st_size - n)
                    raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: {self.path.name} took {n} of {len(line)} bytes")
            finally:
                if locked:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        return t

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _flock(fd: int) -> bool:
    """Take the log's advisory lock; give up after :data:`_LOCK_WAIT_S` (a stopped holder must not stop us)."""
    return flock_within(fd, _LOCK_WAIT_S)


def _drop_unfinished_line(fd: int) -> int | None:
    """Truncate the file after its last newline when it does not end with one; returns the new
    size, or ``None`` when nothing was dropped."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    keep, pos = 0, size
    while pos > 0:
        start = max(0, pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            keep = start + i + 1
            break
        pos = start
    os.ftruncate(fd, keep)
    return keep


class NullWriter:
    """An EventWriter that writes nothing (for the bare loop in the overhead benchmark)."""

    attempt = 0

    def now(self) -> float:
        return time.monotonic()

    def emit(self, kind: str, step: int | None = None, t: float | None = None, **fields: Any) -> float:
        return 0.0

    def close(self) -> None:
        pass


def read_events(path: Path | str) -> list[dict]:
    """All events in the file, ordered by time (stable for equal times).

    Raises :class:`EventLogError` naming the file and the line for a line that is
    not an event (not UTF-8, NUL bytes, not a JSON object, a missing field, a field
    of the wrong type). A last line without its newline (a process killed in the
    middle of writing it) is skipped with an :class:`EventLogWarning`.
    The file must be a regular file (a link is refused). Reads every event into memory:
    the ledger of a long log reads it in batches instead (:mod:`goodputlab.measure.recording`).
    """
    events = [as_dict(ev) for batch in event_batches(path) for ev in batch]
    events.sort(key=lambda e: e["t"])
    return events


class EventTail:
    """Reads the events appended to a file since the last call (for live progress)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def truncated(self, size: int) -> None:
        """The file was cut back to ``size`` bytes (an unfinished line dropped): read on from there."""
        if self._offset > size:
            self._offset = size
            self._partial = b""

    def poll(self) -> list[dict]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:  # live progress only: a line that is not an event is skipped here
            try:
                out.append(parse_event(raw))
            except ValueError:
                continue
        return out
