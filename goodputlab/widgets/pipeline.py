"""Chapter 5's panels: an input-pipeline lab (real runs, model beside them) and a depth calculator."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as W

from ..engine.scratch import scratch_dir
from ..experiments.data_stall import loop_stats, predict_stall_for
from ..theory import data_stall as P
from ..engine.api import RunResult
from ..charts.pipeline import depth_curve, model_vs_measured, zoomed_timeline
from ..engine.config import RunConfig
from ..errors import ConfigError
from .common import PanelNote, RunControls, big_number, chart_widget, set_big_number, show_panel
from .layout import float_slider

_EMPTY = alt.Chart(alt.InlineData(values=[{}])).mark_text(text="press Run").properties(width=620, height=60)


class PipelinePanel:
    """Sliders for storage latency, jitter, transform, workers and prefetch; Run starts a real run.

    The model's prediction follows the sliders at once (:meth:`update_model`); a run
    measures the same configuration and puts the ledger's data wait beside it.
    ``calibration`` holds the measured step time, read cost and hand-off (``t_step``, ``t_read`` and
    ``t_hand`` in notation.md) that the model needs (:func:`goodputlab.experiments.data_stall.calibrate`). ``steps`` and any
    other :class:`RunConfig` field in ``fixed`` are the same for every run.
    """

    history_size = 8

    def __init__(self, calibration: P.Calibration, steps: int = 60, out_root: str | Path | None = None, zoom_s: float = 1.0, **fixed: Any):
        self.calibration = calibration
        self.zoom_s = zoom_s
        self.fixed = {"steps": steps, "ckpt_every": 0, **fixed}
        RunConfig(**self.fixed)  # fail now on a bad fixed setting, not at the first click
        self.out_root = Path(out_root) if out_root else scratch_dir("goodputlab-pipeline-panel-")
        self.io_latency_ms = float_slider(40.0, 0.0, 200.0, 5.0, "storage latency (ms)")
        self.io_jitter = float_slider(0.5, 0.0, 2.0, 0.1, "latency jitter (CV)")
        self.transform_ms = float_slider(5.0, 0.0, 60.0, 1.0, "transform (ms CPU)")
        self.workers = W.IntSlider(value=0, min=0, max=8, description="loader workers")
        self.prefetch = W.IntSlider(value=2, min=1, max=16, description="prefetch per worker (batches)", disabled=True)
        self.controls = RunControls(steps)
        self.button, self.progress, self.status = self.controls.button, self.controls.progress, self.controls.status
        self.model_line = W.HTML()
        self.headline = big_number("data wait")
        self.timeline = chart_widget(_EMPTY)
        self.comparison = chart_widget(_EMPTY)
        self.history: list[dict[str, Any]] = []
        self.result: RunResult | None = None
        self.workers.observe(self._on_workers, names="value")
        for s in (self.io_latency_ms, self.io_jitter, self.transform_ms, self.workers, self.prefetch):
            s.observe(lambda _: self.update_model(), names="value")
        self.button.on_click(lambda _: self.run_once())
        self.widget = W.VBox(
            [
                W.HBox([W.VBox([self.io_latency_ms, self.io_jitter, self.transform_ms]), W.VBox([self.workers, self.prefetch])]),
                self.model_line,
                self.controls.widget,
                self.headline,
                self.timeline,
                self.comparison,
                PanelNote(f"The timeline zooms into {zoom_s:g} s of the last run's training, so each step shows: orange "
                          "<b>data_wait</b> is the loop waiting for its next batch, green <b>productive</b> the step "
                          "itself. The chart below puts each run's measured data wait beside the model's prediction "
                          "(on the diagonal: the model is right)."),
            ]
        )
        self.update_model()

    # --- what the controls mean ---------------------------------------------------------
    def _on_workers(self, change) -> None:
        self.prefetch.disabled = change["new"] == 0  # prefetch needs worker processes

    def config(self) -> RunConfig:
        """The experiment the controls describe (raises ConfigError on a bad combination)."""
        workers = self.workers.value
        return RunConfig(
            **{
                **self.fixed,
                "workers": workers,
                "prefetch": self.prefetch.value if workers > 0 else None,
                "io_latency_ms": float(self.io_latency_ms.value),
                "io_jitter": float(self.io_jitter.value),
                "transform_ms": float(self.transform_ms.value),
            }
        )

    def label(self, config: RunConfig) -> str:
        """The run's name in the charts, in words: ``#2: 4 workers x prefetch 2, storage 45 ms, transform 10 ms``."""
        depth = f"{config.workers} workers x prefetch {config.prefetch}" if config.workers else "no workers"
        return (f"#{len(self.history) + 1}: {depth}, storage {config.io_latency_ms:g} ms, "
                f"transform {config.transform_ms:g} ms")

    def predict(self, config: RunConfig | None = None) -> P.StallPrediction:
        """The model's prediction for ``config`` (default: the controls')."""
        return predict_stall_for(config or self.config(), self.calibration)

    def update_model(self) -> P.StallPrediction | None:
        """Recompute the model line from the sliders (no run); returns the prediction."""
        try:
            config = self.config()
        except ConfigError as e:
            self.model_line.value = f"<i>not valid: {e}</i>"
            return None
        pred = self.predict(config)
        c = self.calibration
        supply = P.supply_ratio(config.io_latency_ms / 1000, config.transform_ms / 1000, config.workers, c.step_s, c.read_s)
        supply_text = "the loop loads each batch itself" if config.workers == 0 else f"supply {supply:.2f}x the step's appetite"
        self.model_line.value = (
            f"model: data wait <b>{pred.wait_share:.1%}</b> of the loop, {pred.samples_per_s:.0f} samples/s "
            f"(ceiling {pred.ceiling_samples_per_s:.0f}); {supply_text}; "
            f"measured step {1000 * c.step_s:.1f} ms, hand-off {1000 * c.handoff_s:.2f} ms"
        )
        return pred

    # --- running ----------------------------------------------------------------------------
    def run_once(self) -> RunResult | None:
        """Run the configuration the controls describe, then redraw; None on bad input."""
        out = self.out_root / f"run-{len(self.history) + 1:03d}"
        started = self.controls.run(self.config, out)
        if started is None:
            return None
        config, result = started
        measured = loop_stats(result)
        predicted = self.predict(config)
        self.result = result
        self.history.append(
            {
                "label": self.label(config),
                "workers": config.workers,
                "measured": measured.wait_share,
                "predicted": predicted.wait_share,
                "samples_per_s": measured.samples_per_s,
                "goodput": result.goodput,
                "out": out,
            }
        )
        self._forget_old_runs()
        self.redraw()
        return result


    def _forget_old_runs(self) -> None:
        while len(self.history) > self.history_size:
            shutil.rmtree(self.history.pop(0)["out"], ignore_errors=True)

    def redraw(self) -> None:
        """Headline, zoomed timeline and the model-against-measurement chart of recent runs."""
        if self.result is None:
            return
        last = self.history[-1]
        set_big_number(
            self.headline,
            "data wait",
            f"{last['measured']:.1%}",
            f"of the loop (model {last['predicted']:.1%}); {last['samples_per_s']:.0f} samples/s; "
            f"goodput of the whole run {last['goodput']:.1%}",
        )
        self.timeline.chart = zoomed_timeline(self.result, self.zoom_s, title=last["label"])
        self.comparison.chart = model_vs_measured(self.history)
        self.status.value = "done"

    def _ipython_display_(self) -> None:
        show_panel(self.widget)


