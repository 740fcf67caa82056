"""Chapter 2 reproduces Llama 3's public failure figures and shows which costs keep goodput above 90%."""

import math

import pytest

from conftest import widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/02_failures_at_scale.ipynb"


def test_chapter_2_figures(executed_notebook):
    _, m, seconds = executed_notebook(CHAPTER)
    # (its time in SMOKE mode is a benchmark figure, tools/execute_notebooks.py --time-only, not a bound here)
    # 466 interruptions in 54 days on 16,384 GPUs: ~5.2 years per GPU, one every ~2.78 h
    assert m["device_mtbf_years"] == pytest.approx(5.2, abs=0.01)
    assert m["job_mtbf_h"] == pytest.approx(2.78, abs=0.01)
    assert m["p_fail_day_1024"] == pytest.approx(1 - math.exp(-1024 * 466 / (16384 * 54)), rel=1e-9)
    assert m["gpu_causes"] == 268
    # the five years count every cause; the GPUs' own 268 faults alone give about nine
    assert m["gpu_only_mtbf_years"] == pytest.approx(16_384 * 54 / 268 / 365, rel=1e-9)
    assert m["gpu_only_mtbf_years"] == pytest.approx(9.04, abs=0.01)
    # the simulator reproduces the interruption counts (3 standard errors of the mean)
    assert abs(m["sim_interruptions"] - 466) < 3 * math.sqrt(466 / m["trials"])
    assert abs(m["sim_unexpected"] - 419) < 3 * math.sqrt(419 / m["trials"])
    # ...and "effective training time higher than 90%" with the chapter's costs
    assert m["sim_goodput"] > 0.9 and m["sim_goodput_p5"] > 0.9
    assert m["grid_cells_above_90"] == 9 and m["grid_best"] == pytest.approx(0.963, abs=0.001)
    assert m["panel_expected_failures"] == pytest.approx(466)
    assert m["panel_goodput"] == pytest.approx(m["sim_goodput"], abs=0.01)


def test_chapter_2_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 7  # MTBF law, causes, breakdown, grid, recovery breakdown, two panels


def test_chapter_2_recovery_at_scale(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    # one failure in five hangs until NCCL's 10-minute watchdog, the rest are seen in 10 s
    assert m["detect_s"] == pytest.approx(128.0)
    assert m["detect_gpu_hours"] == pytest.approx(466 * 128 * 16_384 / 3600)
    assert m["spares_300_share"] == pytest.approx(0.644, abs=0.001)
    # the same GPUs lost, half of them as whole hosts of 8: 262 interruptions, a longer interval, more goodput
    d = {float(k): v for k, v in m["domain_goodput"].items()}
    assert d[0.0] < d[0.5] < d[1.0] and d[0.5] == pytest.approx(0.957, abs=0.001)
    g = m["lever_goodput"]
    assert g["5-min restart (as above)"] == pytest.approx(m["sim_goodput"], abs=0.005)
    assert g["+ 10-min watchdog each time"] < g["5-min restart (as above)"] - 0.04
    assert g["300 hot spares, 1-min swap"] > g["5-min restart (as above)"] + 0.01
    panel = m["recovery_panel"]
    assert panel["goodput"] == pytest.approx(panel["closed_form"], abs=0.005)
    assert panel["expected_interruptions"] == pytest.approx(466)
