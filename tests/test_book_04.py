"""Chapter 4 compares the four checkpoint strategies on real runs and reports what it claims."""

import itertools

import pytest

from conftest import widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/04_cheap_checkpoints.ipynb"
STRATEGIES = {"sync", "async", "dcp", "memory"}


def test_chapter_4_figures(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert set(m["save_s"]) == set(m["goodput"]) == STRATEGIES
    assert m["bit_exact"] is True  # every strategy, killed and restored, ends with the same model
    assert all(f == 1 for f in m["failures"].values())
    assert m["restored_from"]["memory"] == ["memory"]  # the restarted worker read RAM, not storage
    assert all(m["restored_from"][s] == ["disk"] for s in ("sync", "async", "dcp"))
    save = m["save_s"]
    assert save["async"] < save["sync"] and save["memory"] < save["sync"]  # the snapshot blocks, not the write
    assert m["memcpy_floor_s"] > 0 and m["state_bytes"] > 1e6
    # the chapter's claim: a cheaper save puts Daly's optimum at a shorter interval and a higher goodput
    for a, b in itertools.permutations(STRATEGIES, 2):
        if save[a] < save[b]:
            assert m["optimum_interval_s"][a] < m["optimum_interval_s"][b]
            assert m["optimum_goodput"][a] > m["optimum_goodput"][b]
    assert m["panel_strategy"] == "async" and 0 < m["panel_goodput"] < 1
    # the auto interval decided at the start and again after every save
    assert m["auto_checkpoints"] >= 1 and m["auto_decisions"] == m["auto_checkpoints"] + 1


def test_chapter_4_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 5  # anatomy, timelines, breakdown, curves, the panel
