"""A straggler: one chosen rank whose steps run slower (pure: numpy, no torch).

In synchronous data parallelism every step ends in a gradient all-reduce that no rank
leaves before the slowest has arrived, so one slow rank sets the pace of the whole job.
:class:`Straggler` says which steps of which rank are slowed and by how much:

* ``factor``: a slowed step's forward and backward take ``factor`` times as long as they
  took (the rank sleeps ``(factor - 1) x`` its own measured compute time of that step before
  its gradients join the all-reduce; a sleep, so the slow rank does not take CPU from the
  others on a shared machine);
* ``share``: the share of the rank's steps that are slowed (1: every step). Whether step
  *s* is slowed is a pure function of ``(seed, s)``, so a restarted job slows the same steps.

The model of what it costs is :func:`goodputlab.theory.scaling.straggler_step_factor`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Straggler:
    """Which rank is slow (``rank``; ``None``: none), by how much (``factor`` >= 1) and how often (``share``)."""

    rank: int | None = None
    factor: float = 1.0
    share: float = 1.0
    seed: int = 0

    @property
    def active(self) -> bool:
        return self.rank is not None and self.factor > 1.0 and self.share > 0.0

    def slows(self, rank: int, step: int) -> bool:
        """Is ``rank``'s step ``step`` slowed?"""
        if not self.active or rank != self.rank:
            return False
        if self.share >= 1.0:
            return True
        return bool(np.random.default_rng([self.seed, step, 0x57A6]).random() < self.share)

    def delay_s(self, rank: int, step: int, compute_s: float) -> float:
        """Seconds ``rank`` waits before joining step ``step``'s all-reduce after ``compute_s`` seconds of compute."""
        return (self.factor - 1.0) * max(0.0, compute_s) if self.slows(rank, step) else 0.0
