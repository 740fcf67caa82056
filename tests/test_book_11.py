"""Chapter 11, in-job recovery: the recorded torchft run healed and booked `degraded`, the restart lost work,
and at Llama 3's scale in-job recovery beats restarting from checkpoints, held to the closed form."""

import pytest

from conftest import ROOT, widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/11_in_job_recovery.ipynb"


def test_chapter_11_reads_a_real_torchft_pair(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["ran_for_real"] is False  # SMOKE reads the full-size execution's recording
    assert (ROOT / "book" / "data" / "in_job_run.json").stat().st_size < 200_000
    b = m["buckets"]
    for mode in ("none", "torchft"):  # each ledger closes on its wall
        assert sum(b[mode].values()) == pytest.approx(m["wall_s"][mode], rel=1e-6)
        assert m["failures"][mode] == 2
    # the restart restarted and threw work away; torchft restarted nothing, healed, and booked the missing group
    assert b["none"]["restart"] > 0 and b["none"]["lost_work"] > 0 and b["none"]["degraded"] == 0
    assert b["torchft"]["restart"] == 0 and b["torchft"]["degraded"] > 0
    assert m["heals"] == 2 and b["torchft"]["checkpoint_restore"] > 0
    # the survivors lose at most the step in flight at each kill
    assert m["survivors_lost_s"] < 0.1 * b["none"]["lost_work"]
    assert m["goodput"]["torchft"] > m["goodput"]["none"]
    assert m["panel_goodput"] == m["goodput"]
    # a degraded step (half the batch) makes between half a step's progress and a whole one's
    assert m["degraded_steps"] > 0
    gains = sorted(m["degraded_gains"].values())
    assert 0.5 < gains[0] < gains[-1] < 1.0


def test_chapter_11_in_job_beats_restart_at_llama3_scale(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    rows = m["sim_rows"]
    restart, in_job = rows[0], rows[1:]
    assert restart["recovery"] == "restart" and restart["job_restarts_mean"] > 400  # 466 interruptions in 54 days
    goodputs = [r["goodput_mean"] for r in in_job]
    assert all(g > restart["goodput_mean"] + 0.04 for g in goodputs)
    assert goodputs == sorted(goodputs)  # more groups, a smaller share per failure
    assert in_job[0]["job_restarts_mean"] > 0 and in_job[-1]["job_restarts_mean"] == 0
    for r in rows:  # the closed form within a few standard errors and its own bias (docs/IN_JOB_RECOVERY.md)
        assert r["goodput_mean"] == pytest.approx(r["closed_form_goodput"], abs=4 * r["goodput_stderr"] + 0.0005)
    assert all(r["share_degraded"] > 0 for r in in_job) and restart["share_degraded"] == 0


def test_chapter_11_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 5  # the timelines, the books, goodput by groups, where the rest went, the panel
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "<details><summary>Answer</summary>" in text and "## What to remember" in text and "references.md#" in text
    assert "(notation.md)" in text and "08_statistical_efficiency.ipynb" in text
