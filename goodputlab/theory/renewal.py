"""Goodput of periodic checkpointing by renewal-reward: exact for Poisson and Weibull failures, sync or async saves.

Every time here is in **seconds**. The job, as in Daly (2006) and the simulator
(:mod:`goodputlab.theory.simulator`)::

    recover R | compute tau | snapshot delta | compute tau | snapshot delta | ... X failure
                               `-- durable after lag L --'

- ``tau`` (``interval_s``): compute between two checkpoints (progress-based: the
  count restarts after every restore);
- ``delta`` (``blocking_s``): the part of a save that blocks training;
- ``L`` (``durable_lag_s``): how long after its blocking part a checkpoint
  becomes durable. 0 for a synchronous save; the background persist of an
  asynchronous one (at most one in flight: when ``L > tau`` the next save waits
  ``L - tau`` for it, as in the simulator);
- ``R`` (``restart_s``): recovery after a failure: detection, restart and
  reload; a failure during it starts it again;
- failures form a *renewal process*: the clock restarts at each failure, and
  the time to the next one has survival function ``S(t)`` and mean ``M``.
  Exponential (``shape = 1``): Poisson failures, Daly's model. Weibull with
  ``shape < 1``: a job that has just restarted is more likely to fail again
  (failures cluster in time); ``shape > 1``: wear-out.

A failure at time ``u`` after the previous one keeps the work of every
checkpoint durable by then. Checkpoint ``n`` (n = 1, 2, ...) is durable at
``t_n = R + c1 + (n - 1) c + L`` with ``c1 = tau + delta`` and
``c = tau + max(0, L - tau) + delta``, so by the renewal-reward theorem::

    goodput = E[work kept per up period] / E[up period]
            = tau * sum_n S(t_n) / M

For Poisson failures the sum is geometric and gives the closed form
``tau * exp(-(R + c1 + L)/M) / (M * (1 - exp(-c/M)))``; with ``L = 0`` it is
exactly :func:`goodputlab.theory.daly_goodput`. The async lag costs a factor
``exp(-L/M)`` (a failure in the ``L`` seconds after a snapshot rolls back one
checkpoint further), which a model that counts only the blocking part leaves
out.

Why a renewal process is a real assumption at scale: the superposition of many
independent devices' failure processes tends to a Poisson process whatever
each device's law (the Palm-Khintchine theorem), so a non-exponential *job*
failure process needs something that acts on the job as a whole: freshly
replaced parts that fail early, a faulty node that keeps failing after each
restart, a bad software release. Schroeder and Gibson (DSN 2006) found the time
between failures of HPC systems well modelled by a Weibull law with a
decreasing hazard (``shape < 1``).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .. import validate

#: The sum over checkpoints stops once the survival is below this (its tail is negligible).
_TAIL = 1e-16
#: Checkpoints per chunk of the sum.
_CHUNK = 200_000
#: At most this many terms; beyond, the rest of the sum is approximated by its integral.
_MAX_TERMS = 4_000_000


def weibull_scale(mtbf_s: float, shape: float) -> float:
    """The Weibull scale (seconds) that gives mean ``mtbf_s``: ``M / Gamma(1 + 1/shape)``."""
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    _check_shape(shape)
    return mtbf_s / math.gamma(1.0 + 1.0 / shape)


def weibull_survival(t_s, mtbf_s: float, shape: float):
    """P(no failure within ``t_s`` seconds of the last one) for a Weibull law with mean ``mtbf_s``.

    ``exp(-(t / scale) ** shape)``; ``shape = 1`` is the exponential ``exp(-t / M)``.
    Accepts a number or a numpy array.
    """
    scale = weibull_scale(mtbf_s, shape)
    t = np.maximum(np.asarray(t_s, dtype=float), 0.0)
    out = np.exp(-np.power(t / scale, shape))
    return float(out) if np.ndim(out) == 0 else out


def weibull_hazard(t_s, mtbf_s: float, shape: float):
    """Failure rate (per second) at age ``t_s``: ``(shape/scale) (t/scale)^(shape-1)``; falls with age when ``shape < 1``."""
    scale = weibull_scale(mtbf_s, shape)
    t = np.maximum(np.asarray(t_s, dtype=float), 1e-300)
    out = (shape / scale) * np.power(t / scale, shape - 1.0)
    return float(out) if np.ndim(out) == 0 else out


def _check_shape(shape: float) -> float:
    return validate.number("shape", shape, 0.2, 5.0, note="the Weibull shape: 1 is Poisson, below 1 failures cluster after restarts")


def cycle_times(interval_s: float, blocking_s: float, durable_lag_s: float = 0.0) -> tuple[float, float]:
    """``(first, later)``: wall seconds of the first checkpoint cycle after a restore and of the later ones.

    ``first = tau + delta``; ``later = tau + max(0, L - tau) + delta`` (a save waits
    for the previous one's persist when that takes longer than the interval).
    """
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("blocking_s", blocking_s)
    validate.seconds("durable_lag_s", durable_lag_s)
    first = interval_s + blocking_s
    return first, first + max(0.0, durable_lag_s - interval_s)


def durable_checkpoints_survival_sum(
    first_durable_s: float, cycle_s: float, survival: Callable[[np.ndarray], np.ndarray], horizon_s: float | None = None
) -> float:
    """``sum_{n >= 0} S(first_durable_s + n * cycle_s)``: the expected number of durable checkpoints in an up period.

    ``survival`` maps an array of ages (seconds) to probabilities; ``horizon_s``,
    if known, is an age past which it is negligible (it sizes the first chunk).
    The sum runs in chunks until the survival is negligible; past ``_MAX_TERMS``
    terms the tail is replaced by its integral (the terms then vary slowly).
    """
    total, n0 = 0.0, 0
    chunk = _CHUNK
    if horizon_s is not None:
        chunk = int(min(_CHUNK, max(64, (horizon_s - first_durable_s) / cycle_s + 2)))
    while n0 < _MAX_TERMS:
        ages = first_durable_s + cycle_s * np.arange(n0, n0 + chunk, dtype=float)
        s = survival(ages)
        total += float(s.sum())
        if s[-1] < _TAIL:
            return total
        n0 += chunk
        chunk = _CHUNK
    # the rest: integral of S from the next age on, over the cycle (trapezoid on a log grid)
    start = first_durable_s + cycle_s * n0
    grid = start * np.logspace(0.0, 8.0, 20_001)
    s = survival(grid)
    return total + float(np.sum(0.5 * (s[1:] + s[:-1]) * np.diff(grid))) / cycle_s + 0.5 * float(survival(np.array([start]))[0])


def periodic_goodput(
    interval_s: float,
    blocking_s: float,
    restart_s: float,
    mtbf_s: float,
    *,
    durable_lag_s: float = 0.0,
    shape: float = 1.0,
    data_stall_fraction: float = 0.0,
) -> float:
    """Exact expected goodput (a share) of periodic checkpointing under renewal failures.

    ``interval_s`` (tau > 0), ``blocking_s`` (delta), ``restart_s`` (R) and
    ``durable_lag_s`` (L) are seconds, ``mtbf_s`` (M) the mean time between
    failures; ``shape`` the Weibull shape (1: Poisson). See the module's
    docstring for the derivation::

        goodput = (1 - data_stall_fraction) * tau * sum_n S(R + c1 + (n - 1) c + L) / M

    With ``shape = 1`` and ``L = 0`` it equals
    :func:`goodputlab.theory.daly_goodput` (to rounding). It is also what the
    simulator converges to for a long job with the same settings (``save_s =
    L``, ``save_blocking_s = delta`` for an async save; ``failure_shape``).
    """
    validate.seconds("restart_s", restart_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    validate.share("data_stall_fraction", data_stall_fraction)
    _check_shape(shape)
    first, later = cycle_times(interval_s, blocking_s, durable_lag_s)
    first_durable = restart_s + first + durable_lag_s
    if shape == 1.0:
        # geometric sum in closed form; -expm1 keeps precision when c << M
        exponent = first_durable / mtbf_s
        if exponent > 700:
            return 0.0
        kept = math.exp(-exponent) / -math.expm1(-later / mtbf_s)
    else:
        scale = weibull_scale(mtbf_s, shape)
        horizon = scale * (-math.log(_TAIL)) ** (1.0 / shape)  # S(horizon) = _TAIL
        kept = durable_checkpoints_survival_sum(
            first_durable, later, lambda t: np.exp(-np.power(np.maximum(t, 0.0) / scale, shape)), horizon
        )
    return (1.0 - data_stall_fraction) * interval_s * kept / mtbf_s


def expected_loss_per_failure(interval_s: float, mtbf_s: float, durable_lag_s: float = 0.0, blocking_s: float = 0.0) -> float:
    """First-order compute lost per failure (seconds): ``c/2 + tau * L / c`` with ``c = tau + delta``, for ``L <= tau``.

    A failure lands at a uniform phase of the checkpoint cycle and loses the
    work since the last snapshot (``c/2`` on average) plus, when it lands in
    the ``L`` seconds before that snapshot is durable, the whole interval
    before it. Without a lag this is the familiar half interval. Valid when
    ``tau << M``; :func:`periodic_goodput` is exact.
    """
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    first, later = cycle_times(interval_s, blocking_s, durable_lag_s)
    lag = min(durable_lag_s, later)
    return later / 2.0 + interval_s * lag / later


def optimal_interval(
    blocking_s: float,
    restart_s: float,
    mtbf_s: float,
    *,
    durable_lag_s: float = 0.0,
    shape: float = 1.0,
    lo_s: float | None = None,
    hi_s: float | None = None,
) -> float:
    """The interval (seconds) that maximises :func:`periodic_goodput`, found numerically.

    A log-spaced scan over ``[lo_s, hi_s]`` (default ``M/1e5`` to ``3 M``) finds the
    bracket of the best point, then golden-section search refines it to a relative
    precision of about 1e-6. With ``shape = 1`` and no lag it agrees with
    :func:`goodputlab.theory.optimal_interval_numeric`.
    """
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    lo = mtbf_s * 1e-5 if lo_s is None else lo_s
    hi = 3.0 * mtbf_s if hi_s is None else hi_s

    def g(tau: float) -> float:
        return periodic_goodput(tau, blocking_s, restart_s, mtbf_s, durable_lag_s=durable_lag_s, shape=shape)

    grid = np.logspace(math.log10(lo), math.log10(hi), 61)
    values = [g(t) for t in grid]
    k = int(np.argmax(values))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = b - ratio * (b - a), a + ratio * (b - a)
    f1, f2 = g(x1), g(x2)
    while (b - a) > 1e-6 * b:
        if f1 >= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - ratio * (b - a)
            f1 = g(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + ratio * (b - a)
            f2 = g(x2)
    return float(0.5 * (a + b))
