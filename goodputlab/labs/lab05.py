"""Checks of Lab 5, "The input pipeline" (``labs/05_input_pipeline.ipynb``).

The steady-state stall model, the workers a pipeline needs, the data-wait share of a
measured training loop (real runs, or the recorded ones), and what depth costs in memory.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..theory import data_stall as stall
from .checks import CheckResult, as_number, as_share, as_whole, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult

MB = 1e6


@check("wait per step with 2 workers", "max(t_hand, (t_io + t_cpu + t_read) / W - t_step): the workers load while the step computes")
def check_wait_ms(answer_ms: Any, load_ms: float, transform_ms: float, read_ms: float, step_ms: float, handoff_ms: float,
                  workers: int) -> CheckResult:
    """Exercise 1: the steady-state data wait per step, in milliseconds (no jitter)."""
    name = check_wait_ms.check_name
    answer = as_number(answer_ms, "milliseconds")
    expected = 1000 * stall.steady_state_wait_s(load_ms / 1000, transform_ms / 1000, workers, step_ms / 1000,
                                                  read_s=read_ms / 1000, handoff_s=handoff_ms / 1000)
    per_batch = load_ms + transform_ms + read_ms
    if near(answer, expected, 0.01, 1e-3):
        return CheckResult(name, True, f"{answer:.1f} ms per step: the supply is below the step's appetite, so it waits")
    mistake = diagnose(answer, [
        (per_batch / workers, "that is how often the workers deliver a batch; the step computes meanwhile: subtract its time"),
        (per_batch, "that is the wait with no workers; with W workers each batch takes (t_io + t_cpu + t_read) / W of the loop's time"),
        (per_batch / workers - step_ms - handoff_ms, "the hand-off is a floor on the wait, not part of the difference"),
        ((load_ms + transform_ms) / workers - step_ms, "close: the worker also reads the batch from memory (t_read)"),
        (expected / 1000, "that looks like seconds: give milliseconds"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{answer:g} ms is {direction(answer, expected)}")


@check("workers needed", "the smallest W with W x t_step / (t_io + t_cpu + t_read) >= 1.2, a whole number")
def check_workers(answer: Any, load_ms: float, transform_ms: float, read_ms: float, step_ms: float, headroom: float = 1.2) -> CheckResult:
    """Exercise 2: the fewest loader workers whose supply is ``headroom`` times the step's appetite."""
    name = check_workers.check_name
    ratio = (load_ms + transform_ms + read_ms) / step_ms
    expected = stall.workers_needed(load_ms / 1000, transform_ms / 1000, step_ms / 1000, read_s=read_ms / 1000, headroom=headroom)
    value = as_number(answer, "workers")
    if value != int(value):
        near_what = " (that is W before rounding: workers come whole, round up)" if near(value, headroom * ratio, 0.01) else ""
        return CheckResult(name, False, f"{value:g} is not a whole number of workers{near_what}")
    workers = as_whole(value, "workers", 0)
    if workers == expected:
        return CheckResult(name, True, f"{workers} workers supply {workers / ratio:.2f}x the step's appetite")
    if workers == math.ceil(ratio):
        return CheckResult(name, False, f"{workers} workers just keep pace ({workers / ratio:.2f}x); leave headroom for jitter: 1.2x")
    if workers == math.floor(headroom * ratio):
        return CheckResult(name, False, "rounded down: that supply is below 1.2x; round up")
    return CheckResult(name, False, f"{workers} is {direction(workers, expected)}: supply = W x t_step / (t_io + t_cpu + t_read)")


@check("data-wait share of the loop", "data wait over the training loop's time (data wait + compute + bookkeeping)")
def check_wait_share(answer: Any, result: RunResult) -> CheckResult:
    """Exercise 3: the share of a run's training loop spent waiting for data, from its ledger."""
    from ..experiments.data_stall import loop_stats

    name = check_wait_share.check_name
    value = as_number(answer, "a share of the loop")
    loop = loop_stats(result)
    expected = loop.wait_share
    b = result.buckets
    if near(value, expected, 0.03, 0.002):
        return CheckResult(name, True, f"{value:.1%} of the loop waiting for data")
    mistake = diagnose(value, [
        (b["data_wait"] / result.summary["wall_s"],
         "that divides by the whole wall time, start-up and saves included; the question is about the training loop"),
        (b["data_wait"] / max(b["productive"], 1e-9), "that is data wait over compute; divide by the loop (data wait + compute)"),
    ], 0.03)
    if mistake:
        return CheckResult(name, False, mistake)
    share = as_share(value, "a share of the loop")
    return CheckResult(name, False, f"{share:.3f} is {direction(share, expected)}")


@check("memory of the pipeline", "batch bytes x workers x prefetch, twice that with pinned memory")
def check_memory_mb(answer_mb: Any, batch_mb: float, workers: int, prefetch: int, pin_memory: bool) -> CheckResult:
    """Exercise 4: host memory (MB) the loader holds ahead of the loop."""
    name = check_memory_mb.check_name
    answer = as_number(answer_mb, "MB")
    expected = stall.pipeline_memory_bytes(round(batch_mb * MB), workers, prefetch, pin_memory) / MB
    if near(answer, expected, 0.01):
        return CheckResult(name, True, f"{answer:,.0f} MB: depth is not free")
    mistake = diagnose(answer, [
        (batch_mb * workers * prefetch, "the pin thread keeps a second, pinned copy of every batch: double it"),
        (batch_mb * workers * (2 if pin_memory else 1), "each worker keeps `prefetch` batches in flight, not one"),
        (batch_mb * prefetch * (2 if pin_memory else 1), "prefetch is per worker: multiply by the workers too"),
        (expected / 1000, "that looks like GB: give MB"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{answer:g} MB is {direction(answer, expected)}")
