"""SLO accounting, the goodput search and the workload generator: pure code, known answers."""

import math

import numpy as np
import pytest

from goodputlab.errors import ConfigError
from goodputlab.serving import (
    MIXES, SLO, GoodputSearch, LengthClass, LengthMix, RequestRecord, attainment, measure_records, parse_mix,
    percentile, poisson_workload, search_goodput,
)
from goodputlab.serving.slo import drain_s


def rec(i, arrival, first, gap, n, done=None):
    """A request arriving at ``arrival`` whose first token comes at ``first`` and then every ``gap`` s."""
    times = tuple(first + k * gap for k in range(n if done is None else done))
    return RequestRecord(i, arrival, 10, n, times)


# --- per-request latencies ------------------------------------------------------------------------

def test_ttft_and_tpot_of_a_request():
    r = rec(0, 1.0, 1.25, 0.02, 11)
    assert r.finished
    assert r.ttft_s == pytest.approx(0.25)
    assert r.tpot_s == pytest.approx(0.02)  # 10 gaps of 20 ms after the first token
    assert r.latency_s == pytest.approx(0.25 + 0.2)
    assert r.meets(SLO(250, 20)) and not r.meets(SLO(249, 20)) and not r.meets(SLO(250, 19.9))


def test_tpot_averages_the_gaps_so_one_stall_is_spread():
    times = (0.1, 0.11, 0.12, 0.52, 0.53)  # one 400 ms stall between tokens 2 and 3
    r = RequestRecord(0, 0.0, 5, 5, times)
    assert r.tpot_s == pytest.approx((0.53 - 0.1) / 4)


def test_one_token_answer_has_zero_tpot():
    r = RequestRecord(0, 0.0, 5, 1, (0.05,))
    assert r.finished and r.tpot_s == 0.0 and r.meets(SLO(50, 1))


def test_unfinished_requests_meet_nothing_and_count_as_infinite():
    never = RequestRecord(0, 0.0, 5, 4, ())
    partial = rec(1, 0.0, 0.01, 0.01, 4, done=2)
    assert not never.finished and math.isinf(never.ttft_s) and math.isinf(never.tpot_s)
    assert partial.ttft_s == pytest.approx(0.01) and math.isinf(partial.tpot_s) and math.isinf(partial.latency_s)
    assert not partial.meets(SLO(1e6, 1e6))


def test_record_round_trips_through_a_dict():
    r = RequestRecord(3, 0.5, 7, 3, (0.6, 0.7, 0.8), (1, 2, 3), "decode")
    assert RequestRecord.from_dict(r.to_dict()) == r


# --- attainment and percentiles -------------------------------------------------------------------

def test_attainment_counts_requests_meeting_both():
    slo = SLO(100, 10)
    records = [
        rec(0, 0.0, 0.05, 0.005, 10),  # meets both
        rec(1, 0.0, 0.15, 0.005, 10),  # TTFT too long
        rec(2, 0.0, 0.05, 0.02, 10),  # TPOT too long
        rec(3, 0.0, 0.05, 0.005, 10, done=5),  # unfinished
    ]
    assert attainment(records, slo) == 0.25
    m = measure_records(records, slo, rate_rps=4, duration_s=1, horizon_s=3, mode="colocated")
    assert (m.requests, m.finished, m.attainment, m.ttft_met, m.tpot_met) == (4, 3, 0.25, 0.75, 0.5)
    assert math.isnan(attainment([], slo))


def test_nearest_rank_percentiles():
    values = list(range(1, 11))  # 1..10
    assert percentile(values, 50) == 5 and percentile(values, 90) == 9 and percentile(values, 91) == 10
    assert percentile(values, 100) == 10 and percentile([7.0], 1) == 7.0
    assert percentile([1, 2, math.inf], 90) == math.inf  # an unfinished request stays infinite, not NaN
    assert math.isnan(percentile([], 50))
    with pytest.raises(ConfigError):
        percentile(values, 0)


