"""The binary step records that ``gl.Recorder`` writes beside its JSON lines (pure; numpy when read).

A step of a recorded loop is three events (``data_wait``, ``compute``, ``step_end``), and a
long job's log is made almost only of them. Parsing them as JSON lines is most of a report's
time, so by default the recorder writes these events (and ``loop``) as fixed-size binary
records in ``events.steps.bin`` beside ``events.jsonl`` (``events-rankR.steps.bin`` beside
``events-rankR.jsonl``); every other event stays a JSON line. Format version 1
(docs/RECORDER.md, "The step records"):

* a 40-byte header: ``b"GLSTEPS\\0"``, the version (uint32) and the record size (uint32), zeros;
* then records of 40 bytes, little-endian: ``t`` (float64, seconds, the value its JSON line would
  hold: rounded to 7 decimals), ``step`` (int64; -1 for none), ``loss`` (float64), ``lines``
  (uint64: how many JSON lines the log held when the record was written, which places the record
  among them exactly), ``attempt`` (uint32), ``kind`` (uint16: 1 ``data_wait``, 2 ``compute``,
  3 ``step_end``, 4 ``loop``), ``flags`` (uint16: bit 0, the ``step_end`` has a loss; without it
  the loss is ``null``).

Each record is one ``write`` of 40 bytes on an ``O_APPEND`` descriptor, so a SIGKILL keeps every
record written before it whole. It can cut the one being written where that record crosses a page
(the kernel checks for a fatal signal between the pages of a write; ``benchmarks/sigkill_tear.py``).
A file whose size after the header is not a multiple of 40 ends with a torn record, which the reader
drops with a warning and the next attempt truncates. The reader (:mod:`goodputlab.measure.logread`)
merges the records with the JSON lines by ``lines``, so the events reach the ledger in the order
they were written: the same ledger as the same events written as JSON lines
(``tests/test_step_records.py``).
"""

from __future__ import annotations

import math
import os
import struct
import warnings
from pathlib import Path
from typing import Any, Callable

MAGIC = b"GLSTEPS\0"
VERSION = 1
RECORD = struct.Struct("<dqdQIHH")  # t, step, loss, lines, attempt, kind, flags
RECORD_BYTES = RECORD.size  # 40
HEADER = MAGIC + struct.pack("<II", VERSION, RECORD_BYTES) + bytes(RECORD_BYTES - len(MAGIC) - 8)
HAS_LOSS = 1
# kind codes, and the names of measure/events.py (data_wait, compute, step_end, loop)
DATA_WAIT, COMPUTE, STEP_END, LOOP = 1, 2, 3, 4
KIND_NAMES = {DATA_WAIT: "data_wait", COMPUTE: "compute", STEP_END: "step_end", LOOP: "loop"}
MAX_ATTEMPT = (1 << 32) - 1  # an attempt or a line count past what a record holds is written as a JSON line
MAX_LINES = (1 << 63) - 1
CHUNK_RECORDS = 1 << 15  # records read at a time (1.3 MB)
MAX_T = 1e16  # a time's bound, as a JSON line's (logread.MAX_T)


class StepRecordError(ValueError):
    """Records that are not the format's (the message says which and why; the reader adds the file)."""


def records_path(log: Path | str) -> Path:
    """The step records beside the JSON-lines log ``log``: ``events.jsonl`` -> ``events.steps.bin``."""
    log = Path(log)
    stem = log.name[: -len(".jsonl")] if log.name.endswith(".jsonl") else log.name
    return log.with_name(stem + ".steps.bin")


def dtype():
    """The records as a numpy structured dtype (the fields of :data:`RECORD`, in order)."""
    import numpy as np

    return np.dtype([("t", "<f8"), ("step", "<i8"), ("loss", "<f8"), ("lines", "<u8"),
                     ("attempt", "<u4"), ("kind", "<u2"), ("flags", "<u2")])  # fmt: skip


def check_header(head: bytes) -> None:
    """Raise :class:`StepRecordError` unless ``head`` is this version's header."""
    if head[:8] != MAGIC:
        raise StepRecordError("not a file of step records (no GLSTEPS header)")
    version, size = struct.unpack_from("<II", head, 8)
    if version != VERSION or size != RECORD_BYTES:
        raise StepRecordError(f"step records of version {version} ({size}-byte records); this goodputlab reads "
                              f"version {VERSION} ({RECORD_BYTES}-byte records)")


def whole_size(size: int) -> int:
    """The bytes of a file of ``size`` bytes that are a header and whole records (0: not even a header)."""
    if size < RECORD_BYTES:
        return 0
    return size - (size - RECORD_BYTES) % RECORD_BYTES


