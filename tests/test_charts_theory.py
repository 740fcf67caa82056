"""Theory charts: their data come from the theory, their params are named, categories keep their colours."""

import math

import pytest

from goodputlab import theory
from goodputlab.categories import CATEGORIES, COLORS
from goodputlab.charts import cluster as cc
from goodputlab.charts import theory as tc
from goodputlab.errors import ConfigError
from goodputlab.theory import RunTimings

from conftest import chart_rows

M = theory.WORKED_EXAMPLE_MTBF_S
LAB = RunTimings(compute_s=0.02, data_wait_s=0.001, save_s=0.025, launch_s=3.0, restore_s=0.02, relaunch_delay_s=0.5)


def params_of(chart):
    spec = chart.to_dict()
    names = [p["name"] for p in spec.get("params", [])]
    for layer in spec.get("layer", []):
        names += [p["name"] for p in layer.get("params", [])]
    return names


def test_interval_curve_rows_are_the_models():
    rows = tc.interval_curve_rows(60.0, 600.0, M, (60.0, 6 * 3600.0), points=11)
    assert len(rows) == 22
    assert rows[0]["interval_s"] == pytest.approx(60.0) and rows[-1]["interval_s"] == pytest.approx(6 * 3600.0)
    for r in rows:
        if r["model"] == "first-order":
            assert r["goodput"] == pytest.approx(theory.expected_goodput(r["interval_s"], 60.0, 600.0, M))
        else:
            assert r["goodput"] == pytest.approx(theory.daly_goodput(r["interval_s"], 60.0, 600.0, M))
        assert r["interval_min"] == pytest.approx(r["interval_s"] / 60)


def test_interval_curve_rejects_a_bad_range():
    with pytest.raises(ConfigError) as info:
        tc.interval_curve_rows(60.0, 0.0, M, (100.0, 10.0))
    assert info.value.field == "interval_range_s"


def test_goodput_curve_marks_both_optima_and_names_its_selection():
    chart = tc.goodput_curve(60.0, 600.0, M, chosen_interval_s=1800.0)
    assert params_of(chart) == ["model_pick"]
    rules = {r["name"]: r["x"] for r in chart_rows(chart) if r.get("name") in ("Young", "Daly")}
    assert rules["Young"] == pytest.approx(math.sqrt(2 * 60 * M) / 60)
    assert rules["Daly"] == pytest.approx(theory.daly_interval(60, M) / 60)
    # free saves: nothing to mark on a log axis (both optima are 0)
    assert tc.optima_rows(0.0, M) == []
    assert not [r for r in chart_rows(tc.goodput_curve(0.0, 0.0, M)) if r.get("name") in ("Young", "Daly")]


def test_lab_curve_has_the_model_band_and_measured_points():
    measured = [{"ckpt_every": 25, "measured": 0.4, "measured_min": 0.3, "measured_max": 0.5}]
    chart = tc.lab_goodput_curve(LAB, 400, 8.0, measured=measured, runs_per_point=4)
    rows = chart_rows(chart)
    lab = [r for r in rows if r.get("model") == "lab model"]
    assert lab[0]["ckpt_every"] == 1 and lab[-1]["ckpt_every"] == 400
    p = theory.predict_run(LAB, 400, 1, 8.0)
    assert lab[0]["goodput"] == pytest.approx(p.goodput)
    # +-2 standard errors of a point pooled over 4 runs: a band 4 sd / sqrt(4) wide
    assert lab[0]["hi"] - lab[0]["lo"] == pytest.approx(4 * p.goodput_sd / 2, rel=1e-6)
    (k25,) = [r for r in tc.lab_curve_rows(LAB, 400, 8.0, intervals=[25]) if r["model"] == "lab model"]
    assert k25["goodput"] == pytest.approx(theory.predict_run_goodput(LAB, 400, 25, 8.0))
    assert {r["name"] for r in rows if "name" in r} == {"Young", "Daly", "lab model"}
    assert [r for r in rows if r.get("goodput") == 0.4 and r.get("lo") == 0.3]
    with pytest.raises(ConfigError):
        tc.lab_goodput_curve(LAB, 400, 8.0, runs_per_point=0)


def test_breakdown_side_by_side_uses_the_ledger_colours():
    rows = tc.summary_rows({"wall_s": 10.0, "buckets": {c: 10.0 / len(CATEGORIES) for c in CATEGORIES}})
    rows += theory.predict_run(LAB, 400, 25, 8.0).breakdown_rows("model")
    chart = tc.breakdown_side_by_side(rows)
    spec = chart.to_dict()
    assert spec["encoding"]["color"]["scale"]["range"] == [COLORS[c] for c in CATEGORIES]
    assert params_of(chart) == ["category_pick"]
    assert {r["run"] for r in chart_rows(chart)} == {"measured", "model"}
    assert sum(r["share"] for r in chart_rows(chart) if r["run"] == "measured") == pytest.approx(1.0)


def test_cause_chart_is_table_5():
    chart = cc.cause_chart()
    assert params_of(chart) == ["component_pick"]
    rows = chart_rows(chart)
    assert sum(r["count"] for r in rows) == 419
    assert "419 unexpected" in chart.to_dict()["title"]


def test_cluster_mtbf_is_one_over_n():
    rows = cc.cluster_mtbf_rows(1000 * 3600.0, sizes=[1, 10, 1000])
    assert [r["job_mtbf_h"] for r in rows] == pytest.approx([1000, 100, 1])
    assert rows[2]["failures_per_day"] == pytest.approx(24)
    chart = cc.cluster_mtbf_chart([1e8, 2e8], highlight_devices=4096)
    assert params_of(chart) == ["size_hover"]
    llama = [r for r in chart_rows(chart) if "Llama 3" in str(r.get("label", ""))]
    assert llama[0]["job_mtbf_h"] == pytest.approx(theory.llama3_mtbf_s() / 3600)
    assert len([r for r in chart_rows(chart) if r.get("devices") == 4096 and "device MTBF" not in r]) == 2


def test_cost_grid_chart_outlines_cells_above_the_threshold():
    grid = theory.llama3_cost_grid([600, 7200], [300, 1800], save_s=5.0)
    assert [r["x_label"] for r in grid[:2]] == ["10 min", "2 h"]
    assert grid[0]["goodput"] == pytest.approx(theory.daly_goodput(600, 5.0, 300, theory.llama3_mtbf_s()))
    rows = chart_rows(cc.goodput_grid_chart(grid, threshold=0.9))
    assert sum(r["meets"] for r in rows) == sum(g["goodput"] >= 0.9 for g in grid) == 1
