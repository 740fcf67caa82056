"""Chapter 3: the worked example, the exact model and the simulator, and a measured sweep against the lab model."""

import math

import pytest

pytestmark = pytest.mark.notebooks

CHAPTER = "book/03_checkpoint_interval.ipynb"


def test_chapter_3_theory_figures(executed_notebook):
    _, m, seconds = executed_notebook(CHAPTER)
    # (its time in SMOKE mode is a benchmark figure, tools/execute_notebooks.py --time-only, not a bound here)
    # Young: sqrt(2 x 60 s x 10,047 s) = 1098 s; Daly a little shorter
    assert m["young_s"] == pytest.approx(1098.0, abs=1.0)
    assert 1000 < m["daly_s"] < m["young_s"]
    # the worked example: 64% and 91% to first order, within half a point
    assert m["first_order_2h"] == pytest.approx(0.64, abs=0.005)
    assert m["first_order_30min"] == pytest.approx(0.91, abs=0.005)
    # ...but 68% at 2 hours exactly, and the simulator agrees with the exact model
    assert m["exact_2h"] == pytest.approx(0.684, abs=0.001)
    assert m["simulated_2h"] == pytest.approx(m["exact_2h"], abs=max(0.005, 4 * m["simulated_2h_stderr"]))
    assert m["simulated_30min"] == pytest.approx(0.913, abs=0.005)
    assert m["panel_daly"] == pytest.approx(m["exact_2h"])
    assert 600 < m["calculator_daly_s"] < 1200


def test_chapter_3_measured_sweep(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    n = len(m["sweep_intervals"])
    assert n >= 2 and len(m["sweep_measured"]) == len(m["sweep_replayed"]) == n
    for measured, expected, se, replayed, mechanics in zip(
        m["sweep_measured"], m["sweep_expected"], m["sweep_expected_se"], m["sweep_replayed"], m["sweep_mechanics_pts"]
    ):
        assert 0 < measured < 1 and 0 < expected < 1 and se > 0
        # the model walked through the run's own failure times lands on the measurement; a model
        # without the first launch or the failures during restarts misses by tens of points here
        assert replayed == pytest.approx(measured, abs=0.05)
        assert 100 * (measured - replayed) == pytest.approx(mechanics, abs=1e-6)
        # the expectation is within what luck allows
        assert abs(measured - expected) < 4 * se
    assert m["sweep_failures"] >= 1
    assert m["breakdown_sum"] == pytest.approx(1.0)


def test_chapter_3_corrected_figures(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    # a large restart: first order is pessimistic (1 - R/M <= exp(-R/M)), 73.1% against 76.3%
    assert m["r30_first_order"] == pytest.approx(0.731, abs=0.0005) and m["r30_exact"] == pytest.approx(0.763, abs=0.0005)
    assert m["r30_first_order"] < m["r30_exact"]
    # the lab's recovery ratio, in minutes at Llama 3's 2.78-hour MTBF (the same share of the MTBF)
    llama_mtbf_s = 54 * 86400 / 466
    assert m["lab_restart_at_scale_min"] == pytest.approx(m["lab_recovery_over_mtbf"] * llama_mtbf_s / 60)
    # chapter 2's 5-minute restart (and 1-minute restore) at the lab's 3 s MTBF: a tenth of a second
    assert m["chapter2_in_lab_s"] == pytest.approx([300 / llama_mtbf_s * 3.0, 360 / llama_mtbf_s * 3.0])


def test_chapter_3_non_poisson_and_the_timer(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    opt = {float(k): v for k, v in m["shape_optima"].items()}
    assert opt[1.0]["interval_s"] == pytest.approx(m["daly_s"], rel=0.01)  # the renewal optimum is Daly's for Poisson
    # clustered failures (shape < 1), same mean: a longer best interval and a higher goodput; wear-out the reverse
    assert opt[0.5]["interval_s"] > opt[0.7]["interval_s"] > opt[1.0]["interval_s"] > opt[2.0]["interval_s"]
    assert opt[0.5]["goodput"] > opt[1.0]["goodput"] > opt[2.0]["goodput"]
    sim = {float(k): v for k, v in m["shape_sim"].items()}
    for k, g in sim.items():
        assert g == pytest.approx(opt[k]["goodput"], abs=0.005)  # the simulator with Weibull gaps agrees
    assert m["progress_half"] == pytest.approx(0.771, abs=0.001) and m["timer_half"] == pytest.approx(0.787, abs=0.001)
    assert m["policy_panel"]["progress"] == pytest.approx(m["progress_half"])
    for row in m["policy_sim"]:  # 20,000 simulated failures each
        x = row["x"]
        exact = x / math.expm1(x) if row["policy"].startswith("progress") else -math.expm1(-x) / x
        assert row["goodput"] == pytest.approx(exact, abs=0.02)


def test_chapter_3_committed_full_size_sweep_is_the_models_curve():
    """The committed chapter (a full-size sweep at the worked example's ratios): an upside-down U whose top is within
    3 points of the lab model's and whose best interval is within a factor of 2 of Daly's (issue 42)."""
    import nbformat

    from conftest import ROOT
    from goodputlab.notebook import read_metrics

    m = read_metrics(nbformat.read(ROOT / CHAPTER, as_version=4))
    measured, intervals = m["sweep_measured"], m["sweep_intervals"]
    top = measured.index(max(measured))
    assert 0 < top < len(measured) - 1, measured  # it falls on both sides of its top
    assert abs(m["sweep_top_measured"] - m["sweep_model_top"]) <= 0.03
    assert 0.5 <= intervals[top] / m["daly_interval_steps"] <= 2.0
    assert m["sweep_failures"] >= 20 * len(intervals)
