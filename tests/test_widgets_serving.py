"""Chapter 9's panel and charts: set the controls, call the methods, check results and chart specs."""

import json
from pathlib import Path

import pytest

from goodputlab.charts import serving as C
from goodputlab.errors import ConfigError
from goodputlab.serving import SLO, RequestRecord, measure_records, search_goodput
from goodputlab.widgets.serving import ServingPanel

from conftest import chart_rows


def synthetic(mode, rate, ttft_s, gap_s, n=20, out=8, mix="chat"):
    """A measurement whose requests all felt the same: TTFT ``ttft_s``, tokens every ``gap_s``."""
    records = [RequestRecord(i, 0.1 * i, 40, out, tuple(0.1 * i + ttft_s + k * gap_s for k in range(out)), worker="w")
               for i in range(n)]
    spans = [("prefill", 0.0, 0.02, 40, 2), ("decode", 0.02, 0.025, 3, 0), ("handoff", 0.025, 0.026, 40, 3)]
    return measure_records(records, SLO(300, 30), rate, 2.0, 5.0, mode, mix=mix, traces={"w": spans})


HISTORY = [
    synthetic("colocated", 4, 0.05, 0.010), synthetic("colocated", 8, 0.10, 0.025), synthetic("colocated", 12, 0.40, 0.040),
    synthetic("disaggregated", 4, 0.06, 0.008), synthetic("disaggregated", 8, 0.20, 0.012), synthetic("disaggregated", 12, 0.50, 0.015),
    synthetic("colocated", 6, 0.01, 0.001, mix="long-output"),
]


def test_sliders_rescore_without_serving():
    p = ServingPanel(model="tiny", history=HISTORY, ttft_ms=300, tpot_ms=30)
    assert p.goodput_among_measured() == {"colocated": 8, "disaggregated": 8}
    p.tpot_ms.value = 15  # the observer redraws; colocated at 8 req/s now streams too slowly
    assert p.goodput_among_measured() == {"colocated": 4, "disaggregated": 8}
    rows = chart_rows(p.curve.chart)
    at8 = {r["mode"]: r["attainment"] for r in rows if r.get("rate_rps") == 8}
    assert at8 == {"colocated": 0.0, "disaggregated": 1.0}
    assert any(r.get("label") == "goodput 8 req/s" for r in rows)  # the disaggregated goodput marker
    assert "serving_mode" in p.curve.chart.to_json()  # the named legend selection
    p.ttft_ms.value = 150  # TTFT 200 ms at 8 req/s disaggregated now misses
    assert p.goodput_among_measured() == {"colocated": 4, "disaggregated": 4}
    p.mix.value = "long-output"  # only the measurements of the chosen mix
    assert p.goodput_among_measured() == {"colocated": 6}
    assert "prompt 16-48" in p.mix_line.value


def test_looser_slo_than_served_is_flagged_as_a_lower_bound():
    p = ServingPanel(model="tiny", history=HISTORY, ttft_ms=300, tpot_ms=30)
    assert "highest measured rate" in p.status.value
    p.ttft_ms.value, p.tpot_ms.value = 2000, 200  # these measurements stopped at 5 s: too soon for such slow requests
    assert "lower bounds" in p.status.value


def test_a_bad_fixed_setting_fails_at_construction():
    with pytest.raises(ConfigError, match="model"):
        ServingPanel(model="huge")
    with pytest.raises(ConfigError, match="target"):
        ServingPanel(model="tiny", target=0)


def test_run_serves_for_real_and_redraws(tmp_path):
    p = ServingPanel(model="tiny", duration_s=0.4, ttft_ms=2000, tpot_ms=200, rate=30, mode="disaggregated")
    try:
        p.mix.value = "chat"
        m = p.run_once()
        assert m.mode == "disaggregated" and m.rate_rps == 30 and m.requests >= 10 and m.attainment == 1.0
        assert p.history == [m] and p.last is m and not p.button.disabled
        assert "100%" in p.headline.value and "disaggregated, 30 req/s" in p.headline.value
        assert {r["mode"] for r in chart_rows(p.curve.chart) if "attainment" in r} == {"disaggregated"}
        assert len([r for r in chart_rows(p.scatter.chart) if "ttft_ms" in r]) == m.finished
        kinds = {r["kind"] for r in chart_rows(p.timeline.chart) if "kind" in r}
        assert kinds and kinds <= {"prefill", "decode", "handoff"}
        pids = p.server("disaggregated").pids
    finally:
        p.close()
    assert not any(Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2] for pid in pids)
    assert p._servers == {}


def test_charts_of_the_chapter():
    slo = SLO(300, 30)
    rows = C.rate_rows(HISTORY[:6], slo)
    assert [r["rate_rps"] for r in rows] == [4, 8, 12, 4, 8, 12] and rows[0]["mode"] == "colocated"
    assert rows[1]["ttft_p90_ms"] == pytest.approx(100) and rows[1]["tpot_p90_ms"] == pytest.approx(25)
    assert rows[0]["arrived_rps"] == 10  # 20 requests in 2 s of arrivals
    assert C.latency_vs_rate(rows, slo).to_dict()["hconcat"]
    served = [r["throughput_rps"] for r in chart_rows(C.throughput_vs_rate(rows)) if "throughput_rps" in r]
    assert served == [r["throughput_rps"] for r in rows] and all(0 < t <= 10 for t in served)  # 20 requests in 2+ s
    scatter = C.request_scatter(HISTORY[1])
    points = [r for r in chart_rows(scatter) if "ttft_ms" in r]
    assert len(points) == 20 and {r["meets"] for r in points} == {"meets both"}
    gaps = C.gap_rows({"colocated": HISTORY[2], "disaggregated": HISTORY[5]})
    by = {(r["label"], r["bin"]): r["gaps"] for r in gaps}
    assert by[("colocated", "20-50 ms")] == 20 * 7 and by[("disaggregated", "10-20 ms")] == 20 * 7
    assert C.token_gaps({"colocated": HISTORY[2]}).to_dict()["mark"]["type"] == "bar"
    timeline = chart_rows(C.worker_timeline(HISTORY[0], 0.0, 0.0255))
    assert [r["kind"] for r in timeline] == ["prefill", "decode", "handoff"] and timeline[-1]["end"] == 0.0255
    search = search_goodput(lambda r: synthetic("colocated", r, 0.05 if r <= 9 else 1.0, 0.01), start_rps=4, rel_tol=0.2)
    path = chart_rows(C.search_path({"colocated": search}))
    assert [r["rate_rps"] for r in path] == [p.rate_rps for p in search.probes]
    assert [r["meets_target"] for r in path] == [search.passed(p) for p in search.probes]
    json.dumps(C.attainment_vs_rate(rows, 0.9, {"colocated": 8.0}).to_dict())  # serialisable
