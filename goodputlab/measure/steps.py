"""Which step executions survive into the final model, kept as ranges of steps (pure).

The ledger's rule (``docs/ARCHITECTURE.md``, "The ledger"): an execution of step *s* in
attempt *a* survives when it completed (its ``step_end``), no later attempt executed *s*
again, and *s* is covered by the end state: the whole run when it completed, else the
newest valid checkpoint it left (``resume_step`` of its ``end``: steps below it).

A job's steps come in runs (attempt 0 trains 0..600,500, attempt 1 restarts from the
checkpoint at 600,000 and trains to the end), so the sets here are sorted, disjoint
ranges of steps, and :class:`Survival` answers the rule for one execution or for a
range of them with memory that grows with the attempts and the gaps in their steps,
never with the steps themselves.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterable, Iterator

INF = float("inf")


class StepSet:
    """A set of step numbers as sorted, disjoint, inclusive ranges ``[lo, hi]``.

    :meth:`add` costs O(1) for a step at or just after the highest one (a loop's
    steps), O(ranges) otherwise.
    """

    __slots__ = ("los", "his")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()):
        self.los: list[int] = []
        self.his: list[int] = []
        for lo, hi in ranges:
            self.add_range(lo, hi)

    def add(self, s: int) -> None:
        his = self.his
        if his:
            h = his[-1]
            if s == h + 1:
                his[-1] = s
                return
            if s > h:
                self.los.append(s)
                his.append(s)
                return
            if s >= self.los[-1]:
                return
        self.add_range(s, s)

    def add_range(self, lo: int, hi: int) -> None:
        """Add every step from ``lo`` to ``hi`` (inclusive), merging touching ranges."""
        los, his = self.los, self.his
        if his and lo >= los[-1]:  # in or past the highest range: no other range is touched, O(1)
            if lo > his[-1] + 1:
                los.append(lo)
                his.append(hi)
            elif hi > his[-1]:
                his[-1] = hi
            return
        i = bisect_right(his, lo - 2)  # the first range that ends at lo - 1 or later
        j = i
        while j < len(los) and los[j] <= hi + 1:
            lo, hi = min(lo, los[j]), max(hi, his[j])
            j += 1
        los[i:j], his[i:j] = [lo], [hi]

    def __contains__(self, s: int) -> bool:
        i = bisect_right(self.los, s) - 1
        return i >= 0 and s <= self.his[i]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.los, self.his)

    def __len__(self) -> int:
        """The number of steps in the set."""
        return sum(h - l + 1 for l, h in zip(self.los, self.his))

    def __bool__(self) -> bool:
        return bool(self.los)

    def update(self, other: StepSet) -> None:
        for lo, hi in other:
            self.add_range(lo, hi)

    def clipped(self, lo: float, hi: float) -> StepSet:
        """The steps of this set in ``[lo, hi)`` (``hi`` may be infinite)."""
        out = StepSet()
        for a, b in self:
            a, b = max(a, lo), min(b, hi - 1)
            if a <= b:
                out.los.append(int(a))
                out.his.append(int(b))
        return out

    def minus(self, other: StepSet, below: float = INF) -> StepSet:
        """The steps of this set that are not in ``other`` and are below ``below`` (one walk over both)."""
        out = StepSet()
        olos, ohis = other.los, other.his
        j, n = 0, len(olos)
        for lo, hi in self.clipped(-INF, below):
            while j < n and ohis[j] < lo:
                j += 1
            k = j
            while k < n and olos[k] <= hi:
                if olos[k] > lo:
                    out.los.append(lo)
                    out.his.append(olos[k] - 1)
                lo = max(lo, ohis[k] + 1)
                if lo > hi:
                    break
                k += 1
            if lo <= hi:
                out.los.append(lo)
                out.his.append(hi)
        return out

    def intersection(self, other: StepSet) -> StepSet:
        """The steps in both sets (one walk over both)."""
        out = StepSet()
        alos, ahis, blos, bhis = self.los, self.his, other.los, other.his
        i = j = 0
        while i < len(alos) and j < len(blos):
            lo, hi = max(alos[i], blos[j]), min(ahis[i], bhis[j])
            if lo <= hi:
                out.los.append(lo)
                out.his.append(hi)
            if ahis[i] < bhis[j]:
                i += 1
            else:
                j += 1
        return out

    def below(self, xs: Iterable[float]) -> list[int]:
        """For each ``x`` of ``xs`` (ascending; infinite allowed), the number of steps of the set below it."""
        out, los, his = [], self.los, self.his
        i, before = 0, 0  # ranges wholly below x, and their steps
        for x in xs:
            while i < len(los) and his[i] < x:
                before += his[i] - los[i] + 1
                i += 1
            out.append(before + (int(x - los[i]) if i < len(los) and los[i] < x else 0))
        return out

    def bounds(self) -> Iterator[int]:
        """Where membership changes: each range's first step and the step after its last."""
        for lo, hi in self:
            yield lo
            yield hi + 1

    def __repr__(self) -> str:
        return f"StepSet({list(self)})"


