"""The files of a recording (``gl.Recorder``): ``recorder.json``'s t0, the lock, the log's tail (pure).

Every one is opened without following a link and only when it is a regular file: a link
planted where the log should be would otherwise have the recorder append to, or truncate,
whatever it points to; a FIFO would hang it (``goodputlab.safe_io`` holds the same rules for
run folders).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import time
import warnings
from pathlib import Path

from .logread import MAX_LINE_BYTES, EventLogWarning, parse_event

META_FILE = "recorder.json"  # {"format", "t0_unix"}: written once, by the first attempt
FORMAT = 1
META_MAX_BYTES = 4096
_TAIL_BYTES = 1 << 16


class RecorderError(RuntimeError):
    """The recorder cannot record here (another live recorder, a lab run's folder, a damaged recorder.json,
    a link or an odd file where its files go)."""


def open_regular_rw(path: Path, what: str) -> int:
    """``path`` opened for reading and appending, created if missing: never through a link, never a
    FIFO, device or socket (``O_NONBLOCK`` on open, so a FIFO cannot hang it). Raises :class:`RecorderError`."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RecorderError(f"{path}: {what} is a symbolic link; a recorder never writes through one") from None
        if e.errno == errno.ENXIO:
            raise RecorderError(f"{path}: {what} is not a regular file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise RecorderError(f"{path}: {what} is not a regular file; a recorder writes only to one")
    os.set_blocking(fd, True)
    return fd


def _lexists(path: Path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _load_or_create_t0(run_dir: Path) -> float:
    """The recording's t0 (Unix seconds): read from ``recorder.json``, or saved there now.

    Created with a link from a complete temporary file (made with ``O_EXCL | O_NOFOLLOW``), so
    ranks starting together agree on one t0 and no reader sees a half-written file; read only
    when it is a regular file."""
    from ..safe_io import UnsafeFileError, create_new, read_regular, write_all

    meta = run_dir / META_FILE
    if not _lexists(meta):
        tmp = run_dir / f".{META_FILE}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        fd = create_new(tmp)
        try:
            write_all(fd, (json.dumps({"format": FORMAT, "t0_unix": time.time()}) + "\n").encode())
        finally:
            os.close(fd)
        try:
            os.link(tmp, meta)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    try:
        t0 = float(json.loads(read_regular(meta, META_MAX_BYTES).decode("utf-8"))["t0_unix"])
        if not math.isfinite(t0):
            raise ValueError(f"t0_unix is {t0}")
        return t0
    except UnsafeFileError as e:
        raise RecorderError(f"{meta}: {e}; move it away to start a new recording") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise RecorderError(f"{meta} is damaged ({e}); move it away to start a new recording") from None


def _parse(raw: bytes) -> dict | None:
    """A whole line as an event, or None when it is not one (a write cut short)."""
    try:
        return parse_event(raw)
    except ValueError:
        return None


#: The recorder reads at most this much of a log's end to find its last whole event (a line is at most
#: ``logread.MAX_LINE_BYTES``); a log whose end holds no newline in it is refused, never read whole.
TAIL_LIMIT = MAX_LINE_BYTES + _TAIL_BYTES
_INIT_PREFIX = re.compile(rb'\{"t":-?[0-9.]+,"attempt":0,"step":null,"kind":"init"')  # a recorder's first line


def check_own_log(fd: int, path: Path) -> None:
    """Raise :class:`RecorderError` unless the log open at ``fd`` is empty or was begun by a recorder: its
    first line is an attempt's ``init`` with the ``recorder`` field (a first line cut short by a kill may
    be only the beginning of one). Another tool's ``events.jsonl`` is never appended to or cut back."""
    head = os.pread(fd, MAX_LINE_BYTES + 1, 0)
    if not head:
        return
    nl = head.find(b"\n")
    if nl < 0:
        if _INIT_PREFIX.match(head):  # a first line cut short by a kill: the recorder's own
            return
        why = "its first line is not a gl.Recorder's start" if len(head) <= MAX_LINE_BYTES else "its first line is longer than an event"
    else:
        first = _parse(head[:nl])
        if first is not None and first["kind"] == "init" and first["attempt"] == 0 and "recorder" in first:
            return
        why = "its first line is not a gl.Recorder's start"
    raise RecorderError(f"{path} was not written by gl.Recorder ({why}); a recorder appends only to its own log: "
                        "record into another folder")


def check_own_log_before_start(path: Path) -> None:
    """:func:`check_own_log` of the log at ``path`` if there is one, before the recorder writes anything
    beside it (``recorder.json``, its lock): another tool's folder is left as it was. A link or an odd file
    there is left for the opening to refuse."""
    from ..safe_io import UnsafeFileError, open_regular

    try:
        fd, _ = open_regular(path, 1 << 62)
    except (FileNotFoundError, UnsafeFileError):
        return
    try:
        check_own_log(fd, path)
    finally:
        os.close(fd)


def _repair_tail(fd: int, path: Path) -> dict | None:
    """The log's last whole event; the bytes after its last newline (a write cut short by a kill) are cut
    off, with a warning. Reads at most :data:`TAIL_LIMIT` bytes of its end; a log whose end holds no newline
    there, or whose last whole line is not an event, is refused (:class:`RecorderError`), never cut back."""
    check_own_log(fd, path)
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    chunk = min(size, _TAIL_BYTES)
    while True:
        base = size - chunk
        data = os.pread(fd, chunk, base)
        nl = data.rfind(b"\n")
        start = data.rfind(b"\n", 0, nl) + 1 if nl >= 0 else 0
        if (nl >= 0 and (start > 0 or base == 0)) or chunk >= min(size, TAIL_LIMIT):
            break
        chunk = min(size, TAIL_LIMIT, chunk * 4)
    if nl < 0:
        if base > 0:
            raise RecorderError(f"{path}: its last {chunk:,} bytes hold no whole line; a recorder reads no further "
                                "(move it away to record here)")
        keep, last = 0, None  # a first line cut short by a kill (check_own_log saw its beginning)
    elif start == 0 and base > 0:
        raise RecorderError(f"{path}: its last line is longer than an event; move it away to record here")
    else:
        last = _parse(data[start:nl])
        if last is None:
            raise RecorderError(f"{path}: its last whole line is not an event; a recorder never cuts a log back "
                                "past one (move it away to record here)")
        keep = base + nl + 1
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


def count_lines(fd: int) -> int:
    """The whole lines of the log open at ``fd`` (its tail already repaired)."""
    n, pos = 0, 0
    while chunk := os.pread(fd, 1 << 20, pos):
        n += chunk.count(b"\n")
        pos += len(chunk)
    return n


def open_step_records(log: Path, prev: dict | None, lines: int, wanted: bool) -> tuple[int, dict | None]:
    """The step records beside ``log`` opened for an attempt (-1: not written; ``wanted``: write them) and the
    previous attempt's last event, which may be a record (written after the log's ``lines`` JSON lines). A torn
    last record is cut off first, with a warning, as a torn line is; a file that is not step records is refused."""
    from . import step_records as SR

    path = SR.records_path(log)
    if not wanted and not _lexists(path):
        return -1, prev
    fd = open_regular_rw(path, "the step-records file")
    try:
        last = SR.repair_tail(fd, path, EventLogWarning)
    except SR.StepRecordError as e:
        os.close(fd)
        raise RecorderError(f"{path}: {e}; move it away to record here") from None
    except BaseException:
        os.close(fd)
        raise
    if last is not None and last[3] >= lines:
        prev = SR.as_event(last)
    if not wanted:
        os.close(fd)
        return -1, prev
    return fd, prev
