"""Chapter 4 compares the four checkpoint strategies on real runs and reports what it claims."""

import itertools
import math

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
    # the chapter's claim: a cheaper save puts the optimum at a shorter interval, and at a higher goodput
    # unless its lag to durable costs more (a factor exp(-L/M) on the goodput)
    lag = m["lag_s"]
    for a, b in itertools.permutations(STRATEGIES, 2):
        if save[a] < save[b]:
            assert m["optimum_interval_s"][a] < m["optimum_interval_s"][b]
            if lag[a] <= lag[b]:
                assert m["optimum_goodput"][a] > m["optimum_goodput"][b]
    assert all(lag[s] >= 0 for s in STRATEGIES) and lag["async"] > 0 and lag["dcp"] > 0


def test_chapter_4_durability_at_cluster_scale(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    # measured on emulated nodes (or their recording): a process kill leaves each node's RAM, a node kill takes
    # it and the lost node's rank restores from its neighbour's copy, losing no more steps; sync reads the disk
    src = m["ram_tier_sources"]
    assert src["memory_process"] == ["memory"] and src["memory_node"] == ["memory", "peer"]
    assert src["sync_process"] == src["sync_node"] == ["disk"] and m["ram_tier_bit_exact"] is True
    assert m["ram_tier_lost_steps"]["memory_node"] == m["ram_tier_lost_steps"]["memory_process"]
    g, naive = m["cluster_goodput"], m["cluster_blocking_only"]
    # a 5-minute sync save, a 10-minute restart, 8.6 failures a day
    assert g["sync"] == pytest.approx(0.730, abs=0.001) and m["cluster_interval_s"]["sync"] / 60 == pytest.approx(37.6, abs=0.3)
    # the async persist (5 minutes) costs exp(-300/M): 90.1% promised, 87.4% kept
    assert naive["async"] == pytest.approx(0.901, abs=0.001)
    assert g["async"] == pytest.approx(naive["async"] * math.exp(-300 / (86400 / 8.6)), abs=0.001)
    # a RAM tier that survives is as good as its blocking part; one lost with 69% of failures is not
    assert g["memory, RAM survives"] == pytest.approx(0.923, abs=0.001)
    assert g["memory, node lost"] == pytest.approx(0.891, abs=0.002)
    assert g["async"] < g["memory, node lost"] < g["memory, RAM survives"]
    assert m["panel_strategy"] == "async" and 0 < m["panel_goodput"] < 1
    # the auto interval decided at the start and again after every save
    assert m["auto_checkpoints"] >= 1 and m["auto_decisions"] == m["auto_checkpoints"] + 1


def test_chapter_4_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 5  # anatomy, timelines, breakdown, curves, the panel
