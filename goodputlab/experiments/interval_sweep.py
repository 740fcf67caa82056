"""The checkpoint-interval sweep: real runs across intervals, each beside the lab model's prediction.

:func:`run_sweep` runs a real experiment for every (checkpoint interval, seed),
and :func:`pool_sweep` sets the measured goodput beside the lab model
(:mod:`goodputlab.theory.lab_model`), Daly and the first-order model.

The theory (:func:`goodputlab.theory.predict_run`) needs the costs of the
lab's phases: a step, a save, a launch, a restore, the pause after a kill.
Nothing here assumes them: :func:`measure_timings` reads each one from the
run's own event log (the same phases the ledger books), so the model is fed
what this machine, under this load, actually did.

:func:`failure_draws` recovers the failure times the supervisor drew for a
run (checking them against the kills in the log), so :func:`predict_measured`
can also replay the model under the very failures the run saw: the
comparison then no longer depends on luck (how many failures a run of a few
seconds happens to get), and a mismatch points at the model's mechanics.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, Callable, Iterable

from ..measure import events as E
from .. import validate
from ..engine.config import RunConfig
from ..errors import ConfigError
from ..measure.ledger import build_ledger
from ..theory.lab_model import RunPrediction, RunTimings, predict_run, textbook_goodput
from ..theory.lab_replay import replay_run
from ..recovery.booking import M_EXPOSED
from ..recovery.modes import WALL_CLOCK

# How far after its drawn time a kill may land: the supervisor sets the
# deadline just after launching and polls every 20 ms.
_MAX_KILL_LAG_S = 0.5
# A worker's launch: a new process (spawn, init), or a hot spare's handover and activation; then the
# input pipeline's warm-up.
_LAUNCH_KINDS = (E.SUP_SPAWN, E.W_INIT, E.SUP_HANDOVER, E.W_ACTIVATE, E.W_WARMUP)


def measure_timings(events: Iterable[dict]) -> RunTimings:
    """Mean cost of each phase of a run, in seconds, from its event log.

    Phases cut short by a kill are left out of the means (they did not take
    their full time). ``launch_s`` is measured on the attempts that reached
    their first step: launch, imports and set-up, and the input pipeline's
    warm-up, without the restore. ``relaunch_delay_s`` is the time from each
    kill to the next launch (0 when the run had no failure). Raises
    :class:`~goodputlab.errors.ConfigError` for a log without a completed step.
    """
    ledger = build_ledger(events)
    killed_at = set(ledger.failure_times)
    complete: dict[str, list[float]] = defaultdict(list)
    launch_by_attempt: dict[int, float] = defaultdict(float)
    handed_over: set[int] = set()  # attempts a hot spare took (their launch is the handover)
    trained: set[int] = set()
    pauses: list[float] = []
    pause_since: float | None = None
    for seg in ledger.segments:
        if seg.kind in (E.SUP_FAILURE, E.SUP_RESTART_DELAY):
            pause_since = seg.start if pause_since is None else pause_since
            continue
        if pause_since is not None and seg.kind in (E.SUP_SPAWN, E.SUP_HANDOVER):
            pauses.append(seg.start - pause_since)
        pause_since = None
        if seg.kind in _LAUNCH_KINDS:
            launch_by_attempt[seg.attempt] += seg.duration
        if seg.kind == E.SUP_HANDOVER:
            handed_over.add(seg.attempt)
        if seg.kind == E.W_COMPUTE:
            trained.add(seg.attempt)
        if seg.end not in killed_at:
            complete[seg.kind].append(seg.duration)
    if not complete[E.W_COMPUTE]:
        raise ConfigError("events", f"{len(ledger.segments)} phases", "an event log with at least one completed step")

    def mean(kind: str) -> float:
        values = complete[kind]
        return fmean(values) if values else 0.0

    return RunTimings(
        compute_s=mean(E.W_COMPUTE),
        data_wait_s=mean(E.W_DATA_WAIT),
        step_other_s=mean(E.W_STEP_END),
        save_s=mean(E.W_CKPT_SAVE),
        launch_s=fmean(launch_by_attempt[a] for a in sorted(trained - handed_over) or sorted(trained)),
        spare_launch_s=fmean(launch_by_attempt[a] for a in sorted(trained & handed_over)) if trained & handed_over else None,
        restore_s=mean(E.W_RESTORE),
        relaunch_delay_s=fmean(pauses) if pauses else 0.0,
        exit_s=mean(E.W_EXIT),
        start_s=mean(E.SUP_START),
        teardown_s=mean(E.SUP_TEARDOWN),
    )


def _launch_by_attempt(events: list[dict], draws: list[float], mean_launch_s: float) -> list[float]:
    """Each attempt's own launch time (seconds), for a replay of its failure draws.

    An attempt that trained, or was killed while restoring, has its launch
    measured (spawn, init, warm-up). One killed while launching ran at least
    until its kill: the mean launch, or just past its draw if the mean is shorter.
    """
    ledger = build_ledger(events)
    killed_at = set(ledger.failure_times)
    launch: dict[int, float] = defaultdict(float)
    launch_done: set[int] = set()
    for seg in ledger.segments:
        if seg.kind in _LAUNCH_KINDS:
            launch[seg.attempt] += seg.duration
        if seg.kind in (E.W_RESTORE, E.W_COMPUTE, E.W_DATA_WAIT) or (
            seg.kind == E.W_WARMUP and seg.end not in killed_at
        ):
            launch_done.add(seg.attempt)
    return [
        launch[a] if a in launch_done else max(mean_launch_s, draw + 1e-6)
        for a, draw in enumerate(draws)
    ]


def failure_draws(events: Iterable[dict], config: RunConfig) -> list[float]:
    """The failure times the supervisor drew for this run, one per attempt, in seconds from the start
    of its failure clock (its first step; its launch with the wall clock: :func:`failure_clock_of`).

    Regenerated from the run's seed (:func:`goodputlab.engine.supervisor.poisson_failure_rng`)
    and checked against the log: every kill must land just after its attempt's
    draw. Each draw is shifted by the mean lag measured on the kills (the
    supervisor starts the clock just after the launch and polls), so the
    result is when each attempt would really be killed. The list covers every
    attempt of the run, the last one included (its draw is what let it
    finish). Raises :class:`~goodputlab.errors.ConfigError` for a run without
    random failures or whose kills do not match its seed.
    """
    from ..engine.supervisor import poisson_failure_rng

    if config.mtbf <= 0:
        raise ConfigError("mtbf", config.mtbf, "a run with random failures (mtbf > 0)")
    if config.kill_at_steps:
        raise ConfigError("kill_at_steps", config.kill_at_steps, "a run with only random failures (no kill_at_steps)")
    events = sorted(events, key=lambda e: e["t"])
    spawned: dict[int, float] = {}
    killed: dict[int, float] = {}
    marked = any(e["kind"] == M_EXPOSED for e in events)
    for e in events:
        # the failure clock starts at its marker; in a log written before the markers, at a launch or a handover
        if (e["kind"] == M_EXPOSED) if marked else (e["kind"] in (E.SUP_SPAWN, E.SUP_HANDOVER)):
            spawned.setdefault(e["attempt"], e["t"])
        elif e["kind"] == E.SUP_FAILURE:
            killed[e["attempt"]] = e["t"]
    rng = poisson_failure_rng(config.seed)
    draws = [float(rng.exponential(config.mtbf)) for _ in range(len(spawned))]
    lags = [killed[a] - spawned[a] - draws[a] for a in sorted(killed)]
    for attempt, lag in zip(sorted(killed), lags):
        if not 0.0 <= lag <= _MAX_KILL_LAG_S:
            raise ConfigError(
                "events",
                f"attempt {attempt} killed {lag:+.3f} s after its drawn time",
                f"kills within 0 to {_MAX_KILL_LAG_S} s after the draws of seed {config.seed} "
                "(a run made by this version of the supervisor)",
            )
    lag = fmean(lags) if lags else 0.0
    return [d + lag for d in draws]


def predict_measured(events: Iterable[dict], config: RunConfig | dict[str, Any], replay: bool = False) -> RunPrediction:
    """The lab model's prediction for a measured run, fed with that run's own phase costs.

    ``config`` is the run's :class:`~goodputlab.engine.config.RunConfig` (or its dict,
    as in ``summary["config"]``). By default the expectation over failure
    times (:func:`goodputlab.theory.predict_run`); with ``replay`` the model
    walked through the failure times this run drew (:func:`failure_draws`,
    :func:`goodputlab.theory.replay_run`), each attempt with its own launch
    time (a busy machine makes them vary, and whether a failure hits the
    launch or the training hangs on it).
    """
    events = list(events)
    if isinstance(config, dict):
        config = RunConfig.from_dict(config)
    if config.ckpt_every_s is not None:
        raise ConfigError("ckpt_every_s", config.ckpt_every_s, "None: the model knows intervals in steps only")
    timings = measure_timings(events)
    clock = failure_clock_of(events, config)
    if replay:
        draws = failure_draws(events, config)
        launches = _launch_by_attempt(events, draws, timings.launch_s)
        return replay_run(timings, config.steps, config.ckpt_every, draws, launches, clock=clock)
    mtbf = config.mtbf if config.mtbf > 0 else float("inf")
    return predict_run(timings, config.steps, config.ckpt_every, mtbf, clock=clock)


def failure_clock_of(events: Iterable[dict], config: RunConfig) -> str:
    """The failure clock a run used: its ``exposed`` markers name it; a log without them was written
    before the train clock existed, when every clock ran from the launch (``wall``)."""
    for e in events:
        if e["kind"] == M_EXPOSED:
            return e.get("clock", config.failure_clock)
    return WALL_CLOCK if config.mtbf > 0 else config.failure_clock


# ---------------------------------------------------------------------------
# a sweep of real runs over checkpoint intervals, with the model beside each


@dataclass
class SweepRun:
    """One measured run of a sweep, with the lab model's two predictions for it.

    ``expected``: :func:`~goodputlab.theory.predict_run` fed with this run's
    measured timings (the average over failure times); ``replayed``: the same
    model walked through this run's own failure draws.
    """

    ckpt_every: int
    seed: int
    summary: dict[str, Any]
    timings: RunTimings
    expected: RunPrediction
    replayed: RunPrediction
    result: Any = None  # the RunResult, when the sweep keeps its runs (``keep_runs``)

    @property
    def goodput(self) -> float:
        return self.summary["goodput"]

    @property
    def wall_s(self) -> float:
        return self.summary["wall_s"]

    @property
    def productive_s(self) -> float:
        return self.summary["buckets"]["productive"]


def run_sweep(
    intervals: Iterable[int],
    seeds: Iterable[int],
    *,
    steps: int,
    mtbf: float,
    out_root: str | Path | None = None,
    on_run: Callable[[SweepRun], None] | None = None,
    keep_runs: bool = False,
    **fixed: Any,
) -> list[SweepRun]:
    """Run a real experiment for every (checkpoint interval, seed) and predict each one.

    ``intervals`` are in steps; ``mtbf`` in seconds (> 0); ``fixed`` holds any
    other :class:`~goodputlab.engine.config.RunConfig` fields (``threads=1`` keeps
    step times steady on a shared CPU). The same seed gives every interval the
    same failure draws (common random numbers), so differences between
    intervals are not differences in luck. Each run's files go to a
    temporary directory under ``out_root`` (a fresh one by default) and are
    removed once measured, unless ``keep_runs``: then each :class:`SweepRun` holds its
    ``result`` (its files stay under ``out_root``). ``on_run`` is called after each run (progress).
    """
    from ..engine.api import run

    intervals, seeds = list(intervals), list(seeds)
    if not intervals:
        raise ConfigError("intervals", intervals, "at least one checkpoint interval (steps)")
    if not seeds:
        raise ConfigError("seeds", seeds, "at least one seed")
    validate.seconds("mtbf", mtbf, positive=True, note="a sweep against the failure model needs failures")
    configs = [RunConfig(steps=steps, ckpt_every=k, mtbf=mtbf, seed=s, **fixed) for k in intervals for s in seeds]
    root = Path(tempfile.mkdtemp(prefix="goodputlab-sweep-", dir=out_root))
    results = []
    try:
        for i, config in enumerate(configs):
            out = root / f"run-{i:03d}"
            result = run(config, out=out, progress=False)
            swept = SweepRun(
                ckpt_every=config.ckpt_every,
                seed=config.seed,
                summary=result.summary,
                timings=measure_timings(result.events),
                expected=predict_measured(result.events, config),
                replayed=predict_measured(result.events, config, replay=True),
                result=result if keep_runs else None,
            )
            if not keep_runs:
                shutil.rmtree(out, ignore_errors=True)
            results.append(swept)
            if on_run is not None:
                on_run(swept)
    finally:
        if not keep_runs:
            shutil.rmtree(root, ignore_errors=True)
    return results


def pool_sweep(runs: Iterable[SweepRun]) -> list[dict[str, Any]]:
    """One row per checkpoint interval: the measured goodput beside the predictions.

    The seeds of an interval are pooled as total productive over total wall
    time, which estimates ``E[productive] / E[wall]``, the quantity the model
    predicts (the mean of per-run ratios would be biased upwards: 1/wall is
    convex). Keys: ``ckpt_every, runs, interval_s`` (compute+step seconds
    between checkpoints), ``measured, measured_min, measured_max, expected,
    expected_se`` (the model's standard error of the pooled figure), ``expected_after_startup``
    (the model's goodput without the first launch, which an endless job's model leaves out), ``z``
    (error in standard errors), ``replayed, error_pts, replay_error_pts``
    (measured minus predicted, percentage points), ``failures,
    failures_expected``, and the textbook models' ``daly`` and ``first_order``
    (:func:`goodputlab.theory.textbook_goodput`).
    """
    by_interval: dict[int, list[SweepRun]] = defaultdict(list)
    for r in runs:
        by_interval[r.ckpt_every].append(r)
    rows = []
    for k in sorted(by_interval):
        group = by_interval[k]
        productive = sum(r.productive_s for r in group)
        measured = productive / sum(r.wall_s for r in group)
        predicted_productive = sum(r.expected.buckets["productive"] for r in group)
        expected_wall = sum(r.expected.wall_s for r in group)
        expected = predicted_productive / expected_wall
        # delta method on the pooled ratio: sd of total wall over its mean
        expected_se = expected * math.sqrt(sum(r.expected.wall_sd_s**2 for r in group)) / expected_wall
        replayed = sum(r.replayed.buckets["productive"] for r in group) / sum(r.replayed.wall_s for r in group)
        after_startup = predicted_productive / (expected_wall - sum(r.expected.buckets.get("startup", 0.0) for r in group))
        error = measured - expected
        mtbf = group[0].summary["config"]["mtbf"]
        rows.append(
            {
                "ckpt_every": k,
                "runs": len(group),
                "interval_s": k * fmean(r.timings.step_s for r in group),
                "measured": measured,
                "measured_min": min(r.goodput for r in group),
                "measured_max": max(r.goodput for r in group),
                "expected": expected,
                "expected_se": expected_se,
                "expected_after_startup": after_startup,
                "z": error / expected_se if expected_se > 0 else math.nan,
                "replayed": replayed,
                "error_pts": 100.0 * error,
                "replay_error_pts": 100.0 * (measured - replayed),
                **textbook_goodput(mean_timings(group), group[0].summary["config"]["steps"], k, mtbf),
                "failures": fmean(r.summary["failures"] for r in group),
                "failures_expected": fmean(r.expected.failures for r in group),
            }
        )
    return rows


def mean_timings(runs: Iterable[SweepRun]) -> RunTimings:
    """The field-by-field mean of the runs' measured timings (for optima and curves)."""
    runs = list(runs)
    fields = runs[0].timings.to_dict()

    def mean(name: str):
        values = [getattr(r.timings, name) for r in runs if getattr(r.timings, name) is not None]
        return fmean(values) if values else None

    return RunTimings(**{name: mean(name) for name in fields})
