"""Stragglers: ranks whose steps run slower (pure: numpy, no torch).

In synchronous data parallelism every step ends in a gradient all-reduce that no rank
leaves before the slowest has arrived, so one slow rank sets the pace of the whole job.
:class:`Straggler` says which steps of which ranks are slowed and by how much:

* ``factor``: a slowed step's forward and backward take ``factor`` times as long as they
  took (the rank sleeps ``(factor - 1) x`` its own measured compute time of that step before
  its gradients join the all-reduce; a sleep, so the slow rank does not take CPU from the
  others on a shared machine);
* ``prob``: the share of steps that are slowed (1: every step);
* ``rank``: the rank that straggles; ``None``: every rank, each on draws of its own (the
  "tail at scale": some rank is slow in many steps).

Whether a step is slowed is a pure function of ``(seed, step)`` (and the rank, for every rank),
so a restarted job slows the same steps; for one chosen rank it is the same draw as a
one-process run's straggler (:class:`goodputlab.recovery.inject.StragglerSchedule`).

The model of what it costs is :func:`goodputlab.theory.scaling.straggler_step_factor`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Straggler:
    """Which rank is slow (``rank``; ``None``: every rank), by how much (``factor`` >= 1) and how often (``prob``)."""

    rank: int | None = None
    factor: float = 1.0
    prob: float = 0.0
    seed: int = 0

    @property
    def active(self) -> bool:
        return self.factor > 1.0 and self.prob > 0.0

    def slows(self, rank: int, step: int) -> bool:
        """Is ``rank``'s step ``step`` slowed?"""
        if not self.active or (self.rank is not None and rank != self.rank):
            return False
        if self.prob >= 1.0:
            return True
        key = [self.seed, step, 0x57A6] if self.rank is not None else [self.seed, step, rank, 0x57A6]
        return bool(np.random.default_rng(key).random() < self.prob)

    def delay_s(self, rank: int, step: int, compute_s: float) -> float:
        """Seconds ``rank`` waits before joining step ``step``'s all-reduce after ``compute_s`` seconds of compute."""
        return (self.factor - 1.0) * max(0.0, compute_s) if self.slows(rank, step) else 0.0
