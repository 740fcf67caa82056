"""What the ledger's fold keeps of one attempt: its steps as ranges, its completed compute in chunks (pure).

A chunk holds the steps from one checkpoint's resume point to the next; whether a chunk's compute is
``productive`` or ``lost_work`` is decided at the end of the log (:mod:`goodputlab.measure.fold`), so the fold
adds up each chunk's seconds as it goes. Steps written from the top down widen the first chunk rather than
insert one in front per step (that was quadratic).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Iterable

from .steps import StepSet


class _Attempt:
    """What the fold keeps of one attempt: its steps as ranges, its completed compute in chunks."""

    __slots__ = ("computed", "done", "starts", "sums", "top", "top_loss", "loss0", "pending", "front_free")

    def __init__(self, marks: Iterable[int] = ()):
        self.computed = StepSet()  # steps it executed (events after its kill left out)
        self.done = StepSet()  # steps it completed
        self.starts: list[int] = sorted(marks)  # chunk i holds steps [starts[i], starts[i+1])
        self.sums = [0.0] * len(self.starts)  # compute seconds of the completed executions in each chunk
        self.top: list[int | None] = [None] * len(self.starts)  # each chunk's highest completed step
        self.top_loss: list[Any] = [None] * len(self.starts)  # and its loss
        self.loss0: Any = None  # the loss of step 0 (the run's initial loss, if it survives)
        self.pending: dict[int, float] = {}  # compute seconds of executions not completed (yet)
        self.front_free = False  # the first chunk begins at a step, not at a resume point or a cut

    def chunk(self, step: int) -> int:
        starts = self.starts
        if starts and step >= starts[-1]:
            return len(starts) - 1
        i = bisect_right(starts, step) - 1
        if i < 0:
            if self.front_free:  # no resume point or cut below it: the first chunk reaches down, O(1)
                starts[0] = step
                return 0
            starts.insert(0, step)  # a chunk of its own in front, once: later steps below it widen it
            self.sums.insert(0, 0.0)
            self.top.insert(0, None)
            self.top_loss.insert(0, None)
            self.front_free = True
            i = 0
        return i

    def mark(self, step: int) -> bool:
        """A checkpoint's resume point: a new chunk starts there, if no step at or past it ran yet.
        Returns whether a chunk was added."""
        his = self.computed.his
        if (not his or his[-1] < step) and (not self.starts or step > self.starts[-1]):
            if not self.starts:
                self.front_free = False
            self.starts.append(step)
            self.sums.append(0.0)
            self.top.append(None)
            self.top_loss.append(None)
            return True
        return False


def _completed(A: _Attempt, s: int, f: dict, seconds: float) -> None:
    """Step ``s`` of attempt ``A`` completed (its ``step_end``, fields ``f``): its compute ``seconds`` (and any
    earlier part of the execution, from merged ranks) go into its chunk, with its loss if it is the top."""
    i = A.chunk(s)
    A.sums[i] += seconds
    if A.pending and s in A.pending:  # an earlier part of this execution (merged ranks)
        A.sums[i] += A.pending.pop(s)
    top = A.top[i]
    his = A.computed.his
    if (top is None or s >= top) and his and (s == his[-1] or s in A.computed):
        A.top[i] = s
        A.top_loss[i] = f.get("loss")
    if s == 0:
        A.loss0 = f.get("loss")
