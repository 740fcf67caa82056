"""Reading an event log: every line checked, in batches, at the speed of the file (pure).

:func:`~goodputlab.measure.event_line.parse_event` is the rule for one line: a JSON object with the fields and types the
ledger relies on, or ``ValueError`` saying what is wrong. :func:`event_batches` reads a log
with it in batches of ``(t, attempt, step, kind, fields)`` tuples, the ledger fold's input,
holding one batch in memory at a time.

Most lines of a long log are a step's three events, written by the recorder and the
worker as ``{"t":12.3456789,"attempt":0,"step":41,"kind":"compute"}`` (``step_end`` adds
``"loss":2.31``). One regular expression over a megabyte of the file recognises those
lines whole (its grammar is a strict subset of JSON, so a line it accepts is a valid
event), and only the other lines (a checkpoint's commit, an attempt's start, anything
unusual) go through ``json.loads`` and :func:`parse_event`. The result is the same as
parsing every line with ``json.loads``, about 4x faster (``benchmarks/report_scale.py``
measures both, and orjson and msgspec beside them).

Errors: a line that is not an event raises :class:`EventLogError` naming the file and
the line; a line longer than :data:`MAX_LINE_BYTES` too. Only a last line cut short (no
newline: a process killed mid-write) is skipped, with an :class:`EventLogWarning`.
The file must be a regular file (never a link, a FIFO or a device; ``safe_io``).
"""

from __future__ import annotations

import os
import re
import warnings
from collections import deque
from pathlib import Path
from typing import Iterator

from ..errors import RunFileError
from .event_line import _NEEDS_FIELD, _NEEDS_STEP, MAX_T, parse_event  # noqa: F401 (MAX_T: the bound of a time)
from .step_records import (
    CHUNK_RECORDS,
    RECORD_BYTES,
    StepRecordError,
    by_lines,
    check,
    check_header,
    dtype,
    records_path,
    run_stats,
    whole_size,
)

MAX_LINE_BYTES = 1 << 20  # an event is a few hundred bytes; a longer "line" is not an event
CHUNK_BYTES = 1 << 20  # read this much at a time


class EventLogError(RunFileError):
    """A line of an event log that is not an event; the message names the file and the line."""


class EventLogWarning(UserWarning):
    """The last line of an event log was cut short (a process killed mid-write) and was skipped."""


# The lines most of a log is made of (see the module's docstring). t: no exponent, at most 16 digits
# before the point (so always finite); attempt and step: plain whole numbers; loss: a float.
_T = rb"-?(?:0|[1-9][0-9]{0,15})\.[0-9]+"
_WHOLE = rb"0|[1-9][0-9]{0,17}"
_LOSS = rb"-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]+(?:[eE][-+]?[0-9]{1,2})?|[eE][-+]?[0-9]{1,2})|null"  # always finite
_LINE = re.compile(
    rb'(?:\{"t":(' + _T + rb'),"attempt":(' + _WHOLE + rb'),"step":(' + _WHOLE + rb'|null),"kind":"([a-z_]{1,40})"'
    rb'(?:\}|,"loss":(' + _LOSS + rb')\}|,"ckpt_step":(' + _WHOLE + rb'),"tier":"([a-z_]{1,40})"\})|([^\n]*))\n'
)  # a checkpoint's commit: its ckpt_step and tier (every kind needing a field needs only ckpt_step)
_NO_FIELDS: dict = {}  # shared by every event without fields: never written to
# A step as the recorder writes it, three lines, read as one match: its batch, its compute, its end.
# The backreferences make the three lines one attempt's one step.
_STEP = (
    rb'\{"t":(' + _T + rb'),"attempt":(?P<a>' + _WHOLE + rb'),"step":(?P<s>' + _WHOLE + rb'),"kind":"data_wait"\}\n'
    rb'\{"t":(' + _T + rb'),"attempt":(?P=a),"step":(?P=s),"kind":"compute"\}\n'
    rb'\{"t":(' + _T + rb'),"attempt":(?P=a),"step":(?P=s),"kind":"step_end","loss":(' + _LOSS + rb')\}\n'
)
_STEP_OR_LINE = re.compile(rb"(?:" + _STEP + rb"|" + _LINE.pattern + rb")")


