"""Checks of Lab 11, "In-job recovery" (``labs/11_in_job_recovery.ipynb``).

A torchft run's books by hand (the job's ``degraded`` seconds from each replica's), the share of the
time a replica group is away at Llama 3's rate, the closed form's goodput of in-job recovery, the
progress of a degraded step at torchft's fixed learning rate (McCandlish et al.'s model, chapter 8;
:func:`goodputlab.theory.in_job_costs.degraded_step_progress`), and the fewest replica groups with
which the simulated job never restarts as a whole. Every check runs in milliseconds: the run is a recording
(or a run the lab made), the rest theory.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ..categories import DEGRADED
from ..theory import in_job, in_job_costs
from ..theory.cluster import LLAMA3_DURATION_S, LLAMA3_GPUS, LLAMA3_INTERRUPTIONS, device_mtbf_for_count
from ..theory.sim_config import SimConfig
from .checks import CheckResult, as_number, as_share, as_whole, check, diagnose, direction, near

#: Exercises 2 and 3: a failed group relaunches in 5 minutes and heals in one; checkpoints every 10
#: minutes with a 5 s blocking save (the chapter's Llama 3 job)
RELAUNCH_S, HEAL_S, INTERVAL_S, BLOCKING_S, PERSIST_S = 300.0, 60.0, 600.0, 5.0, 60.0


def llama3_rate_per_s() -> float:
    """Llama 3's job failure rate: 466 interruptions in 54 days, per second."""
    return LLAMA3_INTERRUPTIONS / LLAMA3_DURATION_S


def llama3_in_job(groups: int, trials: int = 100, seed: int = 0) -> SimConfig:
    """The chapter's Llama 3 job with in-job recovery in ``groups`` replica groups (a relaunch in
    ``RELAUNCH_S``, a heal in ``HEAL_S``, async saves every ``INTERVAL_S``)."""
    return SimConfig(devices=LLAMA3_GPUS, device_mtbf_s=device_mtbf_for_count(LLAMA3_GPUS, LLAMA3_DURATION_S, LLAMA3_INTERRUPTIONS),
                     duration_s=LLAMA3_DURATION_S, interval_s=INTERVAL_S, save_s=PERSIST_S, save_blocking_s=BLOCKING_S,
                     restore_s=60.0, restart_s=RELAUNCH_S, recovery="in-job", replica_groups=groups, heal_s=HEAL_S,
                     trials=trials, seed=seed)


@check("the job's degraded seconds", "the mean over the replicas of each one's degraded seconds (summary['replicas'])")
def check_job_degraded_s(answer_s: Any, summary: Mapping[str, Any]) -> CheckResult:
    """Exercise 1: a torchft run's ``degraded`` bucket from its replicas' own books, in seconds."""
    name = check_job_degraded_s.check_name
    value = as_number(answer_s, "seconds")
    replicas = summary["replicas"]
    own = [r[DEGRADED] for r in replicas.values()]
    expected = sum(own) / len(own)
    if near(value, expected, 0.005):
        return CheckResult(name, True, f"{value:.2f} s: each of the {len(own)} replica groups is 1/{len(own)} of the job, "
                                       f"so its time away counts for that share")
    mistake = diagnose(value, [
        (sum(own), f"that adds the replicas' seconds; each replica is one of {len(own)} equal shares of the job: take the mean"),
        (expected / summary["wall_s"], "that is a share of the wall time; the question asks for seconds"),
        (max(own), "that is the replica that was away longest alone; the job's bucket is the mean over every replica"),
    ], 0.005)
    return CheckResult(name, False, mistake or f"{value:.2f} s is {direction(value, expected)}")


def away_share(groups: int) -> float:
    """A group's share of the time away at Llama 3's rate: ``1 - exp(-lambda (R + H) / G)``."""
    return in_job.away_share(llama3_rate_per_s() / groups, RELAUNCH_S + HEAL_S)


@check("a group's time away", "1 - exp(-lambda W / G): each group is hit at lambda / G and away W = relaunch + heal")
def check_away_share(answer: Any, groups: int = 8) -> CheckResult:
    """Exercise 2: the share of the time one of ``groups`` replica groups is away (a share)."""
    name = check_away_share.check_name
    value = as_share(answer, "a share of the time")
    lam, w = llama3_rate_per_s(), RELAUNCH_S + HEAL_S
    expected = away_share(groups)
    if near(value, expected, 0.001):
        return CheckResult(name, True, f"{value:.3%} of the time: each group is hit once every "
                                       f"{groups / lam / 3600:.1f} hours and away {w / 60:.0f} minutes")
    mistake = diagnose(value, [
        (1 - math.exp(-lam * w), f"that is the job's whole failure rate; each of the {groups} groups is hit at lambda / G"),
        (1 - math.exp(-lam * HEAL_S / groups), "that counts only the heal; a group is away from its failure: the relaunch too"),
        (1 - math.exp(-lam * RELAUNCH_S / groups), "that counts only the relaunch; the heal keeps the group away too"),
        (lam * w / groups, "close: that is the first-order lambda W / G; the share is 1 - exp(-lambda W / G)"),
    ], 0.001)
    return CheckResult(name, False, mistake or f"{value:.5f} is {direction(value, expected)}")