class Survival:
    """The survival rule of a whole log, decided once its end is known.

    ``computed`` and ``done``: per attempt, the steps it executed and the steps it
    completed (events after a kill left out); ``limit``: ``resume_step`` of a run that
    did not complete (``None``: every step is covered).
    """

    def __init__(self, computed: dict[int, StepSet], done: dict[int, StepSet], limit: int | None):
        self.limit = limit
        self.done = {a: steps.intersection(computed.get(a, StepSet())) for a, steps in done.items()}
        self.owned = owners(computed)  # attempt -> the steps it was the last to execute

    def survives(self, attempt: int, step: int) -> bool:
        """Does the execution of ``step`` in ``attempt`` survive into the final model?"""
        done = self.done.get(attempt)
        if done is None or step not in done:
            return False
        if self.limit is not None and step >= self.limit:
            return False
        owned = self.owned.get(attempt)
        return owned is not None and step in owned

    def surviving(self, attempt: int, lo: float = -INF, hi: float = INF) -> StepSet:
        """The steps in ``[lo, hi)`` whose execution in ``attempt`` survives."""
        done = self.done.get(attempt)
        if done is None:
            return StepSet()
        below = min(hi, INF if self.limit is None else self.limit)
        return done.clipped(lo, below).intersection(self.owned.get(attempt, StepSet()))

    def range_survives(self, attempt: int, lo: float, hi: float) -> bool | None:
        """Do the completed executions of ``attempt`` with steps in ``[lo, hi)`` all survive
        (``True``), none (``False``), or some (``None``)?"""
        done = self.done.get(attempt)
        if done is None:
            return False
        mine = len(done.clipped(lo, hi))
        kept = len(self.surviving(attempt, lo, hi))
        return True if kept == mine else False if kept == 0 else None

    def chunks_survive(self, attempt: int, starts: list[int]) -> list[bool | None]:
        """:meth:`range_survives` of each chunk ``[starts[i], starts[i + 1])`` (the last to infinity), with
        ``starts`` ascending: one walk over the ranges for all of them."""
        done = self.done.get(attempt)
        if done is None:
            return [False] * len(starts)
        edges = [*starts, INF]
        mine = done.below(edges)
        kept = self.surviving(attempt).below(edges)
        out: list[bool | None] = []
        for i in range(len(starts)):
            m, k = mine[i + 1] - mine[i], kept[i + 1] - kept[i]
            out.append(True if k == m else False if k == 0 else None)
        return out

    def bounds(self, attempt: int) -> list[int]:
        """The steps at which survival can change within ``attempt``: the edges of the steps it was the
        last to execute (where a later attempt's executions begin and end), and the limit."""
        owned = self.owned.get(attempt)
        out = set(owned.bounds()) if owned is not None else set()
        if self.limit is not None:
            out.add(self.limit)
        return sorted(out)


def owners(computed: dict[int, StepSet]) -> dict[int, StepSet]:
    """For each attempt, the steps that no later attempt executed again: a sweep over every attempt's
    ranges at once, O(R log R) for R ranges (the highest attempt that executed a step owns it)."""
    import heapq

    edges: list[tuple[int, int, int]] = []  # (step, 0 ends / 1 begins, attempt)
    for a, steps in computed.items():
        for lo, hi in steps:
            edges.append((lo, 1, a))
            edges.append((hi + 1, 0, a))
    edges.sort()
    out: dict[int, StepSet] = {a: StepSet() for a in computed}
    live: list[int] = []  # a max-heap of the attempts executing at the sweep's step (negated)
    ended: dict[int, int] = {}  # attempts ended but still in the heap (lazy removal)
    i, n = 0, len(edges)
    while i < n:
        at = edges[i][0]
        while i < n and edges[i][0] == at:
            _, begins, a = edges[i]
            if begins:
                heapq.heappush(live, -a)
            else:
                ended[a] = ended.get(a, 0) + 1
            i += 1
        while live and ended.get(-live[0], 0):
            ended[-live[0]] -= 1
            heapq.heappop(live)
        if live and i < n:  # steps [at, next edge) belong to the highest live attempt
            out[-live[0]].add_range(at, edges[i][0] - 1)
    return out
