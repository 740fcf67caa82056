"""Real runs at a cluster's ratios: calibrate the lab, plan its settings, and print its ratios beside the cluster's.

* :func:`calibrate` measures this machine in one short real run: a step, the blocking part of an
  asynchronous save (its snapshot), and a hot spare's kill-to-training time with no added delay
  (:func:`calibration_of` reads the same from a run already made);
* :func:`scale_model` turns a cluster (:class:`~goodputlab.theory.scale_model.ClusterCosts`) and that
  calibration into a :class:`ScaleModel`: a :class:`~goodputlab.engine.config.RunConfig` per strategy
  (MTBF, emulated checkpoint storage, rescheduling delay, each strategy's best interval in seconds of
  training, enough steps for the failures wanted), all on the same seed, so they share their failure draws;
* :func:`ratio_rows` reads the ratios a run measured, beside the cluster's, and :func:`ratio_table`
  prints them; :func:`goodput_stderr` is a run's goodput's standard error from its failure cycles.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .. import categories as C
from ..measure import events as E
from ..engine.config import RunConfig
from ..measure.ledger import Segment
from ..theory.scale_model import INTERVAL, RECOVERY, SAVE, STARTUP, ClusterCosts, LabPlan, llama3_cluster, plan_lab

STRATEGIES = ("sync", "async", "dcp", "memory")


@dataclass(frozen=True)
class Calibration:
    """What this machine measured (seconds, bytes): a step, a save's snapshot, a hot spare's recovery."""

    model: str
    state_bytes: int
    step_s: float
    snapshot_s: float
    recovery_floor_s: float


def calibrate(model: str = "small", batch_size: int | None = None, threads: int = 1, seed: int = 0,
              out: Path | str | None = None, **settings: Any) -> Calibration:
    """One short real run (about 10 s on 2 cores): async saves every 5 steps, a hot spare, one kill, no delay.

    The step is the median step's compute and data wait; the snapshot the median blocking part of an
    async save; the recovery floor the kill's restart and restore (what a hot spare costs at its fastest).
    ``settings``: other :class:`RunConfig` fields of the runs to come that change those costs (an input
    pipeline's ``workers``, ``prefetch``, ``io_latency_ms``...: its data wait is then in the step, and the
    warm-up of its first batch after the kill in the recovery floor).
    """
    from ..engine.api import run

    config = RunConfig(model=model, batch_size=batch_size, threads=threads, seed=seed, steps=90, ckpt="async",
                       ckpt_every=5, hot_spare=True, kill_at_steps=(70,), restart_delay=0.0, **settings)
    with tempfile.TemporaryDirectory(prefix="goodputlab-calibrate-") as scratch:
        result = run(config, out=Path(out) if out is not None else Path(scratch) / "run", progress=False)
    return calibration_of(result)


def calibration_of(result) -> Calibration:
    """What a finished run measured of this machine (seconds): its median step (compute and data wait), the
    median blocking part of its saves (the last left out: it may wait for the one before), and its restart
    and restore per failure (0.1 s without a failure). A run with a hot spare, no rescheduling delay and a
    failure measures the recovery floor that :func:`scale_model` tops up: :func:`calibrate` makes one, and
    a chapter that has made one already can read it instead."""
    from ..training.workload import PRESETS

    rows = result.per_step()
    saves = [s.duration for s in result.ledger.segments if s.kind == E.W_CKPT_SAVE][:-1]  # the last one waits
    b, failures = result.buckets, result.summary["failures"]
    model = result.config.model
    return Calibration(
        model=model, state_bytes=PRESETS[model].state_bytes,
        step_s=statistics.median(r["compute_s"] + r["data_wait_s"] for r in rows),
        snapshot_s=statistics.median(saves) if saves else 0.0,
        recovery_floor_s=(b[C.RESTART] + b[C.CHECKPOINT_RESTORE]) / failures if failures else 0.1,
    )


@dataclass(frozen=True)
class ScaleModel:
    """The lab at a cluster's ratios: the plan, and a run configuration for each strategy."""

    plan: LabPlan
    calibration: Calibration
    configs: dict[str, RunConfig]

    @property
    def cluster(self) -> ClusterCosts:
        return self.plan.cluster

    def config(self, strategy: str = "sync") -> RunConfig:
        return self.configs[strategy]

    def table(self) -> str:
        """The planned ratios, lab against cluster, as text."""
        rows = [{"ratio": k, "lab": v, "cluster": self.cluster.ratios()[k]} for k, v in self.plan.ratios().items()]
        return format_rows(rows, self.cluster)


