"""Chapter 5's panels and charts: set the controls, call the methods, check results and chart specs."""

import pytest

from goodputlab.charts.pipeline import anatomy_chart, depth_curve, model_vs_measured
from goodputlab.errors import ConfigError
from goodputlab.experiments.data_stall import LoopStats, StallAnatomy
from goodputlab.theory.data_stall import Calibration
from goodputlab.widgets.pipeline import DepthCalculator, PipelinePanel

from conftest import chart_rows

CALIBRATION = Calibration(step_s=0.015, read_s=0.0004, handoff_s=0.001)


def test_anatomy_chart_shows_differences_beside_the_ledger():
    def loop(name, period_ms, wait_ms):
        steps = 10
        return LoopStats(name, steps, steps * period_ms / 1000, steps * wait_ms / 1000, steps * (period_ms - wait_ms) / 1000, 16, 0.5)

    anatomy = StallAnatomy(
        {"compute_only": loop("compute_only", 15.4, 0.4), "prep_only": loop("prep_only", 25.4, 10.4), "full": loop("full", 55.4, 40.4)},
        results={},
    )
    assert anatomy.prep_stall_s == pytest.approx(0.010) and anatomy.fetch_stall_s == pytest.approx(0.030)
    rows = chart_rows(anatomy_chart(anatomy).to_dict())
    diff = {r["part"]: r["ms"] for r in rows if r["bar"] == "full run, by differencing"}
    assert diff == pytest.approx({"compute": 15.4, "prep stall": 10.0, "fetch stall": 30.0})
    ledger_full = {r["part"]: r["ms"] for r in rows if r["bar"] == "full, ledger"}
    assert ledger_full == pytest.approx({"compute": 15.0, "data wait (ledger)": 40.4})
    assert "milliseconds per step" in str(anatomy_chart(anatomy).to_dict())


def test_model_vs_measured_and_depth_curve_specs():
    spec = model_vs_measured([{"label": "a", "measured": 0.3, "predicted": 0.28, "workers": 2}]).to_dict()
    assert {"label": "a", "measured": 0.3, "predicted": 0.28, "workers": "2"} in chart_rows(spec)
    spec = depth_curve([{"workers": 2, "prefetch": 1, "depth": 2, "share": 0.1}], target_share=0.02).to_dict()
    values = chart_rows(spec)
    assert {"target": 0.02} in values and any(v.get("depth") == 2 for v in values)


def test_depth_calculator_follows_its_inputs():
    calc = DepthCalculator(step_ms=100.0, latency_ms=150.0, jitter=1.0, transform_ms=50.0, workers=4, batch_mb=10.0, target_pct=2.0)
    advice = calc.advice
    assert advice.feasible and advice.predicted_share <= 0.02
    assert advice.memory_bytes == pytest.approx(advice.depth * 10e6)
    assert f"{advice.memory_bytes / 1e9:.2f} GB" in calc.answer.value
    assert chart_rows(calc.curve.chart.to_dict())  # the curve was drawn

    calc.workers.value = 1  # 200 ms of loading per batch for a 100 ms step: one worker cannot keep pace
    assert calc.advice is not None and not calc.advice.feasible
    assert "no depth is enough" in calc.answer.value and calc.advice.workers_needed == 3

    calc.step_ms.value = 0.0
    assert calc.redraw() is None and "not valid" in calc.answer.value
    with pytest.raises(ConfigError):
        calc.compute()


def test_pipeline_panel_model_follows_the_sliders():
    panel = PipelinePanel(CALIBRATION, steps=20)
    panel.io_latency_ms.value, panel.io_jitter.value, panel.transform_ms.value = 40.0, 0.0, 0.0
    assert panel.prefetch.disabled and panel.config().prefetch is None
    serial = panel.update_model()
    assert serial.wait_share == pytest.approx(40.4 / 55.4, abs=0.01)  # R + L against S + R + L
    panel.workers.value = 4
    assert not panel.prefetch.disabled
    panel.prefetch.value = 4
    overlapped = panel.update_model()
    assert overlapped.wait_share < 0.1 and "supply 1.49x" in panel.model_line.value
    with pytest.raises(ConfigError):
        PipelinePanel(CALIBRATION, steps=0)


def test_pipeline_panel_runs_a_real_experiment(tmp_path):
    panel = PipelinePanel(CALIBRATION, steps=15, out_root=tmp_path, zoom_s=0.5, threads=1)
    panel.io_latency_ms.value, panel.io_jitter.value, panel.transform_ms.value = 30.0, 0.0, 0.0
    result = panel.run_once()
    assert result is not None and result.summary["completed"]
    (row,) = panel.history
    # no workers: every step waits for its 30 ms read (a lower bound in seconds, not a share: on a busy
    # machine the compute beside it slows, and the share with it)
    assert result.summary["buckets"]["data_wait"] >= 0.8 * 0.030 * 15 and 0 < row["measured"] < 0.9
    assert "data wait" in panel.headline.value and f"{row['measured']:.1%}" in panel.headline.value
    timeline = panel.timeline.chart.to_dict()
    domain = timeline["layer"][0]["encoding"]["x"]["scale"]["domain"]
    assert domain[1] - domain[0] == pytest.approx(0.5, abs=1e-3)  # zoomed to half a second of the loop
    assert any(v.get("label") == row["label"] for v in chart_rows(panel.comparison.chart.to_dict()))


def _panel_text(widget) -> str:
    """Everything a panel prints: its static figure's settings, headline and status lines, and its
    controls' descriptions."""
    import ipywidgets as W

    from goodputlab.widgets.common import panel_static_parts

    from goodputlab.charts.static import Table

    texts = [p[0] for p in panel_static_parts(widget) if isinstance(p, tuple)]
    texts += [" ".join(filter(None, row)) for p in panel_static_parts(widget) if isinstance(p, Table) for row in p.rows]

    def walk(w):
        if isinstance(w, W.Box):
            for child in w.children:
                walk(child)
        elif getattr(w, "description", ""):
            texts.append(w.description)

    walk(widget)
    return "\n".join(texts)


def test_the_pipeline_panels_print_words_or_notation_not_single_letters():
    """notation.md names the pipeline's quantities t_io, t_cpu, t_read, t_step, t_hand, W and p; the
    panels print those quantities in words, never as the old single letters S, H, L, T, R."""
    import re

    panel = PipelinePanel(CALIBRATION, steps=20)
    panel.workers.value, panel.prefetch.value = 4, 2
    label = panel.label(panel.config())
    assert label == "#1: 4 workers x prefetch 2, storage 40 ms, transform 5 ms"
    text = _panel_text(panel.widget) + "\n" + label + "\n" + _panel_text(DepthCalculator().widget)
    assert "measured step 15.0 ms, hand-off 1.00 ms" in text
    letters = re.findall(r"(?<![\w.])[SHLTR](?![\w.])", text)
    assert not letters, f"single-letter symbols in the printed panel: {letters}\n{text}"
    assert "step time (ms)" in text and "storage latency (ms)" in text and "transform (ms CPU)" in text
