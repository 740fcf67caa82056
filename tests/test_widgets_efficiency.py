"""Chapter 8's panel: moving the controls re-analyses and redraws; an unmeasured rule trains for real."""

from __future__ import annotations

import pytest

from goodputlab.efficiency.analysis import SweepResult
from goodputlab.widgets.efficiency import EfficiencyPanel

from conftest import chart_rows
from efficiency_helpers import synthetic_result, tiny_sweep  # noqa: F401  (a session fixture)


def _rule(result: SweepResult, rule: str) -> SweepResult:
    return SweepResult(result.config.replace(lr_rule=rule), result.throughput, result.trajectories, result.machine)


def test_controls_redraw_the_three_charts():
    sqrt = synthetic_result(noise=40.0)
    linear = _rule(synthetic_result(noise=40.0, missed=(64, 128)), "linear")
    panel = EfficiencyPanel({"sqrt": sqrt, "linear": linear})
    a = panel.current
    assert a is not None and a.lr_rule == "sqrt" and panel.button.disabled
    assert len(panel.chart.chart.hconcat) == 3
    titles = [c.title for c in panel.chart.chart.hconcat]
    assert titles[0].startswith("throughput") and titles[1].startswith("statistical efficiency") and titles[2].startswith("goodput")
    # the selected batch size is drawn as a rule in every chart
    panel.batch.value = 64
    panel.redraw()
    spec = panel.chart.chart.to_dict()
    for member in spec["hconcat"]:
        marks = [layer["mark"] for layer in member["layer"]]
        assert {"type": "rule", "color": "#888", "strokeDash": [2, 2]} in marks
    assert {"batch_size": 64} in chart_rows(spec)
    assert "batch 64" in panel.headline.value
    # a higher target: fewer samples, a smaller noise scale is not assumed (constant here), same rows
    panel.target.value = round(sqrt.config.target_loss + 0.3, 2)
    higher = panel.redraw()
    assert higher.target_loss == pytest.approx(sqrt.config.target_loss + 0.3)
    assert higher.row(64)["samples_to_target"] < a.row(64)["samples_to_target"]
    # another rule: the missed batch sizes say so
    panel.rule.value = "linear"
    panel.target.value = panel.target.min
    got = panel.redraw()
    assert got.lr_rule == "linear" and got.missed == [64, 128]
    assert "missed" in panel.headline.value and "did not reach" in panel.headline.value
    crosses = [row for row in chart_rows(panel.chart.chart) if "note" in row]
    assert {row["batch_size"] for row in crosses} == {64, 128}


def test_an_unmeasured_rule_offers_run():
    panel = EfficiencyPanel(synthetic_result(noise=40.0))
    panel.rule.value = "adascale"
    assert panel.redraw() is None and panel.current is None
    assert not panel.button.disabled and "Run" in panel.status.value


def test_panel_refuses_sweeps_that_differ():
    a = synthetic_result(noise=40.0)
    b = SweepResult(a.config.replace(lr_rule="linear", lr=1e-3), a.throughput, a.trajectories)
    with pytest.raises(ValueError):
        EfficiencyPanel({"sqrt": a, "linear": b})


def test_run_trains_the_chosen_rule(tiny_sweep):
    panel = EfficiencyPanel(tiny_sweep)
    panel.rule.value = "linear"
    result = panel.run_rule()
    assert result is not None and set(panel.results) == {"sqrt", "linear"}
    assert result.trajectories[4] is tiny_sweep.trajectories[4]  # the base batch is the same under every rule
    assert result.trajectories[16].lrs[-1] == pytest.approx(4 * tiny_sweep.config.lr)
    assert panel.current is not None and panel.current.lr_rule == "linear"
    assert panel.progress.value == len(tiny_sweep.config.batch_sizes) + 1
    assert panel.run_rule() is None  # already measured
