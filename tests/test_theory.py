"""Theory: Young, Daly, the first-order and exact goodput models, public figures."""

import math

import pytest

from goodputlab import theory
from goodputlab.cli import theory as cli_theory
from goodputlab.errors import ConfigError

HOUR = 3600.0
DAY = 86400.0


# --- optimal intervals -------------------------------------------------------


def test_young_hand_computed():
    # sqrt(2 * 300 s * 86400 s) = sqrt(51,840,000) = 7200 s exactly
    assert theory.young_interval(300, DAY) == pytest.approx(7200.0, rel=1e-12)
    # sqrt(2 * 60 * 10,000) = sqrt(1,200,000) = 1095.445 s
    assert theory.young_interval(60, 10_000) == pytest.approx(1095.4451150103323, rel=1e-12)
    assert theory.young_interval(0, 10_000) == 0.0


def test_daly_hand_computed():
    # delta = 300 s, M = 86400 s: delta/(2M) = 300/172800 = 1/576, its sqrt = 1/24.
    # sqrt(2 delta M) = 7200; bracket = 1 + (1/3)(1/24) + (1/9)(1/576) = 5257/5184.
    # 7200 * 5257/5184 - 300 = 7301.3889 - 300 = 7001.3889 s
    assert theory.daly_interval(300, DAY) == pytest.approx(7200 * 5257 / 5184 - 300, rel=1e-12)
    assert theory.daly_interval(300, DAY) == pytest.approx(7001.3889, abs=1e-3)


@pytest.mark.parametrize(
    "mtbf_min, published_min",
    # Daly (2006), figures 3-5: delta = 5 min, R = 10 min, "the new model predicts tau_opt = ..."
    [(24 * 60, 117), (6 * 60, 57), (15, 9.1)],
)
def test_daly_matches_published_examples(mtbf_min, published_min):
    tau_min = theory.daly_interval(5 * 60, mtbf_min * 60) / 60
    assert tau_min == pytest.approx(published_min, abs=0.5 if published_min > 10 else 0.05)


def test_daly_large_save_regime_is_mtbf():
    # delta >= 2M: the optimum is M itself
    assert theory.daly_interval(200.0, 100.0) == 100.0
    assert theory.daly_interval(2 * 100.0, 100.0) == 100.0
    assert theory.daly_interval(5000.0, 100.0) == 100.0


def test_daly_tends_to_young_for_cheap_saves():
    mtbf = DAY
    saves = (1e-6 * mtbf, 1e-4 * mtbf, 1e-2 * mtbf)
    ratios = [theory.daly_interval(d, mtbf) / theory.young_interval(d, mtbf) for d in saves]
    assert abs(ratios[0] - 1) < 2e-3
    # and the gap closes monotonically as delta/M shrinks
    assert abs(ratios[0] - 1) < abs(ratios[1] - 1) < abs(ratios[2] - 1)


# --- goodput models -----------------------------------------------------------


def test_worked_example_first_order():
    # GUIDE: 8.6 interruptions/day, free saves and restarts.
    mtbf = theory.WORKED_EXAMPLE_MTBF_S
    assert mtbf == pytest.approx(DAY / 8.6)
    # 2 h: 1 - 1 h / 2.79 h = 0.642 ; 30 min: 1 - 0.25 h / 2.79 h = 0.910
    assert theory.expected_goodput(2 * HOUR, 0, 0, mtbf) == pytest.approx(0.64, abs=0.005)
    assert theory.expected_goodput(0.5 * HOUR, 0, 0, mtbf) == pytest.approx(0.91, abs=0.005)
    # hours lost per day, as the GUIDE states them: ~8.6 h and ~2.15 h
    assert (1 - theory.expected_goodput(2 * HOUR, 0, 0, mtbf)) * 24 == pytest.approx(8.6, abs=0.01)
    assert (1 - theory.expected_goodput(0.5 * HOUR, 0, 0, mtbf)) * 24 == pytest.approx(2.15, abs=0.01)


def test_worked_example_gap_to_exact_model():
    # The first-order model is pessimistic at tau/M = 0.72: exact is 0.684, not 0.642.
    mtbf = theory.WORKED_EXAMPLE_MTBF_S
    x = 2 * HOUR / mtbf
    assert theory.exact_goodput_free(2 * HOUR, mtbf) == pytest.approx(x / math.expm1(x), rel=1e-12)
    assert theory.exact_goodput_free(2 * HOUR, mtbf) == pytest.approx(0.684, abs=0.001)
    assert theory.exact_goodput_free(0.5 * HOUR, mtbf) == pytest.approx(0.913, abs=0.001)


