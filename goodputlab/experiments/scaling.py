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
* :func:`simulate_run` feeds a run's measured costs to the simulator
  (:func:`goodputlab.theory.simulate`), which then extends the same costs to thousands of ranks.

A failing job planned at a cluster's ratios, and its goodput set beside the simulator's through the lab
model replayed on its own failures: :mod:`goodputlab.experiments.scale_out`.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Iterable

from .. import categories as C
from ..distributed import joblog
from ..measure import events as E
from ..engine.config import RunConfig
from ..recovery.booking import M_EXPOSED
from ..theory import scaling
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


def measured_straggler_factor(result) -> float:
    """The straggler factor whose modelled wait (:func:`~goodputlab.theory.scaling.straggler_wait_share`) is the
    wait a run measured: its ``straggler_wait`` over its step compute (productive, lost and waiting). From
    ``w = (f - 1) q / (1 + (f - 1) q)``, ``f = 1 + w / ((1 - w) q)``, with ``q`` the share of steps with a
    slowed rank. 1 for a run without a straggler; at most 100."""
    config, b = result.config, result.summary["buckets"]
    if config.straggler_prob <= 0:
        return 1.0
    stragglers = 1 if config.straggler_rank is not None else result.summary.get("world_size", 1)
    q = scaling.step_slowed_probability(config.straggler_prob, stragglers)
    compute = b[C.STRAGGLER_WAIT] + b[C.PRODUCTIVE] + b[C.LOST_WORK]
    w = b[C.STRAGGLER_WAIT] / compute if compute > 0 else 0.0
    return min(100.0, 1.0 + w / ((1.0 - w) * q)) if w < 1 else 100.0


def observed_rank_mtbf_s(result) -> float:
    """Each rank's MTBF as the run saw it: ranks x wall time / failures (``inf`` without failures)."""
    s = result.summary
    return s.get("world_size", 1) * s["wall_s"] / s["failures"] if s["failures"] else float("inf")


def simulate_run(result, devices: int | None = None, trials: int = 2000, seed: int = 0, rate: str = "observed",
                 straggler: str = "model", **changes) -> SimResult:
    """The simulator on a run's measured costs: ``devices`` ranks (default: the run's) with its straggler,
    for as long as the run took. Each rank fails at the rate the run saw (``rate="observed"``:
    :func:`observed_rank_mtbf_s`; a run of a few failures is one draw, which the simulator's mean
    would not repeat) or at the configured per-rank MTBF (``rate="configured"``). The straggler's factor is
    the model's (``straggler="model"``: :func:`effective_straggler_factor`) or the one whose wait is the
    run's measured wait (``"measured"``: :func:`measured_straggler_factor`). ``changes``
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
    if straggler not in ("model", "measured"):
        raise ValueError(f"straggler {straggler!r}: model or measured")
    factor = 1.0
    if config.straggler_prob > 0:
        factor = effective_straggler_factor(result) if straggler == "model" else measured_straggler_factor(result)
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
