"""Checks of Lab 3, "How often to checkpoint" (``labs/03_checkpoint_interval.ipynb``).

Young's interval, its square root, the exact model against first order, and a
measured sweep of intervals (real runs, or the recorded ones).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from .. import categories as C
from ..theory.closed_forms import daly_interval, exact_goodput_free, expected_goodput, young_interval
from ..theory.cluster import WORKED_EXAMPLE_MTBF_S
from .checks import CheckResult, as_number, as_share, as_whole, as_written, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult

SAVE_S = 60.0
HOUR_S = 3600.0


@check("Young's interval", "sqrt(2 x save x MTBF), every time in seconds")
def check_young_s(answer_s: Any, save_s: float = SAVE_S, mtbf_s: float = WORKED_EXAMPLE_MTBF_S) -> CheckResult:
    """Exercise 1: Young's interval in seconds for a 60-s save at the worked example's MTBF."""
    name = check_young_s.check_name
    answer = as_number(answer_s, "seconds")
    expected = young_interval(save_s, mtbf_s)
    if near(answer, expected, 0.01):
        return CheckResult(name, True, f"{answer:,.0f} s, about {answer / 60:.0f} minutes")
    mistake = diagnose(answer, [
        (math.sqrt(save_s * mtbf_s), "Young's rule has a factor 2 under the square root"),
        (expected / 60, "60 times too small: minutes, or an MTBF in hours? Put both terms in seconds and answer in seconds"),
        (daly_interval(save_s, mtbf_s), "that is Daly's interval (with his correction); Young's is the plain square root"),
        (2 * save_s * mtbf_s, "forgot the square root"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{answer:g} s is {direction(answer, expected)}")


@check("quadruple the save cost", "Young's interval is proportional to the square root of the save cost")
def check_save_factor(answer: Any) -> CheckResult:
    """Exercise 2: by what factor Young's interval grows when a save costs four times as much."""
    name = check_save_factor.check_name
    factor = as_number(answer, "a factor")
    if near(factor, 2.0, 0.01):
        return CheckResult(name, True, "twice as long: sqrt(4) = 2, so costly saves move the optimum less than you might fear")
    mistake = diagnose(factor, [
        (4.0, "the interval is not proportional to the save cost but to its square root"),
        (16.0, "the square goes the other way: the interval grows as the *square root* of the save cost"),
        (0.5, "a costlier save means saving *less* often: the interval grows"),
        (0.25, "a costlier save means saving *less* often: the interval grows"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{factor:g} is {direction(factor, 2.0)}: what does the square root do to a factor 4?")


@check("exact goodput at 2 hours", "tau / (M (exp(tau/M) - 1)) with free saves and restarts")
def check_exact_2h(answer: Any, interval_s: float = 2 * HOUR_S, mtbf_s: float = WORKED_EXAMPLE_MTBF_S) -> CheckResult:
    """Exercise 3: the exact goodput with free saves and restarts, checkpointing every 2 hours (8.6 failures a day)."""
    name = check_exact_2h.check_name
    share = as_share(answer, "goodput")
    expected = exact_goodput_free(interval_s, mtbf_s)
    if as_written(share, expected, 0.005):
        first = expected_goodput(interval_s, 0, 0, mtbf_s)
        return CheckResult(name, True, f"{expected:.1%}: {100 * (expected - first):.0f} points above the "
                                       f"back-of-envelope {first:.0%}")
    mistake = diagnose(share, [
        (expected_goodput(interval_s, 0, 0, mtbf_s),
         "that is the first-order model (half an interval lost per failure); the exact loss per failure is smaller when tau/M is not small"),
        (1 - expected, "that is the share *lost*; the question asks for goodput"),
    ], 0.005)
    return CheckResult(name, False, mistake or f"{share:.3f} is {direction(share, expected)}")


@check("lost work per failure", "the run's lost_work bucket divided by its failures")
def check_lost_per_failure(answer_s: Any, result: RunResult) -> CheckResult:
    """Exercise 4: seconds of compute each failure threw away, on average, in one run."""
    name = check_lost_per_failure.check_name
    answer = as_number(answer_s, "seconds")
    failures = result.summary["failures"]
    lost = result.buckets[C.LOST_WORK]
    if failures == 0:
        ok = near(answer, 0.0, 0, 1e-9)
        return CheckResult(name, ok, "no failure in this run, so nothing was lost" if ok else "this run had no failure: nothing was lost")
    expected = lost / failures
    if near(answer, expected, 0.01, 1e-6):
        return CheckResult(name, True, f"{answer:.2f} s of compute per failure")
    mistake = diagnose(answer, [
        (lost, "that is the total; divide by the number of failures"),
        (lost / result.summary["attempts"], "that divides by the attempts; there is one attempt more than there are failures"),
        (lost / max(1, result.summary["checkpoints"]), "that divides by the checkpoints; the question is per failure"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{answer:g} s is {direction(answer, expected)}: result.buckets['lost_work'] / failures")


@check("the best interval of the sweep", "compare the goodput of the runs")
def check_best_interval(answer: Any, runs: Mapping[int, RunResult]) -> CheckResult:
    """Exercise 5: which checkpoint interval of the measured sweep gave the highest goodput."""
    name = check_best_interval.check_name
    every = as_whole(answer, "a checkpoint interval in steps")
    if every not in runs:
        return CheckResult(name, False, f"{every} is not one of the swept intervals ({', '.join(map(str, runs))})")
    best = max(runs, key=lambda k: runs[k].goodput)
    if every == best:
        return CheckResult(name, True, f"every {every} steps: goodput {runs[every].goodput:.1%}")
    least_lost = min(runs, key=lambda k: runs[k].buckets[C.LOST_WORK])
    least_saving = min(runs, key=lambda k: runs[k].buckets[C.CHECKPOINT_SAVE])
    if every == least_lost:
        return CheckResult(name, False, "that run lost the least work, but lost work is not all: saves and restarts count too")
    if every == least_saving:
        return CheckResult(name, False, "that run saved least, but lost more work to its failures: look at goodput itself")
    return CheckResult(name, False, f"every {every} steps gave {runs[every].goodput:.1%}; another interval did better")
