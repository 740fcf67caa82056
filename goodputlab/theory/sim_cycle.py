"""What both recovery models of the simulator share: the checkpoint cycle and the failure gaps.

Times in seconds. A job that trains without stopping runs a fixed cycle
(compute ``tau``, a blocking save, and for asynchronous saves a wait for the
previous persist); these functions book a stretch of such training in closed
form, vectorised over arrays of any shape. Used by
:mod:`goodputlab.theory.simulator` (restart from a checkpoint) and
:mod:`goodputlab.theory.in_job_sim` (in-job recovery).
"""

from __future__ import annotations

import math

import numpy as np

from .sim_config import SimConfig


def cycle_shape(config: SimConfig) -> tuple[float, float, float]:
    """Timing of the checkpoint cycle within an up period, in seconds.

    Returns ``(first_cycle, later_cycle, durable_lag)``: the first cycle after
    (re)start is ``tau + blocking``; later ones add the wait for the previous
    async persist, ``max(0, save_s - tau)``; a checkpoint is durable
    ``durable_lag`` seconds after its blocking part ends (0 for sync saves,
    ``save_s`` for async).
    """
    tau, blocking = config.interval_s, config.blocking_save_s
    if not config.is_async:
        return tau + blocking, tau + blocking, 0.0
    wait_for_previous = max(0.0, config.save_s - tau)
    return tau + blocking, tau + wait_for_previous + blocking, config.save_s


def compute_done(train_s: np.ndarray, config: SimConfig) -> np.ndarray:
    """Compute seconds done in ``train_s`` seconds of training since a (re)start (the saves left out)."""
    tau = config.interval_s
    first, later, _ = cycle_shape(config)
    after_first = np.maximum(train_s - first, 0.0)
    full_later = np.floor(after_first / later)
    into_cycle = after_first - full_later * later
    return np.where(
        train_s < first,
        np.minimum(train_s, tau),
        tau + full_later * tau + np.minimum(into_cycle, tau),
    )


def compute_and_durable(train_s: np.ndarray, config: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """For ``train_s`` seconds of training since a (re)start: compute seconds done,
    and compute seconds covered by durable checkpoints (arrays of ``train_s``'s shape)."""
    tau = config.interval_s
    first, later, lag = cycle_shape(config)
    compute = compute_done(train_s, config)
    durable_count = np.where(
        train_s < first + lag,
        0.0,
        np.floor(np.maximum(train_s - first - lag, 0.0) / later) + 1.0,
    )
    return compute, durable_count * tau


def failure_gaps(config: SimConfig, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Seconds between the job's failure events (an array of ``shape``).

    Exponential with mean ``job_mtbf_s`` (Poisson failures), or with
    ``failure_shape != 1`` Weibull with the same mean (a renewal process: the
    clock restarts at each failure); ``inf`` when nothing fails.
    """
    if math.isinf(config.job_mtbf_s):
        return np.full(shape, math.inf)
    if config.failure_shape == 1.0:
        return rng.standard_exponential(shape) * config.job_mtbf_s
    return rng.weibull(config.failure_shape, shape) * (config.job_mtbf_s / math.gamma(1.0 + 1.0 / config.failure_shape))
