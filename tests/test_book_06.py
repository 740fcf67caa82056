"""Chapter 6 shows what an incomplete checkpoint does, every failure mode, and the hot spare, on real runs."""

import pytest

from conftest import ROOT, committed_warnings, widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/06_recovery.ipynb"


def test_chapter_6_incomplete_checkpoints(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    omit = m["omit"]
    assert set(omit) == {"complete", "optimizer", "data", "rng"}
    assert omit["complete"]["bit_exact"] is True  # the complete checkpoint: the failure-free model
    assert all(omit[p]["bit_exact"] is False for p in ("optimizer", "data", "rng"))
    restart = omit["complete"]["restart_step"]
    assert restart > 0 and all(v["restart_step"] == restart for v in omit.values())
    # without the data position the stream started over: the batches before the restart came twice
    batch = 16  # the tiny preset's
    assert omit["data"]["repeated"] == omit["data"]["skipped"] == restart * batch
    assert all(omit[p]["repeated"] == omit[p]["skipped"] == 0 for p in ("complete", "optimizer", "rng"))
    assert omit["complete"]["loss_jump"] == 0.0 and omit["optimizer"]["loss_jump"] != 0.0


def test_chapter_6_failure_modes(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    modes = m["modes"]
    assert set(modes) == {"kill", "hang", "exception", "loader-death", "stragglers"}
    for name, r in modes.items():
        assert r["completed"] and r["bit_exact"], name  # every mode ends with the failure-free model
        assert sum(r["buckets"].values()) == pytest.approx(r["wall_s"], abs=1e-6)  # the ledger closes
    assert modes["kill"]["failures"] == modes["hang"]["failures"] == modes["exception"]["failures"] == 1
    assert modes["hang"]["recovery"]["injected"] == {"hang": 1} and len(modes["hang"]["recovery"]["hang_detection_s"]) == 1
    assert modes["exception"]["recovery"]["injected"] == {"exception": 1}
    assert modes["loader-death"]["failures"] == 0 and modes["loader-death"]["recovery"]["loader_rebuilds"] >= 1
    assert modes["loader-death"]["buckets"]["lost_work"] == 0.0
    assert modes["stragglers"]["recovery"]["straggler_steps"] > 0 and modes["stragglers"]["buckets"]["other"] > 0
    if m["disk_full"] is not None:  # only where the machine lets a program mount a file system
        assert m["disk_full"] == {"completed": True, "bit_exact": True, "ckpt_failed": m["disk_full"]["ckpt_failed"]}
        assert m["disk_full"]["ckpt_failed"] >= 1


def test_chapter_6_hot_spare(executed_notebook):
    nb, m, _ = executed_notebook(CHAPTER)
    assert m["spare_same_model"] is True and m["hot_handovers"] >= 1
    assert 0 < m["hot_restart_s"] < m["cold_restart_s"]
    cold, hot = m["spare_configs"]["cold restart"], m["spare_configs"]["hot spare"]
    # one scale model for both: the same MTBF and seed (so the same failure draws), storage, delay and interval
    for key in ("mtbf", "seed", "steps", "ckpt", "ckpt_storage_mbps", "restart_delay", "ckpt_every_s", "model"):
        assert cold[key] == hot[key], key
    assert hot["hot_spare"] is True and cold["hot_spare"] is False and hot["mtbf"] > 0 and hot["ckpt_storage_mbps"] > 0
    assert all(f >= 1 for f in m["spare_failures"].values())
    # the forked standby reads the newest checkpoint while it waits: a handover then restores no file (on a loaded
    # machine a SMOKE run's failure may come before the standby has read it; the committed full-size run holds >= 1)
    assert 0 <= m["spare_preloaded"] <= m["hot_handovers"], (m["spare_preloaded"], m["hot_handovers"])
    assert m["spare_gain"] == pytest.approx(m["spare_goodput"]["hot spare"] - m["spare_goodput"]["cold restart"])
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "recovery / MTBF" in printed and "cluster: Llama 3 405B" in printed and "cold restart" in printed
    assert m["panel_config"]["ckpt_omit"] == ["optimizer"] and m["panel_config"]["hot_spare"] is True


def test_chapter_6_committed_outputs_hold_no_warning():
    """The committed chapter (a full-size run) ran at the cluster's ratios: no RestartCostWarning, no warning."""
    assert not committed_warnings(ROOT / CHAPTER)


def test_chapter_6_committed_hot_spare_is_the_lever():
    """The committed chapter (full size): the forked, preloaded hot spare recovered faster than a cold restart, from
    the state it read while it waited, and kept more of the same run's time (issue 42)."""
    import nbformat

    from goodputlab.notebook import read_metrics
    m = read_metrics(nbformat.read(ROOT / CHAPTER, as_version=4))
    assert m["spare_preloaded"] >= 1 and m["spare_preloaded"] <= m["hot_handovers"]
    assert 0 < m["hot_restart_s"] < m["cold_restart_s"]
    assert m["spare_gain"] > 2 * m["spare_gain_stderr"] > 0, (m["spare_gain"], m["spare_gain_stderr"])
    assert all(f >= 15 for f in m["spare_failures"].values()), m["spare_failures"]


def test_chapter_6_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 7  # loss, samples, modes, hang timeline, restarts, hot timeline, the panel