def scale_model(
    cluster: ClusterCosts | None = None,
    calibration: Calibration | None = None,
    *,
    strategies: Iterable[str] = ("sync",),
    mtbf_s: float = 10.0,
    failures: int = 20,
    seed: int = 0,
    **run_settings: Any,
) -> ScaleModel:
    """Run configurations that put the lab at ``cluster``'s ratios (default: :func:`llama3_cluster`).

    ``calibration``: :func:`calibrate`'s figures (measured now if not given); ``mtbf_s``: the lab's MTBF;
    ``failures``: how many the runs should see (their length); ``run_settings``: any other
    :class:`RunConfig` field, kept in every configuration (``batch_size``, ``threads``...). Every
    configuration has the same seed, so the runs share their failure draws (common random numbers).
    """
    cluster = cluster if cluster is not None else llama3_cluster()
    strategies = tuple(strategies)
    for s in strategies:
        if s not in STRATEGIES:
            raise ValueError(f"strategies: {s!r} is not one of {', '.join(STRATEGIES)}")
    cal = calibration if calibration is not None else calibrate(
        run_settings.get("model", "small"), run_settings.get("batch_size"), run_settings.get("threads", 1), seed)
    plan = plan_lab(cluster, state_bytes=cal.state_bytes, step_s=cal.step_s,
                    snapshot_s={s: cal.snapshot_s for s in strategies}, mtbf_s=mtbf_s,
                    recovery_floor_s=cal.recovery_floor_s, failures=failures,
                    memory_disk_every=run_settings.get("memory_disk_every", 4))
    base = {"model": cal.model, "threads": 1, **run_settings}
    configs = {
        s: RunConfig(**{**base, "ckpt": s, "ckpt_every": 0, "ckpt_every_s": round(plan.intervals_s[s], 4),
                        "steps": plan.steps, "seed": seed,
                        "mtbf": plan.mtbf_s, "hot_spare": True, "restart_delay": round(plan.restart_delay_s, 4),
                        "ckpt_storage_mbps": plan.storage_bps / 1e6, "max_failures": max(50, 4 * failures)})
        for s in strategies
    }
    return ScaleModel(plan, cal, configs)


def measured_ratios(result) -> dict[str, float]:
    """A run's ratios as its ledger measured them: a save's blocking time, a failure's recovery (restart and
    restore) and the mean interval between checkpoints, each over the run's MTBF; start-up over the run.

    The MTBF is the job's: a job of ``nproc`` ranks (or replica groups), each failing with MTBF ``mtbf``,
    fails ``nproc`` times as often (the supervisors draw its failures at ``mtbf / nproc``)."""
    s, b = result.summary, result.buckets
    mtbf = result.config.mtbf / result.config.nproc
    saves = [seg.duration for seg in result.ledger.segments if seg.kind == E.W_CKPT_SAVE]
    commits = sorted(e["t"] for e in result.events if e["kind"] == E.M_CKPT_COMMIT)
    gaps = [b2 - a for a, b2 in zip(commits, commits[1:]) if b2 > a]
    out = {
        SAVE: statistics.median(saves) / mtbf if saves and mtbf else math.nan,
        RECOVERY: (b[C.RESTART] + b[C.CHECKPOINT_RESTORE]) / s["failures"] / mtbf if s["failures"] and mtbf else math.nan,
        INTERVAL: statistics.median(gaps) / mtbf if gaps and mtbf else math.nan,
        STARTUP: b[C.STARTUP] / s["wall_s"] if s["wall_s"] else math.nan,
    }
    return out


