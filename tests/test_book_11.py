"""Chapter 11, in-job recovery: the recorded pair at a cluster's ratios (torchft healed and booked `degraded`, the
restart lost work, each with its standard error and its ratios beside the cluster's), the survivors' failed step
kept or computed again, a degraded step's worth derived and measured, and at Llama 3's scale in-job recovery beats
restarting from checkpoints, held to the closed form, until the timeout and the all-reduce across groups weigh in."""

import pytest

from conftest import ROOT, widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/11_in_job_recovery.ipynb"


def test_chapter_11_reads_a_real_pair_at_a_clusters_ratios(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["ran_for_real"] is False  # SMOKE reads the full-size execution's recording
    assert (ROOT / "book" / "data" / "in_job_run.json").stat().st_size < 200_000
    b = m["buckets"]
    for mode in ("none", "torchft"):  # each ledger closes on its wall; each run saw many failures, each with its luck
        assert sum(b[mode].values()) == pytest.approx(m["wall_s"][mode], rel=1e-6)
        assert m["failures"][mode] >= 5 and 0 < m["goodput_stderr"][mode] < 0.2
    # the restart restarted and threw work away; torchft restarted nothing, healed, and booked the missing group
    assert b["none"]["restart"] > 0 and b["none"]["lost_work"] > 0 and b["none"]["degraded"] == 0
    assert b["torchft"]["restart"] == 0 and b["torchft"]["degraded"] > 0
    assert m["heals"] >= 1 and b["torchft"]["checkpoint_restore"] > 0
    assert m["goodput"]["torchft"] > m["goodput"]["none"] and m["difference_stderr"] > 0
    assert m["panel_goodput"] == m["goodput"]
    # each side's ratios beside the cluster's: the restart's save and recovery, torchft's absence, heal and wait
    assert {r["ratio"] for r in m["restart_rows"]} >= {"save / MTBF", "recovery / MTBF"}
    assert [r["ratio"] for r in m["in_job_rows"]] == ["group away / MTBF", "heal / MTBF", "stall / MTBF", "start-up / job"]
    assert all(r["lab"] is not None and r["lab"] >= 0 and r["cluster"] > 0 for r in m["in_job_rows"])


def test_chapter_11_measures_the_survivors_step_and_a_degraded_steps_worth(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    reuse, recompute = m["survivors"]["reuse"], m["survivors"]["recompute"]
    assert reuse["due"] == recompute["due"] and reuse["failures"] == recompute["failures"] == len(reuse["due"])
    assert reuse["lost_s"] == 0 < recompute["lost_s"]  # keeping the gradient loses nothing; torchft's way, a step
    # at torchft's fixed learning rate, half the batch makes 0.8, 0.5 and 0.2 of a full step as the noise grows
    gains = m["degraded_gains"]
    assert [gains[k] for k in sorted(gains, key=float)] == pytest.approx([0.8, 0.5, 0.2])
    assert m["degraded_steps"] > 0
    worth = m["degraded_worth"]  # measured on the lab's model, beside the model's two forms
    assert 0 < worth["measured"] < 1 and worth["stderr"] >= 0 and worth["fixed"] < worth["retuned"] < 1


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
    # the collective's timeout and the all-reduce across groups: every in-job row pays them, and the most
    # groups no longer give the best goodput
    with_costs = [r["with_costs_goodput"] for r in in_job]
    assert all(c < g for c, g in zip(with_costs, goodputs)) and with_costs[-1] < max(with_costs)
    shares = [r["allreduce_share"] for r in in_job]
    assert shares == sorted(shares) and restart["allreduce_share"] == 0
    stall = next(c["share"] for c in m["cost_rows"] if c["cost"].startswith("detection"))
    assert stall > 0


def test_chapter_11_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 5  # the timelines, the books, goodput by groups, where the rest went, the panel
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "<details><summary>Answer</summary>" in text and "## What to remember" in text and "references.md#" in text
    assert "(notation.md)" in text and "08_statistical_efficiency.ipynb" in text
    own = "".join(c.source for c in nb.cells if c.cell_type == "markdown" and "reading" not in c.metadata.get("goodputlab", {}))
    for development in ("tests/", "benchmarks/", "docs/", "collapsed cell"):  # no development talk in the prose
        assert development not in own, development
