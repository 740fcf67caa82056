"""The Python API the notebooks use: ``goodputlab.run(...)`` and its result."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .config import RunConfig
from ..errors import ConfigError, RunFileError
from ..validate import Number
from ..measure.events import read_events
from ..measure.ledger import Ledger, build_ledger, per_step
from ..measure.recorder_files import _lexists
from ..measure.recording import Recording
from ..measure.report import breakdown_table
from ..recovery.modes import restart_warning
from ..safe_io import UnsafeFileError, read_regular

if TYPE_CHECKING:
    from .supervisor import Progress

SUMMARY_MAX_BYTES = 64 << 20
TIMELINE_SEGMENTS = 4000  # a recording's timeline: segments shorter than wall / this are merged by bins


class RunCharts(Protocol):
    """What draws a :class:`RunResult` (:mod:`goodputlab.charts.runs` is one): each returns an Altair chart."""

    def timeline(self, ledger: Ledger, **kwargs: Any) -> Any: ...

    def breakdown(self, summary: dict[str, Any], **kwargs: Any) -> Any: ...

    def loss_curve(self, rows: list[dict[str, Any]], **kwargs: Any) -> Any: ...


_charts_source: Callable[[], RunCharts] | None = None


def draw_runs_with(source: Callable[[], RunCharts]) -> None:
    """Name what draws every :class:`RunResult`'s charts: ``source()`` returns a :class:`RunCharts`,
    called when a chart is drawn. The engine imports nothing of the book layer; the public API
    (``import goodputlab as gl``) names :mod:`goodputlab.charts.runs` when it hands out a run."""
    global _charts_source
    _charts_source = source


def _run_charts() -> RunCharts:
    if _charts_source is None:
        raise RuntimeError(
            "RunResult draws with goodputlab.charts, which nothing has named here: get runs through "
            "`import goodputlab as gl` (it names them), or call goodputlab.engine.api.draw_runs_with"
        )
    return _charts_source()


@dataclass
class RunResult:
    """A finished run: its summary, raw events and ledger, with charts of them (drawn by :class:`RunCharts`).

    A job recorded with :class:`~goodputlab.Recorder` is read from its event logs only as far
    as each use needs: the summary in one pass, the events, the per-step rows and the timeline
    when they are asked for (``recording``)."""

    out: Path
    summary: dict[str, Any]
    _events: list[dict] | None = field(default=None, repr=False)
    recording: Recording | None = field(default=None, repr=False)

    @property
    def events(self) -> list[dict]:
        """Every event of the run, sorted by time (a recording's are read into memory now)."""
        if self._events is None:
            self._events = self.recording.events()
        return self._events

    @cached_property
    def ledger(self) -> Ledger:
        """The ledger with its segments (a long recording's merged to a chart's resolution: segments
        shorter than 1/4000 of the wall time merged by bins of that width, each drawn as its categories
        side by side, each as long as its time in the bin, :class:`~goodputlab.measure.ledger.TimelineBins`). A torchft job's is booked by
        the job's rules, one strip per replica group with its ``degraded`` time, as its summary is
        (:func:`goodputlab.distributed.replica_ledger.job_ledger`)."""
        if self.summary.get("fault_tolerance") == "torchft":
            from ..distributed.replica_ledger import job_ledger

            return job_ledger(self.events, int(self.summary["replica_groups"]))
        if self._events is None and self.recording is not None:
            return self.recording.ledger(min_s=self.summary["wall_s"] / TIMELINE_SEGMENTS)
        return build_ledger(self.events)

    @property
    def goodput(self) -> float:
        """Productive seconds over wall seconds (0 to 1)."""
        return self.summary["goodput"]

    @property
    def buckets(self) -> dict[str, float]:
        """Seconds of the wall time booked to each category (they add up to ``summary["wall_s"]``)."""
        return self.summary["buckets"]

    @property
    def config(self) -> RunConfig:
        """The lab run's settings (a job recorded with gl.Recorder has none: see ``summary["config"]``)."""
        if self.summary["config"].get("source") == "recorder":
            raise AttributeError("a job recorded with gl.Recorder has no RunConfig; its facts are in summary['config']")
        return RunConfig.from_dict(self.summary["config"])

    def per_step(self) -> list[dict[str, Any]]:
        """One row per step execution (data wait, compute, loss, survived); a torchft job's per replica group
        (each row names its ``replica``: :func:`goodputlab.distributed.replica_ledger.job_per_step`)."""
        if self.summary.get("fault_tolerance") == "torchft":
            from ..distributed.replica_ledger import job_per_step

            return job_per_step(self.events, int(self.summary["replica_groups"]))
        if self._events is None and self.recording is not None:
            return self.recording.per_step()
        return per_step(self.events)

    def table(self) -> str:
        """The breakdown as text (what the CLI prints)."""
        return breakdown_table(self.summary)

    def rolling(self, window_s: float, since_s: float = 0.0, until_s: float = math.inf) -> list[dict[str, Any]]:
        """Rolling goodput: one row per window of ``window_s`` seconds of the run's wall clock (from ``since_s``
        to ``until_s``, seconds from its start): goodput, seconds per category, median and p90 step time,
        slow steps (:mod:`goodputlab.measure.windows`)."""
        from ..measure.windows import windows_of

        return windows_of(self._fold_with, WINDOW_S("window_s", window_s), *_span(since_s, until_s))

    def interval(self, since_s: float = 0.0, until_s: float = math.inf) -> dict[str, Any]:
        """The ledger of the part of the run from ``since_s`` to ``until_s`` (seconds from its start): one row
        as :meth:`rolling` gives."""
        from ..measure.windows import windows_of

        rows = windows_of(self._fold_with, None, *_span(since_s, until_s))
        return rows[0] if rows else {"start_s": since_s, "end_s": since_s, "goodput": 0.0, "buckets": {}, "steps": 0,
                                     "median_step_s": None, "p90_step_s": None, "slow_steps": 0}  # fmt: skip

    def to_pandas(self, window_s: float | None = None):
        """A pandas DataFrame: one row per step execution (:meth:`per_step`), or with ``window_s`` one per
        window (:meth:`rolling`, a column per category). Needs pandas (``pip install pandas``)."""
        from ..measure.exports import to_pandas

        return to_pandas(self.per_step() if window_s is None else self.rolling(window_s))

    def _fold_with(self, visit):
        """The run's log folded with ``visit`` (:func:`goodputlab.measure.fold.fold`)."""
        if self._events is None and self.recording is not None:
            return self.recording.fold(visit=visit)
        from ..measure.fold import fold, sorted_tuples

        tuples = sorted_tuples(self.events)
        return fold(lambda: [tuples], visit=visit)

    def timeline_chart(self, **kwargs):
        """The run as a timeline: a strip per attempt, failures marked (an Altair chart)."""
        return _run_charts().timeline(self.ledger, **kwargs)

    def breakdown_chart(self, **kwargs):
        """Seconds per ledger category (an Altair chart)."""
        return _run_charts().breakdown(self.summary, **kwargs)

    def loss_chart(self, **kwargs):
        """The loss of every step execution, the lost ones marked (an Altair chart)."""
        return _run_charts().loss_curve(self.per_step(), **kwargs)

    def _repr_markdown_(self) -> str:
        return "```\n" + self.table() + "\n```"


WINDOW_S = Number(low=0, low_open=True, unit="seconds")


def _span(since_s: float, until_s: float) -> tuple[float, float]:
    """``(since_s, until_s)`` checked: seconds from the run's start, ``since_s`` before ``until_s``."""
    since = Number(low=0, unit="seconds")("since_s", since_s)
    until = Number(low=0, low_open=True, unit="seconds", allow_inf=True)("until_s", until_s)
    if until <= since:
        raise ConfigError("until_s", until_s, f"a time after since_s ({since_s} s)")
    return since, until


_SCRATCH: Path | None = None


def default_out_dir() -> Path:
    """A fresh directory for a run's files, in this process's scratch folder under the system's
    temporary directory (``goodputlab-runs-<uid>/goodputlab-<pid>-.../``), which is removed when the
    process (a notebook's kernel) exits: see :mod:`goodputlab.engine.scratch`."""
    global _SCRATCH
    from .scratch import scratch_dir

    if _SCRATCH is None or not _SCRATCH.is_dir():
        # one parent per user, this user's alone (scratch.private_folder): another user cannot place it
        _SCRATCH = scratch_dir("goodputlab-", parent=Path(tempfile.gettempdir()) / f"goodputlab-runs-{os.geteuid()}")
    return Path(tempfile.mkdtemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), dir=_SCRATCH))