def ratio_rows(results: dict[str, Any], cluster: ClusterCosts | None = None) -> list[dict[str, Any]]:
    """Rows ``{ratio, cluster, <run name>: lab ratio, ...}``: each measured run's ratios beside the cluster's."""
    cluster = cluster if cluster is not None else llama3_cluster()
    theirs = cluster.ratios()
    measured = {name: measured_ratios(r) for name, r in results.items()}
    return [{"ratio": k, "cluster": theirs[k], **{name: m[k] for name, m in measured.items()}} for k in theirs]


def ratio_table(results: dict[str, Any], cluster: ClusterCosts | None = None) -> str:
    """:func:`ratio_rows` as a small text table, with each run's failures and goodput (± its standard error)."""
    cluster = cluster if cluster is not None else llama3_cluster()
    rows = ratio_rows(results, cluster)
    names = list(results)
    width = max(10, *(len(n) for n in names))
    head = f"{'ratio':<16}" + "".join(f"{n:>{width + 2}}" for n in names) + f"{'cluster':>10}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['ratio']:<16}" + "".join(f"{_pct(r[n]):>{width + 2}}" for n in names) + f"{_pct(r['cluster']):>10}")
    lines.append(f"{'failures':<16}" + "".join(f"{results[n].summary['failures']:>{width + 2}}" for n in names))
    lines.append(f"{'goodput':<16}" + "".join(
        f"{results[n].goodput * 100:>{width - 4}.1f}% ±{goodput_stderr(results[n]) * 100:.1f}" for n in names))
    lines.append(f"cluster: {cluster.name}, MTBF {cluster.mtbf_s / 3600:.2f} h")
    return "\n".join(lines)


def format_rows(rows: list[dict[str, Any]], cluster: ClusterCosts) -> str:
    lines = [f"{'ratio':<16}{'lab':>10}{'cluster':>10}"]
    lines += [f"{r['ratio']:<16}{_pct(r['lab']):>10}{_pct(r['cluster']):>10}" for r in rows]
    lines.append(f"cluster: {cluster.name}, MTBF {cluster.mtbf_s / 3600:.2f} h")
    return "\n".join(lines)


def _pct(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x * 100:.2f}%" if x < 0.1 else f"{x * 100:.1f}%"


def goodput_after_startup(result) -> float:
    """Productive time over the wall time after the first launch: what a model of an endless job predicts."""
    b = result.buckets
    return b[C.PRODUCTIVE] / (result.summary["wall_s"] - b[C.STARTUP])


def goodput_stderr(result, after_startup: bool = False) -> float:
    """The standard error of a run's goodput from its failure cycles (renewal-reward, the ratio estimator).

    The run is cut at each failure; cycle ``i`` has wall time ``w_i`` and productive time ``p_i``, the goodput
    is ``G = sum p / sum w``, and ``Var(G) ~ n/(n-1) * sum (p_i - G w_i)^2 / (sum w)^2``. A run without at
    least two failures has no luck to measure: ``nan``. ``after_startup``: of :func:`goodput_after_startup`."""
    terms = _cycle_terms(result, after_startup)
    if terms is None:
        return math.nan
    n = len(terms)
    return math.sqrt(n / (n - 1) * sum(t * t for t in terms))


def _cycle_terms(result, after_startup: bool) -> list[float] | None:
    """Each failure cycle's linearised share of the goodput's error, ``(p_i - G w_i) / sum w`` (None with fewer
    than two failures): the terms whose squares sum to the goodput's variance, and whose paired differences
    give the variance of a difference (:func:`difference_stderr`)."""
    import bisect

    cuts = sorted(result.ledger.failure_times)
    if len(cuts) < 2:
        return None
    edges = [-math.inf, *cuts, math.inf]
    wall = [0.0] * (len(edges) - 1)
    prod = [0.0] * (len(edges) - 1)
    for seg in result.ledger.segments:
        if after_startup and seg.category == C.STARTUP:
            continue
        start = seg.start
        while start < seg.end:
            i = bisect.bisect_right(cuts, start)
            end = min(seg.end, edges[i + 1])
            wall[i] += end - start
            if seg.category == C.PRODUCTIVE:
                prod[i] += end - start
            start = end
    total = sum(wall)
    g = sum(prod) / total
    return [(p - g * w) / total for p, w in zip(prod, wall)]


