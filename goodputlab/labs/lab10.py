"""Checks of Lab 10, "Your cluster" (``labs/10_your_cluster.ipynb``).

The capstone's model (:mod:`goodputlab.theory.capstone`) by hand: a checkpoint's
size from bytes per parameter, its save time from the storage bandwidth, what one
lever is worth in GPU-hours a day, the effective training time ratio (ETTR) against
goodput, and the lab's measured save read in the cluster's units (the ratio that
carries over). Pure theory: every check runs in milliseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..categories import CHECKPOINT_RESTORE, DATA_WAIT, LOST_WORK, PRODUCTIVE, RESTART
from ..theory import capstone as cap
from ..theory import claim as claims
from ..theory.checkpoint_cost import bytes_per_parameter, checkpoint_cost
from .checks import CheckResult, as_choice, as_number, as_share, as_written, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..theory.capstone import ClusterResult

TB = 1e12
HOURS_PER_DAY = 24.0


@check("checkpoint size", "parameters x the bytes per parameter a checkpoint keeps (weights, master copy, optimizer), in TB")
def check_checkpoint_tb(answer_tb: Any, parameters: float = 70e9, precision: str = "bf16", optimizer: str = "adam") -> CheckResult:
    """Exercise 1: the checkpoint of a ``parameters`` model in mixed precision with Adam, in terabytes."""
    name = check_checkpoint_tb.check_name
    value = as_number(answer_tb, "terabytes")
    state = bytes_per_parameter(precision, optimizer)
    expected = parameters * state.checkpoint / TB
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"{value:.2f} TB: {state.checkpoint:.0f} bytes for each of the parameters")
    mistake = diagnose(value, [
        (parameters * state.in_memory / TB, "that counts the gradients too; a checkpoint leaves them out (they are recomputed)"),
        (parameters * state.weights / TB, "that is the bf16 weights alone; resuming training also needs the master copy and Adam's moments"),
        (parameters * (state.weights + state.optimizer) / TB, "close: the fp32 master copy of the weights is saved too"),
        (expected * 1000, "that looks like gigabytes: give terabytes"),
        (expected * TB, "that looks like bytes: give terabytes"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:g} TB is {direction(value, expected)}: count the bytes per parameter a checkpoint keeps")


@check("save time", "the whole checkpoint at the storage system's aggregate bandwidth, in seconds")
def check_save_s(answer_s: Any, parameters: float = 70e9, gpus: int = 2048, storage_bps: float = 2e11) -> CheckResult:
    """Exercise 2: the synchronous save of that checkpoint, sharded over ``gpus`` ranks, in seconds."""
    name = check_save_s.check_name
    value = as_number(answer_s, "seconds")
    cost = checkpoint_cost(parameters, gpus, storage_bps)
    expected = cost.write_s
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"{value:.1f} s: {gpus:,} ranks write {cost.rank_bytes / 1e6:.0f} MB each, together")
    in_memory = parameters * cost.state.in_memory / storage_bps
    mistake = diagnose(value, [
        (cost.rank_bytes / storage_bps, "that is one rank's share at the whole system's bandwidth; all the ranks share it, so the save takes as long as the whole checkpoint needs"),
        (in_memory, "that writes the gradients too; a checkpoint keeps 14 bytes per parameter, not 16"),
        (expected / 60, "that looks like minutes: give seconds"),
        (8 * expected, "that reads the bandwidth as bits per second; 200 GB/s is bytes"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:g} s is {direction(value, expected)}: checkpoint bytes / aggregate bandwidth")


@check("a faster restart, in GPU-hours a day", "GPU-hours lost a day at the defaults minus with the faster restart (cap.evaluate(...).figures())")
def check_lever_gpu_hours(answer: Any, base: ClusterResult, changed: ClusterResult) -> CheckResult:
    """Exercise 3: the GPU-hours a day a lever saves: ``base`` lost minus ``changed`` lost."""
    name = check_lever_gpu_hours.check_name
    value = as_number(answer, "GPU-hours a day")
    gpus = base.scenario.gpus
    expected = base.gpu_hours_lost_per_day - changed.gpu_hours_lost_per_day
    if near(value, expected, 0.02):
        money = expected * base.scenario.price_per_gpu_hour
        return CheckResult(name, True, f"about {value:,.0f} GPU-hours a day, {money:,.0f} a day at "
                                       f"{base.scenario.price_per_gpu_hour:.2f} per GPU-hour: worth engineering for")
    mistake = diagnose(value, [
        (changed.gpu_hours_lost_per_day, "that is what is still lost with the faster restart; the lever is worth the *difference* from the defaults"),
        (base.gpu_hours_lost_per_day, "that is what the defaults lose; subtract what is lost with the faster restart"),
        (expected / HOURS_PER_DAY, "that looks like GPU-days: a GPU-day is 24 GPU-hours"),
        (changed.goodput - base.goodput, "that is the change of goodput, a share; multiply by the GPUs and 24 hours to get GPU-hours a day"),
        (expected / gpus, f"that is per GPU; the question asks for the whole cluster of {gpus:,} GPUs"),
    ], 0.02)
    if value < 0:
        return CheckResult(name, False, "negative: the subtraction is the wrong way round (the defaults' loss minus the loss with the lever)")
    return CheckResult(name, False, mistake or f"{value:,.0f} GPU-hours a day is {direction(value, expected)}")


@check("ETTR with data stalls", "1 - the shares of lost_work, restart and checkpoint_restore in result.breakdown, unrounded")
def check_ettr(answer: Any, result: ClusterResult) -> CheckResult:
    """Exercise 4: Meta's effective training time ratio from a scenario's breakdown (a share)."""
    name = check_ettr.check_name
    value = as_share(answer, "a share of the wall time")
    b = result.breakdown
    expected = result.ettr
    if near(value, expected, 1e-6):
        return CheckResult(name, True, f"{value:.1%} against a goodput of {result.goodput:.1%}: "
                                       f"ETTR counts the {b[DATA_WAIT]:.1%} of data waits as training")
    mistake = diagnose(value, [
        (b[PRODUCTIVE], "that is the goodput (the productive share); ETTR counts everything but failures' costs as training"),
        (expected - b[DATA_WAIT], "that charges the data waits; ETTR counts a step waiting for its batch as training time"),
        (1 - b[LOST_WORK], "that leaves out only the lost work; the restarts and the restores are failure costs too"),
        (1 - b[LOST_WORK] - b[RESTART], "close: the restore after each restart is a failure cost too"),
        (1 - b[CHECKPOINT_RESTORE] - b[RESTART], "close: the work lost since the last checkpoint is a failure cost too"),
    ], 1e-6)
    if mistake is None and near(value, expected, 0.005):
        mistake = f"{value:.4f} is close but not exact: compute it from result.breakdown without rounding"
    return CheckResult(name, False, mistake or f"{value:.4f} is {direction(value, expected)}")


@check("the lab's save at the cluster's MTBF", "keep the ratio save / MTBF: lab save / lab MTBF x the cluster's MTBF, in seconds")
def check_lab_save_at_cluster(answer_s: Any, lab_save_s: float, lab_mtbf_s: float, cluster: ClusterResult) -> CheckResult:
    """Exercise 5: the save (seconds) that has the lab's ratio save / MTBF at the cluster's job MTBF."""
    name = check_lab_save_at_cluster.check_name
    value = as_number(answer_s, "seconds")
    m = cluster.scenario.job_mtbf_s
    ratio = lab_save_s / lab_mtbf_s
    expected = ratio * m
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"{value:.0f} s: the lab's save is {value / cluster.blocking_s:.0f} times the "
                                       f"cluster's {cluster.blocking_s:.1f} s, in the units that decide goodput")
    mistake = diagnose(value, [
        (ratio, "that is the ratio save / MTBF itself; multiply it by the cluster's MTBF to get seconds"),
        (ratio * m / 3600, "that used the cluster's MTBF in hours: the answer is in seconds"),
        (cluster.blocking_s, "that is the cluster's own save; the question is what the lab's save becomes at the cluster's MTBF"),
        (lab_save_s * m / lab_mtbf_s / 60, "that looks like minutes: give seconds"),
        (lab_mtbf_s / lab_save_s * m, "upside down: the ratio is save / MTBF"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:g} s is {direction(value, expected)}: lab save / lab MTBF x cluster MTBF")


#: Exercise 6's claim, as chapter 10 quotes it: "RAM-tier checkpoints took our goodput from 85% to 95% on 8,192 GPUs"
CLAIM = dict(lever="memory", before=0.85, after=0.95, gpus=8192)


@check("what the claim implies about storage", "the storage bandwidth the claim needs (gl.theory.claim.explain), per GPU, in MB/s")
def check_claim_storage(answer_mbps: Any, lever: str = CLAIM["lever"], before: float = CLAIM["before"],
                        after: float = CLAIM["after"], gpus: int = CLAIM["gpus"]) -> CheckResult:
    """Exercise 6: the storage bandwidth per GPU (MB/s) under which the claim holds, by the capstone's model inverted."""
    name = check_claim_storage.check_name
    value = as_number(answer_mbps, "MB/s per GPU")
    claim = claims.explain(lever, before, after, gpus)
    implied = claim.implied
    expected = implied["storage_per_gpu_mbps"]
    if as_written(value, expected, 0.02):
        return CheckResult(name, True, f"{value:.3g} MB/s per GPU ({implied['storage_gbps']:.3g} GB/s for all {gpus:,}): "
                                       f"the claim's 'before' needs storage that slow to lose that much to saves")
    mistake = diagnose(value, [
        (implied["storage_gbps"], "that is the whole cluster's bandwidth in GB/s; the question asks per GPU, in MB/s"),
        (1000 * implied["storage_gbps"], f"that is the whole cluster's bandwidth; divide by its {gpus:,} GPUs"),
        (expected / 1000, "that looks like GB/s per GPU: give MB/s"),
        (implied["save_s"], "that is the implied synchronous save, in seconds, not a bandwidth"),
    ], 0.02)
    return CheckResult(name, False, mistake or f"{value:g} MB/s per GPU is {direction(value, expected)}: read "
                                               "implied['storage_per_gpu_mbps'] of the claim's explanation")


