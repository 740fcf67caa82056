"""Scaling out, measured: the same work on one and on several ranks, and the models beside it (chapter 7).

* :func:`run_ranks` runs one configuration once per number of ranks (``nproc``), the rest equal;
* :func:`rank_events` reads one rank's own event log of a distributed run;
* :func:`straggler_cost` sets the wait a straggler caused, measured, beside
  :func:`goodputlab.theory.scaling.straggler_wait_s` on the compute the healthy ranks measured, and
  :func:`straggler_parts` goes from the one to the other in parts that add up;
* :func:`save_cost_per_rank` gives what each rank wrote of the sharded checkpoints and how long
  its saves blocked it;
* :func:`exposures` and :func:`failure_count` set the failures a run saw beside what its per-rank MTBF
  predicts; :func:`recomputed_losses` checks that every step a failure rolled back gave the same loss again;
* :func:`scale_out_config` plans a failing job at a cluster's save and interval ratios
  (:func:`goodputlab.theory.scale_model.plan_lab`);
* :func:`simulate_run` feeds a run's measured costs to the simulator
  (:func:`goodputlab.theory.simulate`), which then extends the same costs to thousands of ranks;
  :func:`split_goodput` splits measured minus simulated goodput into the lab model's mechanics, the
  run's luck and the simulator's own picture (:func:`job_timings`, :func:`failure_times`: the lab model
  replayed on a torchrun job, :func:`goodputlab.theory.replay_run`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .. import categories as C
from .. import validate
from ..distributed import joblog
from ..engine import events as E
from ..engine.config import RunConfig
from ..recovery.booking import M_EXPOSED
from ..theory import scaling
from ..theory.lab_model import RunTimings
from ..theory.sim_config import SimConfig, SimResult
from ..theory.simulator import simulate



def run_ranks(config: RunConfig, out_root: Path | str | None = None, ranks: Iterable[int] = (1, 2),
              progress: Any = False) -> dict[int, Any]:
    """Run ``config`` once per number of ranks (only ``nproc`` changes); ``{nproc: RunResult}``.

    Each run writes to ``out_root/ranks-N`` (default: a fresh temporary folder each). Every rank
    count trains on the same global batch of every step, so the runs do the same work (a
    straggler is kept only where there are ranks to hold back).
    """
    from ..engine.api import run

    results = {}
    for n in ranks:
        c = config.replace(nproc=n)
        if n == 1:
            c = c.replace(straggler_rank=None, straggler_prob=0.0)
        out = Path(out_root) / f"ranks-{n}" if out_root is not None else None
        results[n] = run(c, out=out, progress=progress)
    return results


def rank_events(result, rank: int) -> list[dict]:
    """Rank ``rank``'s own events in a distributed run (empty for a one-process run)."""
    return joblog.rank_events(result.out, rank)


def _phase_durations(events: list[dict], kind: str) -> list[tuple[dict, float]]:
    phases = [e for e in events if e["kind"] in E.PHASES]
    return [(cur, nxt["t"] - cur["t"]) for cur, nxt in zip(phases, phases[1:]) if cur["kind"] == kind]


