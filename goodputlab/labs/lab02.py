"""Checks of Lab 2, "Failures at scale" (``labs/02_failures_at_scale.ipynb``).

Pure theory and the simulator: Llama 3's public figures turned into a per-GPU MTBF,
the 1/N law, the chance of a failure in a day, the restart budget for 90% goodput,
and the simulator's breakdown.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..categories import CATEGORIES, PRODUCTIVE
from ..theory import cluster as T
from ..theory.closed_forms import daly_goodput, expected_goodput
from .checks import CheckResult, as_choice, as_number, as_share, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..theory.sim_config import SimResult

YEAR_S = 365 * T.SECONDS_PER_DAY
HOUR_S = 3600.0


def device_mtbf_s(interruptions: int = T.LLAMA3_INTERRUPTIONS) -> float:
    """Llama 3's per-GPU MTBF in seconds: GPUs x duration / interruptions."""
    return T.device_mtbf_for_count(T.LLAMA3_GPUS, T.LLAMA3_DURATION_S, interruptions)


@check("per-GPU MTBF", "GPU-seconds of the snapshot divided by the interruptions, in years")
def check_device_mtbf(answer_years: Any) -> CheckResult:
    """Exercise 1: the MTBF of one GPU, in years, from all 466 interruptions on 16,384 GPUs in 54 days."""
    name = check_device_mtbf.check_name
    answer = as_number(answer_years, "years")
    expected = device_mtbf_s() / YEAR_S
    if near(answer, expected, 0.01):
        return CheckResult(name, True, f"{answer:.2f} years: one GPU is very reliable")
    mistake = diagnose(answer, [
        (T.LLAMA3_DURATION_S / T.LLAMA3_INTERRUPTIONS / YEAR_S,
         "that is the time between the *job's* interruptions; each of the 16,384 GPUs fails 16,384 times less often"),
        (device_mtbf_s(T.LLAMA3_UNEXPECTED_INTERRUPTIONS) / YEAR_S,
         "that counts only the 419 unexpected interruptions; the exercise counts all 466 (planned ones stop the job too)"),
        (expected * 365 * 24, "that looks like hours: the exercise asks for years"),
        (expected * 365, "that looks like days: the exercise asks for years"),
        (expected * YEAR_S, "that looks like seconds: the exercise asks for years"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{answer:g} years is {direction(answer, expected)}: GPUs x duration / interruptions")


@check("job MTBF of 4,096 GPUs", "the 1/N law: a job of N devices fails N times as often as one device")
def check_job_mtbf(answer_hours: Any, devices: int = 4096) -> CheckResult:
    """Exercise 2: the job's MTBF in hours for ``devices`` GPUs of Llama 3's reliability."""
    name = check_job_mtbf.check_name
    answer = as_number(answer_hours, "hours")
    expected = T.cluster_mtbf(devices, device_mtbf_s()) / HOUR_S
    if near(answer, expected, 0.01):
        return CheckResult(name, True, f"{answer:.2f} hours between failures on {devices:,} GPUs")
    mistake = diagnose(answer, [
        (device_mtbf_s() * devices / HOUR_S, "more devices fail *more* often: divide the device MTBF by N, do not multiply"),
        (T.cluster_mtbf(T.LLAMA3_GPUS, device_mtbf_s()) / HOUR_S,
         f"that is the MTBF of Llama 3's 16,384 GPUs; this job has {devices:,}"),
        (expected * 60, "that looks like minutes: the exercise asks for hours"),
        (expected * HOUR_S, "that looks like seconds: the exercise asks for hours"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{answer:g} hours is {direction(answer, expected)}: device MTBF / N")


@check("a failure within a day on 1,024 GPUs", "independent Poisson failures: P(none in T) = exp(-N T / M)")
def check_p_fail_day(answer: Any, devices: int = 1024) -> CheckResult:
    """Exercise 3: the probability that at least one of ``devices`` GPUs fails within a day."""
    name = check_p_fail_day.check_name
    x = devices * T.SECONDS_PER_DAY / device_mtbf_s()
    p = as_share(answer, "a probability")
    expected = T.p_any_failure(devices, device_mtbf_s(), T.SECONDS_PER_DAY)
    if near(p, expected, 0.01):
        return CheckResult(name, True, f"{p:.1%}: a 1,024-GPU job fails on almost half of its days")
    mistake = diagnose(p, [
        (x, "that is the expected *number* of failures in a day (N x day / M); the chance of at least one is 1 - exp(-that)"),
        (math.exp(-x), "that is the chance that *no* GPU fails; the question asks for at least one"),
        (1 - math.exp(-T.LLAMA3_GPUS * T.SECONDS_PER_DAY / device_mtbf_s()), "that is for 16,384 GPUs; this job has 1,024"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{p:.3f} is {direction(p, expected)}: 1 - exp(-N x day / device MTBF)")


def restart_budget_s(goodput: float = 0.9, interval_s: float = 600.0, save_s: float = 5.0, model=daly_goodput) -> float:
    """The longest restart (seconds) that keeps ``model``'s goodput at ``goodput`` at Llama 3's failure rate."""
    mtbf = T.cluster_mtbf(T.LLAMA3_GPUS, device_mtbf_s())
    lo, hi = 0.0, 10 * mtbf
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if model(interval_s, save_s, mid, mtbf) >= goodput else (lo, mid)
    return lo


@check("restart budget for 90%", "try restart times in daly_goodput(600, 5, R, job MTBF) until it drops below 0.9")
def check_restart_budget(answer_min: Any) -> CheckResult:
    """Exercise 4: the longest restart, in minutes, that keeps Daly's goodput at 90% (10-minute checkpoints, 5-s saves)."""
    name = check_restart_budget.check_name
    answer = as_number(answer_min, "minutes")
    expected = restart_budget_s() / 60
    if near(answer, expected, 0.03):
        return CheckResult(name, True, f"about {answer:.1f} minutes: detection, rescheduling and reload must fit in that")
    mistake = diagnose(answer, [
        (restart_budget_s(model=expected_goodput) / 60,
         "that is what the first-order model allows; use Daly's (gl.daly_goodput), which also charges failures during restarts"),
        (expected * 60, "that looks like seconds: the exercise asks for minutes"),
    ], 0.03)
    return CheckResult(name, False, mistake or f"{answer:g} minutes is {direction(answer, expected)}")


@check("the biggest waste", "look at the simulated breakdown: which category after productive holds the most time?")
def check_biggest_waste(answer: Any, sim: SimResult) -> CheckResult:
    """Exercise 5: the waste category that costs the simulated run the most time."""
    name = check_biggest_waste.check_name
    category = as_choice(answer, CATEGORIES, "a ledger category")
    buckets = sim.buckets
    waste = {c: s for c, s in buckets.items() if c != PRODUCTIVE}
    expected = max(waste, key=waste.get)
    hours = {c: s / HOUR_S for c, s in buckets.items()}
    if category == expected:
        return CheckResult(name, True, f"{category}: {hours[category]:,.0f} of the job's {sim.config.duration_s / HOUR_S:,.0f} hours")
    if category == PRODUCTIVE:
        return CheckResult(name, False, "productive is the useful part; which *waste* category is biggest?")
    return CheckResult(name, False, f"{category} holds {hours[category]:,.0f} hours; another waste category holds more")