class StepRun:
    """Consecutive steps of one attempt, each three lines (``data_wait``, ``compute``, ``step_end``),
    kept as columns: the fold books them all at once (:meth:`LedgerFold.feed_run`).

    ``t_wait``, ``t_compute``, ``t_end``: the three times of each step (numpy arrays, seconds);
    ``steps``: the step numbers (numpy); ``losses``: each step's loss as written (the bytes of a JSON
    line, or a step record's float or None); ``stats``: what the fold books of it (:func:`run_stats`'s
    tuple), set by the reader of step records for many runs at once, else computed when first asked."""

    __slots__ = ("attempt", "steps", "t_wait", "t_compute", "t_end", "losses", "stats")

    def __init__(self, attempt, steps, t_wait, t_compute, t_end, losses):
        self.attempt, self.steps, self.losses = attempt, steps, losses
        self.t_wait, self.t_compute, self.t_end = t_wait, t_compute, t_end
        self.stats: tuple | None = None

    def stat(self) -> tuple:
        """:func:`~goodputlab.measure.step_records.run_stats` of this run alone."""
        if self.stats is None:
            import numpy as np

            self.stats = run_stats(self.steps, self.t_wait, self.t_compute, self.t_end, np.zeros(1, np.intp))[0]
        return self.stats

    def __len__(self) -> int:
        return 3 * len(self.steps)

    @staticmethod
    def loss(raw: bytes | float | None) -> float | None:
        """A loss as written: the bytes of a JSON line, or a step record's float (None: null)."""
        return None if raw is None or raw == b"null" else float(raw)

    def events(self, start: int = 0, stop: int | None = None) -> list[tuple]:
        """The run's steps ``start`` to ``stop`` as the fold's tuples, one per line."""
        a, out, part = self.attempt, [], slice(start, stop)
        for s, t1, t2, t3, loss in zip(self.steps[part].tolist(), self.t_wait[part].tolist(),
                                       self.t_compute[part].tolist(), self.t_end[part].tolist(), self.losses[part]):  # fmt: skip
            out.append((t1, a, s, "data_wait", _NO_FIELDS))
            out.append((t2, a, s, "compute", _NO_FIELDS))
            out.append((t3, a, s, "step_end", {"loss": self.loss(loss)}))
        return out


def _kind_of(raw: bytes, kinds: dict) -> tuple[str, bool]:
    """``(kind, may be read fast)`` of a kind's bytes: a kind needing fields never can."""
    kind = raw.decode("ascii")
    entry = kinds[raw] = (kind, kind not in _NEEDS_FIELD)
    return entry


def event_batches(path: Path | str, offset: int = 0, lineno: int = 0, stop_at_partial: bool = False,
                  fd: int | None = None, runs: bool = False) -> Iterator[list[tuple] | StepRun]:
    """The events of ``path`` from byte ``offset`` (line ``lineno`` before it) in batches of tuples
    ``(t, attempt, step, kind, fields)``, in file order; ``fields`` holds the event's other fields
    (for a line read by ``json.loads``, the whole event).

    A last line without its newline is skipped with an :class:`EventLogWarning`, unless
    ``stop_at_partial`` (a live log being appended to: :class:`LogReader` reads it next time).
    ``fd``: an open descriptor of the file to read instead of opening ``path`` (it is closed).
    ``runs``: a batch may also be a :class:`StepRun`, steps in columns (the ledger's fold takes them).
    """
    reader = LogReader(path, offset, lineno, fd=fd)
    try:
        yield from reader.batches(stop_at_partial, runs)
    finally:
        reader.close()


def open_log(path: Path | str) -> int:
    """A read-only descriptor of the log at ``path``: a regular file, never a link, a FIFO or a device;
    :class:`EventLogError` otherwise (``FileNotFoundError`` when it does not exist)."""
    from ..safe_io import UnsafeFileError, open_regular

    try:
        fd, _ = open_regular(path, 1 << 62)
    except UnsafeFileError as e:  # its message begins with the file's name
        raise EventLogError(f"{Path(path).parent / str(e)}") from None
    return fd


