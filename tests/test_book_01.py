"""Chapter 1 runs real experiments and reports what it claims."""

import pytest

from conftest import widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/01_what_is_goodput.ipynb"


def test_chapter_1_figures(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["failures"] >= 1  # the known kill, plus any random ones
    assert m["bit_exact"] is True
    assert m["buckets_sum"] == pytest.approx(m["wall_s"], rel=0.01)
    assert 0 < m["goodput"] < 1
    assert m["final_loss"] < m["initial_loss"] - 1.0
    assert m["panel_runs"] == 1 and 0 < m["panel_goodput"] < 1


def test_chapter_1_measures_a_recorded_loop(executed_notebook):
    # "Measure your own job": a real loop in the kernel, crashed between checkpoints and restarted
    _, m, _ = executed_notebook(CHAPTER)
    b = m["my_buckets"]
    assert 0 < m["my_goodput"] < 1 and m["my_failures"] == 1 and m["my_steps_completed"] == 60
    assert sum(b.values()) == pytest.approx(m["my_wall_s"], rel=1e-6)
    assert b["lost_work"] > 0 and b["restart"] >= 0.3 and b["productive"] > 0 and b["checkpoint_save"] > 0


def test_chapter_1_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 5  # progress bar, timeline, breakdown, loss, comparison, panel


def test_chapter_1_runs_in_a_clusters_regime(executed_notebook):
    # the hot spare took the known failure; the ratios that make the lab stand for a cluster are measured
    _, m, _ = executed_notebook(CHAPTER)
    assert m["handovers"] == m["failures"] >= 1
    r = m["ratios"]
    # (a restart's seconds: no bound from above, which a busy machine could break; its ratio is the point)
    assert 0 < r["restart_s"] and r["restart_over_mtbf"] == pytest.approx(r["restart_s"] / 20.0)
    assert 0 < r["interval_over_mtbf"] < 1 and 0 < r["save_over_interval"] < 1
