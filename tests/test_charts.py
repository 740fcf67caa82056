"""Charts are built from the ledger, keep the category colours, and render offline."""

from collections import defaultdict

import pytest

import goodputlab as gl

from goodputlab import categories as C
from goodputlab import charts
from goodputlab.measure.ledger import Ledger, Segment, build_ledger

from conftest import chart_rows
from test_ledger import ONE_FAILURE, _tiny_steps_log


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
    # the legend lists the categories the run holds, in the ledger's order and colours, and only those
    held = [c for c in C.CATEGORIES if ledger.buckets[c] > 0]
    assert spec["layer"][0]["encoding"]["color"]["scale"] == {"domain": held, "range": [C.COLORS[c] for c in held]}
    assert C.DEGRADED not in held and C.STRAGGLER_WAIT not in held


def test_breakdowns_legend_lists_the_categories_present_and_only_those():
    ledger = build_ledger(ONE_FAILURE)
    summary = {"buckets": ledger.buckets, "wall_s": ledger.wall_s}
    held = [c for c in C.CATEGORIES if ledger.buckets[c] > 0]
    for chart in (charts.breakdown(summary), charts.theory.breakdown_side_by_side(charts.theory.summary_rows(summary))):
        spec = chart.to_dict()
        assert spec["encoding"]["color"]["scale"]["domain"] == held
        assert {r["category"] for r in chart_rows(chart)} == set(held)


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
    # bins of up to a pixel (one closes before the next 9 ms compute would take it past 0.1 s), two categories
    # each: about 1,200 marks, not 12,000 segments
    assert len(bars) < 1300
    assert sum(r["seconds"] for r in bars) == pytest.approx(t, rel=1e-3)
    # each bin drawn as its categories side by side, each as long as its time in the bin: the 9 ms compute
    # and the 1 ms data wait both keep their share (merging into the segment before, the whole chain took
    # the first data wait's colour; a bin drawn as its largest category hid the data wait)
    drawn = defaultdict(float)
    for r in bars:
        drawn[r["category"]] += r["seconds"]
    assert drawn[C.PRODUCTIVE] == pytest.approx(0.9 * t, rel=1e-3)
    assert drawn[C.DATA_WAIT] == pytest.approx(0.1 * t, rel=1e-3)


def test_a_recordings_long_run_of_tiny_steps_is_drawn_in_the_colours_of_its_steps(tmp_path):
    """The chart merges a recording's timeline (already merged at wall / 4000) again at one pixel,
    by the same rule (test_ledger.py: test_a_long_run_of_tiny_steps_is_drawn_in_the_colours_of_its_steps)."""
    _tiny_steps_log(tmp_path / "run")
    run = gl.load_run(tmp_path / "run")
    booked, wall = run.summary["buckets"], run.summary["wall_s"]
    bars = [r for r in chart_rows(run.timeline_chart()) if "category" in r]
    # one-pixel bins of at most three categories (data wait, compute, bookkeeping) a strip, not 24,000 phases
    assert {r["strip"] for r in bars} == {"attempt 0", "attempt 1"} and len(bars) <= 3 * 680 * 2 + 20
    drawn = defaultdict(float)
    for r in bars:
        drawn[r["category"]] += r["seconds"]
    for cat in C.CATEGORIES:  # every category drawn as long as it is booked (rows rounded to 0.1 ms)
        assert drawn[cat] == pytest.approx(booked[cat], abs=len(bars) * 1e-4 + 1e-9), cat


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
