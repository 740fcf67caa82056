"""One job, many ranks, merged as a stream: memory bounded by attempts and checkpoints, not steps.

The rules are :mod:`goodputlab.measure.merge`'s (the job is as far as its slowest rank); this
module applies them in two passes over the ranks' logs instead of holding every rank's events:

1. :func:`scan` reads each rank's log once and keeps what the merge needs from the whole log:
   each attempt's first and last time (to match attempts across ranks), the clock (``t0_unix``),
   the checkpoints committed, the ``finish`` and last ``end`` events, and whether the log is in
   time order (a recorder's is; :func:`merged_batches` refuses one that is not, and the caller
   merges it in memory).
2. :func:`merged_batches` k-way merges the logs by time (``heapq.merge``) and emits the job's
   events as the fold's tuples, in the order :func:`~goodputlab.measure.merge.merge_ranks` sorts
   them. Three things need a look ahead, each held in a small buffer released by time: a
   ``step_end`` waits for every rank's loss of that step (or the end of its attempt), a compute
   phase waits for the next phase (the wait for the slowest rank is cut out of it then), and a
   marker waits behind both. In a synchronous job the ranks are at most a step or so apart, so
   the buffers hold a few events.

Pure: no torch, no files (the caller passes functions that yield each rank's events).
"""

from __future__ import annotations

import heapq
from collections import deque
import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from . import events as E
from .merge import annotate_step, attempts_of_spans, job_end_events, job_phase_at

BATCH = 4096  # events per batch handed to the fold
RELEASE_EVERY = 256  # instants between two releases of the merge's buffer (a power of two)


@dataclass
class RankScan:
    """What :func:`scan` keeps of one rank's log (times in the log's own clock, seconds)."""

    spans: dict[int, list[float]] = field(default_factory=dict)  # attempt -> [first t, last t]
    t0_unix: float | None = None
    in_order: bool = True
    events: int = 0
    last: dict | None = None
    max_attempt: int = 0
    max_done: int | None = None  # the highest step_end step
    commits: list[tuple[int, int, float, int, dict]] = field(default_factory=list)  # (attempt, ckpt_step, t, n, event)
    finishes: list[dict] = field(default_factory=list)
    last_end: dict | None = None  # the last ``end`` event

    @property
    def newest_commit(self) -> int | None:
        return max((c[1] for c in self.commits), default=None)


def scan(batches: Iterable) -> RankScan:
    """One pass over a rank's log (batches of the fold's tuples or :class:`~goodputlab.measure.logread.StepRun`)."""
    from .logread import StepRun, as_dict

    s = RankScan()
    last_t = float("-inf")
    n = 0
    for batch in batches:
        if isinstance(batch, StepRun):
            if not len(batch.steps):
                continue
            a = batch.attempt
            tw, tc, te = batch.t_wait, batch.t_compute, batch.t_end
            if tw[0] < last_t or (tc < tw).any() or (te < tc).any() or (tw[1:] < te[:-1]).any():
                s.in_order = False
            _span(s, a, float(tw[0]))
            _span(s, a, float(te[-1]))
            last_t = float(te[-1])
            top = int(batch.steps.max())
            s.max_done = top if s.max_done is None else max(s.max_done, top)
            s.max_attempt = max(s.max_attempt, a)
            s.last = batch.events(len(batch.steps) - 1)[-1]
            n += len(batch)
            continue
        for ev in batch:
            t, a, step, kind, _ = ev
            if t < last_t:
                s.in_order = False
            last_t = t
            _span(s, a, t)
            s.max_attempt = max(s.max_attempt, a)
            s.last = ev
            if kind == E.W_STEP_END and step is not None:
                s.max_done = step if s.max_done is None else max(s.max_done, step)
            elif kind == E.M_CKPT_COMMIT:
                e = as_dict(ev)
                s.commits.append((a, e["ckpt_step"], t, n, e))
            elif kind == E.M_FINISH:
                s.finishes.append(as_dict(ev))
            elif kind == E.SUP_END:
                s.last_end = as_dict(ev)
            elif kind == E.W_INIT and s.t0_unix is None:
                t0 = as_dict(ev).get("t0_unix")
                if isinstance(t0, (int, float)) and not isinstance(t0, bool):
                    s.t0_unix = t0
            n += 1
    s.events = n
    if s.last is not None:
        s.last = as_dict(s.last)
    return s


def _span(s: RankScan, a: int, t: float) -> None:
    b = s.spans.get(a)
    if b is None:
        s.spans[a] = [t, t]
    elif t < b[0]:
        b[0] = t
    elif t > b[1]:
        b[1] = t


