"""Checks of Lab 8, "Goodput as statistical efficiency" (``labs/08_statistical_efficiency.ipynb``).

Pollux's statistical efficiency, the best batch size from the noise scale and the
throughput's knee, the simple noise-scale estimator on real gradient norms, and the
two goodputs multiplied.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..efficiency.noise import simple_noise_estimates, simple_noise_scale, statistical_efficiency
from .checks import CheckResult, as_number, as_share, as_written, check, diagnose, direction, near


@check("statistical efficiency", "(B_noise + B_0) / (B_noise + B)")
def check_efficiency(answer: Any, noise_scale: float, base_batch: int, batch: int) -> CheckResult:
    """Exercise 1: Pollux's efficiency of ``batch`` relative to ``base_batch`` at a noise scale."""
    name = check_efficiency.check_name
    value = as_number(answer, "a share")
    expected = statistical_efficiency(batch, noise_scale, base_batch)
    if value > 1 and near(value, 1 / expected, 0.01):
        return CheckResult(name, False, "upside down: a bigger batch is *less* efficient per sample, so the efficiency is below 1")
    share = as_share(value, "a share")
    if near(share, expected, 0.01):
        return CheckResult(name, True, f"{share:.2f}: each sample at batch {batch} is worth {share:.0%} of one at {base_batch}")
    mistake = diagnose(share, [
        (base_batch / batch, "that is the efficiency of a noiseless gradient (B_noise = 0): the noise scale is what keeps big batches useful"),
        (noise_scale / batch, "B_noise / B is not relative to the base batch: add B_0 and B_noise where they belong"),
        ((noise_scale + base_batch) / batch, "the noise scale goes in the denominator too"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{share:.3f} is {direction(share, expected)}")


@check("the best batch size", "sqrt(B_noise x knee), with knee = alpha / beta")
def check_best_batch(answer: Any, noise_scale: float, overhead_ms: float, per_sample_ms: float) -> CheckResult:
    """Exercise 2: the batch size that maximises throughput x efficiency, sqrt(B_noise x alpha / beta)."""
    name = check_best_batch.check_name
    value = as_number(answer, "sequences")
    knee = overhead_ms / per_sample_ms
    expected = math.sqrt(noise_scale * knee)
    if as_written(value, expected, 0.02):
        return CheckResult(name, True, f"about {expected:.0f} sequences: between the knee ({knee:.1f}) and the noise scale ({noise_scale:g})")
    mistake = diagnose(value, [
        (noise_scale * knee, "forgot the square root: the best batch is the *geometric mean* of the noise scale and the knee"),
        (math.sqrt(noise_scale * per_sample_ms / overhead_ms), "the knee is alpha / beta (fixed cost over cost per sample), not beta / alpha"),
        (noise_scale, "the noise scale alone ignores throughput: small batches also pay the fixed cost of every step"),
        (knee, "the knee alone ignores efficiency: past the noise scale, samples are wasted"),
    ], 0.02)
    return CheckResult(name, False, mistake or f"{value:g} is {direction(value, expected)}")


@check("the gradient noise scale", "average |G_small|^2 and |G_big|^2 first, then |G|^2, tr(Sigma) and their ratio")
def check_noise_scale(answer: Any, small_sq: Any, big_sq: Any, b_small: int, b_big: int,
                      exact: float | None = None) -> CheckResult:
    """Exercise 3: the simple estimator from many squared gradient norms at two batch sizes. The answer
    must come from the draws: ``exact``, the problem's true noise scale, is not the estimate."""
    name = check_noise_scale.check_name
    value = as_number(answer, "samples")
    expected = simple_noise_scale(small_sq, big_sq, b_small, b_big)
    if near(value, expected, 1e-4):
        return CheckResult(name, True, f"B_simple = {value:.2f} samples, estimated from the draws")
    if exact is not None and near(value, exact, 1e-3):
        return CheckResult(name, False, "that is the exact noise scale of this made-up problem, which a real "
                                        "training run never knows: estimate it from the draws small_sq and big_sq")
    grad_sq, trace = simple_noise_estimates(np.mean(small_sq), np.mean(big_sq), b_small, b_big)
    g_each, t_each = simple_noise_estimates(np.asarray(small_sq), np.asarray(big_sq), b_small, b_big)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_of_ratios = float(np.mean(t_each / g_each))
    g_swapped, t_swapped = simple_noise_estimates(np.mean(big_sq), np.mean(small_sq), b_small, b_big)
    swapped = t_swapped / g_swapped if g_swapped else math.nan
    mistake = diagnose(value, [
        (mean_of_ratios, "that is the mean of each draw's ratio; one draw's |G|^2 can be near zero or negative: "
                         "average the norms first, then take one ratio"),
        (swapped, "small and big are swapped: |G_small|^2 is the noisier, larger one, measured at b_small"),
        (-expected, "negative: are small and big swapped?"),
        (trace, "that is tr(Sigma); divide it by |G|^2"),
        (grad_sq, "that is |G|^2; the noise scale is tr(Sigma) / |G|^2"),
        (1 / expected if expected else math.nan, "upside down: tr(Sigma) / |G|^2, noise over signal"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:g} is {direction(value, expected)}")


@check("time to the target", "samples to the target / (samples per second x ledger goodput)")
def check_time_to_target(answer_s: Any, samples: float, samples_per_s: float, ledger_goodput: float) -> CheckResult:
    """Exercise 4: seconds of wall time to reach the target when both goodputs count."""
    name = check_time_to_target.check_name
    value = as_number(answer_s, "seconds")
    expected = samples / (samples_per_s * ledger_goodput)
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"{value:.2f} s: the two goodputs multiply")
    mistake = diagnose(value, [
        (samples / samples_per_s * ledger_goodput, "a goodput below 1 makes the job take *longer*: divide by it"),
        (samples / samples_per_s, "that ignores the ledger: only the productive share of the wall time trains"),
        (expected / 60, "that looks like minutes: give seconds"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:g} s is {direction(value, expected)}")