class LogReader:
    """Reads a log's events from a byte offset on; :attr:`offset` and :attr:`lineno` say how far it got
    (the start of the first line not read yet), so a live log can be read on from there.

    When the recorder wrote step records beside the log (:mod:`goodputlab.measure.step_records`),
    they are merged in, each before the JSON line it was written before; :attr:`rec_offset` says how
    far into them it got."""

    def __init__(self, path: Path | str, offset: int = 0, lineno: int = 0, fd: int | None = None):
        self.path = Path(path)
        self.offset, self.lineno = offset, lineno
        self.fd = open_log(path) if fd is None else fd
        self.rec_path = records_path(self.path)
        self.rec_fd, self.rec_offset, self._rec_read, self._rec_lines = -1, 0, 0, 0
        self._rec_items: deque = deque()  # (lines, item) of the records read but not yet given out
        self._open_records()

    def _open_records(self) -> bool:
        if self.rec_fd < 0 and os.path.lexists(self.rec_path):
            self.rec_fd = open_log(self.rec_path)
        return self.rec_fd >= 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.rec_fd >= 0:
            os.close(self.rec_fd)
            self.rec_fd = -1

    def batches(self, stop_at_partial: bool = False, runs: bool = False) -> Iterator[list[tuple] | StepRun]:
        """Batches of event tuples up to the end of the file (see :func:`event_batches`). ``runs``: a
        batch may also be a :class:`StepRun` (for the ledger's fold, which books one at once)."""
        if not self._open_records():
            for _, items in self._chunks(stop_at_partial):
                if runs:
                    yield from items
                else:
                    yield [ev for item in items for ev in (item.events() if isinstance(item, StepRun) else item)]
            return
        for start, items in self._chunks(stop_at_partial):
            for item in items:
                yield from self._records(start, runs)  # the records written before this item's first line
                if self._rec_upto(start + len(item) - 1):
                    group: list[tuple] = []  # lines with no record between them go together
                    for i, ev in enumerate(item if isinstance(item, list) else item.events()):
                        if i and self._rec_upto(start + i):
                            yield group
                            yield from self._records(start + i, runs)
                            group = []
                        group.append(ev)
                    yield group
                else:
                    yield item if runs or not isinstance(item, StepRun) else item.events()
                start += len(item)
        # the records after the last whole line (a live log's wait for the line before them)
        yield from self._records(self.lineno if stop_at_partial else None, runs)
        if self._rec_items:  # read again from rec_offset next time
            self._rec_lines = self._rec_items[0][0]
            self._rec_items.clear()
        self._rec_read = self.rec_offset
        size = os.fstat(self.rec_fd).st_size
        if not stop_at_partial and size > max(self.rec_offset, 0) and (size - max(self.rec_offset, RECORD_BYTES)) % RECORD_BYTES:
            warnings.warn(f"{self.rec_path}: a record cut short at the end (a process killed while writing it); ignored",
                          EventLogWarning, stacklevel=3)  # fmt: skip

    def _chunks(self, stop_at_partial: bool) -> Iterator[tuple[int, list[list[tuple] | StepRun]]]:
        """``(first line, items)`` for each block of JSON lines read: steps as :class:`StepRun`, other lines
        as lists of tuples (each item is as many lines as its ``len``)."""
        rest = b""
        pos = self.offset
        while True:
            chunk = os.pread(self.fd, CHUNK_BYTES, pos)
            if not chunk:
                break
            pos += len(chunk)
            data = rest + chunk if rest else chunk
            end = data.rfind(b"\n") + 1
            rest = data[end:]
            if len(rest) > MAX_LINE_BYTES:
                raise EventLogError(f"{self.path}, line {self.lineno + 1}: longer than {MAX_LINE_BYTES} bytes, not an event")
            if end:
                start = self.lineno
                items = self._parse_runs(data, end)
                self.offset = pos - len(rest)
                yield start, items
        if rest and not stop_at_partial and rest.strip(b"\0 \t\r"):
            warnings.warn(
                f"{self.path}, line {self.lineno + 1}: cut short at the end of the log "
                "(a process killed while writing it); ignored",
                EventLogWarning,
                stacklevel=4,
            )

    def _rec_upto(self, lines: int) -> bool:
        """Is a record not given out yet written when the log held at most ``lines`` lines?"""
        items = self._rec_items
        return bool(items or self._read_records()) and items[0][0] <= lines

    def _records(self, limit: int | None, runs: bool) -> Iterator[list[tuple] | StepRun]:
        """The items of the records not given out yet that were written when the log held at most ``limit``
        lines (None: all of them)."""
        items = self._rec_items
        while items or self._read_records():
            lines, item = items[0]
            if limit is not None and lines > limit:
                return
            items.popleft()
            self.rec_offset += len(item) * RECORD_BYTES  # a record per event
            yield item if runs or not isinstance(item, StepRun) else item.events()

    def _read_records(self) -> bool:
        """Read the next records (:data:`CHUNK_RECORDS` at most) into items; False at the end of the whole ones."""
        import numpy as np

        size = os.fstat(self.rec_fd).st_size
        try:
            if self._rec_read == 0:
                if size < RECORD_BYTES:
                    return False
                check_header(os.pread(self.rec_fd, RECORD_BYTES, 0))
                self.rec_offset = self._rec_read = RECORD_BYTES
            pos = self._rec_read
            n = min((whole_size(size) - pos) // RECORD_BYTES, CHUNK_RECORDS)
            if n <= 0:
                return False
            arr = np.frombuffer(os.pread(self.rec_fd, n * RECORD_BYTES, pos), dtype())
            check(arr, (pos - RECORD_BYTES) // RECORD_BYTES, self._rec_lines)
        except StepRecordError as e:
            raise EventLogError(f"{self.rec_path}{', ' if str(e).startswith('record ') else ': '}{e}") from None
        self._rec_read += n * RECORD_BYTES
        self._rec_lines = int(arr["lines"][-1])
        self._rec_items.extend(by_lines(arr, StepRun, _NO_FIELDS))
        return True

    def _parse_runs(self, data: bytes, end: int) -> list[list[tuple] | StepRun]:
        """The lines of ``data[:end]``: steps in :class:`StepRun` columns, every other line a tuple."""
        self._chunk_lineno = self.lineno  # the line data begins with (for an error's line)
        matches = _STEP_OR_LINE.findall(data, 0, end)
        if not matches:
            return []
        cols = list(zip(*matches))  # one tuple per group: the columns of the chunk
        firsts = cols[0]  # a step's first time, or b"" for a line read on its own
        items: list[list[tuple] | StepRun] = []
        i, n = 0, len(matches)
        while i < n:
            try:
                j = firsts.index(b"", i)  # the next line of its own (a C-level search: they are few)
            except ValueError:
                j = n
            if j > i:
                self._runs(cols, i, j, items)
            if j < n:
                k = j
                while k < n and not firsts[k]:
                    k += 1
                singles = []
                for m in matches[j:k]:
                    singles.append(self._line(m[6:], data, end))
                    self.lineno += 1
                items.append(singles)
                j = k
            i = j
        return items

    def _runs(self, cols: list[tuple], i: int, j: int, items: list) -> None:
        """Matches ``i`` to ``j`` (all steps) as :class:`StepRun` items, one per attempt."""
        import numpy as np

        a_col = cols[1]
        while i < j:
            k = j if a_col[i:j].count(a_col[i]) == j - i else _attempt_change(a_col, i, j)
            count = k - i
            items.append(StepRun(
                int(a_col[i]), np.fromiter(map(int, cols[2][i:k]), np.int64, count),
                np.fromiter(map(float, cols[0][i:k]), np.float64, count),
                np.fromiter(map(float, cols[3][i:k]), np.float64, count),
                np.fromiter(map(float, cols[4][i:k]), np.float64, count), cols[5][i:k],
            ))  # fmt: skip
            self.lineno += 3 * count
            i = k

    def _line(self, groups: tuple, data: bytes, end: int) -> tuple:
        """One line as the fold's tuple: read by the grammar when it can be, else by ``json.loads``."""
        t, a, s, k, loss, ckpt, tier, other = groups
        if t:
            entry = _KINDS.get(k) or _kind_of(k, _KINDS)
            if s == b"null":
                if entry[0] in _NEEDS_STEP:
                    self._slow(data, end, 0)
                s = None
            else:
                s = int(s)
            if ckpt:
                e = {"t": float(t), "attempt": int(a), "step": s, "kind": entry[0], "ckpt_step": int(ckpt),
                     "tier": tier.decode("ascii")}  # fmt: skip
                return (e["t"], e["attempt"], s, e["kind"], e)
            if not entry[1]:
                self._slow(data, end, 0)
            fields = ({"loss": None if loss == b"null" else float(loss)}) if loss else _NO_FIELDS
            return (float(t), int(a), s, entry[0], fields)
        if len(other) > MAX_LINE_BYTES:
            raise EventLogError(f"{self.path}, line {self.lineno + 1}: longer than {MAX_LINE_BYTES} bytes, not an event")
        try:
            e = parse_event(other)
        except ValueError as err:
            raise EventLogError(f"{self.path}, line {self.lineno + 1}: {err}") from None
        return (e["t"], e["attempt"], e["step"], e["kind"], e)

    def _slow(self, data: bytes, end: int, index: int) -> None:
        """A line the fast grammar read but that is not an event: raise with :func:`parse_event`'s reason."""
        start = 0
        for _ in range(self.lineno - self._chunk_lineno + index):
            start = data.index(b"\n", start) + 1
        raw = data[start:data.index(b"\n", start)]
        try:
            parse_event(raw)
        except ValueError as err:
            raise EventLogError(f"{self.path}, line {self.lineno + index + 1}: {err}") from None
        raise AssertionError("the fast grammar accepted a line parse_event also accepts")  # pragma: no cover


_KINDS: dict[bytes, tuple[str, bool]] = {}


def _attempt_change(col: tuple, i: int, j: int) -> int:
    """The first index after ``i`` (before ``j``) whose attempt differs from ``col[i]``'s."""
    first = col[i]
    return next(k for k in range(i + 1, j) if col[k] != first)


def as_dict(ev: tuple) -> dict:
    """An event tuple as the event's dict (``{"t", "attempt", "step", "kind", ...}``)."""
    t, a, s, k, f = ev
    if "kind" in f:
        return f
    return {"t": t, "attempt": a, "step": s, "kind": k, **f}
