"""Checkpoint-interval theory: closed forms for the goodput of a job that fails at random.

Every time here is in **seconds**. The symbols follow Daly (2006):

- ``tau`` (``interval_s``): the *checkpoint interval*, the useful compute time
  between two checkpoints, **excluding** the save itself. A job therefore runs
  in segments of ``tau + delta`` wall seconds: ``tau`` of compute, then a save.
  The simulator (:mod:`goodputlab.simulate`) uses the same meaning.
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

And one model of the lab's real runs, which are short enough for their
start-up and their end to matter: :func:`predict_run` (the expectation, with
its spread) and :func:`replay_run` (the same model for given failure times),
fed with the phase costs of :class:`RunTimings` (measured by
:mod:`goodputlab.measure`).

The module also holds the public figures the book reproduces: Llama 3's
pretraining interruptions and the 8.6-interruptions-a-day worked example.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

from goodputlab.categories import (
    CHECKPOINT_RESTORE,
    CHECKPOINT_SAVE,
    DATA_WAIT,
    LOST_WORK,
    OTHER,
    PRODUCTIVE,
    RESTART,
    STARTUP,
    empty_buckets,
)
from goodputlab.errors import check

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


# ---------------------------------------------------------------------------
# input validation shared by the formulas


def _check_save(save_s: float) -> None:
    check(math.isfinite(save_s) and save_s >= 0, "save_s", save_s, "a finite number of seconds >= 0")


def _check_restart(restart_s: float) -> None:
    check(math.isfinite(restart_s) and restart_s >= 0, "restart_s", restart_s, "a finite number of seconds >= 0")


def _check_mtbf(mtbf_s: float) -> None:
    check(math.isfinite(mtbf_s) and mtbf_s > 0, "mtbf_s", mtbf_s, "a finite number of seconds > 0")


def _check_interval(interval_s: float) -> None:
    check(math.isfinite(interval_s) and interval_s > 0, "interval_s", interval_s, "a finite number of seconds > 0")


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
    _check_save(save_s)
    _check_mtbf(mtbf_s)
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
    _check_save(save_s)
    _check_mtbf(mtbf_s)
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
    _check_save(save_s)
    _check_restart(restart_s)
    _check_mtbf(mtbf_s)
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
    - ``R`` not small against ``M``: failures during the restart restart it,
      which first order ignores (optimistic). With M = 2.79 h, tau = 30 min,
      free saves: R = 30 min gives 0.731 (first order) vs 0.763 (exact);
      R = M gives 0 vs 0.336.
    - ``delta`` comparable to ``tau``: the save is counted as ``delta/tau``
      of the time instead of ``delta/(tau + delta)``, and failures during the
      save are ignored. tau = delta = 10 min, M = 2.79 h, R = 0: first order
      0.0, exact 0.471.

    Arguments are seconds: ``interval_s`` (tau > 0), ``save_s`` (delta >= 0),
    ``restart_s`` (R >= 0), ``mtbf_s`` (M > 0); ``data_stall_fraction`` is a
    share in [0, 1).
    """
    _check_interval(interval_s)
    _check_save(save_s)
    _check_restart(restart_s)
    _check_mtbf(mtbf_s)
    check(
        0.0 <= data_stall_fraction < 1.0,
        "data_stall_fraction",
        data_stall_fraction,
        "a share >= 0 and < 1",
    )
    waste = save_s / interval_s + (interval_s / 2.0 + restart_s) / mtbf_s
    return (1.0 - data_stall_fraction) * max(0.0, 1.0 - waste)


