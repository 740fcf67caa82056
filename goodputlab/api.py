"""The Python API the notebooks use: ``goodputlab.run(...)`` and its result."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from .config import RunConfig
from .events import read_events
from .ledger import Ledger, build_ledger, per_step
from .report import breakdown_table
from .supervisor import Progress, check_writable, run_supervised


@dataclass
class RunResult:
    """A finished run: its summary, raw events and ledger, with charts of them."""

    out: Path
    summary: dict[str, Any]
    events: list[dict] = field(repr=False)

    @cached_property
    def ledger(self) -> Ledger:
        return build_ledger(self.events)

    @property
    def goodput(self) -> float:
        return self.summary["goodput"]

    @property
    def buckets(self) -> dict[str, float]:
        return self.summary["buckets"]

    @property
    def config(self) -> RunConfig:
        """The lab run's settings (a job recorded with gl.Recorder has none: see ``summary["config"]``)."""
        if self.summary["config"].get("source") == "recorder":
            raise AttributeError("a job recorded with gl.Recorder has no RunConfig; its facts are in summary['config']")
        return RunConfig.from_dict(self.summary["config"])

    def per_step(self) -> list[dict[str, Any]]:
        """One row per step execution (data wait, compute, loss, survived)."""
        return per_step(self.events)

    def table(self) -> str:
        """The breakdown as text (what the CLI prints)."""
        return breakdown_table(self.summary)

    def timeline_chart(self, **kwargs):
        from . import charts

        return charts.timeline(self.ledger, **kwargs)

    def breakdown_chart(self, **kwargs):
        from . import charts

        return charts.breakdown(self.summary, **kwargs)

    def loss_chart(self, **kwargs):
        from . import charts

        return charts.loss_curve(self.per_step(), **kwargs)

    def _repr_markdown_(self) -> str:
        return "```\n" + self.table() + "\n```"


def default_out_dir() -> Path:
    """A fresh directory for a run's files under the system's temporary directory."""
    root = Path(tempfile.gettempdir()) / "goodputlab-runs"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), dir=root))


def run(
    config: RunConfig | None = None,
    *,
    out: str | Path | None = None,
    progress: bool | Callable[[Progress], None] = True,
    **settings: Any,
) -> RunResult:
    """Run a real experiment and return its :class:`RunResult`.

    Pass a :class:`RunConfig`, or its fields as keywords (``steps=400,
    ckpt_every=50, mtbf=4, ...``; the same names as the CLI's flags). ``out`` is
    the directory for the run's files (a fresh temporary one by default).
    ``progress`` is ``True`` for a progress bar (a widget in Jupyter), ``False``
    for none, or a callable that receives :class:`~goodputlab.supervisor.Progress`.
    Raises :class:`~goodputlab.errors.ConfigError` for a bad setting.
    """
    if config is None:
        config = RunConfig(**settings)
    elif settings:
        config = config.replace(**settings)
    out = Path(out) if out is not None else default_out_dir()
    check_writable(out)  # before any progress bar appears
    bar = None
    callback: Callable[[Progress], None] | None
    if progress is True:
        bar = _ProgressBar(config.steps)
        callback = bar.update
    elif progress is False or progress is None:
        callback = None
    else:
        callback = progress
    try:
        summary = run_supervised(config, out, progress=callback)
    finally:
        if bar is not None:
            bar.close()
    return RunResult(Path(out), summary, read_events(Path(out) / "events.jsonl"))


def load_run(out: str | Path) -> RunResult:
    """Open the results of a run from its directory: a lab run's, or a :class:`~goodputlab.Recorder`'s.

    A recorder's folder (or a lab run that never wrote ``summary.json``) is summarised
    from its event logs, every rank's merged. Raises
    :class:`~goodputlab.recorder.NotARunDirectory` (a ``FileNotFoundError``) when
    ``out`` holds no run.
    """
    out = Path(out)
    if not (out / "summary.json").is_file():
        from .ledger import summarize
        from .recorder import read_recording

        events, config = read_recording(out)
        return RunResult(out, summarize(events, config), events)
    summary = json.loads((out / "summary.json").read_text())
    return RunResult(out, summary, read_events(out / "events.jsonl"))


class _ProgressBar:
    """A tqdm bar over steps; it moves back when a failure rolls steps back."""

    min_interval_s = 0.2  # redraw at most this often (a log file would get a line per redraw)

    def __init__(self, steps: int):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=steps, unit="step", desc="training", leave=True)
        self._last_draw = 0.0
        self._last_phase = ""

    def update(self, p: Progress) -> None:
        self.bar.n = p.steps_done
        self.bar.set_postfix_str(f"attempt {p.attempt}, failures {p.failures}, {p.phase}", refresh=False)
        now = time.monotonic()
        if p.phase != self._last_phase or now - self._last_draw >= self.min_interval_s:
            self.bar.refresh()
            self._last_draw, self._last_phase = now, p.phase

    def close(self) -> None:
        self.bar.close()
