"""Chapter 9 serves real requests in both modes, finds each goodput by a search whose every
probe it reports, and shows interference only where prefill and decode share a worker.
Structure and invariants only: which mode wins depends on the machine."""

import pytest

from conftest import widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/09_serving_goodput.ipynb"


def test_chapter_9_measures_every_probe_it_reports(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert set(m["probes"]) == {"colocated", "disaggregated"}
    for mode, probes in m["probes"].items():
        assert 1 <= len(probes) <= m["max_probes"]
        assert probes[0]["rate_rps"] == m["start_rps"]
        for p in probes:
            assert p["duration_s"] >= m["duration_s"] and p["requests"] >= 6  # SMOKE: at least 6 requests per rate
            assert 0 <= p["attainment"] <= 1 and p["finished"] <= p["requests"]
            if mode == "disaggregated":
                assert p["handoffs"] <= p["requests"] and (p["finished"] < p["requests"] or p["handoffs"] == p["requests"])
        passing = [p["rate_rps"] for p in probes if p["attainment"] >= m["target"]]
        failing = [p["rate_rps"] for p in probes if p["attainment"] < m["target"]]
        # the goodput is the highest measured rate that met the target; every failing rate lies above it
        assert m["goodput_rps"][mode] == max(passing, default=0.0)
        assert m["lowest_failing_rps"][mode] == (min(failing) if failing else None)
        assert all(f > m["goodput_rps"][mode] for f in failing)
        assert m["capped"][mode] == (not failing)
        assert f"{len(probes)} rate" in m["statements"][mode] and "requests" in m["statements"][mode]


def test_chapter_9_compares_the_modes_on_the_same_requests(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    assert m["same_arrivals"] is True and m["tokens_agree"] is True
    assert m["workers"] == {"colocated": [1, 1], "disaggregated": [1, 1]}  # two one-thread workers each
    common = {p["rate_rps"] for p in m["probes"]["colocated"]} & {p["rate_rps"] for p in m["probes"]["disaggregated"]}
    assert m["common_rate"] == max(common)
    requests = next(p["requests"] for p in m["probes"]["colocated"] if p["rate_rps"] == m["common_rate"])
    inter = m["interference"]
    for mode in ("colocated", "disaggregated"):
        probe = next(p for p in m["probes"][mode] if p["rate_rps"] == m["common_rate"])
        # a request is prefilled once at most, and every finished one was; one whose prefill the horizon cut
        # off was not (at load 10 the disaggregated pair once left one of 11 unprefilled)
        assert probe["finished"] <= inter[mode]["prefills"] <= probe["requests"] == requests, (mode, probe, inter[mode])
    assert inter["disaggregated"]["prefills_interrupting"] == 0 and inter["disaggregated"]["stall_seq_s"] == 0
    assert 0 <= inter["colocated"]["prefills_interrupting"] <= requests


def test_chapter_9_search_demo_and_panel(executed_notebook):
    nb, m, _ = executed_notebook(CHAPTER)
    assert (m["demo_goodput"], m["demo_failing"]) == (13.5, 14.0)  # the synthetic knee at 13.7 req/s
    assert m["panel_runs"] == 1 and m["panel_mode"] == "disaggregated" and m["panel_requests"] >= 6
    assert len(widget_views(nb)) >= 7  # scatter, throughput and latency, attainment, search path, timelines, gaps, panel
