"""In-job recovery measured (chapter 11): restart from a checkpoint against torchft's in-job recovery on the
same failure draws, at a cluster's ratios, and a compact recording of the runs.

- :func:`scale_pair`: the scale model's pair (issue 42). The restart side is the one-process job at
  :func:`goodputlab.experiments.scale_model.scale_model`'s settings (a forked, preloaded hot spare, emulated
  storage, a rescheduling delay, the best interval): a torchrun group has no standby, and its cold restart
  alone would be many times a cluster's share. The torchft side runs ``groups`` replica groups with a hot
  spare, the same seed and the same job MTBF (so the same failure draws), its relaunch topped up by a delay
  to the cluster's relaunch share (:class:`InJobCosts`); its steps are sized for about as many failures;
- :func:`survivors_pair`: two torchft runs on the same kills, the survivors keeping a failed try's
  gradient (``--ft-failed-step reuse``, this lab's loop) and computing the step again (``recompute``,
  torchft's ``OptimizerWrapper``);
- :func:`compare`: the same job restarted by torchrun and recovered by torchft at fixed kills (the panel's);
- :func:`record`: what the chapter shows of the runs, in tens of kilobytes: each run's summary, each
  replica's timeline (the ledger's segments, merged), the committed steps' losses, the kills, and for the
  scale pair its ratio tables and standard errors (``book/data/in_job_run.json``); :func:`load_recording`
  reads it back and checks its shape;
- :func:`timeline_rows`, :func:`books_rows`, :func:`degraded_steps`, :func:`in_job_ratio_rows`: the rows the
  charts and the text use (the timelines at a chart's resolution: :func:`binned`).

A restarted job's ranks share one timeline (a failure stops them all), so its rows are the job's ledger once
per rank; a torchft job's rows are each replica's own (docs/IN_JOB_RECOVERY.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import categories as C
from ..engine.torchft_supervision import HEARTBEAT_TIMEOUT_MS
from ..errors import RunFileError
from .recordings import read_recording

MODES = ("none", "torchft")
#: the job of the chapter and of benchmarks/in_job_recovery.py: a tiny model, one thread per rank, slow storage
JOB: dict[str, Any] = {"model": "tiny", "threads": 1, "io_latency_ms": 20.0}
#: checkpoints of each mode: the restart needs periodic ones; torchft keeps its state in the replicas
CKPT_EVERY = {"none": 50, "torchft": 0}
RECORDING_VERSION = 2
#: torchft 0.2.0's lighthouse defaults (``torchft_lighthouse --help``): a replica counts as dead after 5 s without a
#: heartbeat, and a quorum waits up to 60 s for stragglers to join. This lab sets both to 1 s (below).
TORCHFT_HEARTBEAT_TIMEOUT_S, TORCHFT_JOIN_TIMEOUT_S = 5.0, 60.0
RECORDING_NAME = "in_job_run.json"
#: the lab's lighthouse heartbeat timeout (seconds): the survivors' wait for a dead group in a quorum
LAB_HEARTBEAT_TIMEOUT_S = HEARTBEAT_TIMEOUT_MS / 1000
#: a recorded timeline's bins over its run's wall: twice a chart's resolution, so a recording stays tens of kB
#: however many steps its runs took (each category keeps its booked time)
TIMELINE_BINS = 800
#: the committed losses a recording keeps of a run: those of about this many steps, evenly spaced
LOSS_STEPS = 400
#: steps of the plain run that measures the one-process pace before a :func:`scale_pair`
PACE_STEPS = 120


def compare(steps: int, kills: tuple[int, ...], out_root: str | Path, replicas: int = 2, seed: int = 0,
            progress: bool = False, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """``{mode: RunResult}``: the job of ``steps`` steps on ``replicas`` processes with kills at ``kills``
    (steps), once per fault-tolerance mode, one right after the other (so the machine's load hits both)."""
    from ..engine.api import run

    out_root = Path(out_root)
    return {mode: run(steps=steps, nproc=replicas, fault_tolerance=mode, kill_at_steps=tuple(kills),
                      ckpt_every=CKPT_EVERY[mode], seed=seed, out=out_root / mode, progress=progress, **JOB)
            for mode in modes}


@dataclass(frozen=True)
class InJobCosts:
    """What a failure costs a cluster's in-job recovery (seconds): a group's relaunch (detection, rescheduling,
    start-up; booked ``degraded``), its heal from a peer, and the collective timeout in which the surviving
    groups wait for a dead peer (torchft's ``Manager`` default: 60 s). The chapter's Llama 3 simulation uses
    the same relaunch and heal."""

    relaunch_s: float = 300.0
    heal_s: float = 60.0
    timeout_s: float = 60.0


def scaled_cluster(factor: float = 4.0, **llama3):
    """Llama 3's costs (:func:`~goodputlab.theory.scale_model.llama3_cluster`, ``llama3``: its arguments) on a job
    ``factor`` times as large: the same save, restart and restore, ``factor`` times the failure rate."""
    from ..theory.cluster import LLAMA3_GPUS
    from ..theory.scale_model import llama3_cluster

    base = llama3_cluster(**llama3)
    return dataclasses.replace(base, name=f"Llama 3's costs on {LLAMA3_GPUS * factor:,.0f} GPUs", mtbf_s=base.mtbf_s / factor)


def relaunch_floor_s(result) -> float:
    """The median seconds a hot standby took from a kill to its heal's start in a torchft run (its ``recoveries``),
    less any rescheduling delay the run added: the lab's fastest in-job relaunch."""
    away = [r["away_s"] for r in result.summary.get("recoveries", []) if r["hot"] and r["away_s"] is not None]
    return max(0.0, statistics.median(away) - result.config.restart_delay) if away else math.nan


def step_s(result) -> float:
    """A run's pace: the median seconds from one committed step to the next of its replica 0 (or its only worker),
    within one launch: the data, the compute, the quorum and the bookkeeping of a step."""
    from ..measure import events as E

    ends = [(e["attempt"], e["t"]) for e in result.events if e["kind"] == E.W_STEP_END and e.get("committed", True)
            and e.get("replica", 0) == 0]
    return statistics.median(b - a for (ka, a), (kb, b) in zip(ends, ends[1:]) if ka == kb)


def survivors_pair(steps: int, kills: tuple[int, ...], out_root: str | Path, groups: int = 2, seed: int = 0,
                   progress: bool = False) -> dict[str, Any]:
    """``{"reuse": RunResult, "recompute": RunResult}``: the same torchft job (``groups`` groups with a hot spare,
    the tiny model, no data latency) killed at the same ``kills`` (steps), the survivors of a failed all-reduce
    keeping its gradient or computing the step again (``--ft-failed-step``)."""
    from ..engine.api import run

    out_root = Path(out_root)
    return {mode: run(steps=steps, nproc=groups, fault_tolerance="torchft", hot_spare=True, kill_at_steps=tuple(kills),
                      ckpt_every=0, restart_delay=0.0, ft_failed_step=mode, seed=seed, model="tiny", threads=1, out=out_root / mode,
                      progress=progress)
            for mode in ("reuse", "recompute")}


def scale_pair(out_root: str | Path, cluster=None, costs: InJobCosts = InJobCosts(), calibration=None, *,
               mtbf_s: float = 4.0, failures: int = 20, restart_failures: int | None = None, groups: int = 2,
               ft_step_s: float | None = None, floor_s: float = 0.0, seed: int = 0,
               progress: bool = False) -> dict[str, Any]:
    """``{"none": RunResult, "torchft": RunResult}`` at ``cluster``'s ratios (default :func:`scaled_cluster`), on the
    same failure draws: a job MTBF of ``mtbf_s`` seconds, about ``failures`` failures for torchft and
    ``restart_failures`` (default the same) for the restart, whose goodput varies more from one failure to the next
    (the work lost since the last save): the runs share the first draws.

    Restart: the scale model's one-process run (sync saves). torchft: ``groups`` replica groups with a hot spare,
    each group's MTBF ``groups x mtbf_s`` (the supervisors draw the same gaps from the same seed), no periodic
    checkpoints, a rescheduling delay that tops the lab's relaunch (``floor_s``, e.g. :func:`relaunch_floor_s`)
    up to ``costs.relaunch_s`` over the cluster's MTBF. Each run's steps are sized for ``failures`` from its pace
    (:func:`step_s`): the restart's from a short plain run made first (a calibration's step is taken beside a
    standby that is starting, and runs slow), torchft's from ``ft_step_s`` (e.g. the pace of
    :func:`survivors_pair`'s run; None: the restart's), each failure's relaunch added."""
    from ..engine.api import run
    from ..engine.config import RunConfig
    from .scale_model import scale_model

    cluster = cluster if cluster is not None else scaled_cluster()
    out_root = Path(out_root)
    pace = step_s(run(steps=PACE_STEPS, model="tiny", threads=1, ckpt_every=0, seed=seed, out=out_root / "pace",
                      progress=False))
    model = scale_model(cluster, calibration, strategies=("sync",), mtbf_s=mtbf_s, failures=restart_failures or failures,
                        seed=seed, model="tiny")
    restart_config = model.configs["sync"]
    restart_config = restart_config.replace(steps=math.ceil(restart_config.steps * model.calibration.step_s / pace))
    relaunch = costs.relaunch_s / cluster.mtbf_s * mtbf_s
    steps = math.ceil(failures * (mtbf_s + max(relaunch, floor_s)) / (ft_step_s or pace))
    ft_config = RunConfig(steps=steps, nproc=groups, fault_tolerance="torchft", hot_spare=True, mtbf=groups * mtbf_s,
                          restart_delay=round(max(0.0, relaunch - floor_s), 4), ckpt_every=0, seed=seed, model="tiny",
                          threads=1, max_failures=restart_config.max_failures)
    return {"none": run(restart_config, out=out_root / "restart", progress=progress),
            "torchft": run(ft_config, out=out_root / "torchft", progress=progress)}


def in_job_ratio_rows(result, cluster, costs: InJobCosts = InJobCosts()) -> list[dict[str, Any]]:
    """A torchft run's ratios beside ``cluster``'s in-job ones (``costs``), each over the job's MTBF: a group's time
    away (kill to heal: relaunch), its heal, the survivors' wait for the dead group (the lab: the lighthouse's
    heartbeat timeout; a cluster: the collective's timeout), and start-up over the job. Rows ``{ratio, lab,
    cluster}``; the lab's means over its kills."""
    s = result.summary
    mtbf = result.config.mtbf / s["replica_groups"]
    done = [r for r in s["recoveries"] if r["away_s"] is not None]
    waits = s["survivor_quorum_waits_s"]
    mean = statistics.fmean
    lab = {
        "group away / MTBF": mean(r["away_s"] for r in done) / mtbf if done and mtbf else math.nan,
        "heal / MTBF": mean(r["heal_s"] for r in done) / mtbf if done and mtbf else math.nan,
        "stall / MTBF": mean(waits) / mtbf if waits and mtbf else math.nan,
        "start-up / job": s["buckets"][C.STARTUP] / s["wall_s"],
    }
    theirs = {"group away / MTBF": costs.relaunch_s / cluster.mtbf_s, "heal / MTBF": costs.heal_s / cluster.mtbf_s,
              "stall / MTBF": costs.timeout_s / cluster.mtbf_s, "start-up / job": cluster.startup_s / cluster.job_s}
    return [{"ratio": k, "lab": v, "cluster": theirs[k]} for k, v in lab.items()]


def failure_share(rows: list[dict[str, Any]], groups: int, side: str = "lab") -> float:
    """What one failure costs a torchft job, as a share of the MTBF, from :func:`in_job_ratio_rows` (``side``: ``lab``
    or ``cluster``): the struck group's time away and heal over the ``groups`` groups, and the survivors' wait for it
    (``(groups - 1) / groups`` of the job)."""
    r = {row["ratio"]: row[side] for row in rows}
    return (r["group away / MTBF"] + r["heal / MTBF"]) / groups + r["stall / MTBF"] * (groups - 1) / groups


def costed_rows(rows: list[dict[str, Any]], config, parameters: float, step_s: float, network_bps: float,
                timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """:func:`goodputlab.theory.sweep_rows`'s rows with what more groups and a dead peer's timeout cost: per in-job
    row ``with_costs_goodput`` (the closed form with every surviving group stalled ``timeout_s`` seconds after each
    failure and the cross-group all-reduce of a ``parameters``-parameter model at ``network_bps`` bytes per second
    a device, ``step_s`` seconds of compute a step, as the per-step overhead:
    :func:`goodputlab.theory.in_job.with_group_costs`), ``stall_share``, ``allreduce_share`` and
    ``state_bytes_per_device``. The restart row keeps its goodput: none of these is a restart's."""
    from ..theory.in_job import with_group_costs

    out = []
    for r in rows:
        row = dict(r)
        if r["recovery"] == "in-job":
            setting = dataclasses.replace(config, recovery="in-job", replica_groups=r["replica_groups"],
                                          collective_timeout_s=timeout_s)
            prediction, groups = with_group_costs(setting, parameters, step_s, network_bps)
            row.update(with_costs_goodput=prediction.goodput, stall_share=prediction.stall_share,
                       allreduce_share=groups.step_overhead_share, state_bytes_per_device=groups.state_bytes_per_device)
        else:
            row.update(with_costs_goodput=r.get("closed_form_goodput", r["goodput_mean"]), stall_share=0.0,
                       allreduce_share=0.0, state_bytes_per_device=None)
        out.append(row)
    return out


def _kills(result) -> list[dict[str, Any]]:
    """Each failure: its time (s), the replica it struck (torchft) and the steps the job had committed then."""
    from ..measure import events as E

    done, out = 0, []
    for e in result.events:  # in time order
        if e["kind"] == E.W_STEP_END and e.get("committed", True):
            done = max(done, e["step"] + 1)
        elif e["kind"] == E.SUP_FAILURE:
            out.append({"t": round(e["t"], 3), "replica": e.get("replica"), "step": done})
    return out


def _merged(segments) -> dict[str, Any]:
    """A timeline, compact: ``t``, the start of each stretch and then the end of the last (seconds, to the
    millisecond), and ``c``, each stretch's category as one digit (its index in ``categories.CATEGORIES``).
    Neighbours of one category are merged; a timeline runs without gaps from 0 to the wall."""
    starts: list[float] = []
    codes: list[int] = []
    end = 0.0
    for start, stop, category in segments:
        if stop <= start:
            continue
        code = C.CATEGORIES.index(category)
        if not codes or code != codes[-1]:
            starts.append(start)
            codes.append(code)
        end = stop
    return {"t": [round(x, 3) for x in starts] + [round(end, 3)], "c": "".join(str(k) for k in codes)}


def stretches(timeline: Mapping[str, Any]) -> list[tuple[float, float, str]]:
    """``(start, end, category)`` of a compact timeline (:func:`_merged`)."""
    t, c = timeline["t"], timeline["c"]
    return [(t[i], t[i + 1], C.CATEGORIES[int(k)]) for i, k in enumerate(c)]


def _replica_timelines(result, bins: int = TIMELINE_BINS) -> dict[str, list[list]]:
    """Each replica's (torchft: its strip of the job's ledger) or rank's (a restart: the job's ledger) timeline, at
    ``bins`` bins over the run's wall (:func:`binned`: each category keeps its booked time), merged."""
    s = result.summary
    segments = result.ledger.segments
    bin_s = s["wall_s"] / bins
    if s.get("fault_tolerance") != "torchft":
        job = _merged(_binned(((seg.start, seg.end, seg.category) for seg in segments), bin_s))
        return {str(r): job for r in range(int(s.get("world_size", 1)))}
    from ..distributed.replica_ledger import replica_lane

    return {str(r): _merged(_binned(((seg.start, seg.end, seg.category) for seg in segments
                                     if seg.lane == replica_lane(r)), bin_s))
            for r in range(s["replica_groups"])}


def _losses(result) -> list[list]:
    """``[step, loss, replica]`` of every committed step (replica 0 for a torchrun job: its ranks agree)."""
    from ..measure import events as E

    ft = result.summary.get("fault_tolerance") == "torchft"
    rows = []
    for e in result.events:
        if e["kind"] == E.W_STEP_END and e.get("committed", True) and "loss" in e:
            replica = e.get("replica", 0) if ft else e.get("rank", 0)
            if ft or replica == 0:
                rows.append([e["step"], round(float(e["loss"]), 5), replica])
    if not ft:  # the restarted job's surviving executions only: the last attempt's step wins
        rows = [[s, loss, 0] for s, loss in {s: loss for s, loss, _ in rows}.items()]
    return sorted(rows)


def record(runs: Mapping[str, Any], machine: str = "", cluster=None, costs: InJobCosts = InJobCosts(),
           timelines: bool = True) -> dict[str, Any]:
    """The runs as JSON-ready data (tens of kB): per mode its summary, timelines and losses (not with
    ``timelines=False``), kills and goodput's standard error (whole run and after start-up). With ``cluster`` (a
    :func:`scale_pair`): ``scale``, the
    restart's :func:`~goodputlab.experiments.scale_model.ratio_table` and the torchft run's
    :func:`in_job_ratio_rows` beside that cluster's, and the standard error of the goodputs' difference."""
    from .scale_model import difference_stderr, format_rows, goodput_after_startup, goodput_stderr, ratio_rows, ratio_table

    out: dict[str, Any] = {"version": RECORDING_VERSION, "machine": machine, "runs": {}}
    for mode, result in runs.items():
        summary = {k: v for k, v in result.summary.items() if k not in ("scratch",)}
        losses = _losses(result)
        every = max(1, math.ceil(len({step for step, _, _ in losses}) / LOSS_STEPS))
        drawn = {"timelines": _replica_timelines(result), "losses": [row for row in losses if row[0] % every == 0],
                 "degraded_steps": _degraded(losses, summary.get("replica_groups", 1))} if timelines else {}
        out["runs"][mode] = {"summary": summary, **drawn, "kills": _kills(result), "goodput_stderr": _finite(goodput_stderr(result)),
                             "goodput_after_startup": goodput_after_startup(result),
                             "stderr_after_startup": _finite(goodput_stderr(result, after_startup=True))}
    if cluster is not None:
        restart, ft = runs["none"], runs["torchft"]
        in_job_rows = in_job_ratio_rows(ft, cluster, costs)
        out["scale"] = {
            "cluster": {"name": cluster.name, "mtbf_s": cluster.mtbf_s, "save_s": cluster.save_s,
                        "recovery_s": cluster.recovery_s, "ratios": cluster.ratios()},
            "costs": dataclasses.asdict(costs),
            "restart_table": ratio_table({"restart": restart}, cluster),
            "restart_rows": _clean(ratio_rows({"restart": restart}, cluster)),
            "in_job_rows": _clean(in_job_rows),
            "in_job_table": format_rows(in_job_rows, cluster),
            "difference_stderr": _finite(difference_stderr(ft, restart)),
            "difference_stderr_after_startup": _finite(difference_stderr(ft, restart, after_startup=True)),
        }
    return out


def _finite(x: float) -> float | None:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _clean(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with nan (a ratio a run could not measure) as None, for JSON."""
    return [{k: _finite(v) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def save_recording(recording: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``recording`` (compact JSON) to ``path``."""
    path = Path(path)
    path.write_text(json.dumps(recording, separators=(",", ":")) + "\n")
    return path


def load_recording(path: str | Path) -> dict[str, Any]:
    """A recording written by :func:`save_recording`; raises :class:`RunFileError` naming what is wrong."""
    data = read_recording(path, "in-job recovery", RECORDING_VERSION, lambda data: isinstance(data.get("runs"), dict))
    runs = data["runs"]
    for mode, r in runs.items():
        if not {"summary", "timelines", "losses"} <= set(r):
            raise RunFileError(f"{path}: run {mode!r} lacks its summary, timelines or losses")
    return data


def find_recording(start: str | Path = ".") -> Path:
    """The chapter's recording, ``book/data/in_job_run.json``, looked for from ``start`` upwards (a chapter
    runs in ``book/``, a lab in ``labs/`` or ``labs/solutions/``); raises :class:`RunFileError` if none."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        for candidate in (folder / "data" / RECORDING_NAME, folder / "book" / "data" / RECORDING_NAME):
            if candidate.is_file():
                return candidate
    raise RunFileError(f"{RECORDING_NAME}: not found in book/data/ above {here} (run book/11_in_job_recovery.ipynb in full to make it)")


def _binned(parts, bin_s: float) -> list[tuple[float, float, str]]:
    """``(start, end, category)`` stretches at a resolution of ``bin_s`` seconds (:func:`binned`)."""
    from ..measure.ledger import TimelineBins, coalesce

    gathered = TimelineBins(bin_s)
    for start, end, category in parts:
        gathered.add(start, end, category, 0, category)
    return [(g.start, g.end, g.category) for g in coalesce(gathered.segments()) if g.end > g.start]


def binned(timeline: Mapping[str, Any], bin_s: float) -> list[tuple[float, float, str]]:
    """The timeline at a chart's resolution: stretches shorter than ``bin_s`` seconds gathered in bins, each
    bin drawn as its categories side by side, each as long as its time in the bin (the main timeline's
    binning, :class:`~goodputlab.measure.ledger.TimelineBins`), neighbours of one category merged. So every
    category keeps its booked time: a step's data wait of a few milliseconds still shows, summed over a bin."""
    return [(round(a, 3), round(b, 3), c) for a, b, c in _binned(stretches(timeline), bin_s)]


def timeline_rows(recording: Mapping[str, Any], bins: int = 400) -> list[dict[str, Any]]:
    """One row per stretch of each replica's timeline: ``run``, ``replica``, ``lane``, ``start``, ``end`` (s),
    ``category`` (for :func:`goodputlab.charts.in_job.replica_timeline`), at ``bins`` bins over the
    longest run (:func:`binned`)."""
    names = {"none": "restart", "torchft": "torchft"}
    walls = [r["summary"]["wall_s"] for r in recording["runs"].values()]
    bin_s = max(walls, default=1.0) / bins
    rows = []
    for mode, r in recording["runs"].items():
        for replica, timeline in r["timelines"].items():
            lane = f"{names.get(mode, mode)}: {'rank' if mode == 'none' else 'replica'} {replica}"
            rows += [{"run": names.get(mode, mode), "replica": int(replica), "lane": lane, "start": s, "end": e,
                      "category": c} for s, e, c in binned(timeline, bin_s)]
    return rows


def books_rows(recording: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per mode, the job's summary as :func:`goodputlab.charts.runs.breakdown` takes it."""
    names = {"none": "restart from a checkpoint", "torchft": "torchft, in-job"}
    return {names.get(m, m): r["summary"] for m, r in recording["runs"].items()}


def degraded_steps(recording: Mapping[str, Any], mode: str = "torchft") -> int:
    """Steps that ran on fewer replicas than the job has: each such step's global batch was smaller (counted when
    the run was recorded, over every step)."""
    r = recording["runs"][mode]
    if "degraded_steps" in r:
        return int(r["degraded_steps"])
    return _degraded(r["losses"], int(r["summary"].get("replica_groups", 1)))


def _degraded(losses, groups: int) -> int:
    """Of ``[step, loss, replica]`` rows (every committed step of each replica), the steps fewer than ``groups`` committed."""
    per_step: dict[int, int] = {}
    for step, _, _ in losses:
        per_step[step] = per_step.get(step, 0) + 1
    return sum(1 for n in per_step.values() if n < groups)