@check("in-job goodput, the closed form", "(1 - q) x tau / (tau + blocking save): the groups that train, times the checkpoint cycle's share")
def check_in_job_goodput(answer: Any, groups: int = 8) -> CheckResult:
    """Exercise 3: the closed form's goodput of the Llama 3 job with ``groups`` replica groups (a share)."""
    name = check_in_job_goodput.check_name
    value = as_share(answer, "a share of the wall time")
    expected = in_job.predict(llama3_in_job(groups)).goodput
    q = away_share(groups)
    cycle = INTERVAL_S / (INTERVAL_S + BLOCKING_S)
    if near(value, expected, 2e-4):
        return CheckResult(name, True, f"{value:.3%}: {q:.2%} of the groups away, {1 - cycle:.2%} of the time saving")
    mistake = diagnose(value, [
        (1 - q, "that leaves out the checkpoint saves; the groups that train still block for every save"),
        (cycle, "that is the saves alone; the groups away (q) do not train either"),
        ((1 - q) * INTERVAL_S / (INTERVAL_S + PERSIST_S), "that blocks for the whole persist; an async save blocks only its snapshot (5 s)"),
    ], 2e-4)
    return CheckResult(name, False, mistake or f"{value:.5f} is {direction(value, expected)}")


def degraded_gain(noise_ratio: float, survivors: int, groups: int, learning_rate: str = "fixed") -> float:
    """The full steps of progress one step on ``survivors`` of ``groups`` groups' batch makes, the gradient
    noise scale ``noise_ratio`` times the full batch.

    ``learning_rate="fixed"`` (torchft: the gradients averaged over the groups that took part, the learning
    rate kept): ``2 - (1 + B_noise/B) / (1 + B_noise/B0)``; ``"retuned"``: the step at its own batch's best
    learning rate, AdaScale's gain ``(B/B0)(B_noise + B0)/(B_noise + B)``
    (:func:`goodputlab.theory.in_job_costs.degraded_step_progress`)."""
    return 1.0 - in_job_costs.degraded_steps_cost(1.0, survivors, groups, noise_ratio, learning_rate)


@check("a degraded step's progress", "at the full batch's learning rate, 2 - (1 + B_noise/B)/(1 + B_noise/B0) full steps "
       "(McCandlish et al.'s model): torchft keeps the learning rate")
def check_degraded_gain(answer: Any, noise_ratio: float = 2.0, survivors: int = 1, groups: int = 2) -> CheckResult:
    """Exercise 4: the progress of a step on ``survivors`` of ``groups`` groups at torchft's fixed learning rate,
    in full steps."""
    name = check_degraded_gain.check_name
    value = as_number(answer, "full steps of progress")
    expected = degraded_gain(noise_ratio, survivors, groups)
    small = survivors / groups
    if near(value, expected, 0.005):
        words = "less" if expected < small else "more"
        return CheckResult(name, True, f"{value:.3f} of a full step, {words} than the batch ratio {small:g}: at the full "
                                       "batch's learning rate the smaller batch's noisier gradient costs progress")
    mistake = diagnose(value, [
        (degraded_gain(noise_ratio, survivors, groups, "retuned"),
         "that is AdaScale's gain, the step at its own batch's best learning rate; torchft keeps the full batch's rate"),
        (small, "that is the batch ratio B / B0: true only when the learning rate is tuned for it and the gradient is "
                "all noise; use the noise scale"),
        (1 - expected, "that is what the step loses; the question asks for the progress it makes"),
    ], 0.005)
    return CheckResult(name, False, mistake or f"{value:.3f} is {direction(value, expected)}")


@check("groups that never restart the job", "the fewest replica groups whose simulated job_restarts_mean is 0")
def check_fewest_groups(answer: Any, rows: Sequence[Mapping[str, Any]]) -> CheckResult:
    """Exercise 5: from :func:`goodputlab.theory.sweep_rows`, the fewest groups with no whole-job restart."""
    name = check_fewest_groups.check_name
    value = as_whole(answer, "replica groups", 1)
    in_job_rows = sorted((r for r in rows if r["recovery"] == "in-job"), key=lambda r: r["replica_groups"])
    never = [r["replica_groups"] for r in in_job_rows if r["job_restarts_mean"] == 0]
    if not never:
        return CheckResult(name, False, "every simulated setting still restarts the job: simulate more groups")
    expected = never[0]
    if value == expected:
        return CheckResult(name, True, f"{value} groups: a whole-job restart needs all {value} away at once")
    if value in [r["replica_groups"] for r in in_job_rows] and value < expected:
        return CheckResult(name, False, f"with {value} groups the job still restarts as a whole (read job_restarts_mean)")
    if value > expected:
        return CheckResult(name, False, f"{value} groups never restart, but fewer already do not: the question asks for the fewest")
    return CheckResult(name, False, f"{value} is not one of the simulated settings; read the table")

