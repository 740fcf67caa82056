"""The lab-run model: what a measured run of this lab should do, and the optimal interval in steps.


Daly's model describes an endless job. A measured lab run differs in ways
that matter at a lab's scale (a run of seconds, an MTBF of seconds):

- the work is fixed (``steps``), so the run ends when it is done and the
  wall time is the random quantity; goodput = productive / wall;
- a first launch (process start, imports, model construction) before any
  step, which failures can hit, and the same launch after every failure;
- each attempt's failure clock starts at its first step (the lab's default,
  ``clock="train"``: failures strike the time the job could be training) or,
  with ``clock="wall"``, at its launch, so that the launch and the restore are
  exposed too; it stops at the kill, so the pause between a kill and the next
  launch (``relaunch_delay_s``) is always safe from failures;
- before the first checkpoint a restart has nothing to restore;
- the last segment is partial (``steps`` need not be a multiple of the
  interval), ends with the final save and the process's exit;
- each step spends some time waiting for data and on bookkeeping: wall
  time that is not compute, never productive.

Failures are Poisson with mean gap ``mtbf_s`` while a worker runs, so the
time a window of ``x`` exposed seconds takes to complete, when every failure
costs a penalty ``P`` and a retry, is a compound geometric sum: the number of
failures ``F`` before the window succeeds is geometric with success chance
``exp(-x/M)``, each failed try lasts ``Y`` (exponential, conditioned on
``Y < x``), and ``E = (exp(x/M) - 1) (M + E[P])``. Its variance follows from
the same sum, which is what lets :func:`predict_run` say how much one run
should scatter around the expectation.

:func:`predict_run` gives the expectation (with its spread), :func:`replay_run`
the same model for given failure times; both are fed with the phase costs of
:class:`RunTimings` (measured by :func:`goodputlab.experiments.interval_sweep.measure_timings`).
:func:`textbook_goodput` applies Young's and Daly's textbook models to the same
costs, to show what they leave out. Times in seconds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import NamedTuple

from .. import validate
from ..categories import (
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
from .closed_forms import daly_goodput, expected_goodput

TRAIN_CLOCK, WALL_CLOCK = "train", "wall"  # as goodputlab.recovery.modes names the failure clocks


@dataclass(frozen=True)
class RunTimings:
    """How long each phase of a lab run takes, in seconds (means, usually measured).

    :func:`goodputlab.experiments.interval_sweep.measure_timings` reads them from a run's event log.

    - ``compute_s``: forward, backward and optimizer step of one step (> 0).
    - ``data_wait_s``: per step, the loop blocked on the next batch.
    - ``step_other_s``: per step, bookkeeping after the step (logging).
    - ``save_s``: the blocking save of one checkpoint.
    - ``launch_s``: from launching a worker to its first step, restore excluded
      (interpreter start, imports, model construction, input pipeline warm-up).
    - ``spare_launch_s``: with a hot spare, from the handover to a restarted worker's first
      step, restore excluded (the standby had started already; ``None``: restarts launch a
      new worker, ``launch_s``).
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
    spare_launch_s: float | None = None

    def __post_init__(self) -> None:
        validate.seconds("compute_s", self.compute_s, positive=True)
        for f in dataclasses.fields(self)[1:]:
            if f.name == "spare_launch_s" and self.spare_launch_s is None:
                continue
            validate.seconds(f.name, getattr(self, f.name))

    @property
    def relaunch_s(self) -> float:
        """The launch part of a restart: the hot spare's handover, or a new worker's launch."""
        return self.launch_s if self.spare_launch_s is None else self.spare_launch_s

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
        """Tidy rows for a chart, like :meth:`goodputlab.theory.simulator.SimResult.breakdown_rows`."""
        return [
            {"run": run, "category": c, "seconds": s, "hours": s / 3600.0, "share": s / self.wall_s}
            for c, s in self.buckets.items()
        ]


