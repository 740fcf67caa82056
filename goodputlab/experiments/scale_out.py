"""A torchrun job as a scale model of a cluster, and its goodput beside the simulator's (chapter 7).

* :func:`scale_out_config` plans a failing job at a cluster's save and interval ratios
  (:func:`goodputlab.theory.scale_model.plan_lab`), from a failure-free run of the same job;
* :func:`job_timings` and :func:`failure_times` give the lab model (:mod:`goodputlab.theory.lab_model`)
  a torchrun job's own costs and failures, so :func:`split_goodput` can walk the model through them
  (:func:`goodputlab.theory.replay_run`) and split measured minus simulated goodput into the model's
  mechanics, the run's luck and the simulator's own picture of a job (:class:`GoodputSplit`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .. import categories as C
from .. import validate
from ..measure import events as E
from ..engine.config import RunConfig
from ..recovery.booking import M_EXPOSED
from ..theory import scaling
from ..theory.lab_model import RunTimings
from ..theory.sim_config import SimResult
from .scaling import exposures, simulate_run, straggler_cost


def job_timings(result) -> tuple[RunTimings, list[float]]:
    """A torchrun job's costs as the lab model takes them (:class:`~goodputlab.theory.RunTimings`, seconds),
    and each attempt's launch.

    A step is the job's: its compute (the fastest rank's), data wait, and the wait for the slowest rank
    with the loop's bookkeeping (``step_other_s``: wall time that is not compute), averaged over the steps
    that ran to their end. A save, a restore, the exit and the teardown are the job ledger's phases
    (:func:`~goodputlab.experiments.interval_sweep.measure_timings`). Attempt ``a``'s launch is everything
    from the kill before it (the run's start, for the first) to its first step, its restore left out: torchrun
    stopping the ranks, starting new ones that import PyTorch, the new process group.
    """
    from .interval_sweep import measure_timings

    rows = [r for r in result.per_step() if r["loss"] is not None]  # steps a kill did not cut short
    if not rows:
        raise ValueError(f"{result.out}: no step ran to its end, so the job's step costs are unknown")
    other = [seg.duration for seg in result.ledger.segments if seg.kind == E.W_STEP_END]
    base = measure_timings(result.events)
    launches, restores = _launches(result)
    timings = RunTimings(
        compute_s=statistics.fmean(r["compute_s"] for r in rows),
        data_wait_s=statistics.fmean(r["data_wait_s"] for r in rows),
        step_other_s=statistics.fmean(r["sync_wait_s"] for r in rows) + (sum(other) / len(rows)),
        save_s=base.save_s, restore_s=statistics.fmean(restores) if restores else 0.0,
        launch_s=launches[0], spare_launch_s=statistics.fmean(launches[1:]) if len(launches) > 1 else None,
        exit_s=base.exit_s, teardown_s=base.teardown_s,
    )
    return timings, launches


def _launches(result) -> tuple[list[float], list[float]]:
    """Each attempt's launch (start-up and restart seconds before its first step) and each restore (seconds)."""
    launches: list[float] = [0.0]
    restores: list[float] = []
    for seg in result.ledger.segments:
        if seg.kind == E.SUP_FAILURE:
            launches.append(0.0)  # the kill: what follows until the next first step is the next attempt's launch
        if seg.category in (C.STARTUP, C.RESTART):
            launches[-1] += seg.duration
        elif seg.category == C.CHECKPOINT_RESTORE:
            restores.append(seg.duration)
    return launches, restores


def failure_times(result) -> list[float]:
    """Each attempt's time to failure on its failure clock (seconds): the failures this run saw.

    An attempt that was killed: from its clock's start to its kill, as measured (the supervisor's draw,
    at the job's MTBF ``mtbf / nproc``, plus the moment it took to notice it). The last attempt, which the
    run finished, saw none: ``inf``. (Its own draw, longer than what it had left, would strike a replay
    whose mean costs make that attempt longer than it was; the replay is of the failures the run saw.)"""
    return [x["end"] - x["start"] for x in exposures(result) if x["killed"]] + [math.inf]


@dataclass(frozen=True)
class GoodputSplit:
    """A run's measured goodput beside the simulator's, and the difference split in three (shares of 1).

    ``replayed``: the lab model walked through this run's own failure times with its own costs
    (:func:`~goodputlab.theory.replay_run`); ``expected``: the same model's expectation at the configured MTBF
    (:func:`~goodputlab.theory.predict_run`, with ``expected_se``: the standard error one run of this length has
    around it); ``simulated``: the simulator on the run's costs (its measured wait for the straggler included)
    at the configured MTBF, for as long as the lab model expects the run to take (:func:`simulate_run`; ``sim``,
    its result). ``mechanics`` (measured minus
    replayed) is what the model misses of how the job ran; ``luck`` (replayed minus expected) is this run's
    draw of failures; ``assumptions`` (expected minus simulated) is what the simulator's own picture of a job
    adds: failures during restarts, and training on for a fixed time instead of stopping after a fixed amount
    of work. The three add up to measured minus simulated.
    """

    measured: float
    measured_se: float
    replayed: float
    expected: float
    expected_se: float
    simulated: float
    failures: int
    replayed_failures: float
    expected_failures: float
    simulated_failures: float
    sim: SimResult = field(repr=False, compare=False, default=None)

    @property
    def mechanics(self) -> float:
        return self.measured - self.replayed

    @property
    def luck(self) -> float:
        return self.replayed - self.expected

    @property
    def assumptions(self) -> float:
        return self.expected - self.simulated

    def rows(self) -> list[dict[str, Any]]:
        """The table: one row per estimate (``what``, ``goodput``, ``se``, ``failures``)."""
        return [
            {"what": "measured", "goodput": self.measured, "se": self.measured_se, "failures": self.failures},
            {"what": "lab model, this run's failures", "goodput": self.replayed, "se": 0.0,
             "failures": self.replayed_failures},
            {"what": "lab model, expected", "goodput": self.expected, "se": self.expected_se,
             "failures": self.expected_failures},
            {"what": "simulator, expected", "goodput": self.simulated, "se": 0.0, "failures": self.simulated_failures},
        ]


def split_goodput(result, trials: int = 2000) -> GoodputSplit:
    """Measured goodput against the simulator's, the difference split by the lab model replayed on the run's own
    failures (see :class:`GoodputSplit`); ``trials``: the simulator's. The simulator runs at the configured MTBF
    for the lab model's expected wall time, not the run's own: that would carry the run's luck into it."""
    from ..theory.lab_model import predict_run
    from ..theory.lab_replay import replay_run
    from .scale_model import goodput_stderr

    config, s = result.config, result.summary
    timings, launches = job_timings(result)
    clock = next((e.get("clock", config.failure_clock) for e in result.events if e["kind"] == M_EXPOSED),
                 config.failure_clock)
    every = config.ckpt_every if isinstance(config.ckpt_every, int) else 0
    replayed = replay_run(timings, config.steps, every, failure_times(result), launches, clock=clock)
    job_mtbf = config.mtbf / config.nproc if config.mtbf > 0 else math.inf
    expected = predict_run(timings, config.steps, every, job_mtbf, clock=clock)
    sim = simulate_run(result, trials=trials, rate="configured", straggler="measured", duration_s=expected.wall_s)
    return GoodputSplit(
        measured=s["goodput"], measured_se=goodput_stderr(result), replayed=replayed.goodput,
        expected=expected.goodput, expected_se=expected.goodput * expected.wall_sd_s / expected.wall_s,
        simulated=sim.goodput_mean, failures=s["failures"], replayed_failures=replayed.failures,
        expected_failures=expected.failures, simulated_failures=float(sim.interruptions.mean()), sim=sim,
    )


# --- a torchrun job at a cluster's save and interval ratios ------------------------------------------------


def scale_out_config(calibration, cluster, rank_mtbf_s: float, failures: float, **settings: Any) -> tuple[RunConfig, Any]:
    """A failing torchrun job at ``cluster``'s save and interval ratios: ``(RunConfig, LabPlan)``.

    ``calibration``: a failure-free run of the same job (its step, its sharded save's blocking time and size,
    its start-up, which a relaunch of every rank costs again); ``rank_mtbf_s``: each rank's MTBF (seconds), so
    the job's is that over the ranks; ``failures``: about how many the run should see (its length: the expected
    count, so a fraction means a run shorter than one MTBF); ``settings``: the rest
    of the :class:`RunConfig` (``nproc``, ``model``, a straggler: its expected wait is added to the step).
    :func:`~goodputlab.theory.scale_model.plan_lab` gives the emulated storage (a save takes the cluster's
    share of the MTBF) and the best interval; the steps are enough for ``failures`` on the train clock.
    The recovery is not planned: a torchrun restart starts every rank again, whatever the cluster's share.
    """
    from ..theory.scale_model import plan_lab

    nproc = settings.get("nproc", calibration.config.nproc)
    job_mtbf = validate.seconds("rank_mtbf_s", rank_mtbf_s, positive=True) / nproc
    validate.number("failures", failures, 0, low_open=True, allowed="an expected number of failures > 0")
    timings, _ = job_timings(calibration)
    cost = straggler_cost(calibration)
    factor, prob = settings.get("straggler_factor", 1.0), settings.get("straggler_prob", 0.0)
    stragglers = (1 if settings.get("straggler_rank") is not None else nproc) if prob > 0 else 0
    # a step with a slowed rank waits for its sleep instead of the calibration's small wait (its sync_wait)
    slowed = scaling.step_slowed_probability(prob, stragglers) if stragglers else 0.0
    floor = cost["measured_s"] / max(1, calibration.summary["steps_executed"])
    step = timings.step_s - slowed * floor + scaling.straggler_wait_s(cost["own_compute_s"], 1, factor, prob, stragglers)
    state = max((e.get("bytes", 0) for e in calibration.events if e["kind"] == E.M_CKPT_COMMIT), default=0)
    plan = plan_lab(cluster, state_bytes=max(1, int(state)), step_s=step, snapshot_s={"sync": timings.save_s},
                    mtbf_s=job_mtbf, recovery_floor_s=calibration.summary["buckets"][C.STARTUP],
                    failures=max(1, math.ceil(failures)))
    every = plan.ckpt_every("sync")
    # on the train clock the job fails once per job MTBF of training; a failure loses about half a segment
    lost = (every * step + plan.save_s) / 2
    if lost >= job_mtbf:
        raise ValueError(f"rank_mtbf_s: {rank_mtbf_s:g} s leaves no training between failures ({lost:.2f} s lost each)")
    steps = math.ceil(failures * (job_mtbf - lost) / (step * (1 + plan.save_s / (every * step))))
    config = RunConfig(**{**settings, "nproc": nproc, "steps": max(steps, every + 1), "ckpt": "sync",
                          "ckpt_every": every, "mtbf": rank_mtbf_s, "ckpt_storage_mbps": plan.storage_bps / 1e6,
                          "max_failures": max(50, math.ceil(4 * failures))})
    return config, plan