def test_expected_goodput_terms_and_data_stall():
    # waste = 60/600 + (300 + 120)/6000 = 0.1 + 0.07 = 0.17
    assert theory.expected_goodput(600, 60, 120, 6000) == pytest.approx(0.83, rel=1e-12)
    assert theory.expected_goodput(600, 60, 120, 6000, data_stall_fraction=0.1) == pytest.approx(0.9 * 0.83, rel=1e-12)
    # clamped at 0 where the straight line would go negative
    assert theory.expected_goodput(10 * HOUR, 0, 0, HOUR) == 0.0


def test_exact_free_known_value():
    # tau = M: 1 / (e - 1)
    assert theory.exact_goodput_free(HOUR, HOUR) == pytest.approx(1 / (math.e - 1), rel=1e-12)


def test_daly_wall_time_hand_computed():
    # work 1000 s, tau 100, delta 10, R 0, M 1000:
    # 1000 * e^0 * (e^0.11 - 1) * 1000/100 = 1000 * 0.1162781 * 10 = 1162.781 s
    assert theory.daly_expected_wall_time(1000, 100, 10, 0, 1000) == pytest.approx(1162.7807, abs=1e-3)
    # R = 50 multiplies by e^(50/1000)
    with_restart = theory.daly_expected_wall_time(1000, 100, 10, 50, 1000)
    assert with_restart == pytest.approx(1162.7807 * math.exp(0.05), abs=1e-3)
    assert theory.daly_goodput(100, 10, 0, 1000) == pytest.approx(1000 / 1162.7807, rel=1e-6)


@pytest.mark.parametrize("tau, mtbf", [(60, 1e4), (1800, theory.WORKED_EXAMPLE_MTBF_S), (7200, 3600), (1e5, 10)])
def test_daly_goodput_without_costs_is_exact_free(tau, mtbf):
    assert theory.daly_goodput(tau, 0, 0, mtbf) == pytest.approx(theory.exact_goodput_free(tau, mtbf), rel=1e-12)


def test_first_order_agrees_with_daly_when_everything_is_small():
    # tau, R << M and delta << tau: the two models agree to second order
    mtbf = 100 * HOUR
    first = theory.expected_goodput(1800, 10, 60, mtbf)
    full = theory.daly_goodput(1800, 10, 60, mtbf)
    assert first == pytest.approx(full, abs=1e-3)


def test_optimal_numeric_is_the_maximum():
    save, restart, mtbf = 120.0, 600.0, theory.WORKED_EXAMPLE_MTBF_S
    best = theory.optimal_interval_numeric(save, restart, mtbf)
    g = theory.daly_goodput(best, save, restart, mtbf)
    for step in (1.001, 1.01, 1.1):
        assert theory.daly_goodput(best * step, save, restart, mtbf) < g
        assert theory.daly_goodput(best / step, save, restart, mtbf) < g
    # stationarity: (1 + delta/M - y) e^y = 1 with y = (tau + delta)/M
    y = (best + save) / mtbf
    assert (1 + save / mtbf - y) * math.exp(y) == pytest.approx(1.0, abs=1e-9)
    # near Daly's perturbation estimate (within 0.1% here, delta/M = 0.012)
    assert best == pytest.approx(theory.daly_interval(save, mtbf), rel=1e-3)


def test_optimal_numeric_edge_cases():
    # restart cost does not move the optimum of Daly's model
    a = theory.optimal_interval_numeric(60, 0, 1e4)
    b = theory.optimal_interval_numeric(60, 5000, 1e4)
    assert a == pytest.approx(b, rel=1e-9)
    # free saves: checkpoint continuously
    assert theory.optimal_interval_numeric(0, 100, 1e4) == 0.0
    # huge saves: optimum approaches (and never exceeds) M
    big = theory.optimal_interval_numeric(1e6, 0, 100)
    assert 0.99 * 100 < big <= 100


# --- clusters -----------------------------------------------------------------


def test_cluster_helpers():
    assert theory.cluster_mtbf(1000, 1e6) == 1e3
    # 1000 devices, M_dev = 1e6 h, 1000 h: n T / M = 1 expected failure, P(any) = 1 - 1/e
    assert theory.expected_failures(1000, 1e6 * HOUR, 1000 * HOUR) == pytest.approx(1.0)
    assert theory.p_any_failure(1000, 1e6 * HOUR, 1000 * HOUR) == pytest.approx(1 - math.exp(-1))
    assert theory.p_any_failure(1, 1e6, 0) == 0.0