def test_summary_is_json_safe_and_uses_milliseconds():
    import json

    records = [rec(i, 0.0, 0.01 * (i + 1), 0.002, 5) for i in range(9)] + [RequestRecord(9, 0.0, 5, 5, ())]
    m = measure_records(records, SLO(100, 5), 10, 1, 2, "disaggregated")
    s = json.loads(json.dumps(m.summary(), allow_nan=False))
    assert s["requests"] == 10 and s["finished"] == 9 and s["attainment"] == pytest.approx(0.9)
    assert s["ttft_p50_ms"] == pytest.approx(50) and s["ttft_p90_ms"] == pytest.approx(90)
    assert s["ttft_p99_ms"] is None  # the unfinished request is the 99th percentile
    assert s["tpot_p90_ms"] == pytest.approx(2)


def test_rescore_judges_the_same_requests_by_other_objectives():
    records = [rec(i, 0.0, 0.02 * (i + 1), 0.004, 8) for i in range(10)]
    m = measure_records(records, SLO(200, 5), 5, 2, 2 + drain_s(SLO(200, 5), 8), "colocated")
    assert m.attainment == 1.0 and m.exact_for
    tight = m.rescore(SLO(100, 5))
    assert tight.attainment == 0.5 and tight.records is m.records
    assert not m.rescore(SLO(200, 3)).attainment
    assert not m.rescore(SLO(5000, 500)).exact_for  # the run stopped before such slow requests would have finished


def test_drain_covers_the_latest_request_that_could_still_meet_the_slo():
    slo = SLO(200, 20)
    # the last arrival just before the window ends may take TTFT + 19 gaps of TPOT for 20 tokens
    assert drain_s(slo, 20, margin_s=0) == pytest.approx(0.2 + 19 * 0.02)


@pytest.mark.parametrize("ttft,tpot", [(0, 10), (-5, 10), (10, math.nan), (10, math.inf)])
def test_slo_rejects_bad_values(ttft, tpot):
    with pytest.raises(ConfigError) as e:
        SLO(ttft, tpot)
    assert e.value.field in ("ttft_ms", "tpot_ms")


# --- the goodput search ---------------------------------------------------------------------------

class Fake:
    """A measurement of a synthetic server: attainment is a known function of the rate."""

    def __init__(self, rate, attainment, duration=2.0):
        self.rate_rps, self.duration_s, self.attainment = rate, duration, attainment
        self.requests = max(1, int(rate * duration))


def step_curve(knee):
    return lambda r: Fake(r, 0.97 if r <= knee else 0.4)


@pytest.mark.parametrize("knee", [0.9, 5.0, 13.7, 47.0, 150.0])
def test_search_finds_a_known_goodput(knee):
    seen = []
    result = search_goodput(step_curve(knee), target=0.9, start_rps=4, rel_tol=0.05, max_probes=30, on_probe=seen.append)
    assert isinstance(result, GoodputSearch)
    assert result.goodput_rps <= knee < result.lowest_failing_rps
    assert (result.lowest_failing_rps - result.goodput_rps) / result.goodput_rps <= 0.05 + 1e-9
    assert list(result.probes) == seen  # every rate reported was measured, in order
    assert result.best.rate_rps == result.goodput_rps and result.best.attainment >= 0.9
    assert f"{result.goodput_rps:.3g}" in result.statement() and len(result.table().splitlines()) == len(seen) + 1


def test_search_on_a_smooth_curve():
    # attainment falls linearly from 1 at 10 req/s to 0 at 30 req/s: 0.9 is reached at exactly 12
    curve = lambda r: Fake(r, min(1.0, max(0.0, (30 - r) / 20)))
    result = search_goodput(curve, target=0.9, start_rps=1, rel_tol=0.02, max_probes=30)
    assert 12 * 0.98 <= result.goodput_rps <= 12 < result.lowest_failing_rps