def straggler_cost(result, floor=None) -> dict[str, Any]:
    """The stragglers' cost in a distributed run, measured and modelled (seconds).

    ``measured_s``: the job ledger's ``straggler_wait``; ``healthy_wait_s``: what the ranks
    recorded in ``sync_wait`` on steps they were not slowed themselves (each rank's total,
    averaged over the ranks); ``own_compute_s``: the median forward-and-backward time of an
    unslowed step; ``model_s``: :func:`~goodputlab.theory.scaling.straggler_wait_s` with that
    compute, the steps executed, the factor, the share of steps and the number of ranks that
    may straggle (one chosen rank, or every rank); ``model_given_slowed_s``: the same for the
    steps that were actually slowed (the model without the luck of the draw); ``slowed_steps``:
    steps with a slowed rank; ``slept_s``: the stragglers' injected sleep in all.

    Where the wait went, step by step: ``wait_on_slowed_s`` (the job's wait on the steps with a slowed
    rank, which the sleep causes) and ``wait_on_unslowed_s`` (the rest: two ranks never reach the
    all-reduce at the same instant). ``floor``, a run of the same work without a straggler, gives that
    rest's expected size: ``floor_per_step_s`` (its wait per step) times the unslowed steps, ``floor_s``.
    """
    config = result.config
    world = result.summary.get("world_size", 1)
    own, waits, slowed, slept = [], [], set(), 0.0
    for r in range(world):
        events = rank_events(result, r)
        mine = [e for e in events if e["kind"] == E.W_SYNC_WAIT]
        slowed_here = {(e["attempt"], e["step"]) for e in mine if e.get("slowed_s", 0) > 0}
        slowed |= slowed_here
        slept += sum(e.get("slowed_s", 0.0) for e in mine)
        own += [e["own_s"] for e in mine if "own_s" in e and (e["attempt"], e["step"]) not in slowed_here]
        if config.straggler_rank is None or r != config.straggler_rank:
            waits.append(sum(d for e, d in _phase_durations(events, E.W_SYNC_WAIT)
                             if (e["attempt"], e["step"]) not in slowed_here))
    compute = statistics.median(own) if own else 0.0
    steps = result.summary["steps_executed"]
    factor, prob = config.straggler_factor, config.straggler_prob
    may_straggle = 0 if prob == 0 else (1 if config.straggler_rank is not None else world)
    rows = result.per_step()
    on_slowed = sum(r["sync_wait_s"] for r in rows if (r["attempt"], r["step"]) in slowed)
    floor_per_step = floor.summary["buckets"][C.STRAGGLER_WAIT] / max(1, floor.summary["steps_executed"]) if floor else 0.0
    return {
        "measured_s": result.summary["buckets"][C.STRAGGLER_WAIT],
        "healthy_wait_s": statistics.fmean(waits) if waits else 0.0,
        "own_compute_s": compute,
        "slowed_steps": len(slowed),
        "steps": steps,
        "model_s": scaling.straggler_wait_s(compute, steps, factor, prob, may_straggle),
        "model_given_slowed_s": len(slowed) * compute * (factor - 1.0),
        "slept_s": slept,
        "wait_on_slowed_s": on_slowed,
        "wait_on_unslowed_s": result.summary["buckets"][C.STRAGGLER_WAIT] - on_slowed,
        "floor_per_step_s": floor_per_step,
        "floor_s": floor_per_step * (steps - len(slowed)),
    }


def straggler_parts(cost: dict[str, Any]) -> list[dict[str, Any]]:
    """From the model's straggler wait to the measured one, in parts that add up (seconds; rows ``what``,
    ``seconds``), for a :func:`straggler_cost` of a run with a straggler:

    the model (``(factor - 1) x share x median compute x steps``); the draw (the steps actually slowed,
    not the share's expectation); the slowed steps' own compute (each sleep is ``factor - 1`` times the
    compute of its own step, not the median); the healthy ranks' wait beyond the sleep on those steps; the
    wait on the other steps (which any two ranks show: the model leaves it out). The last row is the sum,
    the measured wait.
    """
    parts = [
        ("model: (factor - 1) x share x median compute x steps", cost["model_s"]),
        ("+ the draw: the steps actually slowed", cost["model_given_slowed_s"] - cost["model_s"]),
        ("+ their own compute, not the median", cost["slept_s"] - cost["model_given_slowed_s"]),
        ("+ the wait beyond the sleep on those steps", cost["wait_on_slowed_s"] - cost["slept_s"]),
        ("+ the wait on the other steps", cost["wait_on_unslowed_s"]),
        ("= measured", cost["measured_s"]),
    ]
    return [{"what": what, "seconds": seconds} for what, seconds in parts]


def save_cost_per_rank(result) -> list[dict[str, Any]]:
    """One row per rank: the bytes it wrote per checkpoint, its mean persist time and its mean
    blocking save time (the final save left out: it waits until the state is durable)."""
    world = result.summary.get("world_size", 1)
    rows = []
    for r in range(world):
        events = rank_events(result, r) if world > 1 else result.events
        parts = [e for e in events if e["kind"] == E.M_CKPT_PART]
        blocking = [d for _, d in _phase_durations(events, E.W_CKPT_SAVE)]
        if len(blocking) > 1:
            blocking = blocking[:-1]
        rows.append({
            "rank": r,
            "ranks": world,
            "bytes": statistics.fmean(e["bytes"] for e in parts) if parts else None,
            "persist_s": statistics.fmean(e["persist_s"] for e in parts) if parts else None,
            "blocking_s": statistics.fmean(blocking) if blocking else 0.0,
        })
    return rows