def daly_expected_wall_time(
    work_s: float,
    interval_s: float,
    save_s: float,
    restart_s: float,
    mtbf_s: float,
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
    """
    check(math.isfinite(work_s) and work_s >= 0, "work_s", work_s, "a finite number of seconds >= 0")
    _check_interval(interval_s)
    _check_save(save_s)
    _check_restart(restart_s)
    _check_mtbf(mtbf_s)
    exponent = restart_s / mtbf_s + (interval_s + save_s) / mtbf_s
    if exponent > 700:  # exp() would overflow: the job practically never finishes
        return math.inf if work_s > 0 else 0.0
    per_segment = mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((interval_s + save_s) / mtbf_s)
    return per_segment * work_s / interval_s


def daly_goodput(interval_s: float, save_s: float, restart_s: float, mtbf_s: float) -> float:
    """Goodput (share of wall time) under Daly's complete model: ``T_s / T_wall``.

    ``goodput = tau / (M * exp(R/M) * (exp((tau + delta)/M) - 1))``, all in
    seconds; see :func:`daly_expected_wall_time`. With ``delta = R = 0`` this is
    exactly :func:`exact_goodput_free`.
    """
    return 1.0 / daly_expected_wall_time(1.0, interval_s, save_s, restart_s, mtbf_s)


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
    _check_interval(interval_s)
    _check_mtbf(mtbf_s)
    x = interval_s / mtbf_s
    if x > 700:  # expm1 would overflow; the goodput is below 1e-300
        return 0.0
    return x / math.expm1(x)


# ---------------------------------------------------------------------------
# the lab: a fixed number of steps, failure clocks that start at each launch
#
# Daly's model describes an endless job. A measured lab run differs in ways
# that matter at a lab's scale (a run of seconds, an MTBF of seconds):
#
# - the work is fixed (``steps``), so the run ends when it is done and the
#   wall time is the random quantity; goodput = productive / wall;
# - a first launch (process start, imports, model construction) before any
#   step, which failures can hit, and the same launch after every failure;
# - each attempt's failure clock starts at its launch and stops at the kill,
#   so the pause between a kill and the next launch (``relaunch_delay_s``) is
#   safe from failures, while the launch and the restore are exposed;
# - before the first checkpoint a restart has nothing to restore;
# - the last segment is partial (``steps`` need not be a multiple of the
#   interval), ends with the final save and the process's exit;
# - each step spends some time waiting for data and on bookkeeping: wall
#   time that is not compute, never productive.
#
# Failures are Poisson with mean gap ``mtbf_s`` while a worker runs, so the
# time a window of ``x`` exposed seconds takes to complete, when every failure
# costs a penalty ``P`` and a retry, is a compound geometric sum: the number of
# failures ``F`` before the window succeeds is geometric with success chance
# ``exp(-x/M)``, each failed try lasts ``Y`` (exponential, conditioned on
# ``Y < x``), and ``E = (exp(x/M) - 1) (M + E[P])``. Its variance follows from
# the same sum, which is what lets :func:`predict_run` say how much one run
# should scatter around the expectation.


@dataclass(frozen=True)
class RunTimings:
    """How long each phase of a lab run takes, in seconds (means, usually measured).

    :func:`goodputlab.measure.measure_timings` reads them from a run's event log.

    - ``compute_s``: forward, backward and optimizer step of one step (> 0).
    - ``data_wait_s``: per step, the loop blocked on the next batch.
    - ``step_other_s``: per step, bookkeeping after the step (logging).
    - ``save_s``: the blocking save of one checkpoint.
    - ``launch_s``: from launching a worker to its first step, restore excluded
      (interpreter start, imports, model construction, input pipeline warm-up).
    - ``restore_s``: loading a checkpoint after a restart.
    - ``relaunch_delay_s``: from a kill to the next launch (cleaning up and the
      emulated rescheduling delay); no worker runs, so no failure can strike.
    - ``exit_s``: from the end of the final save until the worker has exited.
    - ``start_s``, ``teardown_s``: the supervisor's own set-up before the first
      launch and its wrap-up after the last exit (booked ``startup`` and ``other``).
    """

    compute_s: float
    data_wait_s: float = 0.0
    step_other_s: float = 0.0
    save_s: float = 0.0
    launch_s: float = 0.0
    restore_s: float = 0.0
    relaunch_delay_s: float = 0.0
    exit_s: float = 0.0
    start_s: float = 0.0
    teardown_s: float = 0.0

    def __post_init__(self) -> None:
        check(
            isinstance(self.compute_s, (int, float)) and math.isfinite(self.compute_s) and self.compute_s > 0,
            "compute_s",
            self.compute_s,
            "a finite number of seconds > 0",
        )
        for name in (
            "data_wait_s",
            "step_other_s",
            "save_s",
            "launch_s",
            "restore_s",
            "relaunch_delay_s",
            "exit_s",
            "start_s",
            "teardown_s",
        ):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
            check(ok, name, value, "a finite number of seconds >= 0")

    @property
    def step_s(self) -> float:
        """Wall seconds of one step: compute + data wait + bookkeeping."""
        return self.compute_s + self.data_wait_s + self.step_other_s

    def to_dict(self) -> dict[str, float]:
        """The fields as a plain dict (for JSON and tables)."""
        return dict(dataclasses.asdict(self))


@dataclass(frozen=True)
class RunPrediction:
    """What a model says one lab run will do.

    ``wall_s``: expected wall time (seconds); ``goodput``: productive seconds
    over ``wall_s`` (the work is fixed, so this is ``E[productive] / E[wall]``);
    ``failures``: expected number of failures; ``buckets``: expected seconds
    per ledger category (they sum to ``wall_s``); ``wall_sd_s``: standard
    deviation of one run's wall time (0 for a replay of given failure times).
    """

    wall_s: float
    goodput: float
    failures: float
    buckets: dict[str, float]
    wall_sd_s: float = 0.0

    @property
    def goodput_sd(self) -> float:
        """Approximate standard deviation of one run's goodput (delta method:
        ``goodput * wall_sd_s / wall_s``)."""
        return self.goodput * self.wall_sd_s / self.wall_s if self.wall_s > 0 else 0.0

    def breakdown_rows(self, run: str = "predicted") -> list[dict]:
        """Tidy rows for a chart, like :meth:`goodputlab.simulate.SimResult.breakdown_rows`."""
        return [
            {"run": run, "category": c, "seconds": s, "hours": s / 3600.0, "share": s / self.wall_s}
            for c, s in self.buckets.items()
        ]


def _check_lab_plan(steps: int, ckpt_every: int, mtbf_s: float) -> None:
    check(
        isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1, "steps", steps, "an integer >= 1"
    )
    check(
        isinstance(ckpt_every, int) and not isinstance(ckpt_every, bool) and ckpt_every >= 0,
        "ckpt_every",
        ckpt_every,
        "an integer number of steps >= 0 (0: only the final save)",
    )
    check(
        isinstance(mtbf_s, (int, float)) and not isinstance(mtbf_s, bool) and mtbf_s > 0 and not math.isnan(mtbf_s),
        "mtbf_s",
        mtbf_s,
        "a number of seconds > 0 (math.inf for no failures)",
    )


def _segment_plan(steps: int, ckpt_every: int) -> list[tuple[int, int, bool, bool]]:
    """The run's checkpoint segments grouped: ``(count, steps, is_first, is_last)``.

    A checkpoint is saved every ``ckpt_every`` steps and after the final step,
    so there are ``steps // k`` segments of ``k`` steps and, when ``k`` does not
    divide ``steps``, a last partial one. ``ckpt_every`` 0 (or >= ``steps``)
    means one segment: only the final save.
    """
    k = ckpt_every if 0 < ckpt_every < steps else steps
    full, rest = divmod(steps, k)
    sizes_last = rest if rest else k
    count = full + (1 if rest else 0)
    if count == 1:
        return [(1, k, True, True)]
    plan = [(1, k, True, False)]
    if count > 2:
        plan.append((count - 2, k, False, False))
    plan.append((1, sizes_last, False, True))
    return plan


def _lower_gamma_regularized(a: int, z: float) -> float:
    """P(a, z) for a small integer ``a``: the chance that a Gamma(a) variable is below ``z``.

    A series with positive terms (no cancellation) for z <= 1, the finite
    closed form ``1 - exp(-z) sum_{j<a} z^j/j!`` above.
    """
    if z <= 1.0:
        term = math.exp(-z) * z**a / math.factorial(a)
        total, n = 0.0, 0
        while term > 1e-18 * max(total, 1e-300):
            total += term
            n += 1
            term *= z / (a + n)
        return total
    return -math.expm1(-z) if a == 1 else 1.0 - math.exp(-z) * sum(z**j / math.factorial(j) for j in range(a))


def _failed_try(x: float, mtbf_s: float) -> tuple[float, float, float, float]:
    """Moments for a window of ``x`` exposed seconds that must pass without a failure.

    Returns ``(mean_failures, var_failures, mean_try, var_try)``: the number of
    failures before the window succeeds (geometric, success chance
    ``exp(-x/M)``), and the length of one failed try, an exponential
    conditioned to be shorter than ``x``.
    """
    if x <= 0 or math.isinf(mtbf_s):
        return 0.0, 0.0, 0.0, 0.0
    z = x / mtbf_s
    if z > 700:
        return math.inf, math.inf, x, 0.0
    mean_failures = math.expm1(z)
    var_failures = math.exp(z) * mean_failures
    p1 = _lower_gamma_regularized(1, z)
    mean_try = mtbf_s * _lower_gamma_regularized(2, z) / p1
    second = 2.0 * mtbf_s**2 * _lower_gamma_regularized(3, z) / p1
    return mean_failures, var_failures, mean_try, max(0.0, second - mean_try**2)


def _time_in(start: float, end: float, x: float, mtbf_s: float) -> float:
    """Expected seconds a failed try of window ``x`` spends in ``[start, end)`` of it.

    ``integral_start^end P(Y > t | Y < x) dt`` for ``Y`` exponential with mean
    ``M``: the try runs through ``t`` unless it failed before.
    """
    if end <= start or x <= 0:
        return 0.0
    z = x / mtbf_s
    if z < 1e-9:  # the failure is uniform over the window
        return (end - start) * (x - 0.5 * (start + end)) / x
    survive_part = mtbf_s * math.exp(-start / mtbf_s) * -math.expm1(-(end - start) / mtbf_s)
    return (survive_part - (end - start) * math.exp(-z)) / -math.expm1(-z)


def _complete_window(x: float, mtbf_s: float, penalty_mean: float, penalty_var: float) -> tuple[float, float]:
    """Mean and variance of the wall time to get ``x`` failure-free exposed seconds,
    when each failure costs a random penalty (mean, variance) before the retry."""
    ef, vf, ey, vy = _failed_try(x, mtbf_s)
    if math.isinf(ef):
        return math.inf, math.inf
    per_failure = ey + penalty_mean
    return x + ef * per_failure, ef * (vy + penalty_var) + vf * per_failure**2


def predict_run(timings: RunTimings, steps: int, ckpt_every: int, mtbf_s: float) -> RunPrediction:
    """Expected wall time, goodput, failures and time breakdown of one lab run.

    The run does ``steps`` steps, checkpointing every ``ckpt_every`` steps and
    after the last (``ckpt_every`` 0: only then); failures are Poisson with
    mean gap ``mtbf_s`` seconds of a worker's run time (``math.inf``: none);
    ``timings`` holds the phase costs (see :class:`RunTimings`). With
    ``s = timings.step_s``, ``delta = save_s``, ``L = launch_s``,
    ``r = restore_s``, ``D = relaunch_delay_s``, ``M = mtbf_s``:

    - a segment of ``n`` steps exposes ``a = n s + delta`` seconds (the last
      also ``exit_s``); it is retried after every failure in it, and each
      failure costs ``D``, then a relaunch window ``R = L + r`` (``L`` before
      the first checkpoint), itself retried when a failure hits it. Expected
      time for the segment, failures and recoveries included:
      ``(exp(a/M) - 1) (M + D) exp(R/M)``, Daly's per-segment term (with his
      ``exp(R/M)``) plus the safe pause ``D``;
    - the first launch: ``(exp(L/M) - 1)(M + D)``; plus the supervisor's
      ``start_s`` and ``teardown_s``.

    Expected wall time is the sum over segments; goodput is
    ``steps * compute_s / E[wall]``. For ``M -> inf`` it reduces to the
    failure-free timeline ``start + L + steps*s + saves*delta + exit + teardown``.
    The spread ``wall_sd_s`` is exact for this model (segments are
    independent because failures are memoryless): a compound geometric sum
    per segment. The breakdown books each expected second as the lab's ledger
    does (:mod:`goodputlab.ledger`): compute of rolled-back steps is
    ``lost_work``, their data waits stay ``data_wait``, relaunches after the
    first are ``restart``, and so on.

    :func:`replay_run` is the same model for given failure times; averaged
    over random times it converges to this function (a test checks it).
    """
    _check_lab_plan(steps, ckpt_every, mtbf_s)

    tm = timings
    step_s, save, launch, restore, pause = tm.step_s, tm.save_s, tm.launch_s, tm.restore_s, tm.relaunch_delay_s
    buckets = empty_buckets()

    # the first launch: its first try is "startup", every retry is "restart"
    start_mean, start_var = _complete_window(launch, mtbf_s, pause, 0.0)
    first_try = launch if math.isinf(mtbf_s) else mtbf_s * -math.expm1(-launch / mtbf_s)
    buckets[STARTUP] += tm.start_s + first_try
    buckets[RESTART] += start_mean - first_try
    wall, var = tm.start_s + start_mean + tm.teardown_s, start_var
    buckets[OTHER] += tm.teardown_s
    failures = _failed_try(launch, mtbf_s)[0]

    for count, n, is_first, is_last in _segment_plan(steps, ckpt_every):
        window = n * step_s + save + (tm.exit_s if is_last else 0.0)
        relaunch = launch + (0.0 if is_first else restore)
        # the penalty of one failure in the segment: the pause, then the relaunch window
        relaunch_mean, relaunch_var = _complete_window(relaunch, mtbf_s, pause, 0.0)
        seg_mean, seg_var = _complete_window(window, mtbf_s, pause + relaunch_mean, relaunch_var)
        wall += count * seg_mean
        var += count * seg_var
        seg_failures = _failed_try(window, mtbf_s)[0]
        relaunch_failures = _failed_try(relaunch, mtbf_s)[0]
        failures += count * seg_failures * (1.0 + relaunch_failures)

        # the try that succeeds
        done = {
            PRODUCTIVE: n * tm.compute_s,
            DATA_WAIT: n * tm.data_wait_s,
            OTHER: n * tm.step_other_s + (tm.exit_s if is_last else 0.0),
            CHECKPOINT_SAVE: save,
        }
        # the tries that fail, spread over the phases they reached
        in_steps = seg_failures * _time_in(0.0, n * step_s, window, mtbf_s) if seg_failures else 0.0
        lost = {
            LOST_WORK: in_steps * tm.compute_s / step_s,
            DATA_WAIT: in_steps * tm.data_wait_s / step_s,
            OTHER: in_steps * tm.step_other_s / step_s
            + (seg_failures * _time_in(n * step_s + save, window, window, mtbf_s) if seg_failures else 0.0),
            CHECKPOINT_SAVE: seg_failures * _time_in(n * step_s, n * step_s + save, window, mtbf_s)
            if seg_failures
            else 0.0,
        }
        # each failure: the pause, then launch (restart) and restore, retried on failure
        in_launch = relaunch_failures * _time_in(0.0, launch, relaunch, mtbf_s) if relaunch_failures else 0.0
        in_restore = relaunch_failures * _time_in(launch, relaunch, relaunch, mtbf_s) if relaunch_failures else 0.0
        recovery = {
            RESTART: seg_failures * (pause * (1.0 + relaunch_failures) + in_launch + launch),
            CHECKPOINT_RESTORE: seg_failures * (in_restore + relaunch - launch),
        }
        for part in (done, lost, recovery):
            for category, seconds in part.items():
                buckets[category] += count * seconds

    productive = steps * tm.compute_s
    return RunPrediction(
        wall_s=wall,
        goodput=productive / wall if math.isfinite(wall) else 0.0,
        failures=failures,
        buckets=buckets,
        wall_sd_s=math.sqrt(var) if math.isfinite(var) else math.inf,
    )


def predict_run_goodput(timings: RunTimings, steps: int, ckpt_every: int, mtbf_s: float) -> float:
    """Expected goodput (a share) of a lab run: :func:`predict_run`'s ``goodput``."""
    return predict_run(timings, steps, ckpt_every, mtbf_s).goodput


