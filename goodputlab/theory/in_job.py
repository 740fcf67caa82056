"""In-job recovery's expected goodput: replica groups that heal from a peer while the rest train on.

Times in **seconds**, rates per second. The model is the simulator's
(:mod:`goodputlab.theory.in_job_sim`, docs/IN_JOB_RECOVERY.md): a job of ``G`` replica
groups sees failures as a Poisson process of rate ``lambda`` (the job's), each taking
one group, uniformly, so each group is hit at ``lambda_g = lambda / G``. A group hit
is away for ``W = R_g + H``: a relaunch ``R_g`` (booked ``degraded``) and a heal ``H``
(a fetch of the live state from a peer, booked ``checkpoint_restore``), at its share
``1/G`` of each second; a hit while it is away starts its recovery again. The job
stops as a whole when ``k* = G - min_groups + 1`` groups are away at once (every
group, by default), and then restarts from its last durable checkpoint as in Daly's
model: a recovery of ``c = restart + restore`` (a failure during it starts it again)
and the work since that checkpoint lost.

**Whole-job cycles (renewal-reward).** A stop resets every group, so the job renews at
each stop: a cycle is a recovery, then training for a time ``T`` (from every group up
to the next stop). With ``E[rec] = (e^{lambda c} - 1) / lambda`` (the classic mean of a
recovery that restarts on every failure)::

    goodput = E[kept work per cycle] / (E[rec] + E[T])

The kept work is the survivors' share of the checkpointed compute: for a periodic
checkpoint with durable times ``t_n = a + (n - 1) c2`` after training starts (``a`` the
first cycle plus an async save's lag, ``c2`` the later cycle: see
:func:`goodputlab.theory.renewal.cycle_times`), ``tau * sum_n P(T > t_n)``, times the
share of that compute the survivors did, ``1 - f``.

**A group's time away, without stops.** A group is away at ``t`` exactly when one of
its failures lies in ``(t - W, t]`` (every hit restarts its recovery), so it is away
with probability ``q = 1 - e^{-lambda_g W}`` at any time ``W`` or more after training
began, independently of the other groups (thinning a Poisson process by group gives
independent Poisson processes): relaunching ``1 - e^{-lambda_g R_g}``, healing
``e^{-lambda_g R_g} - e^{-lambda_g W}``. Exact; and with ``G`` large enough that no stop
happens (``q^{k*-1}`` negligible) it makes the goodput exactly
``(1 - q) * tau / c2`` of the training time, to within ``W`` and one checkpoint cycle
at the ends of the job.

**Two groups away stop the job (``k* = 2``: two groups, or ``min_groups = G - 1``).
Exact.** At most one group is away before a stop, so the job alternates between "all
up" (a failure after ``Exp(lambda)``) and an episode with one group away. Each attempt
of the episode's recovery lasts ``min(W, Exp(lambda))`` and ends in one of three ways:
the group is back (probability ``a = e^{-lambda W}``), another group is hit (a stop,
``(1 - a) p``, ``p = (G - 1) / G``: *the probability that a second failure arrives
during a heal* and takes another group), or the same group is hit again (its recovery
starts over, ``(1 - a)(1 - p)``). So an episode ends in a stop with probability
``pi = (1 - a) p / (a + (1 - a) p)``, and by Wald's identity over the i.i.d.
attempts::

    E[T] = (1 / lambda) * (1 / pi + 1 / p)
    E[group-seconds away before the stop] = E[attempts] E[attempt] = 1 / (lambda p)

so ``f = 1 / (G lambda p E[T])`` of the training time is missing. These are exact;
the kept work uses ``P(T > t_n) = e^{-t_n / E[T]}`` (``T`` exponential with the exact
mean): exact for continuous checkpointing (``tau -> 0`` with free saves), and
otherwise off by at most one checkpoint interval per stop, ``tau / E[cycle]`` of the
goodput (``T`` is a geometric sum of short blocks, close to exponential when stops
are rare).

**Three or more groups away stop the job (``k* >= 3``). An approximation.** Several
groups may be away at once, each with its own deterministic timer, and the time to a
stop has no closed form. The groups are taken as independent and stationary: away
with probability ``q``, so a failure stops the job when it hits a group that is up
while exactly ``k* - 1`` others are away, at rate
``nu = lambda (1 - q) Binom(G - 1, q)(k* - 1)``; ``E[T] = 1 / nu`` and ``f = q``. Its
error falls with the stops: exact in the limit of no stops, and the smaller
``nu E[T_job]`` the closer.

Restart from a checkpoint is ``k* = 1`` (``G = 1``, or ``min_groups = G``): every failure
stops the job, ``f = 0``, ``E[T] = 1 / lambda``, and the formula is exactly
:func:`goodputlab.theory.renewal.periodic_goodput` for Poisson failures.

**Two costs every group pays** (:mod:`goodputlab.theory.in_job_costs`), as shares of the training
time, like a data stall: the *detection stall*, every group waiting in a collective for the dead
peer's timeout ``d`` after each failure that leaves the job training (``1 - e^{-lambda d}`` of the
time, booked ``straggler_wait`` as the measured runs book the survivors' wait), and a steady
*per-step overhead* ``o`` (torchft's quorum and commit, the cross-group all-reduce of more groups;
booked ``other``). Both multiply the goodput: ``x (1 - stall)(1 - o)``. With one group the
detection is part of the whole job's restart, and there is no stall term.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .. import validate
from ..errors import check
from .in_job_costs import GroupCosts, detection_stall_share, replica_group_costs
from .renewal import cycle_times
from .sim_config import SimConfig

#: How exact :func:`in_job_goodput` is, by the number of groups away that stop the job.
REGIMES = {
    "restart": "every failure stops the job: Daly's model, exact",
    "two-away": "two groups away stop the job: the stop rate and the time away are exact; "
                "the checkpoints' arithmetic takes the time to a stop as exponential",
    "stationary": "three or more groups away stop the job: groups taken as independent and stationary (an approximation)",
}


@dataclass(frozen=True)
class InJobPrediction:
    """What :func:`in_job_goodput` predicts for a long job (shares of the wall time, seconds, per second).

    ``goodput``; ``missing_share``: the share of the training time the missing groups
    would have computed (``f``), of which ``relaunch_share`` relaunching (``degraded``)
    and the rest healing; ``degraded_share`` and ``heal_share``: the same as shares of
    the wall time (the ledger's ``degraded`` and the heal's part of
    ``checkpoint_restore``); ``time_to_stop_s``: the mean training time from every
    group up to a whole-job stop (``E[T]``); ``job_restarts_per_s``: whole-job
    restarts per second of wall time, the stops and the failures that strike a
    restart in progress (``e^{lambda c} / E[cycle]``: the simulator's
    ``job_restarts``); ``restart_probability``: the share of failures that restart
    the whole job; ``regime``: a key of :data:`REGIMES`; ``error_bound``: a bound on
    how far ``goodput`` can be from the exact expectation (0 where exact, ``nan``
    where the regime has none: the stationary approximation); ``stall_share`` and
    ``overhead_share``: the shares of the wall time the detection stall and the per-step
    overhead take (``straggler_wait`` and ``other`` in the simulator's ledger).
    """

    goodput: float
    missing_share: float
    relaunch_share: float
    degraded_share: float
    heal_share: float
    time_to_stop_s: float
    job_restarts_per_s: float
    restart_probability: float
    regime: str
    error_bound: float
    stall_share: float = 0.0
    overhead_share: float = 0.0


def away_share(group_rate_per_s: float, away_s: float) -> float:
    """Probability that a replica group is away at a given time: ``1 - e^{-lambda_g W}`` (exact, no stops).

    ``group_rate_per_s``: failures per second that hit this group (``lambda_g``);
    ``away_s``: its relaunch and heal (``W``). A group is away exactly when one of
    its failures fell within the last ``W`` seconds, since each restarts its
    recovery.
    """
    rate = validate.number("group_rate_per_s", group_rate_per_s, 0, unit="failures per second")
    away = validate.seconds("away_s", away_s)
    return -math.expm1(-rate * away)


def two_away_stop(failure_rate_per_s: float, groups: int, away_s: float) -> tuple[float, float, float]:
    """The exact figures of a job that stops when two groups are away: ``(E[T], pi, f_seconds)``.

    ``E[T]``: mean seconds of training from every group up to the stop;
    ``pi``: the probability that a group's time away ends in a stop;
    ``f_seconds``: mean group-seconds away before the stop (``1 / (lambda p)``).
    ``failure_rate_per_s``: the job's (``lambda``, each failure one group);
    ``away_s``: ``W``. The derivation is the module's docstring.
    """
    rate = validate.number("failure_rate_per_s", failure_rate_per_s, 0, low_open=True, unit="failures per second")
    g = validate.whole("groups", groups, 2)
    away = validate.seconds("away_s", away_s)
    back = math.exp(-rate * away)  # a: the attempt completes
    other = (g - 1) / g  # p: a failure hits another group
    if back == 1.0:  # W = 0: never two away at once
        return math.inf, 0.0, 0.0
    pi = (1.0 - back) * other / (back + (1.0 - back) * other)
    return (1.0 / pi + 1.0 / other) / rate, pi, 1.0 / (rate * other)


def _binomial_pmf(n: int, k: int, p: float) -> float:
    if k < 0 or k > n:
        return 0.0
    return math.comb(n, k) * p**k * (1.0 - p) ** (n - k)


def in_job_goodput(
    interval_s: float,
    blocking_s: float,
    restart_s: float,
    restore_s: float,
    relaunch_s: float,
    heal_s: float,
    failure_rate_per_s: float,
    groups: int,
    min_groups: int = 1,
    durable_lag_s: float = 0.0,
    collective_timeout_s: float = 0.0,
    step_overhead_share: float = 0.0,
    queue_s: float = 0.0,
) -> InJobPrediction:
    """Expected goodput of a long job with in-job recovery (renewal-reward over whole-job stops).

    ``interval_s`` (tau) compute between checkpoints, ``blocking_s`` the part of a save
    that blocks, ``durable_lag_s`` how long after it a checkpoint is durable (an async
    save's persist); ``restart_s`` and ``restore_s``: the whole job's restart and its
    checkpoint load after a stop; ``relaunch_s`` and ``heal_s``: a failed group's
    relaunch and its fetch from a peer; ``failure_rate_per_s``: the job's Poisson
    failures, each taking one of ``groups`` replica groups; the job stops below
    ``min_groups``. ``collective_timeout_s``: the seconds every group stalls after a failure that
    leaves the job training (the collective's timeout; torchft's default is 60 s);
    ``step_overhead_share``: the share of each step's time a steady in-job overhead takes;
    ``queue_s``: the wait to be scheduled before each whole-job restart (no failure strikes it, and
    each failure during the restart queues again: ``q e^{lambda c}`` per stop). Which parts are
    exact: :data:`REGIMES` and the module's docstring.
    """
    tau = validate.seconds("interval_s", interval_s, positive=True)
    blocking = validate.seconds("blocking_s", blocking_s)
    lag = validate.seconds("durable_lag_s", durable_lag_s)
    queue = validate.seconds("queue_s", queue_s)
    rec = validate.seconds("restart_s", restart_s) + validate.seconds("restore_s", restore_s)
    relaunch, heal = validate.seconds("relaunch_s", relaunch_s), validate.seconds("heal_s", heal_s)
    rate = validate.number("failure_rate_per_s", failure_rate_per_s, 0, low_open=True, unit="failures per second")
    g = validate.whole("groups", groups, 1)
    m = validate.whole("min_groups", min_groups, 1, g)
    timeout = validate.seconds("collective_timeout_s", collective_timeout_s)
    overhead = validate.share("step_overhead_share", step_overhead_share)
    regime, time_to_stop, missing, relaunch_part = _stops(rate, g, m, relaunch, relaunch + heal)
    kept_per_s, restarts_per_s, cycle_weight, bound = _kept_between_stops(
        tau, blocking, lag, rec, queue, rate, time_to_stop, regime, g)
    missing_wall = missing * cycle_weight
    # the failures that leave the job training stall every group for the timeout (none with one group)
    leaving_training = rate - (0.0 if math.isinf(time_to_stop) else 1.0 / time_to_stop)  # per second of training
    stall = 0.0 if regime == "restart" else detection_stall_share(leaving_training, timeout)
    training = (1.0 - missing) * kept_per_s
    return InJobPrediction(
        goodput=training * (1.0 - stall) * (1.0 - overhead),
        missing_share=missing,
        relaunch_share=missing * relaunch_part,
        degraded_share=missing_wall * relaunch_part,
        heal_share=missing_wall * (1.0 - relaunch_part),
        time_to_stop_s=time_to_stop,
        job_restarts_per_s=restarts_per_s,
        restart_probability=restarts_per_s / rate,
        regime=regime,
        error_bound=bound,
        stall_share=training * stall,
        overhead_share=training * (1.0 - stall) * overhead,
    )


def _stops(rate: float, g: int, m: int, relaunch: float, away: float) -> tuple[str, float, float, float]:
    """How the job stops: ``(regime, mean time to a whole-job stop, the missing groups' share, the relaunch's
    share of a group's time away)``, for failures at ``rate`` over ``g`` groups that stop the job below ``m``."""
    k_stop = g - m + 1
    group_rate = rate / g
    if k_stop == 1:
        return "restart", 1.0 / rate, 0.0, 0.0
    if k_stop == 2:
        time_to_stop, _, away_seconds = two_away_stop(rate, g, away)
        missing = 0.0 if math.isinf(time_to_stop) else away_seconds / (g * time_to_stop)
        # an attempt, cut short by any failure, relaunches for E[min(R, X)] of its E[min(W, X)]
        relaunch_part = -math.expm1(-rate * relaunch) / -math.expm1(-rate * away) if away > 0 else 0.0
        return "two-away", time_to_stop, missing, relaunch_part
    q = away_share(group_rate, away)
    stop_rate = rate * (1.0 - q) * _binomial_pmf(g - 1, k_stop - 1, q)
    time_to_stop = math.inf if stop_rate == 0 else 1.0 / stop_rate
    relaunch_part = -math.expm1(-group_rate * relaunch) / q if q > 0 else 0.0
    return "stationary", time_to_stop, q, relaunch_part


def _kept_between_stops(tau: float, blocking: float, lag: float, rec: float, queue: float, rate: float,
                        time_to_stop: float, regime: str, g: int) -> tuple[float, float, float, float]:
    """The checkpoint cycle between whole-job stops: ``(work kept per second, job restarts per second, the share
    of the wall that is training, the error bound)`` (renewal-reward; the bound as :func:`in_job_goodput` says)."""
    first_cycle, later_cycle = cycle_times(tau, blocking, lag)
    # E[rec]: restarted by every failure during it, each of which queues again
    recovery = math.expm1(rate * rec) / rate + queue * math.exp(rate * rec)
    if math.isinf(time_to_stop):  # no stop ever: the survivors' share of the cycle
        return tau / later_cycle, 0.0, 1.0, (math.nan if regime == "stationary" else 0.0)
    nu = 1.0 / time_to_stop
    first_durable = first_cycle + lag
    kept = tau * math.exp(-nu * first_durable) / -math.expm1(-nu * later_cycle)
    cycle = recovery + time_to_stop
    # For any law of T the durable checkpoints number between (T - a)+ / c2 and one more, and
    # E[(T - a)+] lies within a P(T < a) of E[T] - a: one interval per cycle, plus a P(T < a)
    # bounded by the exponential's; the missing groups' share of the lost tail (at most the
    # cycle and the lag, at 1/G) is the other term.
    bound = 0.0 if regime == "restart" else (
        tau * (1.0 + first_durable / later_cycle * -math.expm1(-nu * first_durable)) + (later_cycle + lag) / g
    ) / cycle
    if regime == "stationary":
        bound = math.nan
    return kept / cycle, math.exp(rate * rec) / cycle, time_to_stop / cycle, bound


def predict(config: SimConfig) -> InJobPrediction:
    """:func:`in_job_goodput` for a simulator configuration (its data stall and straggler wait applied).

    Needs Poisson failures each taking one device (no failure domains), and
    ``recovery="in-job"`` (or ``"restart"``, as one group). A group relaunches
    in ``restart_s`` (hot spares are not modelled here) and heals in ``heal_s``.
    """
    check(config.failure_shape == 1.0, "failure_shape", config.failure_shape, "1 (Poisson failures) for the closed form")
    check(config.domain_size == 1, "domain_size", config.domain_size, "1 (a failure takes one device) for the closed form")
    check(config.hot_spares == 0, "hot_spares", config.hot_spares,
          "0 for the closed form (a spare changes the restart as failures come)")
    in_job = config.recovery == "in-job"
    prediction = in_job_goodput(
        interval_s=config.interval_s,
        blocking_s=config.blocking_save_s,
        durable_lag_s=config.save_s if config.is_async else 0.0,
        restart_s=config.restart_s,
        restore_s=config.restore_s,
        relaunch_s=config.restart_s,
        heal_s=config.heal_s if in_job else 0.0,
        failure_rate_per_s=config.failure_rate_per_s,
        groups=config.replica_groups,
        min_groups=config.min_groups,
        collective_timeout_s=config.collective_timeout_s if in_job else 0.0,
        step_overhead_share=config.step_overhead_share if in_job else 0.0,
        queue_s=config.queue_s,
    )
    factor = (1.0 - config.data_stall_fraction) * (1.0 - config.straggler_wait_share)
    return dataclasses.replace(prediction, goodput=prediction.goodput * factor)


def cost_rows(prediction: InJobPrediction) -> list[dict]:
    """What in-job recovery costs, as shares of the wall time: rows ``{cost, share}`` for a table or a chart.

    The missing groups (relaunching, booked ``degraded``, and healing), the detection stall (every group
    waiting in a collective for a dead peer's timeout) and the steady per-step overhead. At Llama 3's
    failure rate with eight groups and torchft's 60 s timeout, the stall costs more than the missing groups.
    """
    return [
        {"cost": "missing groups: relaunch (degraded)", "share": prediction.degraded_share},
        {"cost": "missing groups: heal from a peer", "share": prediction.heal_share},
        {"cost": "detection stall (collective timeout)", "share": prediction.stall_share},
        {"cost": "per-step overhead", "share": prediction.overhead_share},
    ]


def with_group_costs(config: SimConfig, parameters: float, step_s: float, network_bps_per_device: float,
                     **costs: float) -> tuple[InJobPrediction, GroupCosts]:
    """:func:`predict` for ``config`` with the cost of its replica groups as the per-step overhead.

    More groups shrink each group's shard, so every device holds more of the model's state, and add a
    cross-group all-reduce to every step (:func:`goodputlab.theory.in_job_costs.replica_group_costs`,
    ``parameters`` of the model, ``step_s`` seconds of compute a step, ``network_bps_per_device`` bytes
    per second; ``costs``: its other arguments). Returns the prediction and the costs (``fits``: whether
    the state fits a device's memory).
    """
    groups = replica_group_costs(parameters, config.devices, config.replica_groups, step_s, network_bps_per_device,
                                 **costs)
    overhead = 1.0 - (1.0 - config.step_overhead_share) * (1.0 - groups.step_overhead_share)
    changed = dataclasses.replace(config, step_overhead_share=overhead) if config.recovery == "in-job" else config
    return predict(changed), groups
