"""Charts are built from the ledger, keep the category colours, and render offline."""

from collections import defaultdict

import pytest

from goodputlab import categories as C
from goodputlab import charts
from goodputlab.engine.ledger import Ledger, Segment, build_ledger

from conftest import chart_rows
from test_ledger import ONE_FAILURE


def test_timeline_shows_every_attempt_and_each_failure():
    ledger = build_ledger(ONE_FAILURE)
    chart = charts.timeline(ledger)
    rows = chart_rows(chart)
    bars = [r for r in rows if "category" in r]
    rules = [r for r in rows if "label" in r]
    assert {r["attempt"] for r in bars} == {"attempt 0", "attempt 1"}
    assert [r["t"] for r in rules] == [3.0]
    per_cat = defaultdict(float)
    for r in bars:
        per_cat[r["category"]] += r["seconds"]
    for cat in C.CATEGORIES:
        assert per_cat[cat] == pytest.approx(ledger.buckets[cat], abs=1e-3)
    spec = chart.to_dict()
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == list(C.CATEGORIES)


def test_long_runs_are_drawn_with_fewer_marks_but_the_same_span():
    segs = []
    t = 0.0
    for i in range(6000):  # 3000 steps of 1 ms data wait + 9 ms compute
        segs.append(Segment(t, t + 0.001, C.DATA_WAIT, 0, "data_wait", i))
        segs.append(Segment(t + 0.001, t + 0.010, C.PRODUCTIVE, 0, "compute", i))
        t += 0.010
    ledger = Ledger(segs, t, C.empty_buckets(), [], True)
    rows = chart_rows(charts.timeline(ledger, width=600))
    bars = [r for r in rows if "category" in r]
    assert len(bars) < 1000
    assert sum(r["seconds"] for r in bars) == pytest.approx(t, rel=1e-3)


def test_breakdown_shares_add_up_per_run():
    ledger = build_ledger(ONE_FAILURE)
    s = {"buckets": ledger.buckets, "wall_s": ledger.wall_s}
    rows = chart_rows(charts.breakdown({"a": s, "b": s}))
    for run in ("a", "b"):
        assert sum(r["share"] for r in rows if r["run"] == run) == pytest.approx(1.0)


def test_png_renders_offline(tmp_path):
    path = tmp_path / "timeline.png"
    charts.save_png(charts.timeline(build_ledger(ONE_FAILURE)), path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
