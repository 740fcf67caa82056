"""The renewal model of periodic checkpointing: Daly's closed form, the async lag, Weibull failures, the simulator."""

import math

import pytest

from goodputlab.errors import ConfigError
from goodputlab.theory import SimConfig, daly_goodput, optimal_interval_numeric, renewal, simulate

M = 86400 / 8.6  # the worked example's MTBF, seconds


@pytest.mark.parametrize("tau,delta,restart", [(1800, 0, 1800), (600, 60, 600), (7200, 0, 0), (1.0, 0.01, 5.0)])
def test_poisson_without_lag_is_dalys_model(tau, delta, restart):
    assert renewal.periodic_goodput(tau, delta, restart, M) == pytest.approx(daly_goodput(tau, delta, restart, M), rel=1e-12)


def test_the_lag_to_durable_costs_a_factor_exp_minus_l_over_m():
    tau, delta, r, lag = 600.0, 5.0, 600.0, 300.0
    with_lag = renewal.periodic_goodput(tau, delta, r, M, durable_lag_s=lag)
    assert with_lag == pytest.approx(daly_goodput(tau, delta, r, M) * math.exp(-lag / M), rel=1e-12)
    # a lag longer than the interval also makes every later save wait for the previous persist
    long = renewal.periodic_goodput(tau, delta, r, M, durable_lag_s=900.0)
    c1, c = tau + delta, tau + delta + 300.0
    assert long == pytest.approx(tau * math.exp(-(r + c1 + 900.0) / M) / (M * -math.expm1(-c / M)), rel=1e-12)
    # first order: half a cycle plus, with probability L/c, one interval more
    assert renewal.expected_loss_per_failure(600.0, M, durable_lag_s=60.0) == pytest.approx(300.0 + 60.0)


def test_weibull_shape_one_is_exponential_and_the_series_matches_the_closed_form():
    assert renewal.weibull_scale(M, 1.0) == pytest.approx(M)
    assert renewal.weibull_survival(M, M, 1.0) == pytest.approx(math.exp(-1.0))
    # the series path (shape just off 1) lands on the geometric closed form
    g = renewal.periodic_goodput(1060.0, 60.0, 600.0, M, durable_lag_s=30.0)
    assert renewal.periodic_goodput(1060.0, 60.0, 600.0, M, durable_lag_s=30.0, shape=1.0 + 1e-9) == pytest.approx(g, rel=1e-6)
    # the mean of the Weibull law is M whatever the shape: scale * Gamma(1 + 1/k)
    for k in (0.5, 0.7, 2.0):
        assert renewal.weibull_scale(M, k) * math.gamma(1 + 1 / k) == pytest.approx(M)
        young, old = renewal.weibull_hazard(10.0, M, k), renewal.weibull_hazard(1000.0, M, k)
        assert (young > old) if k < 1 else (young < old)  # shape < 1: failures come soon after a restart


def test_optimum_matches_the_numeric_daly_optimum():
    assert renewal.optimal_interval(60.0, 600.0, M) == pytest.approx(optimal_interval_numeric(60.0, 600.0, M), rel=1e-4)


@pytest.mark.parametrize("shape", [1.0, 0.6, 2.0])
@pytest.mark.parametrize("tau,blocking,save,restart", [(1060, 60, 60, 600), (600, 5, 300, 600), (600, 5, 900, 300)])
def test_simulator_converges_to_the_renewal_model(shape, tau, blocking, save, restart):
    # sync (blocking == save) or async (durable `save` seconds after the snapshot); Weibull gaps with mean M
    config = SimConfig(devices=1, device_mtbf_s=M, duration_s=2e7, interval_s=tau, save_s=save, save_blocking_s=blocking,
                       restart_s=restart, failure_shape=shape, trials=200, seed=3)
    sim = simulate(config)
    lag = save if blocking < save else 0.0
    model = renewal.periodic_goodput(tau, blocking, restart, M, durable_lag_s=lag, shape=shape)
    assert sim.goodput_mean == pytest.approx(model, abs=max(0.002, 4 * sim.goodput_stderr))


def test_clustered_failures_waste_less_for_the_same_mean_and_move_the_optimum_out():
    # same mean gap: bursts of failures soon after restarts cost less than evenly spread ones
    poisson = renewal.periodic_goodput(1060.0, 60.0, 600.0, M)
    bursty = renewal.periodic_goodput(1060.0, 60.0, 600.0, M, shape=0.5)
    assert bursty > poisson + 0.02
    assert renewal.optimal_interval(60.0, 600.0, M, shape=0.5) > 1.15 * renewal.optimal_interval(60.0, 600.0, M)


def test_bad_shape_is_refused():
    with pytest.raises(ConfigError, match="shape"):
        renewal.periodic_goodput(600.0, 5.0, 60.0, M, shape=0.0)
    with pytest.raises(ConfigError, match="failure_shape"):
        SimConfig(devices=1, device_mtbf_s=M, duration_s=1e6, interval_s=600.0, failure_shape=-1.0)