def repair_tail(fd: int, path: Path, warning: type[Warning]) -> tuple | None:
    """Open for an attempt: a torn last record (a kill) is cut off with a ``warning``, a missing or torn header
    written; returns the last record as ``(t, step, loss, lines, attempt, kind, flags)`` or None."""
    size = os.fstat(fd).st_size
    keep = whole_size(size)
    if keep:
        check_header(os.pread(fd, RECORD_BYTES, 0))
    if keep < size:
        warnings.warn(f"{path}: dropped {size - keep} bytes after the last whole record (a write cut short by a kill)",
                      warning, stacklevel=3)  # fmt: skip
        os.ftruncate(fd, keep)
    if not keep:
        if os.write(fd, HEADER) != RECORD_BYTES:
            raise OSError(f"{path}: the header of the step records was cut short (disk full?)")
        return None
    if keep == RECORD_BYTES:
        return None
    return RECORD.unpack(os.pread(fd, RECORD_BYTES, keep - RECORD_BYTES))


def as_event(rec: tuple) -> dict:
    """One record (``RECORD.unpack``'s tuple) as the event dict its JSON line holds."""
    t, step, loss, _, attempt, kind, flags = rec
    ev: dict[str, Any] = {"t": t, "attempt": attempt, "step": None if step < 0 else step, "kind": KIND_NAMES[kind]}
    if kind == STEP_END:
        ev["loss"] = loss if flags & HAS_LOSS else None
    return ev


def check(arr, first: int, last_lines: int) -> None:
    """Raise :class:`StepRecordError` naming the first record of ``arr`` (numbered from ``first``) that is not
    an event: a time that is not finite, an unknown kind or flag, a step missing, ``lines`` going back."""
    import numpy as np

    kind, step, lines = arr["kind"], arr["step"], arr["lines"]
    bad = ~(np.abs(arr["t"]) < MAX_T) | ((arr["flags"] & HAS_LOSS) & ~np.isfinite(arr["loss"])).astype(bool) \
        | (kind < DATA_WAIT) | (kind > LOOP) | (arr["flags"] > HAS_LOSS) \
        | (step < -1) | ((step < 0) & (kind != LOOP))
    bad[1:] |= lines[1:] < lines[:-1]
    if len(arr):
        bad[0] |= int(lines[0]) < last_lines
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    rec = tuple(arr[i].tolist())
    t, s, _, n, _, k, f = rec
    if not abs(t) < MAX_T:
        why = f"'t' is {t}, not a finite number of seconds within ±1e16"
    elif f & HAS_LOSS and not math.isfinite(rec[2]):
        why = f"'loss' is {rec[2]}, not a finite number"
    elif k not in KIND_NAMES:
        why = f"kind code {k}, not one of {sorted(KIND_NAMES)}"
    elif f > HAS_LOSS:
        why = f"flags {f}, not 0 or {HAS_LOSS}"
    elif s < -1 or (s < 0 and k != LOOP):
        why = f"'step' is {s}, not a step number"
    else:
        why = f"'lines' is {n}, less than the record before"
    raise StepRecordError(f"record {first + i + 1}: {why}")


class Losses:
    """The losses of a run of ``step_end`` records, read one at a time only when asked: ``[i]`` is a float
    or None (no loss), a slice a list of them."""

    __slots__ = ("loss", "flags")

    def __init__(self, loss, flags):
        self.loss, self.flags = loss, flags

    def __len__(self) -> int:
        return len(self.loss)

    def __getitem__(self, i):
        if isinstance(i, slice):
            out = self.loss[i].tolist()
            for k, f in enumerate(self.flags[i].tolist()):
                if not f & HAS_LOSS:
                    out[k] = None
            return out
        return float(self.loss[i]) if self.flags[i] & HAS_LOSS else None


def _singles(arr, no_fields: dict) -> list[tuple]:
    """Records as ``(lines, [event tuples])`` items, one per value of ``lines``."""
    out: list[tuple] = []
    group: list[tuple] = []
    at = None
    for t, s, loss, lines, a, k, f in arr.tolist():
        if lines != at:
            group = []
            out.append((lines, group))
            at = lines
        fields = ({"loss": loss if f & HAS_LOSS else None}) if k == STEP_END else no_fields
        group.append((t, a, None if s < 0 else s, KIND_NAMES[k], fields))
    return out


