"""Chapter 6's panel: choose what the checkpoint leaves out, the failure mode and the hot spare; run the
job for real and see where its time went, how its loss compares with the failure-free run's, and
whether it ended with the same model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as W

from ..charts.restarts import loss_around_restart
from ..charts.runs import breakdown
from ..engine.api import RunResult, run
from ..engine.config import RunConfig
from ..engine.scratch import scratch_dir
from ..experiments import recovery as rx
from ..recovery.modes import FAILURE_MODES, LOADER_DEATH
from ..recovery.omit import OMITTABLE
from .common import LEDGER_NOTE, PanelNote, RunControls, big_number, chart_widget, set_big_number, show_panel

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run").properties(width=620, height=60)


class RecoveryRunPanel:
    """Controls: the parts the checkpoints leave out, the failure mode, the hot spare.

    **Run** makes one real run of the job with failures at ``kill_at_steps`` (a failure-free run of
    the same job is made once, first, as the reference) and shows: the goodput and whether the final
    model matches the reference, the time breakdown beside the reference's, and the loss of both.
    ``disk-full`` is not offered (it needs the run folder on a small file system). ``reference``: a
    failure-free run of the same job made before, to use instead. Other keyword settings are fixed
    for every run.
    """

    def __init__(self, steps: int = 80, kill_at_steps: tuple[int, ...] = (40,), out_root: str | Path | None = None,
                 reference: RunResult | None = None, **fixed: Any):
        self.fixed = {"steps": steps, "kill_at_steps": kill_at_steps, **fixed}
        RunConfig(**self.fixed)  # fail now on a bad fixed setting
        self.out_root = Path(out_root) if out_root else scratch_dir("goodputlab-recovery-panel-")
        self.reference: RunResult | None = reference  # the failure-free run of the same job, if one was made
        self.result: RunResult | None = None
        self.history: list[dict[str, Any]] = []
        self.omit = W.SelectMultiple(options=list(OMITTABLE), value=(), description="checkpoint leaves out", rows=3)
        modes = [m for m in FAILURE_MODES if m != "disk-full"]
        self.mode = W.Dropdown(options=modes, value="kill", description="failure mode")
        self.hot_spare = W.Checkbox(value=False, description="hot spare")
        self.controls = RunControls(steps)
        self.button, self.progress, self.status = self.controls.button, self.controls.progress, self.controls.status
        self.headline = big_number("goodput")
        self.bars = chart_widget(_EMPTY)
        self.loss = chart_widget(_EMPTY)
        self.button.on_click(lambda _: self.run_once())
        self.widget = W.VBox([W.HBox([self.omit, W.VBox([self.mode, self.hot_spare])]), self.controls.widget,
                              self.headline, self.bars, self.loss,
                              PanelNote("The bars set your runs beside the failure-free reference; the loss shows "
                                        "whether the restart changed training (a complete checkpoint resumes on "
                                        f"the reference's curve). {LEDGER_NOTE}")])

    def config(self) -> RunConfig:
        """The run the controls describe (a DataLoader worker process to kill comes with ``loader-death``)."""
        settings = dict(self.fixed)
        settings.update(ckpt_omit=tuple(p for p in OMITTABLE if p in self.omit.value), failure_mode=self.mode.value,
                        hot_spare=self.hot_spare.value)
        if self.mode.value == LOADER_DEATH and not settings.get("workers"):
            settings["workers"] = 2
        if self.mode.value == "hang" and settings.get("hang_timeout") is None:
            settings["hang_timeout"] = 1.0
        return RunConfig(**settings)

    def ensure_reference(self) -> RunResult:
        """The failure-free run of the job (made on the first Run)."""
        if self.reference is None:
            base = RunConfig(**self.fixed)
            self.status.value = "the failure-free reference run first..."
            self.reference = run(base.replace(kill_at_steps=(), mtbf=0.0, hot_spare=False), out=self.out_root / "reference",
                                 progress=False)
        return self.reference

    def run_once(self) -> RunResult | None:
        """Run the experiment the controls describe and redraw (also what the Run button does)."""
        ref = self.ensure_reference()
        n = len(self.history)
        done = self.controls.run(self.config, self.out_root / f"run-{n:03d}")
        if done is None:
            return None
        config, result = done
        self.result = result
        same = result.summary["final_state_sha256"] == ref.summary["final_state_sha256"]
        label = "+".join(config.ckpt_omit) or "complete"  # the run's variant (rx.checkpoint_label words it)
        self.history.append({"omit": config.ckpt_omit, "mode": config.failure_mode, "hot_spare": config.hot_spare,
                             "goodput": result.goodput, "bit_exact": same})
        set_big_number(self.headline, "goodput", f"{result.goodput:.1%}",
                       f"{config.failure_mode}, {checkpoint_words(config.ckpt_omit)}{', hot spare' if config.hot_spare else ''}: final model "
                       + ("identical to the failure-free run" if same else "DIFFERENT from the failure-free run"))
        self.status.value = f"{result.summary['failures']} failures, {result.summary['recovery']['loader_rebuilds']} loader rebuilds"
        self.bars.chart = breakdown({"failure-free": ref.summary, "this run": result.summary})
        rows = rx.loss_rows({"reference": ref, label: result})
        restarts = rx.restart_steps(result)
        self.loss.chart = loss_around_restart(rows, restarts[0] if restarts else None)
        return result

    def _ipython_display_(self) -> None:
        show_panel(self.widget)


def checkpoint_words(omit: tuple[str, ...]) -> str:
    """``complete checkpoint``, or ``checkpoint without the optimizer's state`` (the panel's headline)."""
    return "complete checkpoint" if not omit else "checkpoint " + rx.checkpoint_label(omit)