def merged_batches(sources: dict[int, Callable[[], Iterator[dict]]], scans: dict[int, RankScan],
                   closing: dict[int, list[dict]]) -> Iterator[list[tuple]]:
    """The job's events as the fold's tuples, in batches, merged from each rank's events.

    ``sources``: rank -> a function yielding that rank's events (dicts, in file order, which must be
    time order: every ``scans[rank].in_order``); ``scans``: :func:`scan` of each; ``closing``: the
    events that close a rank's log whose last attempt did not (``recording.open_attempt_events``),
    else ``[]``. Ranks keep the mapping's order (``merge_ranks``'s order for markers at one instant).
    """
    ranks = [r for r in sources if scans[r].events]
    if not ranks:
        return
    assert all(scans[r].in_order for r in ranks), "merged_batches needs each log in time order"
    shift = _clock_shifts({r: scans[r].t0_unix for r in ranks})
    spans = [(lo + shift[r], hi + shift[r], r, a) for r in ranks for a, (lo, hi) in scans[r].spans.items()]
    attempt_of = attempts_of_spans(spans)
    participants: dict[int, list[int]] = {}
    attempt_end: dict[int, float] = {}
    for lo, hi, r, a in spans:
        job = attempt_of[(r, a)]
        if r not in participants.setdefault(job, []):
            participants[job].append(r)
        attempt_end[job] = max(attempt_end.get(job, hi), hi)
    for job in participants:
        participants[job].sort()
    t_end = max(hi for _, hi, _, _ in spans)
    position = {r: i for i, r in enumerate(ranks)}
    # each checkpoint once, when its last rank committed it (ties: the first in rank, then file, order)
    winners: dict[tuple[int, int], tuple[float, int, int]] = {}
    for r in ranks:
        for a, ckpt, t, n, _ in scans[r].commits:
            key = (attempt_of[(r, a)], ckpt)
            if key not in winners or t + shift[r] > winners[key][0]:
                winners[key] = (t + shift[r], r, n)
    commit_at = {(r, n) for _, r, n in winners.values()}
    last_job = max(participants)
    final_ends = [closing[r][-1] if closing.get(r) else (scans[r].last_end or {"completed": False, "reason": "no end"})
                  for r in participants[last_job]]
    finishes = [e for r in ranks for e in scans[r].finishes]
    newest = [scans[r].newest_commit for r in ranks if scans[r].newest_commit is not None]
    end_events = job_end_events(final_ends, finishes, last_job, t_end, lambda: min(newest) if newest else 0)

    def stream(r: int) -> Iterator[tuple]:
        n, d = 0, shift[r]
        # no further than the scan read: a live log grows between the passes, and what it gained is the next update's
        for e in itertools.islice(sources[r](), scans[r].events):
            if d:
                e = {**e, "t": e["t"] + d}
            yield e["t"], position[r], n, r, e
            n += 1
        for e in closing.get(r, ()):
            yield e["t"] + d, position[r], n, r, {**e, "t": e["t"] + d}
            n += 1

    merger = _Merger(attempt_of, participants, attempt_end, t_end, commit_at)
    group: list[tuple] = []
    out: list[tuple] = []
    instants = 0
    for item in heapq.merge(*(stream(r) for r in ranks)):
        if group and item[0] != group[0][0]:
            merger.instant(group)
            group = []
            instants += 1
            if not instants & (RELEASE_EVERY - 1):  # now and then: the buffer holds a few hundred instants at most
                merger.release(item[0], out)
                if len(out) >= BATCH:
                    yield out
                    out = []
        group.append(item)
    merger.instant(group)
    merger.finish(end_events)
    merger.release(float("inf"), out)
    if out:
        yield out