def run_stats(steps, t_wait, t_compute, t_end, starts) -> list[tuple]:
    """What the fold books of each run of steps, all runs at once: run ``j`` is steps ``starts[j]`` up to
    the next start (numpy columns; ``starts`` ascending, the first 0). Per run a tuple ``(plain, wait,
    other, compute, step, t_wait, t_compute, t_end, last_step, last_t_end)``: ``plain`` when it has two
    steps or more, consecutive, each phase's times in order; then the seconds of its steps after the
    first (positive parts: data wait, the gap from a step's end to the next one's wait, compute), its
    first step and its times, its last step and that step's end. A run's sums do not depend on the
    runs beside it (``np.add.reduceat`` sums each run's slice alone), so a run of JSON lines and the
    same run of records book the same seconds to the last bit (runs cut at other places add up to totals
    that can differ in their last bit)."""
    import numpy as np

    n, k = len(steps), len(starts)
    wait, compute = t_compute - t_wait, t_end - t_compute
    other = np.zeros(n)
    np.subtract(t_wait[1:], t_end[:-1], out=other[1:])
    bad = (wait < 0) | (compute < 0)
    pair = np.zeros(n, bool)
    pair[1:] = (np.diff(steps) != 1) | (other[1:] < 0)
    pair[starts] = False  # the step before a run's first is another run's
    bad |= pair
    ends = np.empty(k, np.intp)
    ends[:-1], ends[-1] = starts[1:], n
    plain = (np.logical_or.reduceat(bad, starts) == 0) & (ends - starts > 1)
    at = np.empty(2 * k - 1, np.intp)  # [s0 + 1, s1, s1 + 1, s2, ...]: even sums are the runs' after their first
    at[0::2], at[1::2] = np.minimum(starts + 1, n - 1), starts[1:]
    sums = [np.add.reduceat(np.where(x > 0, x, 0.0), at)[0::2].tolist() for x in (wait, other, compute)]
    last = ends - 1
    return list(zip(plain.tolist(), *sums, steps[starts].tolist(), t_wait[starts].tolist(),
                    t_compute[starts].tolist(), t_end[starts].tolist(), steps[last].tolist(), t_end[last].tolist()))  # fmt: skip


def by_lines(arr, make_run: Callable, no_fields: dict) -> list[tuple]:
    """Records (in write order) as items ``(lines, item)``, each item's records all written when the log
    held ``lines`` JSON lines (a JSON line goes between two items, never inside one): consecutive whole
    steps (``data_wait``, ``compute``, ``step_end`` of one attempt and step) as ``make_run(attempt, steps,
    t_wait, t_compute, t_end, losses)`` with its :func:`run_stats` (computed for all the runs at once)
    set as ``.stats``; every other record a tuple ``(t, attempt, step, kind, fields)`` in a list."""
    import numpy as np

    n = len(arr)
    if not n:
        return []
    kind, att, step, lines, t = arr["kind"], arr["attempt"], arr["step"], arr["lines"], arr["t"]
    starts = np.zeros(0, np.intp)
    if n >= 3:
        lead = (kind[:-2] == DATA_WAIT) & (kind[1:-1] == COMPUTE) & (kind[2:] == STEP_END) \
            & (att[:-2] == att[1:-1]) & (att[1:-1] == att[2:]) & (step[:-2] == step[1:-1]) & (step[1:-1] == step[2:]) \
            & (lines[:-2] == lines[2:])
        starts = np.flatnonzero(lead)  # never overlap: a start is a data_wait, the two after it are not
    out: list[tuple] = []
    pos = 0
    if len(starts):
        m, o = len(starts), int(starts[0])
        if int(starts[-1]) - o == 3 * (m - 1):  # the steps follow each other: columns as strided views
            at, end = slice(o, o + 3 * m, 3), slice(o + 2, o + 3 * m, 3)
            steps, t1, t2, t3 = step[at], t[at], t[o + 1 : o + 3 * m : 3], t[end]
            loss, flags, a_col, l_col = arr["loss"][end], arr["flags"][end], att[at], lines[at]
            cut = np.flatnonzero((a_col[1:] != a_col[:-1]) | (l_col[1:] != l_col[:-1])) + 1
        else:
            cut = np.flatnonzero((np.diff(starts) != 3) | (att[starts[1:]] != att[starts[:-1]])
                                 | (lines[starts[1:]] != lines[starts[:-1]])) + 1  # fmt: skip
            steps, t1, t2, t3 = step[starts], t[starts], t[starts + 1], t[starts + 2]
            loss, flags = arr["loss"][starts + 2], arr["flags"][starts + 2]
        runs = np.empty(len(cut) + 1, np.intp)  # where each run begins among the steps
        runs[0], runs[1:] = 0, cut
        stats = run_stats(steps, t1, t2, t3, runs)
        bounds = [*runs.tolist(), len(starts)]
        first = starts[runs].tolist()
        for j, (a, at) in enumerate(zip(att[starts[runs]].tolist(), lines[starts[runs]].tolist())):
            if first[j] > pos:
                out.extend(_singles(arr[pos:first[j]], no_fields))
            i, e = bounds[j], bounds[j + 1]
            run = make_run(a, steps[i:e], t1[i:e], t2[i:e], t3[i:e], Losses(loss[i:e], flags[i:e]))
            run.stats = stats[j]
            out.append((at, run))
            pos = first[j] + 3 * (e - i)
    if pos < n:
        out.extend(_singles(arr[pos:], no_fields))
    return out