def run(
    config: RunConfig | None = None,
    *,
    out: str | Path | None = None,
    progress: bool | Callable[[Progress], None] = True,
    resume: bool = False,
    announce: Callable[[str], None] | None = None,
    **settings: Any,
) -> RunResult:
    """Run a real experiment and return its :class:`RunResult`.

    Pass a :class:`RunConfig`, or its fields as keywords (``steps=400,
    ckpt_every=50, mtbf=4, ...``; the same names as the CLI's flags). ``out`` is
    the directory for the run's files (by default a fresh temporary one, removed when this Python
    process exits; an existing
    one must be empty or hold an earlier goodputlab run, or ``overwrite=True`` must
    be set, see :mod:`goodputlab.engine.run_dir`). ``resume``: continue the run in ``out``
    from its newest valid checkpoint.
    ``progress`` is ``True`` for a progress bar (a widget in Jupyter), ``False``
    for none, or a callable that receives :class:`~goodputlab.engine.supervisor.Progress`.
    ``announce`` receives the run's first line (its model, steps and torch threads) once it starts.
    Raises :class:`~goodputlab.errors.ConfigError` for a bad setting, before anything starts.
    """
    if config is None and resume and out is not None:  # the run's own configuration, with these changes
        from ..recovery.resume import resume_settings

        config = resume_settings(out, settings)
    elif config is None:
        config = RunConfig(**settings)
    elif settings:
        config = config.replace(**settings)
    if out is None:
        out = default_out_dir()
    bar = None
    callback: Callable[[Progress], None] | None
    if progress is True:
        bar = _ProgressBar(config.steps)  # drawn on the first update: a refused run shows no bar
        callback = bar.update
    elif progress is False or progress is None:
        callback = None
    else:
        callback = progress
    try:
        from .supervisor import run_supervised  # when running: loading a run needs none of it

        summary = run_supervised(config, out, progress=callback, resume=resume, announce=announce)
    finally:
        if bar is not None:
            bar.close()
    warning = restart_warning(summary)
    if warning:  # one line: the CLI prints it as "goodputlab run: warning: ...", a notebook shows it
        warnings.warn(warning, RestartCostWarning, stacklevel=2)
    out = Path(out).expanduser().resolve()
    return RunResult(out, summary, read_events(out / "events.jsonl"))


