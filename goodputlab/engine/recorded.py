"""Recorded runs that ship with the package: for a machine too slow to train, or a phone.

A workshop room has laptops of every speed, Binder sessions with a fraction of a core, and
participants on a phone. Each recording in ``goodputlab/recorded/`` is a real run made by
``tools/record_runs.py``: its event log (``events.jsonl.gz``) and its summary, nothing else
(no checkpoints). :func:`recorded_run` reads one back as the same
:class:`~goodputlab.engine.api.RunResult` that :func:`~goodputlab.engine.api.run` returns, so
every chart, ledger, lab check and panel works on it unchanged::

    result = gl.recorded_run("lab01")        # instead of gl.run(...): no training
    result.goodput, result.timeline_chart()

:func:`recorded_runs` lists them (``index.json``: what each shows, its settings, the machine
it was recorded on); :func:`nearest_recorded` finds the recording closest to a configuration,
and says how it differs, for a panel whose reader asked for recorded runs.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..categories import CATEGORIES
from ..errors import ConfigError, RunFileError
from .api import RunResult, read_summary
from .config import RunConfig
from ..measure.events import parse_event

#: The folder of the recordings (package data).
RECORDED_DIR = Path(__file__).resolve().parent.parent / "recorded"
INDEX_NAME = "index.json"
EVENTS_NAME = "events.jsonl.gz"
SUMMARY_NAME = "summary.json"
MAX_EVENTS_BYTES = 16 << 20  # uncompressed; the largest recording is a few hundred KB


@dataclass(frozen=True)
class Recording:
    """One recorded run: its name, what it shows, the settings it ran with and where."""

    name: str
    title: str
    chapters: tuple[int, ...]
    settings: dict[str, Any]
    """The settings given to ``gl.run`` (the rest are RunConfig's defaults)."""
    goodput: float
    wall_s: float
    failures: int
    machine: dict[str, Any] = field(default_factory=dict)
    """Where it was recorded: cores, torch version, load average, date."""

    @property
    def config(self) -> RunConfig:
        return RunConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in self.settings.items()})

    def describe(self) -> str:
        return f"{self.name}: {self.title} (goodput {self.goodput:.1%}, {self.failures} failures, {self.wall_s:.0f} s)"


def _read_index(folder: Path) -> dict[str, Recording]:
    path = folder / INDEX_NAME
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing (run tools/record_runs.py to make the recordings)") from None
    except json.JSONDecodeError as e:
        raise RunFileError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    out = {}
    for name, r in raw["recordings"].items():
        out[name] = Recording(
            name=name, title=r["title"], chapters=tuple(r["chapters"]), settings=dict(r["settings"]),
            goodput=r["goodput"], wall_s=r["wall_s"], failures=r["failures"], machine=dict(r.get("machine", {})),
        )
    return out


def recorded_runs(folder: str | Path | None = None) -> dict[str, Recording]:
    """Every recording that ships with the package, by name (in the order they were recorded)."""
    return _read_index(Path(folder) if folder is not None else RECORDED_DIR)


def read_recorded_events(path: Path) -> list[dict]:
    """The events of a gzipped event log, ordered by time; a bad line raises RunFileError naming it."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read(MAX_EVENTS_BYTES + 1)
    except (OSError, EOFError) as e:
        raise RunFileError(f"{path}: not a readable gzip file ({e})") from None
    if len(raw) > MAX_EVENTS_BYTES:
        raise RunFileError(f"{path}: more than {MAX_EVENTS_BYTES} bytes of events, not a recording")
    events = []
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        if not line:
            continue
        try:
            events.append(parse_event(line))
        except ValueError as e:
            raise RunFileError(f"{path}, line {lineno}: {e}") from None
    events.sort(key=lambda e: e["t"])
    return events


def recorded_run(name: str, folder: str | Path | None = None) -> RunResult:
    """A recorded run, as the :class:`RunResult` a real ``gl.run`` returns (no training happens).

    ``name`` is one of :func:`recorded_runs`; an unknown name raises
    :class:`~goodputlab.errors.ConfigError` listing the names there are.
    """
    folder = Path(folder) if folder is not None else RECORDED_DIR
    known = _read_index(folder)
    if name not in known:
        raise ConfigError("recorded run", name, f"one of {', '.join(known)}")
    run_dir = folder / name
    summary = with_every_category(read_summary(run_dir / SUMMARY_NAME))
    return RunResult(run_dir, summary, read_recorded_events(run_dir / EVENTS_NAME))


def with_every_category(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with a zero for every ledger category it lacks, in ``buckets`` and ``shares``.

    A recording made before a category existed (``straggler_wait`` came with runs on many ranks)
    had none of that time: zero is what its ledger would book. The recordings then read like
    today's runs, whose summaries name every category.
    """
    for key in ("buckets", "shares"):
        if isinstance(summary.get(key), dict):
            summary[key] = {c: summary[key].get(c, 0.0) for c in CATEGORIES} | summary[key]
    return summary


