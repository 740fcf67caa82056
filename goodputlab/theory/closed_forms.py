"""Closed forms of checkpoint-interval theory: the optimal interval and the goodput it gives.

Every time here is in **seconds**. The symbols follow Daly (2006):

- ``tau`` (``interval_s``): the *checkpoint interval*, the useful compute time
  between two checkpoints, **excluding** the save itself. A job therefore runs
  in segments of ``tau + delta`` wall seconds: ``tau`` of compute, then a save.
  The simulator (:mod:`goodputlab.theory.simulator`) uses the same meaning.
- ``delta`` (``save_s``): the wall time a save takes (blocks training).
- ``R`` (``restart_s``): time from a failure until training can resume
  (detection, reschedule, initialisation, loading the checkpoint).
- ``M`` (``mtbf_s``): mean time between failures of the whole job. Failures
  are a Poisson process (exponential gaps), so the past does not matter.

Three models of the same job, from rough to exact:

1. :func:`expected_goodput`, the first-order model (the back-of-envelope
   "each failure loses half an interval plus the restart").
2. :func:`daly_goodput`, Daly's complete model: failures can also strike during
   saves and during restarts; exact for Poisson failures and periodic saves.
3. :func:`exact_goodput_free`, the special case of (2) with free saves and
   restarts, where the only waste is recomputing lost work.
"""

from __future__ import annotations

import math

from .. import validate


# ---------------------------------------------------------------------------
# optimal intervals