class DepthCalculator:
    """How deep must my pipeline be? Inputs in the units of a real job; the model answers at once."""

    def __init__(self, step_ms: float = 250.0, latency_ms: float = 400.0, jitter: float = 1.0, transform_ms: float = 300.0, workers: int = 4, batch_mb: float = 38.5, target_pct: float = 2.0):
        self.step_ms = W.FloatText(value=step_ms, description="step time (ms)")
        self.latency_ms = W.FloatText(value=latency_ms, description="storage latency (ms)")
        self.jitter = float_slider(jitter, 0.0, 3.0, 0.1, "latency jitter (CV)")
        self.transform_ms = W.FloatText(value=transform_ms, description="transform (ms CPU)")
        self.workers = W.IntSlider(value=workers, min=1, max=64, description="workers")
        self.batch_mb = W.FloatText(value=batch_mb, description="batch size (MB)")
        self.target_pct = float_slider(target_pct, 0.5, 20.0, 0.5, "target data wait (%)")
        self.answer = W.HTML()
        self.curve = chart_widget(_EMPTY)
        self.advice: P.DepthAdvice | None = None
        for w in (self.step_ms, self.latency_ms, self.jitter, self.transform_ms, self.workers, self.batch_mb, self.target_pct):
            w.observe(lambda _: self.redraw(), names="value")
        self.widget = W.VBox(
            [
                W.HBox([W.VBox([self.step_ms, self.latency_ms, self.jitter, self.transform_ms]), W.VBox([self.workers, self.batch_mb, self.target_pct])]),
                self.answer,
                self.curve,
            ]
        )
        self.redraw()

    def compute(self) -> P.DepthAdvice:
        """The advice for the current inputs (raises ConfigError on bad input)."""
        return P.depth_for_share(
            target_share=self.target_pct.value / 100,
            load_s=self.latency_ms.value / 1000,
            transform_s=self.transform_ms.value / 1000,
            workers=self.workers.value,
            step_s=self.step_ms.value / 1000,
            jitter=self.jitter.value,
            batch_nbytes=int(round(self.batch_mb.value * 1e6)),
            max_prefetch=32,
        )

    def curve_rows(self, prefetches=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32)) -> list[dict[str, Any]]:
        """Predicted share against depth for the chosen workers and for the workers the model advises."""
        step_s = self.step_ms.value / 1000
        load_s, transform_s = self.latency_ms.value / 1000, self.transform_ms.value / 1000
        latencies = P.emulated_latencies(load_s, self.jitter.value, 0, 2000)
        counts = sorted({self.workers.value, P.workers_needed(load_s, transform_s, step_s, headroom=1.2)})
        rows = []
        for w in counts:
            for p in prefetches:
                waits = P.simulate_waits(latencies, transform_s, w, p, step_s)[200:]
                rows.append({"workers": w, "prefetch": p, "depth": w * p, "share": waits.sum() / (waits.sum() + step_s * waits.size)})
        return rows

    def redraw(self) -> P.DepthAdvice | None:
        try:
            advice = self.compute()
        except ConfigError as e:
            self.answer.value = f"<i>not valid: {e}</i>"
            self.advice = None
            return None
        self.advice = advice
        supply = P.supply_ratio(self.latency_ms.value / 1000, self.transform_ms.value / 1000, self.workers.value, self.step_ms.value / 1000)
        if advice.feasible:
            self.answer.value = (
                f"supply {supply:.2f}x the step's appetite. Prefetch <b>{advice.prefetch}</b> per worker "
                f"(depth {advice.depth} batches) keeps data wait at {advice.predicted_share:.1%}; "
                f"it holds <b>{advice.memory_bytes / 1e9:.2f} GB</b> of host memory "
                f"(twice that with pinned memory)."
            )
        else:
            self.answer.value = (
                f"supply {supply:.2f}x the step's appetite: <b>no depth is enough</b> "
                f"(data wait stays at {advice.predicted_share:.1%} or more). "
                f"Raise the workers to about <b>{advice.workers_needed}</b> (1.2x the appetite), "
                f"make storage or the transform faster, or give the step more work per batch."
            )
        self.curve.chart = depth_curve(self.curve_rows(), target_share=self.target_pct.value / 100)
        return advice

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