class _Merger:
    """The state of a streaming merge: each rank's phase, the job's, and the small look-ahead buffers."""

    def __init__(self, attempt_of, participants, attempt_end, t_end, commit_at):
        self.attempt_of, self.participants, self.attempt_end = attempt_of, participants, attempt_end
        self.t_end, self.commit_at = t_end, commit_at
        self.current: dict[int, dict] = {}  # rank -> its phase now (relabelled with the job's attempt)
        self.previous: dict[int, dict] = {}  # rank -> its previous phase as written
        self.own: dict[tuple[int, int], dict[int, tuple[float, float]]] = {}  # (job, step) -> rank -> (own compute s, end)
        self.by_step: dict[tuple[int, int], dict[int, dict]] = {}  # (job, step) -> rank -> its step_end
        self.pending: deque[dict] = deque()  # the job's step_end events still waiting for ranks' losses, in time order
        self.heap: list[tuple] = []  # (t, group, a, b, event): the output, released by time
        self.job = 0
        self.last_key = None
        self.last_phase: dict | None = None
        self.seq = 0

    def instant(self, group: list[tuple]) -> None:
        """Every rank's events at one instant (``(t, position, n, rank, event)``), then the job's phase."""
        t = group[0][0]
        for _, pos, n, rank, e in group:
            kind = e["kind"]
            job_a = self.attempt_of[(rank, e["attempt"])]
            if kind in E.PHASES:
                prev = self.previous.get(rank)
                if prev is not None and prev["kind"] == E.W_COMPUTE and kind == E.W_SYNC_WAIT and prev["step"] == e["step"]:
                    key = (self.attempt_of[(rank, prev["attempt"])], prev["step"])
                    self.own.setdefault(key, {}).setdefault(rank, (e["t"] - prev["t"], e["t"]))
                self.previous[rank] = e
                if kind == E.W_STEP_END:
                    self.by_step.setdefault((job_a, e["step"]), {})[rank] = e
                if kind == E.SUP_END and t >= self.t_end:
                    continue  # a log's last event ends it; at that instant the rank is still in its last phase
                self.current[rank] = {**e, "attempt": job_a, "rank": rank}
                self.job = max(self.job, job_a)
            elif kind == E.M_CKPT_COMMIT:
                if (rank, n) in self.commit_at:
                    heapq.heappush(self.heap, (t, 1, pos, n, {**e, "attempt": job_a, "rank": rank}))
            elif kind != E.M_FINISH:
                heapq.heappush(self.heap, (t, 2, pos, n, {**e, "attempt": job_a, "rank": rank}))
        found = job_phase_at(self.current, self.participants[self.job], self.job, t, self.t_end)
        if found is not None and found[0] != self.last_key:
            self.last_key, e = found
            self._phase(e)
        self._settle(t)

    def _phase(self, nxt: dict) -> None:
        cur = self.last_phase
        if (cur is not None and cur["kind"] == E.W_COMPUTE and not cur.get("collective") and nxt.get("collective")
                and (nxt["attempt"], nxt["step"]) == (cur["attempt"], cur["step"])):
            times = self.own.get((cur["attempt"], cur["step"]))
            if times:
                at = cur["t"] + min(d for d, _ in times.values())
                slowest = max(times, key=lambda r: times[r][1])  # the rank that joined the all-reduce last
                if at < nxt["t"]:
                    self._push({**cur, "t": at, "kind": E.W_SYNC_WAIT, "rank": slowest, "waiting_for": slowest})
        self._push(nxt)
        self.last_phase = nxt
        if nxt["kind"] == E.W_COMPUTE and not nxt.get("collective"):
            floor = (nxt["attempt"], nxt["step"])
            _drop_below(self.own, floor)
            if self.pending:
                floor = min(floor, (self.pending[0]["attempt"], self.pending[0]["step"]))
            _drop_below(self.by_step, floor)
        elif nxt["kind"] == E.W_STEP_END:
            self.pending.append(nxt)

    def _push(self, e: dict) -> None:
        heapq.heappush(self.heap, (e["t"], 0, self.seq, 0, e))
        self.seq += 1

    def _settle(self, t: float, final: bool = False) -> None:
        """Give each waiting job ``step_end`` its ranks' mean loss and samples once all are in."""
        pending = self.pending
        while pending:  # the first waits longest; the rest are settled when they come first (the mark is the first's)
            e = pending[0]
            key = (e["attempt"], e["step"])
            done = self.by_step.get(key, {})
            if not (final or len(done) >= len(self.participants[key[0]]) or t > self.attempt_end[key[0]]):
                return
            annotate_step(e, done)
            pending.popleft()

    def finish(self, end_events: list[dict]) -> None:
        self._settle(float("inf"), final=True)
        for i, e in enumerate(end_events):
            heapq.heappush(self.heap, (e["t"], 3, i, 0, e))

    def release(self, t_next: float, out: list[tuple]) -> None:
        """Move to ``out`` every buffered event that nothing still to come can precede (times < the mark)."""
        mark = t_next
        if self.pending:
            mark = min(mark, self.pending[0]["t"])
        cur = self.last_phase
        if cur is not None and cur["kind"] == E.W_COMPUTE and not cur.get("collective"):
            mark = min(mark, cur["t"])  # a wait for the slowest rank may still be cut out of it
        heap = self.heap
        while heap and heap[0][0] < mark:
            e = heapq.heappop(heap)[4]
            out.append((e["t"], e["attempt"], e.get("step"), e["kind"], e))


def _drop_below(table: dict[tuple[int, int], dict], floor: tuple[int, int]) -> None:
    """Drop the entries of ``table`` below ``floor`` from its oldest on (its keys come in rising order,
    so this stops at the first one kept: amortised, a few entries a step)."""
    while table:
        key = next(iter(table))
        if key >= floor:
            return
        del table[key]


def _clock_shifts(t0s: dict[int, float | None]) -> dict[int, float]:
    """Seconds to add to each rank's times: logs whose attempts used another t0 move onto the earliest."""
    known = {r: t0 for r, t0 in t0s.items() if t0 is not None}
    if len(set(known.values())) <= 1:
        return {r: 0.0 for r in t0s}
    first = min(known.values())
    return {r: (known[r] - first if r in known else 0.0) for r in t0s}