def test_search_brackets_upwards_then_bisects():
    result = search_goodput(step_curve(13.7), target=0.9, start_rps=4, rel_tol=0.1)
    rates = [p.rate_rps for p in result.probes]
    assert rates[:3] == [4, 8, 16]  # doubling until a miss
    assert all(8 < r < 16 for r in rates[3:])  # then only inside the bracket


def test_search_halves_when_the_start_misses():
    result = search_goodput(step_curve(1.1), target=0.9, start_rps=8, rel_tol=0.1)
    assert [p.rate_rps for p in result.probes][:4] == [8, 4, 2, 1]
    assert 1 <= result.goodput_rps <= 1.1


def test_search_reports_a_cap_and_a_floor():
    capped = search_goodput(step_curve(1e9), start_rps=4, max_rps=50)
    assert capped.capped and capped.goodput_rps == 50 and capped.lowest_failing_rps is None
    assert [p.rate_rps for p in capped.probes] == [4, 8, 16, 32, 50]
    assert "at least" in capped.statement()
    floored = search_goodput(step_curve(0.0), start_rps=4, min_rps=0.5)
    assert floored.floored and floored.goodput_rps == 0.0 and floored.best is None
    assert floored.probes[-1].rate_rps == 0.5 and "below" in floored.statement()


def test_search_respects_its_probe_budget():
    result = search_goodput(step_curve(13.7), start_rps=4, rel_tol=1e-6, max_probes=5)
    assert len(result.probes) == 5 and 8 <= result.goodput_rps < result.lowest_failing_rps <= 16


def test_search_on_a_noisy_curve_settles_on_a_crossing():
    # a dip below the target at 8 req/s although 10 would pass: the search takes the first crossing it brackets
    noisy = lambda r: Fake(r, 0.85 if r == 8 else (0.95 if r <= 12 else 0.3))
    result = search_goodput(noisy, start_rps=4, rel_tol=0.1)
    assert 4 <= result.goodput_rps < 8 == result.lowest_failing_rps
    assert all(p.rate_rps <= result.goodput_rps for p in result.probes if result.passed(p))


def test_search_counts_an_empty_measurement_as_a_miss_and_checks_its_input():
    result = search_goodput(lambda r: Fake(r, math.nan), start_rps=2, min_rps=1)
    assert result.floored
    with pytest.raises(ConfigError, match="target"):
        search_goodput(step_curve(5), target=1.5)
    with pytest.raises(ConfigError, match="start_rps"):
        search_goodput(step_curve(5), start_rps=500, max_rps=100)


# --- the workload ---------------------------------------------------------------------------------

def test_workload_is_seeded_and_poisson():
    a = poisson_workload(20, 30, "chat", seed=3)
    b = poisson_workload(20, 30, "chat", seed=3)
    assert [r.arrival_s for r in a.requests] == [r.arrival_s for r in b.requests]
    assert all(np.array_equal(x.prompt, y.prompt) for x, y in zip(a.requests, b.requests))
    assert [r.arrival_s for r in a.requests] != [r.arrival_s for r in poisson_workload(20, 30, "chat", seed=4).requests]
    arrivals = np.array([r.arrival_s for r in a.requests])
    assert np.all(np.diff(arrivals) > 0) and arrivals[-1] < 30
    assert abs(len(a) - 600) < 4 * math.sqrt(600)  # Poisson count: mean 600, sd 24.5
    gaps = np.diff(arrivals)
    assert gaps.mean() == pytest.approx(1 / 20, rel=0.1) and gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)


def test_workload_at_a_higher_rate_is_the_same_requests_arriving_faster():
    slow = poisson_workload(5, 10, "mixed", seed=1)
    fast = poisson_workload(10, 10, "mixed", seed=1)
    assert len(fast) > len(slow)
    for s, f in zip(slow.requests, fast.requests):
        assert f.arrival_s == pytest.approx(s.arrival_s / 2)
        assert (f.output_len, f.prompt_len) == (s.output_len, s.prompt_len) and np.array_equal(f.prompt, s.prompt)


