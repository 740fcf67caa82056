"""Scaling out: what more ranks do to failures, stragglers and checkpoint saves (pure: numpy only).

Three facts of synchronous data-parallel training, each a small model that the measured
2-process runs are set beside (``benchmarks/distributed.py``, chapter 7):

* **One failure stops every rank.** Ranks fail independently, each with mean time between
  failures ``M``; the job stops at the first, so its MTBF is ``M / N``
  (:func:`goodputlab.theory.cluster.cluster_mtbf`), and which rank fails is uniform.
* **Every step waits for the slowest rank.** If ``k`` ranks are each slowed by a factor ``f``
  on a share ``p`` of their steps (independently), a step is slowed with probability
  ``q = 1 - (1 - p)^k`` (two slow ranks in one step cost no more than one), so a step's
  compute takes ``1 + (f - 1) q`` times as long on average, and the healthy ranks wait
  ``(f - 1) q`` of a healthy step's compute in its all-reduce. With every one of ``N`` ranks a
  possible straggler (``k = N``), ``q`` tends to 1 as ``N`` grows: at scale, some rank is slow
  in nearly every step.
* **A sharded save writes ``1/N`` of the state per rank.** With DDP every rank holds the whole
  state, and DCP splits the replicated tensors among the ranks; with FSDP each rank holds
  ``1/N`` to begin with. Each rank's write is cheaper; whether the job's save is faster
  depends on whether the ranks write in parallel paths (a disk or a network link each) or
  share one.

Times in seconds, sizes in bytes.
"""

from __future__ import annotations

import math

from .. import validate


def step_slowed_probability(share: float, slow_ranks: int = 1) -> float:
    """``q``: the probability that a step has at least one slowed rank (``slow_ranks`` ranks, each a
    ``share`` of its steps, independently)."""
    validate.number("share", share, 0, 1)
    validate.whole("slow_ranks", slow_ranks, 0)
    return -math.expm1(slow_ranks * math.log1p(-share)) if share < 1 else (1.0 if slow_ranks else 0.0)


def straggler_step_factor(factor: float, share: float = 1.0, slow_ranks: int = 1) -> float:
    """Mean compute time of a job's step over a healthy one's: ``1 + (factor - 1) q``."""
    validate.number("factor", factor, 1)
    return 1.0 + (factor - 1.0) * step_slowed_probability(share, slow_ranks)


def straggler_wait_share(factor: float, share: float = 1.0, slow_ranks: int = 1) -> float:
    """Share of the job's compute time that the healthy ranks spend waiting for a straggler:
    ``(factor - 1) q / (1 + (factor - 1) q)`` (the ledger's ``straggler_wait`` over its compute)."""
    slowed = straggler_step_factor(factor, share, slow_ranks)
    return (slowed - 1.0) / slowed


def straggler_wait_s(compute_s: float, steps: int, factor: float, share: float = 1.0, slow_ranks: int = 1) -> float:
    """Expected seconds the healthy ranks wait in ``steps`` steps whose healthy compute is ``compute_s`` each."""
    validate.seconds("compute_s", compute_s)
    validate.whole("steps", steps, 0)
    return steps * compute_s * (straggler_step_factor(factor, share, slow_ranks) - 1.0)


def sharded_save_bytes_per_rank(state_bytes: float, ranks: int) -> float:
    """Bytes each rank writes of a sharded checkpoint of ``state_bytes`` (DCP spreads them evenly)."""
    validate.number("state_bytes", state_bytes, 0)
    validate.whole("ranks", ranks, 1)
    return state_bytes / ranks


def sharded_save_s(
    state_bytes: float,
    ranks: int,
    rank_bandwidth_Bps: float,
    shared_bandwidth_Bps: float = math.inf,
    overhead_s: float = 0.0,
) -> float:
    """Seconds a synchronous sharded save takes (every rank writes its part at once, then the commit).

    Each rank writes ``state_bytes / ranks`` at ``rank_bandwidth_Bps``, unless the ranks share a
    path of ``shared_bandwidth_Bps`` (one disk, one link), which they then split;
    ``overhead_s`` is the fixed part (planning, metadata, the commit).
    """
    validate.number("rank_bandwidth_Bps", rank_bandwidth_Bps, 0, low_open=True)
    validate.number("shared_bandwidth_Bps", shared_bandwidth_Bps, 0, low_open=True, allow_inf=True)
    validate.seconds("overhead_s", overhead_s)
    per_rank_bandwidth = min(rank_bandwidth_Bps, shared_bandwidth_Bps / ranks)
    return overhead_s + sharded_save_bytes_per_rank(state_bytes, ranks) / per_rank_bandwidth
