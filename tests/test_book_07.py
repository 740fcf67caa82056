"""Chapter 7 runs real torchrun jobs of 2 gloo ranks and sets them beside the models."""

import pytest

from conftest import widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/07_scaling_out.ipynb"


def test_chapter_7_the_same_work_on_one_and_two_ranks(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["two_world_size"] == 2 and m["two_launcher"] == "torchrun" and m["two_closes"] is True
    assert m["same_steps"] == [m["steps"], m["steps"]]
    one, two = [r for r in m["save_rows"] if r["ranks"] == 1], [r for r in m["save_rows"] if r["ranks"] == 2]
    assert len(one) == 1 and one[0]["bytes"] is None and len(two) == 2
    total = sum(r["bytes"] for r in two)
    assert all(0.3 * total < r["bytes"] < 0.7 * total for r in two)  # each rank writes about half


def test_chapter_7_failed_and_straggling_ranks(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["failing_completed"] is True and m["failing_closes"] is True and m["failures"] >= 1
    # every step a failure made the job compute again gave, bit for bit, the loss it gave the first time
    assert m["recomputed_equal"] is True and m["recomputed_steps"] >= 1
    assert 0.2 * m["straggler_steps"] < m["straggler_slowed_steps"] < 0.8 * m["straggler_steps"]
    # the healthy rank waited on the slowed steps at least half what the straggler slept there: a causal lower
    # bound (other waits only add to it; beside two busy loops the no-straggler run's own waits were most of a
    # short run's, so the floor is not subtracted from the total)
    assert m["straggler_wait_on_slowed_s"] >= 0.5 * m["straggler_slept_s"] > 0
    assert m["straggler_wait_on_slowed_s"] + m["straggler_wait_on_unslowed_s"] == pytest.approx(m["straggler_measured_s"])
    assert 0 < m["straggler_compute_share"] < 1 and 0 < m["straggler_model_share"] < 1
    assert m["panel_ranks"][-1] == 16384


def test_chapter_7_runs_at_the_clusters_save_ratio(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["failing_storage_mbps"] > 0 and m["failing_ckpt_every"] >= 1
    save, cluster_save = m["lab_ratios"]["save / MTBF"], m["cluster_ratios"]["save / MTBF"]
    assert save >= 0.9 * cluster_save  # the emulated storage sets the save's floor; a loaded machine adds to it


def test_chapter_7_splits_measured_from_simulated_goodput(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    # the lab model walked through the run's own failures and costs reproduces it: the mechanics hold
    assert abs(m["measured_goodput"] - m["replayed_goodput"]) < 0.05, (m["measured_goodput"], m["replayed_goodput"], m["failures"])
    assert m["expected_goodput_se"] > 0 and 0 < m["simulated_goodput"] < 1


def test_chapter_7_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 7  # breakdown, save per rank, timeline, MTBF, ranks, straggler, panel


def test_chapter_7_shows_a_node_lost_whole_on_an_emulated_cluster(executed_notebook):
    """Under SMOKE the chapter reads its recording of a real emulated cluster (book/data/emulated_nodes_run.json):
    a node killed whole, a spare node in its place, the job resumed from a checkpoint before the kill."""
    _, m, _ = executed_notebook(CHAPTER)
    facts = m["node_loss"]
    assert m["node_loss_ran_here"] is False  # SMOKE prefers the recording
    assert facts["nodes"] == 2 and facts["spares"] == 1 and facts["failures"] == 1
    assert facts["replaced"] is True and facts["spare"] == 2 and facts["node"] in (0, 1)
    assert 0 < facts["resumed_at"] <= facts["kill_step"] < facts["steps"]
    assert 0 < facts["restart_s"] < facts["wall_s"] and facts["back_s"] > 0


def test_an_emulated_cluster_recording_is_checked_when_read(tmp_path):
    from goodputlab.errors import RunFileError
    from goodputlab.experiments import emulated_nodes as en

    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "summary": {}}')
    with pytest.raises(RunFileError, match="not a version-1 recording of an emulated cluster"):
        en.load_recording(bad)