def check_lab_plan(steps: int, ckpt_every: int, mtbf_s: float) -> None:
    validate.whole("steps", steps, 1)
    validate.whole("ckpt_every", ckpt_every, 0, unit="steps", note="0: only the final save")
    validate.number("mtbf_s", mtbf_s, 0, low_open=True, unit="seconds", allow_inf=True, note="math.inf for no failures")


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


def predict_run(timings: RunTimings, steps: int, ckpt_every: int, mtbf_s: float, clock: str = TRAIN_CLOCK) -> RunPrediction:
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

    That is the ``wall`` clock (``clock="wall"``: failures from each launch). With the ``train``
    clock (the default, as the lab's runs) launches and restores are not exposed: ``R`` and the
    first launch take their own time, never retried, and a segment takes
    ``(exp(a/M) - 1) (M + D + R)`` in expectation.

    Expected wall time is the sum over segments; goodput is
    ``steps * compute_s / E[wall]``. For ``M -> inf`` it reduces to the
    failure-free timeline ``start + L + steps*s + saves*delta + exit + teardown``.
    The spread ``wall_sd_s`` is exact for this model (segments are
    independent because failures are memoryless): a compound geometric sum
    per segment. The breakdown books each expected second as the lab's ledger
    does (:mod:`goodputlab.measure.ledger`): compute of rolled-back steps is
    ``lost_work``, their data waits stay ``data_wait``, relaunches after the
    first are ``restart``, and so on.

    :func:`replay_run` is the same model for given failure times; averaged
    over random times it converges to this function (a test checks it).
    """
    check_lab_plan(steps, ckpt_every, mtbf_s)
    launch_mtbf_s = launch_mtbf(mtbf_s, clock)
    buckets = empty_buckets()
    wall, var, failures = _expect_first_launch(timings, launch_mtbf_s, buckets)
    for count, n, is_first, is_last in _segment_plan(steps, ckpt_every):
        seg = _expect_segment(timings, n, is_first, is_last, mtbf_s, launch_mtbf_s)
        wall += count * seg.wall_mean
        var += count * seg.wall_var
        failures += count * seg.failures * (1.0 + seg.relaunch_failures)
        for part in seg.booked:
            for category, seconds in part.items():
                buckets[category] += count * seconds

    productive = steps * timings.compute_s
    return RunPrediction(
        wall_s=wall,
        goodput=productive / wall if math.isfinite(wall) else 0.0,
        failures=failures,
        buckets=buckets,
        wall_sd_s=math.sqrt(var) if math.isfinite(var) else math.inf,
    )


def launch_mtbf(mtbf_s: float, clock: str) -> float:
    """The MTBF a launch and a restore see: the run's with the wall clock, none (inf) with the train clock."""
    if clock not in (TRAIN_CLOCK, WALL_CLOCK):
        raise ValueError(f"clock={clock!r} is invalid: {TRAIN_CLOCK} or {WALL_CLOCK}")
    return mtbf_s if clock == WALL_CLOCK else math.inf


def _expect_first_launch(tm: RunTimings, mtbf_s: float, buckets: dict[str, float]) -> tuple[float, float, float]:
    """Book the supervisor's start, the first launch and the teardown; ``(wall mean, wall variance, failures)``.

    The first launch's first try is ``startup``, every retry is ``restart``.
    """
    start_mean, start_var = _complete_window(tm.launch_s, mtbf_s, tm.relaunch_delay_s, 0.0)
    first_try = tm.launch_s if math.isinf(mtbf_s) else mtbf_s * -math.expm1(-tm.launch_s / mtbf_s)
    buckets[STARTUP] += tm.start_s + first_try
    buckets[RESTART] += start_mean - first_try
    buckets[OTHER] += tm.teardown_s
    return tm.start_s + start_mean + tm.teardown_s, start_var, _failed_try(tm.launch_s, mtbf_s)[0]


class _SegmentExpectation(NamedTuple):
    wall_mean: float
    wall_var: float
    failures: float
    """expected failures while the segment runs"""
    relaunch_failures: float
    """expected failures while relaunching after one of them"""
    booked: tuple[dict[str, float], ...]
    """expected seconds per category: the try that succeeds, the tries that fail, the recoveries"""


def _expect_segment(
    tm: RunTimings, n: int, is_first: bool, is_last: bool, mtbf_s: float, launch_mtbf_s: float
) -> _SegmentExpectation:
    """One checkpoint segment of ``n`` steps, retried until it completes, with its recoveries
    (relaunches exposed to failures with mean gap ``launch_mtbf_s``: inf with the train clock)."""
    step_s, save, launch, pause = tm.step_s, tm.save_s, tm.relaunch_s, tm.relaunch_delay_s
    window = n * step_s + save + (tm.exit_s if is_last else 0.0)
    relaunch = launch + (0.0 if is_first else tm.restore_s)
    # the penalty of one failure in the segment: the pause, then the relaunch window
    relaunch_mean, relaunch_var = _complete_window(relaunch, launch_mtbf_s, pause, 0.0)
    seg_mean, seg_var = _complete_window(window, mtbf_s, pause + relaunch_mean, relaunch_var)
    seg_failures = _failed_try(window, mtbf_s)[0]
    relaunch_failures = _failed_try(relaunch, launch_mtbf_s)[0]

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
    in_launch = relaunch_failures * _time_in(0.0, launch, relaunch, launch_mtbf_s) if relaunch_failures else 0.0
    in_restore = relaunch_failures * _time_in(launch, relaunch, relaunch, launch_mtbf_s) if relaunch_failures else 0.0
    recovery = {
        RESTART: seg_failures * (pause * (1.0 + relaunch_failures) + in_launch + launch),
        CHECKPOINT_RESTORE: seg_failures * (in_restore + relaunch - launch),
    }
    return _SegmentExpectation(seg_mean, seg_var, seg_failures, relaunch_failures, (done, lost, recovery))


def predict_run_goodput(timings: RunTimings, steps: int, ckpt_every: int, mtbf_s: float, clock: str = TRAIN_CLOCK) -> float:
    """Expected goodput (a share) of a lab run: :func:`predict_run`'s ``goodput``."""
    return predict_run(timings, steps, ckpt_every, mtbf_s, clock).goodput


def optimal_ckpt_every(timings: RunTimings, steps: int, mtbf_s: float, clock: str = TRAIN_CLOCK) -> int:
    """The checkpoint interval, in steps (1 to ``steps``), that maximises :func:`predict_run_goodput`.

    A scan over every interval: exact for the lab model, including the effects
    Young and Daly leave out (the partial last segment, the relaunch costs).
    """
    check_lab_plan(steps, 0, mtbf_s)
    best, best_goodput = steps, -1.0
    for k in range(1, steps + 1):
        g = predict_run_goodput(timings, steps, k, mtbf_s, clock)
        if g > best_goodput:
            best, best_goodput = k, g
    return best


def textbook_goodput(timings: RunTimings, steps: int, ckpt_every: int, mtbf_s: float) -> dict[str, float]:
    """Daly's and the first-order goodput for a lab run's measured costs, as the textbook applies them.

    The interval is ``ckpt_every`` steps of ``timings.step_s`` (all steps when
    ``ckpt_every`` is 0 or >= ``steps``), the save ``save_s``, the restart
    everything between a kill and training again (``relaunch_delay_s +
    relaunch_s + restore_s``: a hot spare's handover where the run had one, a new
    worker's launch otherwise), and the share of step time that is not compute
    is a data stall. What the textbook leaves out and the lab has: the first
    launch, the partial last segment and the fixed amount of work, the safe
    pause after a kill. Returns ``{"daly": ..., "first_order": ...}``.
    """
    k = ckpt_every if 0 < ckpt_every < steps else steps
    interval = k * timings.step_s
    restart = timings.relaunch_delay_s + timings.relaunch_s + timings.restore_s
    compute_share = timings.compute_s / timings.step_s
    return {
        "daly": daly_goodput(interval, timings.save_s, restart, mtbf_s, 1.0 - compute_share),
        "first_order": expected_goodput(interval, timings.save_s, restart, mtbf_s, 1.0 - compute_share),
    }