def test_llama3_rate_gives_466():
    device_mtbf = theory.device_mtbf_for_count(
        theory.LLAMA3_GPUS, theory.LLAMA3_DURATION_S, theory.LLAMA3_INTERRUPTIONS
    )
    assert theory.expected_failures(theory.LLAMA3_GPUS, device_mtbf, theory.LLAMA3_DURATION_S) == pytest.approx(466)
    # about 5.2 years per GPU; job MTBF ~2.78 h, the worked example's 8.6 a day
    assert device_mtbf / (365 * DAY) == pytest.approx(5.2, abs=0.05)
    job_mtbf = theory.cluster_mtbf(theory.LLAMA3_GPUS, device_mtbf)
    assert DAY / job_mtbf == pytest.approx(8.6, abs=0.05)


# --- public figures -----------------------------------------------------------


def test_llama3_table():
    rows = theory.LLAMA3_INTERRUPTION_CAUSES
    assert len(rows) == 18
    assert sum(r["count"] for r in rows) == theory.LLAMA3_UNEXPECTED_INTERRUPTIONS == 419
    assert theory.LLAMA3_PLANNED_INTERRUPTIONS + 419 == theory.LLAMA3_INTERRUPTIONS == 466
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert set(rows[0]) == {"cause", "component", "count", "share"}
    assert rows[0]["cause"] == "Faulty GPU" and rows[0]["count"] == 148
    components = {"GPU", "Dependency", "Network", "Unplanned maintenance", "Host", "Unknown"}
    assert {r["component"] for r in rows} == components
    gpu = sum(r["count"] for r in rows if r["component"] == "GPU")
    assert gpu == 148 + 72 + 19 + 17 + 6 + 6 == 268
    assert sum(c for _, c in theory.llama3_cause_table()) == 466
    assert sum(c for _, c in theory.llama3_cause_table(include_planned=False)) == 419


def test_human_duration():
    assert theory.human_duration(4320) == "1h 12m"
    assert theory.human_duration(270) == "4m 30s"
    assert theory.human_duration(2 * DAY + 3 * HOUR) == "2d 3h"
    assert theory.human_duration(12.5) == "12.5s"


# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: theory.young_interval(-1, 100), "save_s"),
        (lambda: theory.young_interval(1, 0), "mtbf_s"),
        (lambda: theory.daly_interval(1, -5), "mtbf_s"),
        (lambda: theory.expected_goodput(0, 1, 1, 100), "interval_s"),
        (lambda: theory.expected_goodput(10, 1, -1, 100), "restart_s"),
        (lambda: theory.expected_goodput(10, 1, 1, 100, data_stall_fraction=1.0), "data_stall_fraction"),
        (lambda: theory.daly_goodput(10, float("nan"), 1, 100), "save_s"),
        (lambda: theory.daly_expected_wall_time(-1, 10, 1, 1, 100), "work_s"),
        (lambda: theory.exact_goodput_free(10, float("inf")), "mtbf_s"),
        (lambda: theory.optimal_interval_numeric(1, -1, 100), "restart_s"),
        (lambda: theory.cluster_mtbf(0, 100), "n_devices"),
        (lambda: theory.cluster_mtbf(2.5, 100), "n_devices"),
        (lambda: theory.cluster_mtbf(2, 0), "device_mtbf_s"),
        (lambda: theory.p_any_failure(2, 100, -1), "duration_s"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ConfigError) as info:
        call()
    assert info.value.field == field
    assert field in str(info.value)


# --- CLI: optimal ---------------------------------------------------------------


def test_cli_optimal_prints_all_three(capsys):
    assert cli_theory.main(["optimal", "--save-s", "300", "--mtbf-s", str(DAY), "--restart-s", "600"]) == 0
    out = capsys.readouterr().out
    assert "Young (1974)" in out and "Daly (2006)" in out and "numeric optimum" in out
    assert "7,200 s (2h 0m)" in out  # Young's interval, hand-computed above
    assert "7,001 s (1h 56m)" in out  # Daly's


def test_cli_optimal_bad_input_raises():
    with pytest.raises(ConfigError) as info:
        cli_theory.main(["optimal", "--save-s", "-3", "--mtbf-s", "100"])
    assert cli_theory.FLAGS[info.value.field] == "--save-s"