def recomputed_losses(result) -> dict[str, Any]:
    """Steps that a failure made the job compute again, and whether each gave the same loss again.

    A rolled-back step is computed once before the failure and again after the restore; each rank
    records its loss both times (its own log). Bit-exact resume (the same model, optimizer, data
    position and dropout stream restored) gives equal losses, bit for bit. Returns ``steps`` (steps
    computed more than once, to their end), ``comparisons`` (pairs of one rank's losses compared) and
    ``equal`` (all of them equal; True when there was nothing to compare).
    """
    world = result.summary.get("world_size", 1)
    steps, comparisons, equal = set(), 0, True
    for r in range(world):
        events = rank_events(result, r) if world > 1 else result.events
        losses: dict[int, list[float]] = {}
        for e in events:
            if e["kind"] == E.W_STEP_END and e.get("loss") is not None:
                losses.setdefault(e["step"], []).append(e["loss"])
        for step, seen in losses.items():
            if len(seen) > 1:
                steps.add(step)
                comparisons += len(seen) - 1
                equal = equal and all(x == seen[0] for x in seen)
    return {"steps": len(steps), "comparisons": comparisons, "equal": equal}


def exposures(result) -> list[dict[str, Any]]:
    """Each attempt's stretch on the failure clock: ``{attempt, start, end, killed}`` (seconds since the run began).

    The clock starts at the attempt's ``exposed`` marker (its first step on the train clock) and ends at its
    kill, or, for the attempt that completed, at the supervisor's teardown."""
    events = sorted(result.events, key=lambda e: e["t"])
    starts = {e["attempt"]: e["t"] for e in events if e["kind"] == M_EXPOSED}
    kills = {e["attempt"]: e["t"] for e in events if e["kind"] == E.SUP_FAILURE}
    end = next((e["t"] for e in events if e["kind"] in (E.SUP_TEARDOWN, E.SUP_END)), events[-1]["t"] if events else 0.0)
    return [{"attempt": a, "start": t, "end": kills.get(a, end), "killed": a in kills} for a, t in sorted(starts.items())]


def failure_count(result) -> dict[str, float]:
    """Failures seen against failures expected (seconds, counts).

    Each rank fails with mean ``mtbf`` seconds on the failure clock, so the job, which stops at any rank's
    failure, fails ``nproc`` times as often: ``job_mtbf_s``. ``exposed_s`` is the time the clock ran (the
    attempts' :func:`exposures`), ``expected`` the failures it predicts, ``measured_mtbf_s`` the job's MTBF as the
    run saw it (exposed time over failures) and ``measured_mtbf_se_s`` that estimate's standard error
    (an MTBF from ``n`` exponential gaps is uncertain by about one over the root of ``n``)."""
    config = result.config
    failures = result.summary["failures"]
    exposed = sum(x["end"] - x["start"] for x in exposures(result))
    job_mtbf = config.mtbf / config.nproc if config.mtbf > 0 else math.inf
    measured = exposed / failures if failures else math.inf
    return {"failures": failures, "expected": exposed / job_mtbf, "job_mtbf_s": job_mtbf, "exposed_s": exposed,
            "measured_mtbf_s": measured, "measured_mtbf_se_s": measured / math.sqrt(failures) if failures else math.inf}


def measured_costs(result) -> dict[str, float]:
    """A run's costs in the simulator's terms (seconds): startup, restart and restore per failure, save,
    the checkpoint interval in seconds of compute, and the share of compute waiting for data."""
    s, b = result.summary, result.summary["buckets"]
    failures = s["failures"]
    saves = max(1, s["checkpoints"])
    steps = max(1, s["steps_executed"])
    compute = b[C.PRODUCTIVE] + b[C.LOST_WORK] + b[C.STRAGGLER_WAIT] + b[C.DATA_WAIT]
    every = result.config.ckpt_every if isinstance(result.config.ckpt_every, int) and result.config.ckpt_every > 0 else steps
    return {
        "startup_s": b[C.STARTUP],
        "restart_s": b[C.RESTART] / failures if failures else 0.0,
        "restore_s": b[C.CHECKPOINT_RESTORE] / failures if failures else 0.0,
        "save_s": b[C.CHECKPOINT_SAVE] / saves,
        "interval_s": every * compute / steps,
        "data_stall_fraction": b[C.DATA_WAIT] / compute if compute else 0.0,
    }


