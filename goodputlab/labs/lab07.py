"""Checks of Lab 7, "Scaling out" (``labs/07_scaling_out.ipynb``).

What a job of many ranks does to the checkpoint interval (its MTBF falls as 1/N), how a rare
slow rank becomes a tax on most steps, the wait for the slowest rank measured in a real
two-rank run (or its recording), what a sharded save costs when the ranks share one path to
storage, and where the ledger books a rank's late batch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..categories import CATEGORIES, DATA_WAIT, LOST_WORK, PRODUCTIVE, STRAGGLER_WAIT
from ..theory import scaling
from .checks import AnswerError, CheckResult, as_choice, as_number, as_share, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult


@check("the interval at 16 times the GPUs", "Young: the interval goes as sqrt(save x MTBF), and the job's MTBF as 1/N")
def check_interval_factor(answer: Any, small: int = 1024, large: int = 16384) -> CheckResult:
    """Exercise 1: by what factor the optimal checkpoint interval changes from ``small`` to ``large`` ranks
    (the same ranks, the same save)."""
    name = check_interval_factor.check_name
    value = as_number(answer, "a factor (new interval / old interval)")
    ratio = large / small
    expected = 1 / math.sqrt(ratio)
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"x{value:g}: {ratio:g} times the failures, a checkpoint {1 / value:g} times as often")
    mistake = diagnose(value, [
        (1 / ratio, "that takes the interval as proportional to the MTBF; Young's interval grows as its square root"),
        (math.sqrt(ratio), "more GPUs fail more often, so the job must checkpoint *more* often: the interval shrinks"),
        (ratio, "more GPUs fail more often, so the job must checkpoint *more* often: the interval shrinks"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"x{value:g} is {direction(value, expected)}")


@check("steps with a slow rank", "1 - (1 - p)^k: the chance that not every rank is on time")
def check_slowed_share(answer: Any, share: float = 0.001, ranks: int = 1024) -> CheckResult:
    """Exercise 2: the share of steps in which at least one of ``ranks`` ranks is slow (each on ``share`` of its steps)."""
    name = check_slowed_share.check_name
    value = as_number(answer, "a share of the steps")
    expected = scaling.step_slowed_probability(share, ranks)
    if near(value, expected, 0.005):
        return CheckResult(name, True, f"{value:.0%} of the steps: a rare hiccup on one device is a tax on most steps of a large job")
    mistake = diagnose(value, [
        (share * ranks, "that adds the ranks' probabilities, which counts a step with two slow ranks twice (and passes 1 "
                        "for a larger job); take the chance that every rank is on time, (1 - p)^k, from 1"),
        ((1 - share) ** ranks, "that is the chance that *every* rank is on time; the question asks for at least one slow rank"),
        (share, "that is one rank's share; the step waits if *any* of the ranks is slow"),
        (100 * expected, "that looks like a percentage: give a share between 0 and 1"),
    ], 0.005)
    return CheckResult(name, False, mistake or (f"{value:g} is {direction(value, expected)}" if 0 <= value <= 1
                                               else f"{value:g} is not a share between 0 and 1"))


def measured_wait_share(result: RunResult) -> float:
    """The healthy ranks' wait as a share of the job's compute: straggler_wait / (straggler_wait + productive + lost_work)."""
    b = result.buckets
    return b[STRAGGLER_WAIT] / (b[STRAGGLER_WAIT] + b[PRODUCTIVE] + b[LOST_WORK])


@check("the measured wait", "straggler_wait / (straggler_wait + productive + lost_work), from run.buckets")
def check_measured_wait_share(answer: Any, result: RunResult) -> CheckResult:
    """Exercise 3: the share of the job's compute time the healthy rank spent waiting for the straggler."""
    name = check_measured_wait_share.check_name
    value = as_share(answer, "a share of the job's compute time")
    b = result.buckets
    expected = measured_wait_share(result)
    if near(value, expected, 1e-3, 1e-9):
        return CheckResult(name, True, f"{value:.0%} of the compute time the healthy rank sat in the all-reduce")
    mistake = diagnose(value, [
        (b[STRAGGLER_WAIT] / result.summary["wall_s"], "that divides by the wall time; the question is about the compute "
                                                        "time (start-up, saves and restarts are not steps)"),
        (b[STRAGGLER_WAIT] / b[PRODUCTIVE] if b[PRODUCTIVE] else math.nan,
         "that divides by the productive time alone; the waits are part of the steps' time too: add them below the line"),
    ], 1e-3)
    return CheckResult(name, False, mistake or f"{value:.4f} is {direction(value, expected)}")


@check("a sharded save on a shared path", "the fixed cost plus one rank's share at its part of the bandwidth (its own path, or the shared one split N ways, whichever is slower)")
def check_sharded_save_s(answer_s: Any, state_bytes: float = 140e9, ranks: int = 64, rank_bps: float = 2e9,
                         shared_bps: float = 20e9, overhead_s: float = 2.0) -> CheckResult:
    """Exercise 4: a synchronous sharded save of ``state_bytes`` by ``ranks`` ranks sharing ``shared_bps``, in seconds."""
    name = check_sharded_save_s.check_name
    value = as_number(answer_s, "seconds")
    expected = scaling.sharded_save_s(state_bytes, ranks, rank_bandwidth_Bps=rank_bps, shared_bandwidth_Bps=shared_bps,
                                      overhead_s=overhead_s)
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"{value:.1f} s: no faster than one writer at the shared path's speed, plus the fixed cost")
    share = state_bytes / ranks
    mistake = diagnose(value, [
        (expected - overhead_s, "close: the fixed cost (planning, the index, the commit) comes on top"),
        (overhead_s + share / rank_bps, "that gives every rank its own 2 GB/s path; here they share one path of 20 GB/s, "
                                        "so each gets a 64th of it"),
        (overhead_s + share / shared_bps, "that gives one rank the whole shared path; all 64 write at once and split it"),
        (overhead_s + state_bytes / rank_bps, "that writes the whole state through one rank's path; each rank writes only its share"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:g} s is {direction(value, expected)}")


@check("where a late batch is booked", "the job is as far as the rank that holds it back: what was that rank doing?")
def check_late_batch(answer: Any) -> CheckResult:
    """Exercise 5: the ledger category of the 30 ms rank 0 waits while rank 1's batch is late."""
    name = check_late_batch.check_name
    if isinstance(answer, str) and answer.strip().lower() == "sync_wait":
        raise AnswerError("sync_wait is a phase a rank records, not a ledger category: name the category the merged "
                          f"ledger books it to ({', '.join(CATEGORIES)})")
    category = as_choice(answer, CATEGORIES, "a ledger category")
    if category == DATA_WAIT:
        return CheckResult(name, True, "data_wait: the delay is booked once, where it arose; the late rank then computes "
                                       "no longer than the fastest, so nothing is left for a straggler")
    if category == STRAGGLER_WAIT:
        return CheckResult(name, False, "rank 1 was not slow at computing: it was waiting for its batch; what was holding "
                                        "the job back?")
    return CheckResult(name, False, f"{category} is not where a wait for input goes")
