"""Theory panels: set a control's value, call the panel's method, check the figures and the chart spec."""

import math

import pytest

from goodputlab import theory
from goodputlab.widgets.theory import SECONDS_PER_YEAR, CheckpointCalculator, ClusterPanel, IntervalPanel

from conftest import chart_rows


def param_names(spec):
    names = {p["name"] for p in spec.get("params", [])}
    for layer in spec.get("layer", []):
        names |= {p["name"] for p in layer.get("params", [])}
    return names


@pytest.fixture(scope="module")
def cluster():
    return ClusterPanel(trials=100)


def test_cluster_panel_defaults_are_llama3(cluster):
    f = cluster.figures()
    assert f["devices"] == 16_384
    assert f["expected_failures"] == pytest.approx(466, rel=1e-9)
    assert f["simulated_failures"] == pytest.approx(466, abs=3 * math.sqrt(466 / 100))
    assert f["failures_per_day"] == pytest.approx(8.63, abs=0.01)
    # 10-minute checkpoints, 5 s saves, 5-minute restarts: above Llama 3's 90%
    assert f["goodput"] > 0.9 and f["goodput"] == pytest.approx(f["daly_goodput"], abs=0.01)
    spec = cluster.mtbf_chart.chart.to_dict()
    assert "size_hover" in param_names(spec)
    assert any(r.get("devices") == 16_384 and "label" not in r for r in chart_rows(spec))


def test_cluster_panel_smaller_cluster_fails_less(cluster):
    cluster.devices.value = 1024  # the observer re-simulates; call it directly too
    result = cluster.simulate_once()
    f = cluster.figures()
    assert result.config.devices == 1024
    assert f["expected_failures"] == pytest.approx(466 / 16, rel=1e-9)
    assert f["job_mtbf_h"] == pytest.approx(16 * 2.7811, rel=1e-3)
    assert f["goodput"] > 0.98
    highlighted = [r for r in chart_rows(cluster.mtbf_chart.chart.to_dict()) if r.get("devices") == 1024]
    assert highlighted, "the chosen cluster size is marked"
    breakdown = cluster.breakdown_chart.chart.to_dict()
    assert "category_pick" in param_names(breakdown)
    assert {r["run"] for r in chart_rows(breakdown)} == {"simulated, 1,024 devices"}
    causes = {r["cause"]: r["count"] for r in chart_rows(cluster.cause_chart.chart.to_dict())}
    assert sum(causes.values()) == pytest.approx(f["simulated_failures"], rel=1e-9)
    # Faulty GPU is 148 of the 466: its share of the simulated failures follows
    assert causes["Faulty GPU"] / sum(causes.values()) == pytest.approx(148 / 466, abs=0.05)


def test_cluster_panel_less_reliable_devices_cost_goodput(cluster):
    cluster.devices.value = 16_384
    cluster.device_mtbf_years.value = 1.0
    cluster.simulate_once()
    f = cluster.figures()
    assert f["job_mtbf_h"] == pytest.approx(SECONDS_PER_YEAR / 16_384 / 3600, rel=1e-9)
    assert f["goodput"] < 0.8


def test_cluster_panel_caps_trials_for_huge_failure_counts(cluster):
    cluster.devices.value = 131_072
    cluster.device_mtbf_years.value = 0.1
    result = cluster.simulate_once()
    assert result.config.trials < 100
    assert cluster.figures()["goodput"] < 0.05  # a failure every 24 s, restarts of 5 min


def test_interval_panel_worked_example():
    panel = IntervalPanel()
    f = panel.update()  # defaults: 8.6 failures a day, free saves, 2-hour interval
    assert f["first_order"] == pytest.approx(0.64, abs=0.005)
    assert f["daly"] == pytest.approx(0.684, abs=0.001)
    assert f["hours_lost_per_day_first_order"] == pytest.approx(8.6, abs=0.01)
    panel.interval_min.value = 30
    f = panel.update()
    assert f["first_order"] == pytest.approx(0.91, abs=0.005)
    assert f["daly"] == pytest.approx(0.913, abs=0.001)
    spec = panel.chart.chart.to_dict()
    assert "model_pick" in param_names(spec)
    chosen = [r for r in chart_rows(spec) if r.get("interval_min") == 30 and "goodput" in r]
    assert {r["model"] for r in chosen if "model" in r} == {"first-order", "Daly (exact)"}