def effective_straggler_factor(result) -> float:
    """The straggler's factor on the job's whole step compute: it slows only its forward and backward
    (the measured ``own_compute_s``), not the all-reduce's transfer or the optimizer step, so on the
    step's compute (the job's productive and lost time per executed step) it is
    ``1 + (factor - 1) x own / step``."""
    config, s = result.config, result.summary
    step = (s["buckets"][C.PRODUCTIVE] + s["buckets"][C.LOST_WORK]) / max(1, s["steps_executed"])
    own = straggler_cost(result)["own_compute_s"]
    part = min(1.0, own / step) if step > 0 else 1.0
    return 1.0 + (config.straggler_factor - 1.0) * part


def observed_rank_mtbf_s(result) -> float:
    """Each rank's MTBF as the run saw it: ranks x wall time / failures (``inf`` without failures)."""
    s = result.summary
    return s.get("world_size", 1) * s["wall_s"] / s["failures"] if s["failures"] else float("inf")


def simulate_run(result, devices: int | None = None, trials: int = 2000, seed: int = 0, rate: str = "observed",
                 **changes) -> SimResult:
    """The simulator on a run's measured costs: ``devices`` ranks (default: the run's) with its straggler
    (:func:`effective_straggler_factor`), for as long as the run took. Each rank fails at the rate the run saw (``rate="observed"``:
    :func:`observed_rank_mtbf_s`; a run of a few failures is one draw, which the simulator's mean
    would not repeat) or at the configured per-rank MTBF (``rate="configured"``). ``changes``
    override any :class:`~goodputlab.theory.SimConfig` field (a longer duration, more devices)."""
    config = result.config
    costs = measured_costs(result)
    world = result.summary.get("world_size", 1)
    if rate == "observed":
        rank_mtbf = observed_rank_mtbf_s(result)
    elif rate == "configured":
        rank_mtbf = config.mtbf if config.mtbf > 0 else float("inf")
    else:
        raise ValueError(f"rate {rate!r}: observed or configured")
    factor = effective_straggler_factor(result) if config.straggler_prob > 0 else 1.0
    fields = dict(
        devices=devices or world,
        duration_s=result.summary["wall_s"],
        interval_s=max(costs["interval_s"], 1e-6),
        device_mtbf_s=rank_mtbf,
        save_s=costs["save_s"],
        restore_s=costs["restore_s"],
        restart_s=costs["restart_s"],
        startup_s=min(costs["startup_s"], result.summary["wall_s"]),
        data_stall_fraction=min(costs["data_stall_fraction"], 0.99),
        straggler_factor=factor,
        straggler_share=config.straggler_prob,
        straggler_devices=1 if config.straggler_rank is not None else (devices or world),
        trials=trials,
        seed=seed,
    )
    fields.update(changes)
    return simulate(SimConfig(**fields))


# --- the lab model replayed on a torchrun job: where measured and simulated goodput part ---------------


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
    around it); ``simulated``: the simulator on the run's costs at the configured MTBF
    (:func:`simulate_run`). ``mechanics`` (measured minus replayed) is what the model misses of how the job
    ran; ``luck`` (replayed minus expected) is this run's draw of failures; ``assumptions`` (expected minus
    simulated) is what the simulator's own picture of a job adds: failures during restarts, and a fixed
    duration instead of a fixed amount of work. The three add up to measured minus simulated.
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


def split_goodput(result, sim: SimResult | None = None, trials: int = 2000) -> GoodputSplit:
    """Measured goodput against the simulator's, the difference split by the lab model replayed on the run's own
    failures (see :class:`GoodputSplit`). ``sim``: :func:`simulate_run` at the configured MTBF (made if not given)."""
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
    sim = sim if sim is not None else simulate_run(result, trials=trials, rate="configured")
    return GoodputSplit(
        measured=s["goodput"], measured_se=goodput_stderr(result), replayed=replayed.goodput,
        expected=expected.goodput, expected_se=expected.goodput * expected.wall_sd_s / expected.wall_s,
        simulated=sim.goodput_mean, failures=s["failures"], replayed_failures=replayed.failures,
        expected_failures=expected.failures, simulated_failures=float(sim.interruptions.mean()),
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