@check("is the claim plausible?", "'plausible' or 'implausible': the implied values against the published ranges (claim.checks)")
def check_claim_verdict(answer: Any, lever: str = CLAIM["lever"], before: float = CLAIM["before"],
                        after: float = CLAIM["after"], gpus: int = CLAIM["gpus"]) -> CheckResult:
    """Exercise 6: whether the values the claim needs fall within the published ranges."""
    name = check_claim_verdict.check_name
    value = as_choice(answer, ("plausible", "implausible"), "the verdict")
    claim = claims.explain(lever, before, after, gpus)
    if (value == "plausible") == claim.plausible:
        return CheckResult(name, True, f"{value}: " + ("every implied value is within its published range" if claim.plausible
                                                       else claim.reasons[0]))
    wrong = [c for c in claim.checks if not c.plausible]
    if value == "plausible":
        return CheckResult(name, False, "a plausible failure rate is not enough: hold every implied value against its "
                                        f"published range ({', '.join(c.range.quantity for c in wrong)} among them)")
    return CheckResult(name, False, "every implied value falls within its published range, widened "
                                    f"{claims.TOLERANCE:g} times each way: look at claim.checks again")


def llama3(**changes: Any) -> ClusterResult:
    """Llama 3 405B's scenario (the chapter's defaults) with ``changes``, at its optimal interval."""
    return cap.evaluate(cap.ClusterScenario(**changes))
