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
import stat
import time
import warnings
from pathlib import Path

from .logread import EventLogWarning, parse_event

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