def young_interval(save_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum checkpoint interval, in seconds.

    Source: J. W. Young, "A first order approximation to the optimum checkpoint
    interval", Communications of the ACM 17(9), 1974::

        tau_young = sqrt(2 * delta * M)

    ``save_s`` (delta) is the save cost and ``mtbf_s`` (M) the job's mean time
    between failures, both in seconds. It minimises the first-order waste
    ``delta/tau + tau/(2M)`` of :func:`expected_goodput`; it is good when
    ``delta << M``.
    """
    validate.seconds("save_s", save_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    return math.sqrt(2.0 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum checkpoint interval, in seconds.

    Source: J. T. Daly, "A higher order estimate of the optimum checkpoint
    interval for restart dumps", Future Generation Computer Systems 22, 2006
    (the perturbation solution of his complete model)::

        tau_daly = sqrt(2 delta M) * [1 + (1/3) sqrt(delta/(2M)) + (1/9) (delta/(2M))] - delta
                   for delta < 2M
        tau_daly = M                                                  for delta >= 2M

    ``tau`` is useful compute between checkpoints, excluding the save.
    The restart cost does not appear: in Daly's complete model it scales the
    wall time by the constant factor ``exp(R/M)`` and so does not move the
    optimum. As ``delta/M -> 0`` it tends to :func:`young_interval`.
    Daly's published examples (delta = 5 min, R = 10 min): M = 24 h gives
    about 117 min, M = 6 h about 57 min, M = 15 min about 9.1 min.
    """
    validate.seconds("save_s", save_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    if save_s >= 2.0 * mtbf_s:
        return float(mtbf_s)
    ratio = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - save_s


def optimal_interval_numeric(save_s: float, restart_s: float, mtbf_s: float) -> float:
    """The interval (seconds) that maximises :func:`daly_goodput`, found numerically.

    Daly's goodput depends on ``tau`` only through ``tau / (exp((tau + delta)/M) - 1)``,
    so ``restart_s`` is validated but cannot move the optimum. That function
    is log-concave in ``tau``, so its single maximum is where the derivative
    of its log changes sign. The sign is that of::

        s(tau) = (1 - tau/M) - exp(-(tau + delta)/M)

    positive at ``tau = 0`` (when ``delta > 0``) and negative at ``tau = M``,
    so bisection on ``[0, M]`` finds the optimum to float precision. The
    same condition in Daly's variables is ``(1 + delta/M - y) * exp(y) = 1``
    with ``y = (tau + delta)/M``, i.e. ``tau = M * (1 + W0(-exp(-(1 + delta/M))))``
    with Lambert's W. Returns 0.0 when ``save_s`` is 0: with free saves,
    checkpoint continuously.
    """
    validate.seconds("save_s", save_s)
    validate.seconds("restart_s", restart_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    if save_s == 0:
        return 0.0

    def slope_sign(tau: float) -> float:
        # -expm1(-y) is 1 - exp(-y) without cancellation when y is small
        return -math.expm1(-(tau + save_s) / mtbf_s) - tau / mtbf_s

    lo, hi = 0.0, float(mtbf_s)
    while True:
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):  # the bracket is one float wide
            return mid
        if slope_sign(mid) > 0:
            lo = mid
        else:
            hi = mid


# ---------------------------------------------------------------------------
# goodput models


def expected_goodput(
    interval_s: float,
    save_s: float,
    restart_s: float,
    mtbf_s: float,
    data_stall_fraction: float = 0.0,
    queue_s: float = 0.0,
) -> float:
    """First-order expected goodput (a share in [0, 1]) of a checkpointed job.

    The back-of-envelope model behind Young (1974) and the book's worked
    example. Per unit of wall time, the job wastes

    - ``delta / tau`` on saves (one save per interval), and
    - ``(tau/2 + R) / M`` on failures: ``1/M`` failures per second, each losing
      on average half an interval of work plus the restart,

    so ``goodput = (1 - data_stall_fraction) * max(0, 1 - delta/tau - (tau/2 + R)/M)``.
    Data stalls are modelled as a fixed share of the remaining compute time
    spent waiting for input (the accelerator idles that share of every step,
    failure or not), hence the multiplication; the clamp at 0 keeps the
    straight-line model from going negative where it no longer applies.

    Worked example (GUIDE): 8.6 interruptions a day (M = 86400/8.6 s = 2.79 h),
    free saves and restarts: a 2-hour interval gives 1 - 1/2.79 = 0.642, a
    30-minute interval 1 - 0.25/2.79 = 0.910.

    Where it breaks down (compare with the exact models, :func:`daly_goodput`
    and :func:`exact_goodput_free`):

    - ``tau`` not small against ``M``: failures per second are really fewer
      than ``1/M`` of the wall time once part of it is wasted, and a failure
      cannot lose more than what was computed, so first order is pessimistic.
      Worked example, 2-hour interval (tau/M = 0.72): first order 0.642, exact
      0.684; 30 minutes (tau/M = 0.18): 0.910 vs 0.913. At tau = M first order
      says 0.50, exact 0.58; at tau = 2M first order says 0, exact 0.31.
    - ``R`` not small against ``M``: first order is pessimistic here too. It
      charges a full restart to ``1/M`` failures per second of *wall* time,
      but a failure that strikes while the job is already recovering only
      prolongs that recovery. Daly's model counts those restarts of restarts
      (its factor ``exp(R/M)`` on the wall time) and still loses less:
      ``1 - R/M <= exp(-R/M)``. With M = 2.79 h, tau = 30 min, free saves:
      R = 30 min gives 0.731 (first order) vs 0.763 (exact); R = M gives 0
      vs 0.336, where the straight line has crashed to zero while the job
      still makes progress.
    - ``delta`` comparable to ``tau``: the save is counted as ``delta/tau``
      of the time instead of ``delta/(tau + delta)``, and failures during the
      save are ignored. tau = delta = 10 min, M = 2.79 h, R = 0: first order
      0.0, exact 0.471.

    Arguments are seconds: ``interval_s`` (tau > 0), ``save_s`` (delta >= 0),
    ``restart_s`` (R >= 0), ``mtbf_s`` (M > 0); ``data_stall_fraction`` is a
    share in [0, 1). ``queue_s`` (q >= 0) is the time the job waits to be
    scheduled again after each failure (Kokolis et al.'s ``q``): no failure
    strikes a job in a queue, so it stretches the wall time by ``1 + q/M``
    (``M`` counts only the running time) and divides the goodput by it.
    """
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("save_s", save_s)
    validate.seconds("restart_s", restart_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    validate.share("data_stall_fraction", data_stall_fraction)
    validate.seconds("queue_s", queue_s)
    waste = save_s / interval_s + (interval_s / 2.0 + restart_s) / mtbf_s
    return (1.0 - data_stall_fraction) * max(0.0, 1.0 - waste) / (1.0 + queue_s / mtbf_s)


def daly_expected_wall_time(
    work_s: float,
    interval_s: float,
    save_s: float,
    restart_s: float,
    mtbf_s: float,
    queue_s: float = 0.0,
) -> float:
    """Expected wall time (seconds) to finish ``work_s`` seconds of compute (Daly 2006).

    Daly's complete model for Poisson failures with mean gap ``M``::

        T_wall = M * exp(R/M) * (exp((tau + delta)/M) - 1) * T_s / tau

    The job is ``T_s / tau`` segments of ``tau + delta`` (compute, then save);
    a failure anywhere in a segment, the save included, loses the segment, and
    a failure during the restart ``R`` restarts the restart. Expected time to
    complete one segment: ``(M + M(exp(R/M) - 1)) * (exp((tau+delta)/M) - 1)``,
    the standard renewal argument. ``T_s / tau`` need not be an integer (the
    last, partial segment is costed like a full one; negligible for long jobs).

    ``queue_s`` (q): after every failure the job waits ``q`` seconds to be
    scheduled again, and no failure strikes it there. The running time above
    sees ``T_wall / M`` failures, so the queue adds ``q / M`` of it::

        T_wall(q) = T_wall(0) * (1 + q/M)
    """
    validate.seconds("work_s", work_s)
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("save_s", save_s)
    validate.seconds("restart_s", restart_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    validate.seconds("queue_s", queue_s)
    exponent = restart_s / mtbf_s + (interval_s + save_s) / mtbf_s
    if exponent > 700:  # exp() would overflow: the job practically never finishes
        return math.inf if work_s > 0 else 0.0
    per_segment = mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((interval_s + save_s) / mtbf_s)
    return per_segment * work_s / interval_s * (1.0 + queue_s / mtbf_s)


def daly_goodput(
    interval_s: float, save_s: float, restart_s: float, mtbf_s: float, data_stall_fraction: float = 0.0,
    queue_s: float = 0.0,
) -> float:
    """Goodput (share of wall time) under Daly's complete model: ``T_s / T_wall``.

    ``goodput = tau / (M * exp(R/M) * (exp((tau + delta)/M) - 1) * (1 + q/M))``, all in
    seconds; see :func:`daly_expected_wall_time` (``q``: ``queue_s``, the wait to be
    scheduled again after each failure). With ``delta = R = q = 0`` this is
    exactly :func:`exact_goodput_free`. ``data_stall_fraction`` (a share in
    [0, 1)) of the compute time spent waiting for input scales it by
    ``1 - data_stall_fraction``, as in :func:`expected_goodput`.
    """
    validate.share("data_stall_fraction", data_stall_fraction)
    wall = daly_expected_wall_time(1.0, interval_s, save_s, restart_s, mtbf_s, queue_s)
    return (1.0 - data_stall_fraction) * (1.0 / wall)


def exact_goodput_free(interval_s: float, mtbf_s: float) -> float:
    """Exact goodput with free saves and restarts: ``tau / (M * (exp(tau/M) - 1))``.

    Poisson failures with mean gap ``M`` seconds, a checkpoint every
    ``tau`` seconds of compute, saves and restarts taking no time. By the
    renewal-reward theorem, goodput = (work per segment) / (expected wall
    time per segment) = ``tau / E[time to get tau failure-free seconds]``
    = ``tau / (M (exp(tau/M) - 1))``. It is :func:`daly_goodput` with
    ``delta = R = 0``, and the number the simulator converges to for a
    long job with free saves and restarts.
    """
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    x = interval_s / mtbf_s
    if x > 700:  # expm1 would overflow; the goodput is below 1e-300
        return 0.0
    return x / math.expm1(x)


# ---------------------------------------------------------------------------
# effective training time ratio (Meta's ETTR): the same jobs, saves counted as training


def first_order_ettr(interval_s: float, restart_s: float, mtbf_s: float, queue_s: float = 0.0, save_s: float = 0.0) -> float:
    """Kokolis et al.'s first-order expected ETTR (HPCA 2025, section IV), a share in [0, 1].

    ETTR is productive running time over the wall clock, queue included, where
    the unproductive time is the work redone after a failure and the
    (re)initialisation; a blocking save counts as training time. Per failure
    (``1/M`` per second of running time) the job loses half a checkpoint
    interval of wall time and the restart ``u0`` (``restart_s``), and waits
    ``q`` (``queue_s``) in the queue, where no failure strikes it::

        E[ETTR] = (1 - (dt/2 + u0) / M) / (1 + q / M),   dt = tau + delta

    ``dt`` is the wall time from one checkpoint to the next (``interval_s`` of
    compute and ``save_s`` of save). With a free save it is exactly
    :func:`expected_goodput`. Clamped at 0, as that is.
    """
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("save_s", save_s)
    validate.seconds("restart_s", restart_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    validate.seconds("queue_s", queue_s)
    lost = ((interval_s + save_s) / 2.0 + restart_s) / mtbf_s
    return max(0.0, 1.0 - lost) / (1.0 + queue_s / mtbf_s)


def daly_ettr(interval_s: float, save_s: float, restart_s: float, mtbf_s: float, queue_s: float = 0.0) -> float:
    """The effective training time ratio of Daly's complete model (exact for Poisson failures), a share.

    The ledger's reading (:func:`goodputlab.theory.frame.effective_training_time_ratio`):
    everything but the lost work, the restarts (queue included) and the restores is
    training time, saves included, even a save that a failure cut short. Per
    completed segment of ``c = tau + delta`` the job keeps ``c``; its failed tries
    add the time they spent saving: a try that fails at ``t < c`` was saving for
    ``max(0, t - tau)``, which over the ``e^{c/M} - 1`` failed tries per segment
    sums to ``M (e^{delta/M} - 1 - delta/M)``. So::

        ETTR = goodput * (tau + delta + M (e^{delta/M} - 1 - delta/M)) / tau

    with :func:`daly_goodput`'s goodput (the same ``queue_s``). It is at least the
    goodput, with equality for free saves.
    """
    goodput = daly_goodput(interval_s, save_s, restart_s, mtbf_s, queue_s=queue_s)
    x = save_s / mtbf_s
    cut_saves = mtbf_s * (math.expm1(x) - x) if x < 700 else math.inf
    if math.isinf(cut_saves):
        return 0.0
    return goodput * (interval_s + save_s + cut_saves) / interval_s
