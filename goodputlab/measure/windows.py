"""Goodput over time: the ledger per window of wall time, and the step times in each (pure).

What Google's ml-goodput-measurement offers as interval and rolling goodput and step-time deviation,
computed locally from the event log with the same fold as the summary
(:mod:`goodputlab.measure.fold`, its phases visited):

* :class:`WindowBooks` books each phase's seconds into windows of ``width_s`` seconds of the run's wall
  clock (from its first event), or into one window ``[since_s, until_s)``. Whether a compute is
  ``productive`` or ``lost_work`` is known only at the end of the log, so :func:`windows_of` folds the
  log twice: once for survival (the plain fold, fast), then with the windows, each compute booked exactly.
* Step times: the time from one ``step_end`` to the next within an attempt (everything the loop does
  per step), counted per window in a histogram of 2% wide bins, so memory grows with the windows, never
  the steps. Each window gives its median and p90 step time and the steps slower than
  :data:`SLOW_FACTOR` times the whole run's median (anomalies).

Each window's row: ``start_s``, ``end_s``, ``goodput``, ``buckets`` (seconds per category), ``steps``,
``median_step_s``, ``p90_step_s``, ``slow_steps``.
"""

from __future__ import annotations

import math
from typing import Any

from .. import categories as C
from . import events as E

SLOW_FACTOR = 2.0  # a step slower than this times the run's median step time is an anomaly
MAX_WINDOWS = 100_000  # a window so narrow that a run needs more is refused
_BIN = math.log(1.02)  # step-time histogram: bins 2% wide (median and p90 to within 1%)


class WindowError(ValueError):
    """Windows that cannot be made (a width so small that the run needs more than :data:`MAX_WINDOWS`)."""


class WindowBooks:
    """A fold's ``visit`` that books the ledger per window (see the module's docstring). ``width_s``: the
    windows' width in seconds (None: one window); ``since_s``, ``until_s``: the part of the run booked,
    seconds from its start."""

    def __init__(self, survives, width_s: float | None = None, since_s: float = 0.0, until_s: float = math.inf):
        self.survives = survives  # (attempt, step) -> does that execution survive (a first fold's survival)
        self.width, self.since, self.until = width_s, since_s, until_s
        self.reset()

    def reset(self) -> None:
        self.origin: float | None = None
        self.books: dict[int, dict[str, float]] = {}  # window -> category -> seconds
        self.hist: dict[int, dict[int, int]] = {}  # window -> step-time bin -> steps
        self.last_end: dict[int, float] = {}  # attempt -> its last step_end's time

    def _window(self, x: float) -> int:
        if self.width is None:
            return 0
        w = int((x - self.since) // self.width)
        while self.since + (w + 1) * self.width <= x:  # 0.5 // 0.1 is 4.0: the division rounds down a window
            w += 1
        if w >= MAX_WINDOWS:
            raise WindowError(f"windows of {self.width} s: the run needs more than {MAX_WINDOWS:,}; choose a wider one")
        return w

    def __call__(self, ev: tuple, start: float, end: float | None, category: str | None) -> None:
        if self.origin is None:
            self.origin = start
        t, attempt, step, kind, _ = ev
        if kind == E.W_STEP_END:
            before = self.last_end.get(attempt)
            self.last_end[attempt] = t
            at = t - self.origin
            if before is not None and self.since <= at < self.until and t > before:
                hist = self.hist.setdefault(self._window(at), {})
                b = round(math.log(t - before) / _BIN)
                hist[b] = hist.get(b, 0) + 1
        if end is None or end <= start:
            return
        if category is None:  # a compute: productive when its execution survives
            category = C.PRODUCTIVE if self.survives(attempt, step) else C.LOST_WORK
        a, b = max(start - self.origin, self.since), min(end - self.origin, self.until)
        while a < b:
            w = self._window(a)
            edge = b if self.width is None else min(b, self.since + (w + 1) * self.width)
            books = self.books.setdefault(w, {})
            books[category] = books.get(category, 0.0) + (edge - a)
            a = edge

    def rows(self, wall: float) -> list[dict[str, Any]]:
        """One row per window of a run of ``wall`` seconds."""
        whole: dict[int, int] = {}
        for hist in self.hist.values():
            for b, n in hist.items():
                whole[b] = whole.get(b, 0) + n
        median = _quantile(whole, 0.5)
        out = []
        for w in sorted(set(self.books) | set(self.hist)):
            start = self.since + (0 if self.width is None else w * self.width)
            end = min(wall, self.until if self.width is None else min(self.until, start + self.width))
            books = {c: self.books.get(w, {}).get(c, 0.0) for c in C.CATEGORIES}
            hist = self.hist.get(w, {})
            span = end - start
            out.append({
                "start_s": start, "end_s": end,
                "goodput": books[C.PRODUCTIVE] / span if span > 0 else 0.0,
                "buckets": books, "steps": sum(hist.values()),
                "median_step_s": _quantile(hist, 0.5), "p90_step_s": _quantile(hist, 0.9),
                "slow_steps": 0 if median is None else sum(n for b, n in hist.items()
                                                          if math.exp(b * _BIN) > SLOW_FACTOR * median),
            })  # fmt: skip
        return out


def _quantile(hist: dict[int, int], q: float) -> float | None:
    """The ``q`` quantile of a step-time histogram (its bin's middle, seconds), None when it is empty."""
    total = sum(hist.values())
    if not total:
        return None
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= q * total:
            return math.exp(b * _BIN)
    return None  # pragma: no cover


def windows_of(fold_with, width_s: float | None = None, since_s: float = 0.0, until_s: float = math.inf) -> list[dict]:
    """The rows of a run's log in windows (see :class:`WindowBooks`): ``fold_with(visit)`` folds the log with
    ``visit`` (None: the plain fold) and returns its :class:`~goodputlab.measure.fold.Folded`."""
    done = fold_with(None)
    books = WindowBooks(done.survival.survives, width_s, since_s, until_s)
    fold_with(books)
    return books.rows(done.wall_s)
