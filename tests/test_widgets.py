"""Chapter 1's panel: the sliders set the experiment; Run runs it and redraws the charts."""

import json

import pytest

from goodputlab.widgets import RunPanel

from conftest import chart_rows


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    return RunPanel(steps=30, out_root=tmp_path_factory.mktemp("panel"), seed=3, restart_delay=0.1)


def test_sliders_describe_the_experiment(panel):
    panel.ckpt_every.value = 10
    panel.mtbf.value = 0.0
    panel.workers.value = 2
    panel.prefetch.value = 3
    panel.io_latency_ms.value = 5.0
    c = panel.config()
    assert (c.ckpt_every, c.mtbf, c.workers, c.prefetch, c.io_latency_ms, c.steps, c.seed) == (10, 0.0, 2, 3, 5.0, 30, 3)
    assert c.pipeline_depth == 6


def test_prefetch_is_disabled_without_workers(panel):
    panel.workers.value = 0
    assert panel.prefetch.disabled
    assert panel.config().prefetch is None  # not a ConfigError: the slider is ignored
    panel.workers.value = 1
    assert not panel.prefetch.disabled


def test_run_redraws_charts_and_keeps_history(panel):
    panel.workers.value = 0
    panel.ckpt_every.value = 10
    panel.mtbf.value = 0.0
    first = panel.run_once()
    assert first.summary["completed"] and first.config.ckpt_every == 10
    assert panel.progress.value == 30
    assert f"{first.goodput:.1%}" in panel.headline.value
    spec = panel.timeline.chart.to_dict()
    assert f"goodput {first.goodput:.1%}" in json.dumps(spec["title"])

    panel.ckpt_every.value = 5
    panel.button.click()  # the real button path
    assert len(panel.history) == 2
    assert panel.result.config.ckpt_every == 5
    assert panel.result.summary["checkpoints"] == 6  # 5, 10, ..., 30
    runs = {row["run"] for row in chart_rows(panel.breakdown.chart)}
    assert len(runs) == 2 and any("ckpt 5" in r for r in runs)


def test_the_panel_shows_the_runs_restart_warning(panel):
    # a launch takes seconds and the MTBF is 1 s: a restart costs more than half of it, and the panel
    # says so in the same words as the CLI (and gl.run's RestartCostWarning)
    from goodputlab.engine.api import RestartCostWarning
    from goodputlab.recovery.modes import restart_warning

    panel.workers.value = 0
    panel.mtbf.value = 1.0
    with pytest.warns(RestartCostWarning):
        result = panel.run_once()
    warning = restart_warning(result.summary)
    assert warning and warning in panel.status.value and "--hot-spare" in panel.status.value
    assert result.summary["restart_vs_mtbf"]["ratio"] > 0.5
    panel.mtbf.value = 0.0
    assert "warning" not in panel.run_once().summary.get("restart_vs_mtbf", {})
    assert "warning" not in panel.status.value


def test_bad_fixed_setting_fails_at_construction(tmp_path):
    from goodputlab.errors import ConfigError

    with pytest.raises(ConfigError):
        RunPanel(steps=0, out_root=tmp_path)


def test_after_a_run_the_panel_predicts_the_next_one_from_its_measured_costs(tmp_path):
    panel = RunPanel(steps=40, out_root=tmp_path, seed=3, threads=1)
    panel.workers.value, panel.mtbf.value, panel.io_latency_ms.value, panel.ckpt_every.value = 0, 0.0, 2.0, 10
    assert panel.predicted_goodput() is None and panel.prediction.value == ""  # nothing measured yet
    first = panel.run_once()
    assert panel.timings is not None and panel.read_s >= 0
    # the callback: a slider moved redraws the prediction; the model says more latency costs goodput
    at_2ms = panel.predicted_goodput()
    panel.io_latency_ms.value = 20.0
    assert "the model predicts" in panel.prediction.value
    at_20ms = panel.predicted_goodput()
    assert at_20ms < at_2ms
    # more workers hide the latency again, in the model
    panel.workers.value = 2
    assert panel.predicted_goodput() > at_20ms
    second = panel.run_once()
    assert panel.predictions[-1]["measured"] == second.goodput
    assert "the model predicted" in panel.headline.value and first.summary["completed"]
