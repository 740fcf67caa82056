"""Chapter 4's panel and charts: set the controls, call the methods, check the results and the specs."""

import pytest

from goodputlab.charts.checkpoints import goodput_vs_interval, save_anatomy, strategy_timelines
from goodputlab.errors import ConfigError
from goodputlab.experiments.strategy_compare import goodput_curves, optimum, save_cost_s, step_s
from goodputlab.widgets.checkpoints import DEFAULT_RESTART_S, CheckpointPanel

from conftest import chart_rows

COSTS = {"sync": 0.040, "async": 0.004, "dcp": 0.020, "memory": 0.002}


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    p = CheckpointPanel(steps=24, models=("tiny",), save_costs={"tiny": COSTS}, out_root=tmp_path_factory.mktemp("panel"),
                        kill_at_steps=(14,), restart_delay=0.1, threads=1)
    p.strategy.value = "memory"
    p.ckpt_every.value = 5
    p.mtbf.value = 30.0
    p.result_of_run = p.run_once()
    return p


def test_controls_make_the_config():
    p = CheckpointPanel(steps=40, models=("tiny", "small"), save_costs={"tiny": COSTS, "small": COSTS})
    p.strategy.value, p.model.value, p.ckpt_every.value, p.mtbf.value = "dcp", "small", 7, 12.5
    c = p.config()
    assert (c.ckpt, c.model, c.ckpt_every, c.mtbf, c.steps) == ("dcp", "small", 7, 12.5, 40)


def test_a_bad_fixed_setting_fails_at_construction():
    with pytest.raises(ConfigError, match="threads"):
        CheckpointPanel(steps=40, threads=0)


def test_curves_follow_the_controls_without_a_run():
    p = CheckpointPanel(steps=40, models=("tiny",), save_costs={"tiny": COSTS})
    p.mtbf.value = 10.0
    p.redraw_theory()
    rows = chart_rows(p.curves.chart)
    diamonds = {r["strategy"]: r for r in rows if r.get("what") == "Daly's optimum"}
    assert set(diamonds) == set(COSTS)
    assert diamonds["memory"]["interval_s"] < diamonds["async"]["interval_s"] < diamonds["dcp"]["interval_s"] < diamonds["sync"]["interval_s"]
    assert diamonds["memory"]["goodput"] > diamonds["sync"]["goodput"]
    assert diamonds["sync"]["interval_s"] == pytest.approx(optimum(COSTS["sync"], DEFAULT_RESTART_S, 10.0)["interval_s"])
    p.mtbf.value = 20.0  # the observer redraws; a longer MTBF moves every optimum right
    diamonds_20 = {r["strategy"]: r for r in chart_rows(p.curves.chart) if r.get("what") == "Daly's optimum"}
    assert all(diamonds_20[s]["interval_s"] > diamonds[s]["interval_s"] for s in COSTS)
    assert "strategy_pick" in p.curves.chart.to_json()  # the named legend selection


def test_run_adds_a_measured_point_and_learns_costs(panel):
    r = panel.result_of_run
    assert r is panel.result and r.summary["completed"] and r.summary["failures"] >= 1  # the kill, maybe Poisson ones
    sources = [e["source"] for e in r.events if e["kind"] == "restored"]
    assert sources and set(sources) == {"memory"}
    (point,) = panel.measured
    assert point["strategy"] == "memory" and 0 < point["goodput"] < 1 and point["interval_s"] > 0
    assert panel.costs_for("tiny")["memory"] == pytest.approx(save_cost_s(r))  # the run's own measurement
    assert panel.restart_s["tiny"] > 0 and panel.step_s["tiny"] > 0
    assert panel.chosen_interval_s() == pytest.approx(5 * panel.step_s["tiny"])
    rows = chart_rows(panel.curves.chart)
    assert any(row.get("what") == "measured run" and row["strategy"] == "memory" for row in rows)
    assert "memory" in panel.headline.value and panel.status.value == "done"
    assert chart_rows(panel.timeline.chart)  # the run's timeline is drawn


def test_save_costs_are_measured_when_not_given(tmp_path):
    p = CheckpointPanel(steps=20, models=("tiny",), out_root=tmp_path)
    costs = p.costs_for("tiny")
    assert set(costs) == set(COSTS) and all(c > 0 for c in costs.values())
    assert p.costs_for("tiny") is costs  # measured once


def test_charts_of_the_chapter(panel):
    rows = [{"strategy": "sync", "blocking_s": 0.1, "durable_s": 0.1}, {"strategy": "async", "blocking_s": 0.01, "durable_s": 0.12}]
    anatomy = chart_rows(save_anatomy(rows))
    assert {(r["strategy"], r["part"]): r["ms"] for r in anatomy}[("async", "background (persist)")] == pytest.approx(110)
    curves = goodput_curves(COSTS, 2.0, 10.0, [0.1, 1.0, 10.0])
    assert len(curves) == 12 and all(0 < r["goodput"] < 1 for r in curves)
    chart = goodput_vs_interval(curves, chosen_interval_s=1.0)
    assert any(layer.get("mark", {}).get("type") == "rule" for layer in chart.to_dict()["layer"])
    timelines = strategy_timelines({"memory": panel.result, "again": panel.result}).to_dict()
    assert len(timelines["vconcat"]) == 2
    assert step_s(panel.result) > 0
