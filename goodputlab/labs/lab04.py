"""Checks of Lab 4, "Cheap checkpoints" (``labs/04_cheap_checkpoints.ipynb``).

What a save blocks, measured on the strategies' runs (real, or the recorded ones); where the
memory strategy's checkpoints went; which half of a save must block; and how a cheaper save
moves Daly's optimum at cluster scale.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Mapping

from ..measure import events as E
from ..theory.closed_forms import daly_interval, young_interval
from .checks import CheckResult, as_choice, as_number, as_whole, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult

CLUSTER_MTBF_S = 86400 / 8.6  # the worked example: 8.6 interruptions a day


def save_durations_s(result: RunResult) -> list[float]:
    """The blocking time of every save of a run (``ckpt_save`` phases), seconds, in order."""
    return [seg.duration for seg in result.ledger.segments if seg.kind == E.W_CKPT_SAVE]


def typical_save_s(result: RunResult) -> float:
    """The median blocking time of a save, leaving out the run's final save (it waits until durable)."""
    durations = save_durations_s(result)
    return statistics.median(durations[:-1] if len(durations) > 1 else durations)


@check("a sync save", "the median duration of the ckpt_save phases (leave out the last, final save), in ms")
def check_sync_save_ms(answer_ms: Any, result: RunResult) -> CheckResult:
    """Exercise 1: the typical blocking time of a sync save, in milliseconds."""
    name = check_sync_save_ms.check_name
    value = as_number(answer_ms, "milliseconds")
    expected = 1000 * typical_save_s(result)
    if near(value, expected, 0.10):
        return CheckResult(name, True, f"about {value:.0f} ms of training stopped per save")
    durations = save_durations_s(result)
    mistake = diagnose(value, [
        (1000 * sum(durations), "that is every save together; the question is one typical save"),
        (expected / 1000, "that looks like seconds: give milliseconds"),
    ], 0.10)
    return CheckResult(name, False, mistake or f"{value:g} ms is {direction(value, expected)}: what blocks is the ckpt_save phase, until the next phase")


@check("async against sync", "the typical sync save divided by the typical async save")
def check_speedup(answer: Any, runs: Mapping[str, RunResult]) -> CheckResult:
    """Exercise 2: how many times less an async save blocks training than a sync save."""
    name = check_speedup.check_name
    value = as_number(answer, "a ratio")
    expected = typical_save_s(runs["sync"]) / typical_save_s(runs["async"])
    if near(value, expected, 0.10):
        return CheckResult(name, True, f"an async save blocks about {value:.0f} times less: it only copies the state")
    totals = runs["sync"].buckets["checkpoint_save"] / runs["async"].buckets["checkpoint_save"]
    mistake = diagnose(value, [
        (1 / expected, "upside down: sync over async, so the answer says how many times cheaper async is"),
        (totals, "that compares the runs' totals, whose final save waits for the disk in both; compare typical saves"),
    ], 0.10)
    return CheckResult(name, False, mistake or f"{value:g} is {direction(value, expected)}")


@check("the memory strategy's disk copies", "count the ckpt_commit markers whose tier includes the disk")
def check_disk_commits(answer: Any, result: RunResult) -> CheckResult:
    """Exercise 3: how many of the memory strategy's checkpoints reached the disk."""
    name = check_disk_commits.check_name
    value = as_whole(answer, "checkpoints", 0)
    commits = [e for e in result.events if e["kind"] == E.M_CKPT_COMMIT]
    expected = sum("disk" in str(e.get("tier", "")) for e in commits)
    if value == expected:
        return CheckResult(name, True, f"{value} of {len(commits)} checkpoints reached the disk; the rest lived in RAM only")
    if value == len(commits):
        return CheckResult(name, False, "that counts every checkpoint; most lived only in the RAM tier")
    if value == sum(e.get("tier") == "disk" for e in commits):
        return CheckResult(name, False, "look at the tier names: 'memory+disk' reached the disk too")
    return CheckResult(name, False, f"{value} is {direction(value, expected)}: each commit marker names its tier")


@check("what must block", "one of 'snapshot' or 'persist'")
def check_blocking_half(answer: Any) -> CheckResult:
    """Exercise 4: which half of a save training must wait for."""
    name = check_blocking_half.check_name
    half = as_choice(answer, ("snapshot", "persist"), "the half of a save")
    if half == "snapshot":
        return CheckResult(name, True, "the snapshot: a step taken during the copy would mix two steps in one checkpoint")
    return CheckResult(name, False, "writing to storage can run in the background; what would go wrong if training moved on during the *copy*?")


@check("the async optimum at cluster scale", "gl.daly_interval(save_s, mtbf_s), in minutes")
def check_async_optimum_min(answer_min: Any, save_s: float = 10.0, sync_save_s: float = 300.0,
                            mtbf_s: float = CLUSTER_MTBF_S) -> CheckResult:
    """Exercise 5: Daly's optimal interval in minutes for a 10-s async snapshot at 8.6 failures a day."""
    name = check_async_optimum_min.check_name
    value = as_number(answer_min, "minutes")
    expected = daly_interval(save_s, mtbf_s) / 60
    if near(value, expected, 0.03) or near(value, young_interval(save_s, mtbf_s) / 60, 0.03):
        return CheckResult(name, True, f"about {value:.1f} minutes, against {daly_interval(sync_save_s, mtbf_s) / 60:.0f} for a 5-minute sync save")
    mistake = diagnose(value, [
        (daly_interval(sync_save_s, mtbf_s) / 60, "that is the optimum for the 5-minute *sync* save; the async snapshot takes 10 s"),
        (expected * 60, "that looks like seconds: give minutes"),
    ], 0.03)
    return CheckResult(name, False, mistake or f"{value:g} minutes is {direction(value, expected)}")
