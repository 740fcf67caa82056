"""Chapter 11's panel: choose the fault-tolerance mode, the kills and the replica groups; run the job for
real and see each replica's timeline and where the job's time went, beside the runs made before."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import ipywidgets as W

from ..charts.in_job import replica_timeline
from ..charts.runs import breakdown
from ..engine.config import RunConfig
from ..engine.scratch import scratch_dir
from ..errors import ConfigError
from ..experiments import in_job as ij
from .common import LEDGER_NOTE, PanelNote, big_number, chart_widget, set_big_number, show_panel

MODE_LABELS = {"torchft": "torchft: heal one replica group", "none": "restart the whole job"}


def parse_kills(text: str) -> tuple[int, ...]:
    """``"100, 200"`` -> ``(100, 200)``; raises :class:`ConfigError` naming the field for anything else."""
    parts = [p.strip() for p in str(text).replace(";", ",").split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        raise ConfigError("kill_at_steps", text, "whole step numbers separated by commas (e.g. 100, 200)")
    return tuple(sorted(int(p) for p in parts))


class InJobPanel:
    """Controls: the fault-tolerance mode (torchft or a restart of the whole job), the kills (steps) and
    the replica groups (processes).

    It starts with ``recording`` (:func:`goodputlab.experiments.in_job.record`, the chapter's pair), so
    its charts show real runs before anything trains. **Run** makes one real run of the job the controls
    describe (``steps`` steps, the chapter's tiny model); its timeline and books join the charts, beside
    the last run of the other mode.
    """

    def __init__(self, recording: Mapping[str, Any] | None = None, steps: int = 600, kills: str = "100, 200",
                 replicas: int = 2, out_root: str | Path | None = None):
        self.steps = steps
        self.out_root = Path(out_root) if out_root else None
        self.shown: dict[str, Any] = {"version": ij.RECORDING_VERSION, "machine": "", "runs": {}}
        if recording is not None:
            self.shown["runs"].update(recording["runs"])
        self.history: list[dict[str, Any]] = []
        self.mode = W.Dropdown(options=[(v, k) for k, v in MODE_LABELS.items()], value="torchft", description="fault tolerance")
        self.kills = W.Text(value=kills, description="kills at steps")
        # the groups split the batch of 16 sequences evenly, one process each: two or four on a laptop
        self.replicas = W.Dropdown(options=[2, 4], value=replicas, description="replica groups")
        self.button = W.Button(description="Run", button_style="primary", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=steps, description="steps")
        self.status = W.Label(value="")
        self.headline = big_number("goodput")
        self.timeline = chart_widget(replica_timeline(ij.timeline_rows(self.shown) or [{"lane": "", "start": 0, "end": 0, "category": "productive"}]))
        self.bars = chart_widget(breakdown(ij.books_rows(self.shown) or {}))
        self.button.on_click(lambda _: self.run_once())
        self.widget = W.VBox([W.HBox([self.mode, self.kills]), self.replicas,
                              W.HBox([self.button, self.progress, self.status]), self.headline, self.timeline, self.bars,
                              PanelNote("Each lane is one replica group's wall clock (a restart's ranks share one). "
                                        "A killed torchft group is <i>degraded</i> until it relaunches, then heals from "
                                        f"a peer (booked as a restore); the others keep training. {LEDGER_NOTE}")])
        self.redraw()

    def config(self) -> RunConfig:
        """The run the controls describe (raises :class:`ConfigError` for a bad kill list)."""
        mode = self.mode.value
        return RunConfig(steps=self.steps, nproc=self.replicas.value, fault_tolerance=mode,
                         kill_at_steps=parse_kills(self.kills.value), ckpt_every=ij.CKPT_EVERY[mode], **ij.JOB)

    def redraw(self) -> None:
        """Redraw the charts and the headline from the runs shown."""
        runs = self.shown["runs"]
        if runs:
            self.timeline.chart = replica_timeline(ij.timeline_rows(self.shown))
            self.bars.chart = breakdown(ij.books_rows(self.shown))
            parts = [f"{MODE_LABELS.get(m, m)} {r['summary']['goodput']:.1%}" for m, r in runs.items()]
            latest = runs.get(self.mode.value) or next(iter(runs.values()))
            set_big_number(self.headline, "goodput", f"{latest['summary']['goodput']:.1%}", "; ".join(parts))

    def figures(self) -> dict[str, float]:
        """The goodput of each mode shown."""
        return {m: r["summary"]["goodput"] for m, r in self.shown["runs"].items()}

    def run_once(self):
        """Run the job the controls describe, for real, and redraw (also what the Run button does)."""
        from ..engine.api import run

        try:
            config = self.config()
        except ConfigError as e:
            self.status.value = f"not run: {e}"
            return None
        if self.out_root is None:
            self.out_root = scratch_dir("goodputlab-in-job-panel-")
        out = self.out_root / f"run-{len(self.history):03d}"
        self.button.disabled = True
        self.status.value = "starting..."
        try:
            result = run(config, out=out, progress=lambda p: setattr(self.progress, "value", p.steps_done))
        except ConfigError as e:  # torchft not installed, a kill past the end: one line, not a traceback
            self.status.value = f"not run: {e}"
            return None
        finally:
            self.button.disabled = False
        self.shown["runs"][config.fault_tolerance] = ij.record({config.fault_tolerance: result})["runs"][config.fault_tolerance]
        self.history.append({"mode": config.fault_tolerance, "replicas": config.nproc, "kills": config.kill_at_steps,
                             "goodput": result.goodput})
        self.status.value = f"{result.summary['failures']} failures, wall {result.summary['wall_s']:.1f} s"
        self.redraw()
        return result

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
