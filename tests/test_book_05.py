"""Chapter 5 measures the stalls it explains, and its model and restart claims hold."""

import statistics
import pytest

from goodputlab.theory.data_stall import emulated_latencies

from conftest import ROOT, committed_warnings, widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/05_input_pipeline.ipynb"


def test_chapter_5_anatomy(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["anatomy_ledger_matches"] is True
    draws = emulated_latencies(m["latency_ms"] / 1000, m["jitter"], m["seed"], m["steps"])[1:]
    assert m["latency_draw_mean_ms"] == pytest.approx(1000 * draws.mean())
    wait = m["wait_ms"]
    # the ledger's data wait: reading from memory, plus the transform, plus the storage latency; reading
    # from memory waits least (an order within one run: its size in ms is a bet on how busy the machine is,
    # 1 ms quiet and 5 ms beside a dozen runnable processes)
    assert wait["compute_only"] < wait["prep_only"] and wait["compute_only"] < wait["full"]
    # the transform burns CPU time and the storage latency is a sleep: a busy machine can stretch both
    # on the wall clock (a 10 ms transform took 44 ms beside a dozen runnable processes on 2 cores),
    # never shrink them. So each wait is bounded from below by what was injected (4 ms for the loop's
    # own noise), and nothing from above: that would be a bet on how busy the machine is.
    prep = wait["prep_only"] - wait["compute_only"]
    assert prep >= m["transform_ms"] - 4
    lat = m["latency_draw_mean_ms"]
    assert wait["full"] - wait["compute_only"] >= lat + m["transform_ms"] - 4
    # differencing the periods: the anatomy's two stalls hold the full variant's extra period (the
    # runs' own steps drift on a busy machine, so neither stall alone is firm: in CI the compute-only
    # run's steps were slowed by 23 ms against the full run's). Together they hold the storage latency
    # and the transform, which no drift of that size hides.
    assert m["fetch_stall_ms"] + m["prep_stall_ms"] > 0


def test_chapter_5_workers_and_prefetch_shrink_the_stall(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    serial, two, four = m["measured_share"]
    assert serial > two and serial > four + 0.2
    # four workers overlap the storage's sleeps whatever the load, so they are faster; by how much is a
    # bet on the load, two runs apart: how much their CPU transforms overlap the step depends on the
    # cores a neighbour leaves (1.8x quiet; 1.29x in make test's four jobs beside two busy loops)
    assert m["samples_per_s"][2] > m["samples_per_s"][0]
    # not asserted: that no pipelined run beats the compute-only ceiling. The ceiling is another run's,
    # measured a minute earlier, and on a shared machine the load between the two moves it (at load 10
    # the four-worker run made 210 samples/s against a ceiling of 187): not a bound of one run.
    # with no workers the model has nothing to overlap, and fed the run's own step times (the replay) it
    # must be close. The a-priori model takes the step time calibrated a minute earlier, which a busy
    # machine moves (beside two busy loops: 0.77 predicted against 0.61 measured), so it is held to a
    # share only, below.
    assert m["replay_share"][0] == pytest.approx(serial, abs=0.15)
    assert all(0 < s < 1 for s in m["model_share"])
    assert m["panel_runs"] == 1 and 0 < m["panel_measured"] < 1 and 0 < m["panel_predicted"] < 1
    assert m["calculator_feasible"] is True


def test_chapter_5_pipelines_at_a_clusters_ratios(executed_notebook):
    nb, m, _ = executed_notebook(CHAPTER)
    shallow, deep = m["scale_configs"]["no workers"], m["scale_configs"]["4 workers x prefetch 4"]
    # one scale model for both: the same MTBF and seed (so the same failure draws), storage, delay, interval, spare
    for key in ("mtbf", "seed", "ckpt", "ckpt_storage_mbps", "restart_delay", "ckpt_every_s", "hot_spare",
                "io_latency_ms", "io_jitter", "transform_ms", "model"):
        assert shallow[key] == deep[key], key
    assert deep["hot_spare"] and deep["mtbf"] > 0 and deep["ckpt_storage_mbps"] > 0
    assert (shallow["workers"], deep["workers"], deep["prefetch"]) == (0, 4, 4)
    assert shallow["steps"] < deep["steps"]  # the slower loop runs fewer steps, for about the same training time
    assert all(m["completed"].values()) and all(f >= 1 for f in m["failures"].values())
    # the lever, measured: without a pipeline the loop waits for data on every step
    assert m["scale_wait_share"]["no workers"] > m["scale_wait_share"]["4 workers x prefetch 4"]
    names = ("no workers", "4 workers x prefetch 4")
    assert m["scale_gain"] == pytest.approx(m["scale_goodput"][names[1]] - m["scale_goodput"][names[0]])
    for name in names:
        se = m["scale_stderr"][name]
        assert (se is None or se != se) if m["failures"][name] < 2 else 0 < se < 0.5
    # the ratios each run measured, printed beside the cluster's
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "recovery / MTBF" in printed and "cluster: Llama 3 405B" in printed and "no workers" in printed


def test_chapter_5_restarts_start_cold_pipelines(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["pipeline_infos"] == m["attempts"]  # every attempt built its own loader and workers
    assert m["restart_warmup_categories"] and set(m["restart_warmup_categories"]) == {"restart"}
    # a restarted pipeline waits for the resume step's first batch: the warm-ups' median is no shorter than the
    # batches' (one warm-up can be cut short by a kill that lands in it)
    assert statistics.median(m["restart_warmup_s"]) >= statistics.median(m["restart_first_batch_s"])


def test_chapter_5_committed_outputs_hold_no_warning():
    """The committed chapter (a full-size run) ran at the cluster's ratios: no RestartCostWarning, no warning."""
    assert not committed_warnings(ROOT / CHAPTER)


def test_chapter_5_draws_its_charts(executed_notebook):
    nb, _, _ = executed_notebook(CHAPTER)
    assert len(widget_views(nb)) >= 6  # anatomy, timelines, depth curve, panel, calculator, restart timeline