def difference_stderr(a, b, after_startup: bool = False, paired: bool = True) -> float:
    """The standard error of ``a.goodput - b.goodput`` for two runs.

    ``paired``: runs on the same seed draw the same failure gaps (in seconds of training), so their ``i``-th
    failure cycles share their luck: the error of the difference comes from the cycles' paired differences
    (the unpaired tail of the longer run counts alone). ``paired=False`` takes the two errors as independent,
    the larger, safe bound for runs that do not share their draws."""
    ta, tb = _cycle_terms(a, after_startup), _cycle_terms(b, after_startup)
    if ta is None or tb is None:
        return math.nan
    if not paired:
        return math.hypot(goodput_stderr(a, after_startup), goodput_stderr(b, after_startup))
    n = max(len(ta), len(tb))
    ta, tb = ta + [0.0] * (n - len(ta)), tb + [0.0] * (n - len(tb))
    return math.sqrt(n / (n - 1) * sum((x - y) ** 2 for x, y in zip(ta, tb)))


def measured_costs(result) -> dict[str, float]:
    """What a run's saves and failures cost, read from its log (seconds, medians):

    ``blocking_s`` (a save's blocking part), ``durable_s`` (from a save's start to its first commit: for
    ``memory`` the RAM tier's), ``interval_s`` (training between the end of one save and the start of the
    next, in the same attempt) and ``recovery_s`` (restart and restore per failure, a mean)."""
    saves: list[Segment] = [seg for seg in result.ledger.segments if seg.kind == E.W_CKPT_SAVE]
    commits: dict[tuple[int, int], float] = {}
    for e in result.events:
        if e["kind"] == E.M_CKPT_COMMIT:
            commits.setdefault((e["attempt"], e["ckpt_step"]), e["t"])
    durable = [commits[(seg.attempt, seg.step + 1)] - seg.start for seg in saves if (seg.attempt, seg.step + 1) in commits]
    gaps = [b.start - a.end for a, b in zip(saves, saves[1:]) if a.attempt == b.attempt and b.start > a.end]
    b, failures = result.buckets, result.summary["failures"]
    blocking = statistics.median(seg.duration for seg in saves[:-1]) if len(saves) > 1 else math.nan
    return {
        "blocking_s": blocking,
        "durable_s": statistics.median(durable) if durable else blocking,
        "interval_s": statistics.median(gaps) if gaps else math.nan,
        "recovery_s": (b[C.RESTART] + b[C.CHECKPOINT_RESTORE]) / failures if failures else 0.0,
    }


def model_goodput(result, **memory: Any) -> float:
    """The goodput the model predicts for a run at its measured costs (:func:`measured_costs`) and its MTBF:
    :func:`~goodputlab.theory.checkpoint_tiers.strategy_goodput` of its strategy (an endless job: compare it
    with :func:`goodput_after_startup`). ``memory``: the RAM tier's options (``disk_every`` defaults to the
    run's ``memory_disk_every``)."""
    from ..theory.checkpoint_tiers import strategy_goodput

    config, c, b = result.config, measured_costs(result), result.buckets
    if config.ckpt == "memory":
        memory = {"disk_every": config.memory_disk_every, **memory}
    # the model's training time is all compute; a run's also holds its data waits and bookkeeping
    training = b[C.PRODUCTIVE] + b[C.LOST_WORK] + b[C.DATA_WAIT] + b[C.OTHER]
    not_compute = (b[C.DATA_WAIT] + b[C.OTHER]) / training if training > 0 else 0.0
    return (1.0 - not_compute) * strategy_goodput(config.ckpt, c["interval_s"], c["blocking_s"], c["durable_s"],
                                                  c["recovery_s"], config.mtbf, **memory)
