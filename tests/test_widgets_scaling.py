"""Chapter 7's panel: its sliders drive the simulator (the callback's logic is tested directly)."""

from __future__ import annotations

import pytest

from goodputlab import categories as C
from goodputlab.charts import scaling as charts
from goodputlab.widgets import ScalingPanel


@pytest.fixture
def panel():
    return ScalingPanel(duration_s=3600.0, rank_mtbf_s=5 * 365 * 86400.0, interval_s=600.0, save_s=10.0,
                        restore_s=60.0, restart_s=300.0, straggler_factor=1.5, straggler_share=0.001, trials=50)


def test_more_ranks_fail_more_and_wait_more(panel):
    results = panel.simulate_once()
    assert set(results) >= {1, 2, 16384}
    small, large = results[1], results[16384]
    assert large.interruptions_mean > small.interruptions_mean
    assert large.buckets[C.STRAGGLER_WAIT] > 10 * small.buckets[C.STRAGGLER_WAIT]
    assert large.goodput_mean < small.goodput_mean
    assert "goodput" in panel.headline.value and "job MTBF" in panel.facts.value


def test_the_sliders_change_the_simulated_job(panel):
    panel.ranks.value = 1024
    base = panel.simulate_once()[1024].goodput_mean
    panel.straggler_factor.value = 1.0  # no straggler
    assert panel.simulate_once()[1024].buckets[C.STRAGGLER_WAIT] == 0.0
    panel.straggler_factor.value = 3.0
    assert panel.simulate_once()[1024].goodput_mean < base
    panel.rank_mtbf_s.value = panel.rank_mtbf_s.value / 100  # a hundred times less reliable
    assert panel.simulate_once()[1024].interruptions_mean > 10 * (1024 * 3600.0 / (5 * 365 * 86400.0))
    assert panel.state()["ranks"] == 1024
    spec = panel.sweep_chart.chart.to_dict()
    # the legend lists the categories some job size holds, in the ledger's order (no degraded: no replica groups)
    held = {c for r in panel.results.values() for c in C.CATEGORIES if r.buckets[c] > 0}
    assert spec["encoding"]["color"]["scale"]["domain"] == [c for c in C.CATEGORIES if c in held]
    assert C.DEGRADED not in held


def test_the_sweep_rows_close():
    results = ScalingPanel(duration_s=100.0, rank_mtbf_s=400.0, interval_s=5.0, save_s=0.5, restore_s=1.0,
                           restart_s=2.0, trials=20).results
    rows = charts.sweep_rows(results)
    for n in results:
        assert sum(r["share"] for r in rows if r["ranks"] == n) == pytest.approx(1.0)
