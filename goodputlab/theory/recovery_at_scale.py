"""Recovery at scale: detecting a failure, hot spares, failure domains, and when to call a checkpoint due.

Times in **seconds**. What decides the cost of a failure besides the work it
throws away, as closed forms the simulator and the chapters check:

- **Detection** is its own term. A crash is seen within seconds (the process
  exits, the launcher notices); a *hang* (a rank stuck in a collective) is
  seen only when a watchdog gives up: PyTorch's NCCL process groups wait 10
  minutes by default. :func:`detection_s` mixes the two; :func:`recovery_s`
  adds detection, restart and reload into the ``R`` of Daly's model.
- **Hot spares.** A job that keeps warm standby machines swaps one in instead
  of waiting to be rescheduled. :func:`spare_hit_share` is the share of
  failures a pool of spares absorbs over a job (the simulator's
  ``hot_spares``: a pool used up as failures come), and
  :func:`spare_availability` the same in the steady state when each failed
  machine comes back from repair after a while.
- **Failure domains.** A switch, a power supply or a host takes several devices
  at once. A synchronous job stops once per *event*, whatever it took, so for
  the same number of devices lost, correlated losses mean fewer, larger
  interruptions (:func:`domain_interruption_rate`), each of which needs as
  many spares as devices it took (:func:`devices_per_interruption`).
- **Timer or progress?** Checkpointing every ``tau`` seconds of *progress*
  (the lab, the simulator, Daly) gives ``x / (e^x - 1)`` with free saves and
  restarts, ``x = tau/M``; a wall-clock timer that fires every ``tau``
  seconds whatever happened gives ``(1 - e^-x) / x``. Both are exact, for
  different policies (:func:`progress_goodput_free`, :func:`timer_goodput_free`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import validate

#: PyTorch's default timeout of an NCCL process group (torch.distributed, since PyTorch 2.2): 10 minutes.
NCCL_DEFAULT_TIMEOUT_S = 600.0


# ---------------------------------------------------------------------------
# detection and recovery


def detection_s(hang_share: float, watchdog_s: float = NCCL_DEFAULT_TIMEOUT_S, crash_detect_s: float = 10.0) -> float:
    """Mean seconds from a failure to its detection: ``h * watchdog_s + (1 - h) * crash_detect_s``.

    ``hang_share`` (h) is the share of failures that hang the job instead of
    crashing it: nothing exits, and only a timeout (``watchdog_s``) notices.
    With PyTorch's default 10-minute NCCL timeout, a job whose failures are one
    in five hangs waits 0.2 x 600 + 0.8 x 10 = 128 s on average before any
    restart begins.
    """
    validate.share("hang_share", hang_share, high_open=False)
    validate.seconds("watchdog_s", watchdog_s)
    validate.seconds("crash_detect_s", crash_detect_s)
    return hang_share * watchdog_s + (1.0 - hang_share) * crash_detect_s


def recovery_s(detect_s: float, restart_s: float, restore_s: float) -> float:
    """Seconds from a failure until training resumes: detect + restart (reschedule, init) + restore.

    This is Daly's ``R``. The ledger books detection and restart as
    ``restart`` and the reload as ``checkpoint_restore``.
    """
    validate.seconds("detect_s", detect_s)
    validate.seconds("restart_s", restart_s)
    validate.seconds("restore_s", restore_s)
    return detect_s + restart_s + restore_s


# ---------------------------------------------------------------------------
# hot spares


def _poisson_cdf(k: int, mean: float) -> float:
    """P(X <= k) for X ~ Poisson(mean), summed in log space (mean up to ~1e6)."""
    if k < 0:
        return 0.0
    if mean == 0:
        return 1.0
    i = np.arange(k + 1, dtype=float)
    log_terms = i * math.log(mean) - mean - np.array([math.lgamma(x + 1.0) for x in i])
    return float(min(1.0, np.exp(log_terms).sum()))


def spare_hit_share(spares: int, expected_failures: float) -> float:
    """Expected share of a job's failures that find a hot spare, for a pool used up as failures come.

    ``spares`` warm machines, none returned during the job; the job sees
    ``N ~ Poisson(expected_failures)`` failures, and the first ``spares`` of
    them are absorbed: the share is ``E[min(N, S)] / E[N]``, with
    ``E[min(N, S)] = sum_{n < S} P(N > n)``. It is what the simulator's
    ``hot_spares`` does.
    """
    s = validate.whole("spares", spares, 0)
    mu = validate.number("expected_failures", expected_failures, 0, low_open=True)
    if s == 0:
        return 0.0
    expected_min = sum(1.0 - _poisson_cdf(n, mu) for n in range(s))
    return min(1.0, expected_min / mu)  # more spares than failures: the sum can pass 1 by rounding


def spare_availability(spares: int, failure_rate_per_s: float, repair_s: float) -> float:
    """Steady-state share of failures that find a spare when failed machines return after repair.

    Failed machines are repaired in parallel, each in ``repair_s`` seconds on
    average, so the number away in repair is Poisson with mean ``lambda *
    repair_s`` (an M/G/infinity queue, whatever the law of the repair time);
    a failure, arriving at random (PASTA), finds a spare when fewer than
    ``spares`` are away: ``P(Poisson(lambda * repair_s) <= spares - 1)``.
    Example: 8.6 failures a day and a 3-day repair keep about 26 machines in
    repair; 32 spares cover 87% of failures, 40 spares 99.4%.
    """
    s = validate.whole("spares", spares, 0)
    rate = validate.number("failure_rate_per_s", failure_rate_per_s, 0)
    validate.seconds("repair_s", repair_s)
    return _poisson_cdf(s - 1, rate * repair_s)


def mean_restart_with_spares(hit_share: float, spare_restart_s: float, cold_restart_s: float) -> float:
    """Mean restart (seconds) when a share ``hit_share`` of failures finds a spare: the mix of the two costs."""
    validate.share("hit_share", hit_share, high_open=False)
    validate.seconds("spare_restart_s", spare_restart_s)
    validate.seconds("cold_restart_s", cold_restart_s)
    return hit_share * spare_restart_s + (1.0 - hit_share) * cold_restart_s


# ---------------------------------------------------------------------------
# failure domains


def domain_interruption_rate(devices: int, device_loss_rate_per_s: float, domain_size: int, correlated_share: float) -> float:
    """Job interruptions per second when a share of device losses comes in groups of ``domain_size``.

    Devices are lost at ``r`` per device-second in all; a share ``c`` of those
    losses arrives as events that take a whole domain of ``d`` devices at once
    (a host, a switch, a power feed), the rest one device at a time. A
    synchronous job stops once per event::

        rate = N * r * ((1 - c) + c / d)

    With ``c = 0`` it is the independent ``N r`` of :func:`goodputlab.theory.cluster_mtbf`.
    """
    n = validate.whole("devices", devices, 1)
    r = validate.number("device_loss_rate_per_s", device_loss_rate_per_s, 0)
    d = validate.whole("domain_size", domain_size, 1)
    c = validate.share("correlated_share", correlated_share, high_open=False)
    return n * r * ((1.0 - c) + c / d)


def devices_per_interruption(domain_size: int, correlated_share: float) -> float:
    """Mean devices lost per interruption: ``1 / ((1 - c) + c / d)`` (spares an interruption needs)."""
    d = validate.whole("domain_size", domain_size, 1)
    c = validate.share("correlated_share", correlated_share, high_open=False)
    return 1.0 / ((1.0 - c) + c / d)


def replica_loss_share(domain_size: int, correlated_share: float, replicas_share_domain: bool) -> float:
    """Share of interruptions that destroy an in-memory checkpoint and its peer replica together.

    An in-memory checkpoint with one replica on a peer machine (Gemini's
    scheme) is lost only when both copies are. With the peer in the *same*
    failure domain, every domain event takes both: a share
    ``(c/d) / ((1 - c) + c/d)`` of interruptions. With peers in different
    domains only two independent losses within one recovery would, which this
    first-order count treats as 0.
    """
    d = validate.whole("domain_size", domain_size, 1)
    c = validate.share("correlated_share", correlated_share, high_open=False)
    if not replicas_share_domain or d == 1:
        return 0.0
    return (c / d) / ((1.0 - c) + c / d)


# ---------------------------------------------------------------------------
# the timer and the progress policy (free saves and restarts)


def progress_goodput_free(interval_s: float, mtbf_s: float) -> float:
    """Goodput of a checkpoint after every ``interval_s`` seconds of progress: ``x / (e^x - 1)``, ``x = tau/M``.

    Free saves and restarts, Poisson failures: each segment of ``tau`` seconds of
    work is retried until it runs ``tau`` seconds without a failure, which takes
    ``M (e^x - 1)`` on average (the same as
    :func:`goodputlab.theory.exact_goodput_free`).
    """
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    x = interval_s / mtbf_s
    return 0.0 if x > 700 else x / math.expm1(x)


def timer_goodput_free(interval_s: float, mtbf_s: float) -> float:
    """Goodput of a wall-clock timer that checkpoints every ``interval_s`` seconds: ``(1 - e^-x) / x``.

    Free saves and restarts, Poisson failures. A failure loses the work since
    the last tick, but the timer does not restart: at each tick the job keeps
    the time since the last failure in that period (or all ``tau`` if none),
    ``integral_0^tau e^(-s/M) ds = M (1 - e^-x)`` on average. The timer keeps
    more than the progress policy at the same ``tau`` (it also checkpoints
    sooner after a failure), so compare the two at the same number of saves,
    not the same ``tau``. Both are ``1 - x/2`` to first order.
    """
    validate.seconds("interval_s", interval_s, positive=True)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    x = interval_s / mtbf_s
    return -math.expm1(-x) / x


def simulate_policies_free(interval_s: float, mtbf_s: float, duration_s: float, seed: int = 0) -> dict[str, float]:
    """Both policies played out over ``duration_s`` seconds of Poisson failures (free saves and restarts).

    Returns ``{"progress": goodput, "timer": goodput, "failures": count}``: the
    same failure times drive both. Progress policy: a checkpoint once ``tau``
    seconds have run since the last checkpoint or failure. Timer: a checkpoint
    at every multiple of ``tau``, keeping the time since the last failure.
    """
    tau = validate.seconds("interval_s", interval_s, positive=True)
    m = validate.seconds("mtbf_s", mtbf_s, positive=True)
    t_end = validate.seconds("duration_s", duration_s, positive=True)
    rng = np.random.default_rng(seed)
    n = int(t_end / m * 1.2 + 10 * math.sqrt(t_end / m) + 10)
    times = np.cumsum(rng.standard_exponential(n) * m)
    while times[-1] < t_end:
        times = np.concatenate([times, times[-1] + np.cumsum(rng.standard_exponential(n) * m)])
    times = times[times < t_end]
    # progress policy: in each gap between failures, floor(gap / tau) checkpoints keep their work
    edges = np.concatenate([[0.0], times, [t_end]])
    gaps = np.diff(edges)
    kept_gaps = np.floor(gaps[:-1] / tau) * tau  # failed gaps keep the completed checkpoints
    progress = float(kept_gaps.sum() + np.floor(gaps[-1] / tau) * tau)
    # timer: per tick, time since the last failure in that period (or tau)
    ticks = np.arange(1, int(t_end // tau) + 1) * tau
    last_failure = np.searchsorted(times, ticks)  # failures strictly before each tick
    prev = np.where(last_failure > 0, times[np.maximum(last_failure - 1, 0)], -np.inf)
    timer = float(np.minimum(ticks - prev, tau).sum())
    wall = ticks[-1] if len(ticks) else t_end
    return {"progress": progress / t_end, "timer": timer / wall, "failures": float(len(times))}