def optimal_ckpt_every(timings: RunTimings, steps: int, mtbf_s: float) -> int:
    """The checkpoint interval, in steps (1 to ``steps``), that maximises :func:`predict_run_goodput`.

    A scan over every interval: exact for the lab model, including the effects
    Young and Daly leave out (the partial last segment, the relaunch costs).
    """
    _check_lab_plan(steps, 0, mtbf_s)
    best, best_goodput = steps, -1.0
    for k in range(1, steps + 1):
        g = predict_run_goodput(timings, steps, k, mtbf_s)
        if g > best_goodput:
            best, best_goodput = k, g
    return best


def replay_run(
    timings: RunTimings,
    steps: int,
    ckpt_every: int,
    times_to_failure: Sequence[float],
    launch_s_by_attempt: Sequence[float] | None = None,
) -> RunPrediction:
    """The lab model's timeline for given failure times: wall time, goodput, breakdown.

    ``times_to_failure[i]`` is how long attempt ``i`` would run before its
    failure, counted from its launch (the supervisor draws one per attempt);
    when the list runs out, no more failures. ``launch_s_by_attempt[i]``, if
    given, replaces ``timings.launch_s`` for attempt ``i`` (on a busy machine
    one launch can take twice as long as another, which decides whether a
    failure strikes during the launch or during training). Deterministic: the
    same model as :func:`predict_run` (same phases, same booking), walked
    attempt by attempt instead of averaged. Used to compare a measured run
    with the model under the very failure times the run saw, which removes
    the randomness of the failures from the comparison.
    """
    _check_lab_plan(steps, ckpt_every, math.inf)

    tm = timings
    step_s = tm.step_s
    k = ckpt_every if 0 < ckpt_every < steps else steps
    buckets = empty_buckets()
    buckets[STARTUP] += tm.start_s
    wall = tm.start_s
    committed = 0  # steps in the newest checkpoint
    failures = 0
    draws = iter(times_to_failure)

    def book_steps(seconds: float, category_for_compute: str) -> None:
        buckets[category_for_compute] += seconds * tm.compute_s / step_s
        buckets[DATA_WAIT] += seconds * tm.data_wait_s / step_s
        buckets[OTHER] += seconds * tm.step_other_s / step_s

    attempt = 0
    while True:
        ttf = next(draws, math.inf)
        check(ttf >= 0 and not math.isnan(ttf), "times_to_failure", ttf, "seconds >= 0")
        launch_category = STARTUP if attempt == 0 else RESTART
        launch = tm.launch_s
        if launch_s_by_attempt is not None and attempt < len(launch_s_by_attempt):
            launch = launch_s_by_attempt[attempt]
            check(launch >= 0 and math.isfinite(launch), "launch_s_by_attempt", launch, "seconds >= 0")
        restore = tm.restore_s if committed > 0 else 0.0
        if ttf < launch + restore:  # killed while launching or restoring
            buckets[launch_category] += min(ttf, launch)
            buckets[CHECKPOINT_RESTORE] += max(0.0, ttf - launch)
            buckets[RESTART] += tm.relaunch_delay_s
            wall += ttf + tm.relaunch_delay_s
            failures += 1
            attempt += 1
            continue
        buckets[launch_category] += launch
        buckets[CHECKPOINT_RESTORE] += restore
        wall += launch + restore
        left = ttf - launch - restore  # training seconds before the kill

        # whole segments that are not the last one, in one go
        last_start = ((steps - 1) // k) * k  # first step of the last segment
        full_window = k * step_s + tm.save_s
        remaining = max(0, (last_start - committed) // k)
        whole = remaining if left >= remaining * full_window else min(int(left // full_window), remaining)
        if whole:
            n = whole * k
            buckets[PRODUCTIVE] += n * tm.compute_s
            buckets[DATA_WAIT] += n * tm.data_wait_s
            buckets[OTHER] += n * tm.step_other_s
            buckets[CHECKPOINT_SAVE] += whole * tm.save_s
            wall += whole * full_window
            left = max(0.0, left - whole * full_window)
            committed += n

        n = min(k, steps - committed)
        is_last = committed + n == steps
        window = n * step_s + tm.save_s + (tm.exit_s if is_last else 0.0)
        if is_last and left >= window:
            buckets[PRODUCTIVE] += n * tm.compute_s
            buckets[DATA_WAIT] += n * tm.data_wait_s
            buckets[OTHER] += n * tm.step_other_s + tm.exit_s
            buckets[CHECKPOINT_SAVE] += tm.save_s
            wall += window + tm.teardown_s
            buckets[OTHER] += tm.teardown_s
            break
        # killed inside this segment: its steps are lost, the save did not commit
        in_steps = min(left, n * step_s)
        book_steps(in_steps, LOST_WORK)
        buckets[CHECKPOINT_SAVE] += min(max(0.0, left - n * step_s), tm.save_s)
        buckets[OTHER] += max(0.0, left - n * step_s - tm.save_s)
        buckets[RESTART] += tm.relaunch_delay_s
        wall += left + tm.relaunch_delay_s
        failures += 1
        attempt += 1

    return RunPrediction(
        wall_s=wall, goodput=buckets[PRODUCTIVE] / wall, failures=float(failures), buckets=buckets
    )


# ---------------------------------------------------------------------------
# clusters of independent devices


def _check_devices(n_devices: int) -> None:
    check(
        isinstance(n_devices, int) and not isinstance(n_devices, bool) and n_devices >= 1,
        "n_devices",
        n_devices,
        "an integer >= 1",
    )


def cluster_mtbf(n_devices: int, device_mtbf_s: float) -> float:
    """Job-level MTBF (seconds) of ``n_devices`` that each fail independently.

    Each device fails as a Poisson process with rate ``1/device_mtbf_s``; a
    synchronous job stops when any one fails, and the superposition of
    independent Poisson processes is Poisson with the summed rate, so the job's
    MTBF is ``device_mtbf_s / n_devices``.
    """
    _check_devices(n_devices)
    check(
        math.isfinite(device_mtbf_s) and device_mtbf_s > 0,
        "device_mtbf_s",
        device_mtbf_s,
        "a finite number of seconds > 0",
    )
    return device_mtbf_s / n_devices


def expected_failures(n_devices: int, device_mtbf_s: float, duration_s: float) -> float:
    """Expected number of job failures in ``duration_s`` seconds: ``n * T / M_device``."""
    check(math.isfinite(duration_s) and duration_s >= 0, "duration_s", duration_s, "a finite number of seconds >= 0")
    return duration_s / cluster_mtbf(n_devices, device_mtbf_s)


def p_any_failure(n_devices: int, device_mtbf_s: float, duration_s: float) -> float:
    """Probability that at least one of ``n_devices`` fails within ``duration_s`` seconds.

    ``1 - exp(-n * T / M_device)``: the chance the job's first Poisson event
    comes before ``T``.
    """
    return -math.expm1(-expected_failures(n_devices, device_mtbf_s, duration_s))


def device_mtbf_for_count(n_devices: int, duration_s: float, failure_count: float) -> float:
    """Per-device MTBF (seconds) that makes ``failure_count`` job failures expected.

    The inverse of :func:`expected_failures`: ``n * T / count``. For Llama 3
    (16,384 GPUs, 54 days, 466 interruptions) it is about 5.2 years per GPU.
    """
    _check_devices(n_devices)
    check(math.isfinite(duration_s) and duration_s > 0, "duration_s", duration_s, "a finite number of seconds > 0")
    check(math.isfinite(failure_count) and failure_count > 0, "failure_count", failure_count, "a number > 0")
    return n_devices * duration_s / failure_count


# ---------------------------------------------------------------------------
# public figures
#
# Llama 3 pretraining: "The Llama 3 Herd of Models", Llama Team, AI @ Meta,
# 2024, section 3.3.4 (Reliability and Operational Challenges) and Table 5.
# A 54-day snapshot of the 405B pretraining run on 16,384 H100 GPUs.

LLAMA3_DAYS = 54
LLAMA3_DURATION_S = LLAMA3_DAYS * SECONDS_PER_DAY
LLAMA3_GPUS = 16_384
LLAMA3_INTERRUPTIONS = 466  # all job interruptions in the snapshot
LLAMA3_PLANNED_INTERRUPTIONS = 47  # automated maintenance (firmware, config, dataset updates)
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419  # the rows of Table 5
LLAMA3_EFFECTIVE_TRAINING_TIME = 0.90  # reported as "higher than 90%": a lower bound

# Table 5, root causes of the 419 unexpected interruptions: (component,
# category as the paper groups it, count). The paper's percentage column has
# Faulty GPU at 30.1%, which does not match 148/419 = 35.3% (the other rows do
# match count/419); we keep the counts, which sum to 419, and recompute shares.
_LLAMA3_TABLE5 = (
    ("Faulty GPU", "GPU", 148),
    ("GPU HBM3 memory", "GPU", 72),
    ("Software bug", "Dependency", 54),
    ("Network switch/cable", "Network", 35),
    ("Host maintenance", "Unplanned maintenance", 32),
    ("GPU SRAM memory", "GPU", 19),
    ("GPU system processor", "GPU", 17),
    ("NIC", "Host", 7),
    ("NCCL watchdog timeouts", "Unknown", 7),
    ("Silent data corruption", "GPU", 6),
    ("GPU thermal interface + sensor", "GPU", 6),
    ("SSD", "Host", 3),
    ("Power supply", "Host", 3),
    ("Server chassis", "Host", 2),
    ("IO expansion board", "Host", 2),
    ("Dependency", "Dependency", 2),
    ("CPU", "Host", 2),
    ("System memory", "Host", 2),
)

#: Table 5 as chart-ready rows: cause, component category, count, share of the 419.
LLAMA3_INTERRUPTION_CAUSES: list[dict] = [
    {"cause": cause, "component": component, "count": count, "share": count / LLAMA3_UNEXPECTED_INTERRUPTIONS}
    for cause, component, count in _LLAMA3_TABLE5
]


def llama3_cause_table(include_planned: bool = True) -> list[tuple[str, int]]:
    """Llama 3's interruption causes as ``(cause, count)`` pairs for :class:`~goodputlab.simulate.SimConfig`.

    The counts are over the 54-day snapshot on 16,384 GPUs. With
    ``include_planned`` a row "Planned maintenance" (47) is added so the table
    sums to all 466 interruptions; without it, to the 419 unexpected ones.
    """
    rows = [(cause, count) for cause, _, count in _LLAMA3_TABLE5]
    if include_planned:
        rows.append(("Planned maintenance", LLAMA3_PLANNED_INTERRUPTIONS))
    return rows


def llama3_mtbf_s() -> float:
    """Llama 3's job-level MTBF in seconds: 54 days over 466 interruptions, about 2.78 hours."""
    return LLAMA3_DURATION_S / LLAMA3_INTERRUPTIONS


def _compact_duration(seconds: float) -> str:
    """``"2 h"``, ``"30 min"``, ``"45 s"``: a round duration in its largest whole unit."""
    for unit, name in ((3600.0, "h"), (60.0, "min")):
        if seconds >= unit and (seconds / unit) == round(seconds / unit, 1):
            return f"{seconds / unit:g} {name}"
    return f"{seconds:g} s"


def llama3_cost_grid(
    intervals_s: Sequence[float],
    restarts_s: Sequence[float],
    save_s: float,
    mtbf_s: float | None = None,
) -> list[dict]:
    """Daly's goodput at Llama 3's interruption rate for each (checkpoint interval, restart time).

    Which checkpoint and restart costs give the reported "effective training
    time above 90%"? ``intervals_s`` and ``restarts_s`` are in seconds,
    ``save_s`` the blocking part of a save (seconds); ``mtbf_s`` defaults to
    :func:`llama3_mtbf_s` (all 466 interruptions counted as failures). One row
    per pair: ``interval_s, restart_s, goodput``, and ``x_label``, ``y_label``,
    ``x_title``, ``y_title`` for :func:`goodputlab.charts.theory.goodput_grid_chart`.
    """
    mtbf = llama3_mtbf_s() if mtbf_s is None else mtbf_s
    rows = []
    for restart in restarts_s:
        for interval in intervals_s:
            rows.append(
                {
                    "interval_s": float(interval),
                    "restart_s": float(restart),
                    "goodput": daly_goodput(interval, save_s, restart, mtbf),
                    "x_label": _compact_duration(interval),
                    "y_label": _compact_duration(restart),
                    "x_title": "checkpoint interval",
                    "y_title": "restart (detect, reschedule, reload)",
                }
            )
    return rows


# The GUIDE's worked example: about 8.6 interruptions a day (Llama 3's rate,
# 466 / 54 = 8.63). First order: a 2-hour interval loses ~1 h per failure,
# 8.6 h a day (64% goodput); a 30-minute interval ~2.15 h a day (91%).
WORKED_EXAMPLE_INTERRUPTIONS_PER_DAY = 8.6
WORKED_EXAMPLE_MTBF_S = SECONDS_PER_DAY / WORKED_EXAMPLE_INTERRUPTIONS_PER_DAY  # ~10,047 s = 2.79 h


def human_duration(seconds: float) -> str:
    """A short human form of a duration in seconds: ``"1h 12m"``, ``"4m 30s"``, ``"2d 3h"``."""
    check(math.isfinite(seconds) and seconds >= 0, "seconds", seconds, "a finite number of seconds >= 0")
    if seconds < 60:
        return f"{seconds:.3g}s"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s"
