"""Detection, hot spares, failure domains and the timer policy: closed forms against simulation."""

import math

import numpy as np
import pytest

from goodputlab.errors import ConfigError
from goodputlab.theory import SimConfig, daly_goodput, recovery_at_scale as R, simulate

DAY = 86400.0


def test_detection_mixes_crashes_and_hangs():
    assert R.NCCL_DEFAULT_TIMEOUT_S == 600.0
    assert R.detection_s(0.2) == pytest.approx(0.2 * 600 + 0.8 * 10)  # 128 s
    assert R.detection_s(0.0, crash_detect_s=5.0) == 5.0
    assert R.recovery_s(90.0, 300.0, 60.0) == 450.0
    # detection is part of R: a 10-minute watchdog on every failure costs what it costs in Daly's model
    m = DAY / 8.6
    assert daly_goodput(600, 5, 300 + 600, m) < daly_goodput(600, 5, 300 + 10, m) - 0.05


def test_spare_hit_share_is_e_min_n_s_over_e_n():
    mu = 20.0
    rng = np.random.default_rng(0)
    n = rng.poisson(mu, 400_000)
    for s in (0, 5, 20, 40):
        assert R.spare_hit_share(s, mu) == pytest.approx(np.minimum(n, s).mean() / mu, abs=2e-3)
    assert R.spare_hit_share(1000, mu) == pytest.approx(1.0)


def test_simulator_hot_spares_match_the_pool_model():
    # restarts short against the MTBF, so failures during restarts are rare: restart time per run
    # = E[min(N, S)] spare swaps + the rest cold restarts
    mtbf, duration, spares = 5000.0, 200 * 5000.0, 120
    config = SimConfig(devices=1, device_mtbf_s=mtbf, duration_s=duration, interval_s=300.0, restart_s=50.0,
                       hot_spares=spares, spare_restart_s=5.0, trials=400, seed=1)
    sim = simulate(config)
    mu = config.expected_failures
    hit = R.spare_hit_share(spares, mu)
    expected = mu * (hit * 5.0 + (1 - hit) * 50.0)
    assert sim.buckets["restart"] == pytest.approx(expected, rel=0.02)


def test_spare_availability_in_the_steady_state():
    lam, repair = 8.6 / DAY, 3 * DAY  # ~26 machines away in repair on average
    assert R.spare_availability(0, lam, repair) == 0.0
    assert R.spare_availability(32, lam, repair) == pytest.approx(0.868, abs=0.001)
    assert R.spare_availability(40, lam, repair) == pytest.approx(0.994, abs=0.001)
    # M/G/infinity by simulation: failures at random, each machine away for a lognormal repair
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.exponential(1 / lam, 60_000))
    back = t + rng.lognormal(math.log(repair) - 0.125, 0.5, t.size)  # mean = repair
    away = np.searchsorted(np.sort(back), t, side="right")
    in_repair = np.arange(t.size) - away  # failed before t and not yet back
    assert np.mean(in_repair[2000:] < 32) == pytest.approx(R.spare_availability(32, lam, repair), abs=0.02)
    assert R.mean_restart_with_spares(0.5, 60.0, 300.0) == 180.0


def test_failure_domains_fewer_larger_interruptions():
    n, r = 16_384, 1 / (5.2 * 365 * DAY)
    assert R.domain_interruption_rate(n, r, 8, 0.0) == pytest.approx(n * r)
    assert R.domain_interruption_rate(n, r, 8, 1.0) == pytest.approx(n * r / 8)
    assert R.devices_per_interruption(8, 0.5) == pytest.approx(1 / (0.5 + 0.5 / 8))
    # by simulation: domains of 8 fail together (share c of device losses), single devices otherwise
    rng = np.random.default_rng(3)
    c, d, horizon = 0.4, 8, 2e9
    singles = rng.poisson(n * r * (1 - c) * horizon)
    domain_events = rng.poisson(n / d * r * c * horizon)  # each takes d devices: r*c device losses per device
    assert (singles + domain_events) / horizon == pytest.approx(R.domain_interruption_rate(n, r, d, c), rel=0.02)
    assert (singles + d * domain_events) / (singles + domain_events) == pytest.approx(
        R.devices_per_interruption(d, c), rel=0.02)
    assert R.replica_loss_share(8, 0.4, True) == pytest.approx((0.05) / (0.6 + 0.05))
    assert R.replica_loss_share(8, 0.4, False) == 0.0


@pytest.mark.parametrize("x", [0.1, 0.5, 2.0])
def test_timer_and_progress_policies_both_exact(x):
    m = 1000.0
    sim = R.simulate_policies_free(x * m, m, 3e7, seed=1)
    se = 3 / math.sqrt(sim["failures"])  # relative: one gap's kept work has a spread of about one MTBF
    assert sim["progress"] == pytest.approx(x / math.expm1(x), rel=se)
    assert sim["timer"] == pytest.approx(-math.expm1(-x) / x, rel=se)
    assert R.progress_goodput_free(x * m, m) == pytest.approx(x / math.expm1(x))
    assert R.timer_goodput_free(x * m, m) == pytest.approx(-math.expm1(-x) / x)
    # same first order, 1 - x/2; the timer keeps more at the same tau
    assert R.timer_goodput_free(x * m, m) > R.progress_goodput_free(x * m, m)


def test_bad_input():
    with pytest.raises(ConfigError, match="hang_share"):
        R.detection_s(1.5)
    with pytest.raises(ConfigError, match="spares"):
        R.spare_hit_share(-1, 10.0)
