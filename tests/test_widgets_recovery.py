"""Chapter 2's recovery panel: the levers move the simulation and its closed form together."""

import pytest

from goodputlab.widgets import RecoveryPanel

from conftest import chart_rows


@pytest.fixture(scope="module")
def panel():
    return RecoveryPanel(trials=60, seed=1)


def test_baseline_is_llama3_and_the_closed_form_agrees(panel):
    f = panel.figures()
    assert f["expected_interruptions"] == pytest.approx(466)
    assert f["goodput"] == pytest.approx(f["baseline_goodput"])
    assert f["goodput"] == pytest.approx(f["closed_form"], abs=0.005)
    # at the defaults every slider sits at the baseline: each lever is shown at a typical improvement, not as 0
    rows = panel.lever_rows()
    assert len(rows) == 6 and all(r["typical"] and "(typical)" in r["lever"] for r in rows)
    assert all(abs(r["points"]) > 0.01 for r in rows), rows
    assert len(chart_rows(panel.lever_chart.chart)) == 6


def test_levers(panel):
    panel.spares.value = 300
    f = panel.figures()
    assert f["spare_share"] > 0.6 and f["goodput"] > f["baseline_goodput"] + 0.01
    assert f["goodput"] == pytest.approx(f["closed_form"], abs=0.005)
    panel.spares.value = 0
    panel.detect_min.value = 10.0  # a hang found by NCCL's 10-minute watchdog
    assert panel.figures()["goodput"] < panel.figures()["baseline_goodput"] - 0.03
    panel.detect_min.value = 1.5
    panel.correlated.value, panel.domain.value = 1.0, 8  # every loss takes a whole host of 8
    f = panel.figures()
    assert f["expected_interruptions"] == pytest.approx(466 / 8) and f["devices_per_interruption"] == pytest.approx(8)
    panel.correlated.value = 0.0
    panel.shape.value = 0.5
    f = panel.figures()
    assert f["goodput"] == pytest.approx(f["closed_form"], abs=0.005) and f["goodput"] > f["baseline_goodput"]
    rows = {r["lever"]: r["points"] for r in panel.lever_rows()}
    assert rows["Weibull shape 0.5"] > 0
    runs = {r["run"] for r in chart_rows(panel.breakdown_chart.chart)}
    assert runs == {"baseline: Llama 3, 1.5 + 5 min recovery", "your settings"}
    assert any(r.get("lever") for r in chart_rows(panel.lever_chart.chart))
    panel.shape.value = 1.0


def test_policy_panel():
    from goodputlab.widgets import PolicyPanel

    p = PolicyPanel(failures=20_000, seed=2)
    f = p.figures()
    assert f["x"] == pytest.approx(0.5) and f["progress"] == pytest.approx(0.771, abs=0.001)
    assert f["timer"] == pytest.approx(0.787, abs=0.001) and f["timer_saves_per_mtbf"] > f["progress_saves_per_mtbf"]
    p.x.value = 1.0  # the observer redraws
    assert "58.2%" in p.facts.value and "63.2%" in p.facts.value
    s = p.simulate_once()
    assert s["progress"] == pytest.approx(0.582, abs=0.02) and s["timer"] == pytest.approx(0.632, abs=0.02)
    rows = chart_rows(p.chart.chart)
    assert sum(1 for r in rows if r.get("x") == pytest.approx(1.0)) >= 4  # two simulated, two marks


def test_the_panel_prints_ettr_beside_goodput(panel):
    f = panel.figures()
    assert f["ettr"] >= f["goodput"] and "ETTR" in panel.headline.value
    assert any("<summary>goodput and ETTR</summary>" in str(getattr(w, "value", "")) for w in panel.widget.children)