class RestartCostWarning(UserWarning):
    """A run whose restarts cost more than half its MTBF (``summary["restart_vs_mtbf"]``)."""


def _finite(v: Any, low: float = 0.0, high: float = math.inf) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and low <= v <= high


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62


_SUMMARY_FIELDS = {
    "goodput": ("a share between 0 and 1", lambda v: _finite(v, 0.0, 1.0)),
    "wall_s": ("a finite number of seconds >= 0", _finite),
    "buckets": (
        "an object of finite seconds >= 0 per category",
        lambda v: isinstance(v, dict) and all(_finite(x) for x in v.values()),
    ),
    "completed": ("true or false", lambda v: isinstance(v, bool)),
    "config": ("an object with a whole number of steps", lambda v: isinstance(v, dict) and _count(v.get("steps"))),
    "failures": ("a whole number >= 0", _count),
    "checkpoints": ("a whole number >= 0", _count),
    "steps_completed": ("a whole number >= 0", _count),
    "steps_executed": ("a whole number >= 0", _count),
}
_OPTIONAL_NUMBERS = ("initial_loss", "final_loss")  # a number or null when present


def read_summary(path: str | Path) -> dict[str, Any]:
    """A run's ``summary.json``; raises :class:`~goodputlab.errors.RunFileError` naming the file and
    the problem (not a regular file, not UTF-8, not a JSON object, a field missing, of the wrong type
    or out of its range: NaN, infinities and negative seconds are refused, never shown)."""
    path = Path(path)
    try:
        raw = read_regular(path, SUMMARY_MAX_BYTES)
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing (the run never finished writing its results)") from None
    except UnsafeFileError as e:
        raise RunFileError(f"{path}: {e}") from None
    try:
        summary = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RunFileError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise RunFileError(f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise RunFileError(f"{path}: not a summary (JSON nested too deeply)") from None
    except ValueError:  # an integer of more than 4300 digits
        raise RunFileError(f"{path}: not a summary (a number too long to read)") from None
    if not isinstance(summary, dict):
        raise RunFileError(f"{path}: a JSON {type(summary).__name__}, not an object")
    for name, (what, ok) in _SUMMARY_FIELDS.items():
        if name not in summary:
            raise RunFileError(f"{path}: no {name!r} field")
        if not ok(summary[name]):
            raise RunFileError(f"{path}: {name!r} is {_shown(summary[name])}, not {what}")
    for name in _OPTIONAL_NUMBERS:
        v = summary.get(name)
        if v is not None and not _finite(v, -math.inf):
            raise RunFileError(f"{path}: {name!r} is {_shown(v)}, not a finite number or null")
    return summary


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_run(out: str | Path) -> RunResult:
    """Open the results of a run from its directory: a lab run's, or a :class:`~goodputlab.Recorder`'s.

    A recorder's folder (or a lab run that never wrote ``summary.json``) is summarised
    from its event logs, every rank's merged. Raises
    :class:`~goodputlab.recorder.NotARunDirectory` (a ``FileNotFoundError``) when
    ``out`` holds no run, and :class:`~goodputlab.errors.RunFileError` (a ``ValueError``)
    naming the file, and for ``events.jsonl`` the line, when a file is not what a run writes.
    """
    out = Path(out)
    if not _lexists(out / "summary.json"):
        recording = Recording(out)
        return RunResult(out, recording.summary(), recording=recording)
    return RunResult(out, read_summary(out / "summary.json"), read_events(out / "events.jsonl"))



class _ProgressBar:
    """A tqdm bar over steps; it moves back when a failure rolls steps back."""

    min_interval_s = 0.2  # redraw at most this often (a log file would get a line per redraw)

    def __init__(self, steps: int):
        self.steps = steps
        self.bar = None  # created on the first update
        self._last_draw = 0.0
        self._last_phase = ""

    def update(self, p: Progress) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.steps, unit="step", desc="training", leave=True)
        self.bar.n = p.steps_done
        self.bar.set_postfix_str(f"attempt {p.attempt}, failures {p.failures}, {p.phase}", refresh=False)
        now = time.monotonic()
        if p.phase != self._last_phase or now - self._last_draw >= self.min_interval_s:
            self.bar.refresh()
            self._last_draw, self._last_phase = now, p.phase

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