def test_lengths_follow_the_mix():
    w = poisson_workload(50, 20, "mixed", seed=0)
    classes = MIXES["mixed"].classes
    long_prompt = [r for r in w.requests if r.prompt_len > 128]
    assert 0.2 < len(long_prompt) / len(w) < 0.4  # 30% of the mix
    for r in w.requests:
        assert any(c.prompt[0] <= r.prompt_len <= c.prompt[1] and c.output[0] <= r.output_len <= c.output[1] for c in classes)
        assert r.prompt.dtype == np.int64 and r.prompt.min() >= 0 and r.prompt.max() < 64
    assert {r.output_len for r in w.requests} >= {8, 64}  # both ends of the ranges are drawn
    assert MIXES["mixed"].max_tokens == 256 and MIXES["chat"].mean_lengths() == (80.0, 40.0)


def test_a_short_window_at_a_low_rate_stretches_to_min_requests():
    w = poisson_workload(0.5, 1.0, "chat", seed=0, min_requests=10)
    assert len(w) == 10 and w.duration_s > 1.0 and w.requests[-1].arrival_s < w.duration_s
    assert len(poisson_workload(50, 1.0, "chat", seed=0, min_requests=10).requests) > 10  # no stretch needed
    assert poisson_workload(50, 1.0, "chat", seed=0, min_requests=10).duration_s == 1.0


def test_mixes_parse_by_name_or_ranges():
    assert parse_mix("long-prompt") is MIXES["long-prompt"]
    custom = parse_mix("64-128/16-32")
    assert custom.classes == (LengthClass(1.0, (64, 128), (16, 32)),) and custom.max_tokens == 160
    for bad in ("huge", "64-32/1-2", "0-4/1-2", "1-2/3"):
        with pytest.raises(ConfigError) as e:
            parse_mix(bad)
        assert e.value.field == "mix"
    with pytest.raises(ConfigError):
        LengthMix("empty", ())


@pytest.mark.parametrize("kwargs,field", [(dict(rate_rps=0), "rate"), (dict(rate_rps=math.inf), "rate"),
                                          (dict(duration_s=-1), "duration"), (dict(seed=-2), "seed")])
def test_workload_rejects_bad_values(kwargs, field):
    args = dict(rate_rps=5.0, duration_s=2.0, mix="chat", seed=0) | kwargs
    with pytest.raises(ConfigError) as e:
        poisson_workload(**args)
    assert e.value.field == field


def test_interference_from_traces_and_token_gaps():
    from goodputlab.serving.analysis import interference, token_gaps_ms

    records = [RequestRecord(0, 0.0, 10, 4, (0.010, 0.015, 0.045, 0.050))]  # gaps 5, 30, 5 ms
    spans = {"w": [("prefill", 0.000, 0.010, 10, 0), ("decode", 0.010, 0.015, 1, 0),
                   ("prefill", 0.015, 0.040, 50, 3), ("decode", 0.040, 0.045, 4, 0)]}
    m = measure_records(records, SLO(100, 10), 1, 1, 2, "colocated", traces=spans)
    assert token_gaps_ms(m) == pytest.approx([5, 30, 5])
    i = interference(m)
    assert (i["decode_steps"], i["prefills"], i["prefills_interrupting"]) == (2, 2, 1)
    assert i["stall_seq_s"] == pytest.approx(3 * 0.025)  # three sequences waited through a 25 ms prefill
    assert i["decode_step_ms_median"] == pytest.approx(5) and i["prefill_ms_median"] == pytest.approx(17.5)
    assert i["gaps_over_tpot"] == pytest.approx(1 / 3) and i["gap_p99_ms"] == pytest.approx(30)
