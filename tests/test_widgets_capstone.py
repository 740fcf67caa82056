"""Chapter 10's panel: set the controls, call the methods, check the figures and the charts' specs."""

import pytest

from goodputlab.theory import capstone
from goodputlab.widgets import CapstonePanel

from conftest import chart_rows

LAB = {"save_s": 0.02, "restart_s": 3.0, "mtbf_s": 8.0}


@pytest.fixture(scope="module")
def panel():
    return CapstonePanel(lab=LAB)


def test_defaults_are_llama3(panel):
    f = panel.figures()
    default = capstone.evaluate().figures()
    assert f == pytest.approx(default)
    assert f["ettr"] > 0.9 and f["failures_per_day"] == pytest.approx(466 / 54)
    assert "5.67 TB" in panel.facts.value and "%" in panel.headline.value
    rows = chart_rows(panel.breakdown_chart.chart)
    assert {r["run"] for r in rows} == {"Llama 3 405B defaults", "your cluster"}
    assert sum(r["share"] for r in rows if r["run"] == "your cluster") == pytest.approx(1.0)
    diamonds = [r for r in chart_rows(panel.curve_chart.chart) if r.get("what") == "optimum"]
    assert diamonds and diamonds[0]["minutes"] == pytest.approx(f["interval_min"])
    ratios = {r["ratio"] for r in chart_rows(panel.ratio_chart.chart)}
    assert ratios == {"save / MTBF", "recovery / MTBF", "best interval / MTBF"}


def test_every_lever_redraws(panel):
    base = panel.figures()["goodput"]
    panel.spares.value = 300  # the observer recomputes
    assert panel.figures()["goodput"] > base
    panel.spares.value = 0
    panel.detect_s.value = 600.0
    assert panel.figures()["goodput"] < base - 0.03
    panel.detect_s.value = 90.0
    panel.strategy.value = "memory, same node"
    assert panel.result.node_loss_share == pytest.approx(321 / 466) and "storage copy" in panel.facts.value
    panel.strategy.value = "sync"
    panel.gpus.value = 131_072
    assert panel.figures()["failures_per_day"] == pytest.approx(8 * 466 / 54)
    panel.gpus.value = 16_384
    panel.price.value = 4.0
    f = panel.figures()
    assert f["money_lost_per_day"] == pytest.approx(4.0 * f["gpu_hours_lost_per_day"])
    panel.price.value = 2.0
    assert panel.figures() == pytest.approx(capstone.evaluate().figures())


def test_a_bad_combination_is_reported_not_raised():
    p = CapstonePanel()
    p.gpus.value = 131_072
    p.gpu_mtbf_years.value = 0.3  # a failure every 72 s: below the 5-minute floor
    assert p.compute() is None and "gpu_mtbf_years" in p.status.value