def test_interval_panel_optima_move_with_the_save_cost():
    panel = IntervalPanel()
    panel.save_s.value = 60.0
    f = panel.update()
    assert f["young_s"] == pytest.approx(math.sqrt(2 * 60 * theory.WORKED_EXAMPLE_MTBF_S))
    rules = {r["name"]: r["x"] for r in chart_rows(panel.chart.chart.to_dict()) if r.get("name") in ("Young", "Daly")}
    assert rules["Young"] == pytest.approx(f["young_s"] / 60)
    assert rules["Daly"] == pytest.approx(theory.daly_interval(60.0, theory.WORKED_EXAMPLE_MTBF_S) / 60)
    panel.save_s.value = 240.0  # four times the save cost: Young's interval doubles
    assert panel.update()["young_s"] == pytest.approx(2 * f["young_s"])


def test_interval_panel_simulation_lands_on_daly():
    panel = IntervalPanel(simulate_trials=100)
    result = panel.simulate_here()  # 2 hours at the worked example's rate: ~68%, not 64%
    assert result.goodput_mean == pytest.approx(panel.figures()["daly"], abs=0.01)
    assert result.goodput_mean > panel.figures()["first_order"] + 0.03
    points = [r for r in chart_rows(panel.chart.chart.to_dict()) if str(r.get("label", "")).startswith("simulated")]
    assert len(points) == 1 and points[0]["goodput"] == pytest.approx(result.goodput_mean)
    panel.mtbf_h.value = 10.0  # other settings: the old simulated point no longer applies
    panel.update()
    assert not [r for r in chart_rows(panel.chart.chart.to_dict()) if str(r.get("label", "")).startswith("simulated")]


def test_checkpoint_calculator():
    calc = CheckpointCalculator()
    calc.devices.value = theory.LLAMA3_GPUS
    calc.device_mtbf_years.value = 5.2
    calc.save_s.value = 60.0
    calc.restart_min.value = 10.0
    r = calc.compute()
    mtbf = 5.2 * SECONDS_PER_YEAR / theory.LLAMA3_GPUS
    assert r["job_mtbf_s"] == pytest.approx(mtbf)
    assert r["young_s"] == pytest.approx(math.sqrt(2 * 60 * mtbf))
    assert r["daly_s"] == pytest.approx(theory.daly_interval(60, mtbf))
    assert r["goodput"] == pytest.approx(theory.daly_goodput(r["daly_s"], 60, 600, mtbf))
    assert r["device_hours_lost_per_day"] == pytest.approx((1 - r["goodput"]) * 24 * theory.LLAMA3_GPUS)
    assert "Daly's interval" in calc.output.value
    calc.save_s.value = 0.0  # free saves: no interval to compute, only restarts are lost
    r = calc.compute()
    assert r["daly_s"] == 0 and r["goodput"] == pytest.approx(math.exp(-600 / mtbf))


def test_the_panels_print_ettr_beside_goodput_with_its_definition(cluster):
    f = cluster.figures()
    assert f["ettr"] >= f["goodput"] and f["daly_ettr"] >= f["daly_goodput"]
    assert "ETTR" in cluster.headline.value and "ETTR" in cluster.facts.value
    interval = IntervalPanel(simulate_trials=10, simulated_days=10.0)
    interval.save_s.value = 60.0
    g = interval.update()
    assert g["daly_ettr"] == pytest.approx(theory.daly_ettr(g["interval_s"], 60.0, g["restart_s"], g["mtbf_s"]))
    assert g["daly_ettr"] > g["daly"] and "ETTR" in interval.headline.value
    calc = CheckpointCalculator()
    r = calc.compute()
    assert r["ettr"] > r["goodput"] and "ETTR at Daly's interval" in calc.output.value
    for panel in (cluster, interval, calc):
        assert any("<summary>goodput and ETTR</summary>" in str(getattr(w, "value", "")) for w in panel.widget.children)
