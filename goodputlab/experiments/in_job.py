"""In-job recovery measured (chapter 11): the same job and the same kills, restarted from a checkpoint
by torchrun and recovered in-job by torchft, and a compact recording of the pair.

- :func:`compare`: two real runs of one job (``--nproc`` replicas, kills at fixed steps):
  ``fault_tolerance="none"`` (every rank stops, the job restarts from its last checkpoint) and
  ``"torchft"`` (the killed replica group relaunches and heals from a peer while the others train);
- :func:`record`: what the chapter shows of the pair, in a few tens of kilobytes: each run's summary,
  each replica's timeline (the ledger's segments, merged) and the committed steps' losses, so a chapter
  can show a real run without training (``book/data/in_job_run.json``); :func:`load_recording` reads
  it back and checks its shape;
- :func:`timeline_rows`, :func:`books_rows`, :func:`degraded_steps`: the rows the charts and the text
  use, from a recording (the timelines at a chart's resolution: :func:`binned`).

A torchrun job's ranks share one timeline (a failure stops them all), so its rows are the job's
ledger once per rank; a torchft job's rows are each replica's own (docs/IN_JOB_RECOVERY.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from .. import categories as C
from ..errors import RunFileError
from .recordings import read_recording

MODES = ("none", "torchft")
#: the job of the chapter and of benchmarks/in_job_recovery.py: a tiny model, one thread per rank, slow storage
JOB: dict[str, Any] = {"model": "tiny", "threads": 1, "io_latency_ms": 20.0}
#: checkpoints of each mode: the restart needs periodic ones; torchft keeps its state in the replicas
CKPT_EVERY = {"none": 50, "torchft": 0}
RECORDING_VERSION = 1
RECORDING_NAME = "in_job_run.json"


def compare(steps: int, kills: tuple[int, ...], out_root: str | Path, replicas: int = 2, seed: int = 0,
            progress: bool = False, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """``{mode: RunResult}``: the job of ``steps`` steps on ``replicas`` processes with kills at ``kills``
    (steps), once per fault-tolerance mode, one right after the other (so the machine's load hits both)."""
    from ..engine.api import run

    out_root = Path(out_root)
    return {mode: run(steps=steps, nproc=replicas, fault_tolerance=mode, kill_at_steps=tuple(kills),
                      ckpt_every=CKPT_EVERY[mode], seed=seed, out=out_root / mode, progress=progress, **JOB)
            for mode in modes}


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


def _replica_timelines(result) -> dict[str, list[list]]:
    """Each replica's (torchft: its strip of the job's ledger) or rank's (torchrun: the job's ledger) merged timeline."""
    s = result.summary
    segments = result.ledger.segments
    if s.get("fault_tolerance") != "torchft":
        job = _merged((seg.start, seg.end, seg.category) for seg in segments)
        return {str(r): job for r in range(int(s.get("world_size", 1)))}
    from ..distributed.replica_ledger import replica_lane

    return {str(r): _merged((seg.start, seg.end, seg.category) for seg in segments if seg.lane == replica_lane(r))
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


def record(runs: Mapping[str, Any], machine: str = "") -> dict[str, Any]:
    """The pair as JSON-ready data (a few tens of kB): per mode its summary, timelines and losses."""
    out: dict[str, Any] = {"version": RECORDING_VERSION, "machine": machine, "runs": {}}
    for mode, result in runs.items():
        summary = {k: v for k, v in result.summary.items() if k not in ("scratch",)}
        out["runs"][mode] = {"summary": summary, "timelines": _replica_timelines(result), "losses": _losses(result)}
    return out


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


def binned(timeline: Mapping[str, Any], bin_s: float) -> list[tuple[float, float, str]]:
    """The timeline at a chart's resolution: each ``bin_s`` seconds coloured by the category that took
    most of it, neighbours merged (a step's phases last milliseconds: drawn one by one, a chart of
    thousands of bars shows nothing more). The books (the summary) stay exact."""
    t = timeline["t"]
    wall = t[-1]
    bins = max(1, int(math.ceil(wall / bin_s)))
    out: list[list] = []
    parts = stretches(timeline)
    i = 0
    for b in range(bins):
        lo, hi = b * bin_s, min(wall, (b + 1) * bin_s)
        held: dict[str, float] = {}
        while i < len(parts) and parts[i][1] <= lo:
            i += 1
        j = i
        while j < len(parts) and parts[j][0] < hi:
            s0, s1, cat = parts[j]
            held[cat] = held.get(cat, 0.0) + min(s1, hi) - max(s0, lo)
            j += 1
        if not held:
            continue
        cat = max(held, key=held.get)
        if out and out[-1][2] == cat:
            out[-1][1] = hi
        else:
            out.append([lo, hi, cat])
    return [(round(a, 3), round(b, 3), c) for a, b, c in out]


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
    """Steps that ran on fewer replicas than the job has: each such step's global batch was smaller."""
    r = recording["runs"][mode]
    groups = int(r["summary"].get("replica_groups", 1))
    per_step: dict[int, int] = {}
    for step, _, _ in r["losses"]:
        per_step[step] = per_step.get(step, 0) + 1
    return sum(1 for n in per_step.values() if n < groups)