# --- the recording nearest to what a reader asked for ----------------------------------------------------

#: How far apart two values of a setting are, for the settings that shape a run's goodput.
def _log_gap(a: float, b: float, zero: float) -> float:
    return abs(math.log((a or 0) + zero) - math.log((b or 0) + zero))


_DISTANCES = {
    "ckpt": lambda a, b: 0.0 if a == b else 2.0,
    "model": lambda a, b: 0.0 if a == b else 1.5,
    "ckpt_every": lambda a, b: _log_gap(a if isinstance(a, (int, float)) else 25, b if isinstance(b, (int, float)) else 25, 1.0),
    "mtbf": lambda a, b: 3.0 if (a > 0) != (b > 0) else _log_gap(a, b, 0.5),
    "workers": lambda a, b: 0.5 * abs(a - b),
    "prefetch": lambda a, b: 0.0 if a == b else 0.3,
    "io_latency_ms": lambda a, b: 0.5 * _log_gap(a, b, 2.0),
    "transform_ms": lambda a, b: 0.5 * _log_gap(a, b, 2.0),
    "steps": lambda a, b: 0.3 * _log_gap(a, b, 1.0),
    "kill_at_steps": lambda a, b: 0.0 if tuple(a) == tuple(b) else 0.2,
}
#: Settings that change what a run is (recovery: hot spares, failure modes, parts left out of checkpoints;
#: scaling out: ranks and stragglers): a recording that differs in one is far away.
_EXTRA = ("hot_spare", "hot_spares", "failure_mode", "hang_timeout", "ckpt_omit", "nproc", "nnodes",
          "straggler_prob", "straggler_factor", "straggler_rank")
_EXTRA_DISTANCE = 2.0


def _differences(wanted: Mapping[str, Any], have: Mapping[str, Any]) -> dict[str, float]:
    gaps = {}
    for name in sorted(set(wanted) & set(have)):
        a, b = wanted[name], have[name]
        if a == b or (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and tuple(a) == tuple(b)):
            continue
        if name in _DISTANCES:
            try:
                gaps[name] = _DISTANCES[name](a, b)
            except TypeError:  # None against a number (prefetch, batch size)
                gaps[name] = 0.3
        elif name in _EXTRA:
            gaps[name] = _EXTRA_DISTANCE
    return gaps


@dataclass(frozen=True)
class NearestRecording:
    """The recording closest to a configuration, and how it differs from it."""

    name: str
    distance: float
    differences: dict[str, tuple[Any, Any]]
    """setting -> (what was asked, what the recording has), for the settings that matter."""

    def describe(self) -> str:
        if not self.differences:
            return f"recorded run {self.name!r}: the same settings"
        diffs = ", ".join(f"{k} {have!r} instead of {want!r}" for k, (want, have) in self.differences.items())
        return f"recorded run {self.name!r}, nearest to your settings: {diffs}"


def nearest_recorded(config: RunConfig | Mapping[str, Any], folder: str | Path | None = None,
                     among: list[str] | None = None) -> NearestRecording:
    """The recording whose settings are closest to ``config`` (strategy, model, interval, failure rate,
    pipeline, storage latency weigh most), with the settings that differ."""
    wanted = config.to_dict() if isinstance(config, RunConfig) else dict(config)
    wanted_full = RunConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in wanted.items()}).to_dict()
    best: NearestRecording | None = None
    for name, rec in recorded_runs(folder).items():
        if among is not None and name not in among:
            continue
        have = rec.config.to_dict()
        gaps = _differences(wanted_full, have)
        distance = sum(gaps.values())
        if best is None or distance < best.distance:
            shown = {k: (wanted_full[k], have[k]) for k, g in gaps.items() if g > 0}
            best = NearestRecording(name, distance, shown)
    if best is None:
        raise ConfigError("among", among, "names of recorded runs")
    return best
