"""In-job recovery: the closed forms (goodputlab.theory.in_job) and the simulator held to them.

Every comparison with the simulator allows 3 standard errors of its mean over trials
(sampling noise) plus a bound computed from the job: ``error_bound`` where the closed
form is an approximation with one, and the ends of a finite job (``end_effects``).
"""

import math

import numpy as np
import pytest

from goodputlab import theory
from goodputlab.categories import CATEGORIES, CHECKPOINT_RESTORE, DEGRADED
from goodputlab.errors import ConfigError
from goodputlab.theory import SimConfig, in_job, recovery_at_scale, renewal, simulate
from goodputlab.theory.in_job_sim import domain_groups

HOUR = 3600.0
LONG = 2000 * HOUR
# 64 devices failing once an hour as a job; a group is away 15 minutes (5 min relaunch, 10 min heal)
BASE = dict(devices=64, device_mtbf_s=64 * HOUR, duration_s=LONG, interval_s=600.0, save_s=30.0,
            restart_s=300.0, restore_s=0.0, heal_s=600.0, recovery="in-job", trials=200, seed=1)


def job(**overrides) -> SimConfig:
    return SimConfig(**{**BASE, **overrides})


def end_effects(config: SimConfig, prediction) -> float:
    """A bound on how far a finite job's mean goodput is from the long-run one (a share).

    The job starts with every group up and no recovery, and ends with its last cycle
    unfinished, its work since the last checkpoint kept: two stops' worth of loss (a
    recovery, a cycle and an async lag; the renewal function is within -1 and +2 stops
    of ``D / E[cycle]`` for cycles no more variable than exponential ones), and a
    group's first time away (``W``) and a checkpoint cycle at the ends.
    """
    first, later = renewal.cycle_times(config.interval_s, config.blocking_save_s, config.save_s if config.is_async else 0.0)
    rate = config.failure_rate_per_s
    recovery = math.expm1(rate * (config.restart_s + config.restore_s)) / rate
    away = config.restart_s + config.heal_s
    stops = 0.0 if prediction.job_restarts_per_s == 0 else 2.0
    return (stops * (recovery + later + config.save_s) + away + later) / config.duration_s


def assert_closes(result):
    per_trial = sum(result.buckets_per_trial[c] for c in CATEGORIES)
    np.testing.assert_allclose(per_trial, result.config.duration_s, rtol=1e-9)
    for c in CATEGORIES:
        assert np.all(result.buckets_per_trial[c] >= 0), c


def stderr_of(values: np.ndarray) -> float:
    """Standard error of the mean of per-trial values."""
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


# --- the closed form on its own ---------------------------------------------------------


@pytest.mark.parametrize("lag", [0.0, 300.0])
def test_one_group_is_dalys_model_exactly(lag):
    # k* = 1: every failure stops the job, and the formula is the renewal-reward one for Poisson failures
    p = in_job.in_job_goodput(600.0, 20.0, 300.0, 60.0, 300.0, 600.0, 1 / HOUR, groups=1, durable_lag_s=lag)
    exact = renewal.periodic_goodput(600.0, 20.0, 360.0, HOUR, durable_lag_s=lag)
    assert p.goodput == pytest.approx(exact, rel=1e-12)
    assert p.regime == "restart" and p.missing_share == 0 and p.error_bound == 0
    assert p.restart_probability == pytest.approx(1.0)  # every failure restarts the job
    same = in_job.in_job_goodput(600.0, 20.0, 300.0, 60.0, 300.0, 600.0, 1 / HOUR, groups=4, min_groups=4, durable_lag_s=lag)
    assert same.goodput == pytest.approx(p.goodput, rel=1e-12)
    if lag == 0.0:
        assert p.goodput == pytest.approx(theory.daly_goodput(600.0, 20.0, 360.0, HOUR), rel=1e-12)


def test_two_away_by_hand():
    # lambda W = 1/4, two groups: a = e^-0.25, p = 1/2, pi = (1 - a)/(1 + a)
    rate, away = 1 / HOUR, 900.0
    t, pi, seconds_away = in_job.two_away_stop(rate, 2, away)
    a = math.exp(-0.25)
    assert pi == pytest.approx((1 - a) / (1 + a))
    assert t == pytest.approx(HOUR * ((1 + a) / (1 - a) + 2))
    assert seconds_away == pytest.approx(2 * HOUR)
    # many groups: a second failure almost surely takes another group, p -> 1
    t_many, pi_many, _ = in_job.two_away_stop(rate, 1000, away)
    assert pi_many == pytest.approx(1 - a, rel=1e-3) and t_many < t
    # rare stops: pi ~ lambda W (G-1)/G, the probability that a second failure strikes a heal
    _, pi_rare, _ = in_job.two_away_stop(1e-6, 2, away)
    assert pi_rare == pytest.approx(1e-6 * away / 2, rel=1e-3)


def test_away_share_and_the_limits():
    assert in_job.away_share(0.0, 900.0) == 0.0
    assert in_job.away_share(1 / HOUR, 900.0) == pytest.approx(1 - math.exp(-0.25))
    # many groups: no stop in sight, the survivors' share of the checkpoint cycle
    p = in_job.in_job_goodput(600.0, 30.0, 300.0, 0.0, 300.0, 600.0, 1 / HOUR, groups=64)
    q = 1 - math.exp(-900.0 / (64 * HOUR))
    assert p.goodput == pytest.approx((1 - q) * 600.0 / 630.0, rel=1e-9)
    assert p.relaunch_share == pytest.approx(1 - math.exp(-300.0 / (64 * HOUR)), rel=1e-9)


@pytest.mark.parametrize(
    "call",
    [
        lambda: in_job.in_job_goodput(0.0, 1, 1, 1, 1, 1, 1e-4, 2),
        lambda: in_job.in_job_goodput(600.0, 1, 1, 1, 1, 1, 0.0, 2),
        lambda: in_job.in_job_goodput(600.0, 1, 1, 1, 1, 1, 1e-4, 2, min_groups=3),
        lambda: in_job.in_job_goodput(600.0, 1, 1, 1, -1, 1, 1e-4, 2),
        lambda: in_job.two_away_stop(1e-4, 1, 10.0),
        lambda: in_job.predict(job(failure_shape=0.7)),
        lambda: in_job.predict(job(domain_size=4)),
    ],
)
def test_the_closed_form_refuses_what_it_does_not_cover(call):
    with pytest.raises(ConfigError):
        call()


# --- the simulator against it ------------------------------------------------------------


def test_no_stop_regime_is_exact():
    # 16 groups, each away 1.6% of the time: a stop needs all 16 away at once (never).
    config = job(replica_groups=16)
    r, p = simulate(config), in_job.predict(config)
    assert r.job_restarts_mean == 0
    # a union bound on P(any stop): failures x P(the 15 others away)
    q = 1 - math.exp(-config.failure_rate_per_s / 16 * 900.0)
    p_stop = config.expected_failures * q**15
    tolerance = end_effects(config, p) + p_stop
    assert abs(r.goodput_mean - p.goodput) < 3 * r.goodput_stderr + tolerance
    # the groups' time away: relaunch (degraded) and heal (the only restore: no stop)
    for category, model in ((DEGRADED, p.degraded_share), (CHECKPOINT_RESTORE, p.heal_share)):
        per_trial = r.buckets_per_trial[category] / config.duration_s
        assert abs(per_trial.mean() - model) < 3 * stderr_of(per_trial) + tolerance
    assert r.buckets["lost_work"] == 0 and r.buckets["restart"] == 0  # the survivors lose nothing
    assert_closes(r)


@pytest.mark.parametrize("groups, min_groups", [(2, 1), (4, 3)])
def test_two_away_with_continuous_checkpoints_is_exact(groups, min_groups):
    # tau = 1 s, free saves: nothing but a second is lost at a stop, and E[T] and the
    # time away are exact (Wald): the closed form is exact up to one interval per stop.
    config = job(replica_groups=groups, min_groups=min_groups, interval_s=1.0, save_s=0.0)
    r, p = simulate(config), in_job.predict(config)
    assert p.regime == "two-away"
    tolerance = p.error_bound + end_effects(config, p)
    assert abs(r.goodput_mean - p.goodput) < 3 * r.goodput_stderr + tolerance
    # restarts: the renewal function is within -1 and +2 cycles of D / E[cycle], each cycle
    # e^{lambda c} restarts (its stop and the failures that strike its recovery)
    per_cycle = math.exp(config.failure_rate_per_s * (config.restart_s + config.restore_s))
    expected = p.job_restarts_per_s * config.duration_s
    assert abs(r.job_restarts_mean - expected) < 3 * stderr_of(r.job_restarts) + 2 * per_cycle
    assert_closes(r)


@pytest.mark.parametrize("save_s, blocking", [(30.0, None), (120.0, 5.0)])
def test_two_away_with_periodic_checkpoints_within_its_bound(save_s, blocking):
    config = job(replica_groups=2, save_s=save_s, save_blocking_s=blocking)
    r, p = simulate(config), in_job.predict(config)
    assert 0 < p.error_bound < 0.05
    assert abs(r.goodput_mean - p.goodput) < 3 * r.goodput_stderr + p.error_bound + end_effects(config, p)
    # the groups' time away is exact whatever the checkpoints (the relaunch: degraded)
    per_trial = r.buckets_per_trial[DEGRADED] / config.duration_s
    assert abs(per_trial.mean() - p.degraded_share) < 3 * stderr_of(per_trial) + end_effects(config, p)
    assert_closes(r)


def test_stationary_regime_is_close_where_stops_are_rare():
    # 4 groups, the job stops only when all 4 are away: a handful of stops in 2000 hours
    config = job(replica_groups=4)
    r, p = simulate(config), in_job.predict(config)
    assert p.regime == "stationary" and math.isnan(p.error_bound)
    assert 0 < r.job_restarts_mean < 2
    # each stop costs at most a recovery and a cycle: beyond that, only the groups' time away, which is exact
    stop_cost = r.job_restarts_mean * (config.restart_s + config.interval_s + config.save_s) / config.duration_s
    assert abs(r.goodput_mean - p.goodput) < 3 * r.goodput_stderr + end_effects(config, p) + stop_cost


def test_in_job_recovery_beats_restart_and_more_groups_help():
    common = dict(replica_groups=1, recovery="restart", heal_s=None)
    restart = simulate(job(**common))
    results = [simulate(job(replica_groups=g)) for g in (2, 4, 16)]
    goodputs = [r.goodput_mean for r in results]
    assert restart.goodput_mean < goodputs[0] < goodputs[1] < goodputs[2]
    # the survivors lose nothing: in-job lost work only at the (rare) stops
    assert results[2].buckets["lost_work"] == 0 and restart.buckets["lost_work"] > 0
    assert results[0].buckets[DEGRADED] > results[2].buckets[DEGRADED] > 0


def test_one_group_or_no_group_to_spare_is_the_restart_model_exactly():
    for seed in (0, 5):
        restart = simulate(job(recovery="restart", heal_s=None, seed=seed))
        for overrides in ({"replica_groups": 1}, {"replica_groups": 4, "min_groups": 4}):
            in_job_result = simulate(job(seed=seed, **overrides))
            np.testing.assert_array_equal(in_job_result.goodput, restart.goodput)
            np.testing.assert_array_equal(in_job_result.interruptions, restart.interruptions)
            for c in CATEGORIES:
                np.testing.assert_array_equal(in_job_result.buckets_per_trial[c], restart.buckets_per_trial[c])


# --- failure domains -----------------------------------------------------------------------


def test_domain_groups_by_hand():
    # 48 devices, groups of 16, domains of 12: [0,12) [12,24) [24,36) [36,48)
    groups = domain_groups(np.arange(4), 12, 16, 2)
    assert groups.tolist() == [[0, -1], [0, 1], [1, 2], [2, -1]]
    # domains of 32 over groups of 16: each takes two
    assert domain_groups(np.arange(2), 32, 16, 2).tolist() == [[0, 1], [2, 3]]


@pytest.mark.parametrize("size, share", [(8, 1.0), (8, 0.25)])
def test_domains_match_the_closed_forms(size, share):
    config = SimConfig(devices=1024, device_mtbf_s=1024 * HOUR, duration_s=500 * HOUR, interval_s=600.0,
                       save_s=30.0, restart_s=300.0, domain_size=size, domain_share=share, trials=300, seed=4)
    rate = recovery_at_scale.domain_interruption_rate(1024, 1 / (1024 * HOUR), size, share)
    assert config.failure_rate_per_s == pytest.approx(rate, rel=1e-12)
    r = simulate(config)
    mean = rate * config.duration_s  # a Poisson count: its variance is its mean
    assert abs(r.interruptions_mean - mean) < 3 * math.sqrt(mean / config.trials)
    per_event = recovery_at_scale.devices_per_interruption(size, share)
    stderr = stderr_of(r.devices_lost)
    assert abs(r.devices_lost_mean - mean * per_event) < 3 * stderr
    # the devices lost are those of independent failures: N T / M whatever the domains
    assert abs(r.devices_lost_mean - 500.0) < 3 * stderr
    assert_closes(r)


def test_a_domain_that_spans_the_groups_to_stop_stops_every_time():
    # 64 devices in 4 groups of 16, domains of 32 (two groups), stop at two away
    config = job(replica_groups=4, min_groups=3, domain_size=32)
    r = simulate(config)
    np.testing.assert_array_equal(r.job_restarts, r.interruptions)
    assert r.buckets[DEGRADED] == 0
    # so the job is the restart model at the rate of domain events (one per 32 device losses)
    exact = renewal.periodic_goodput(600.0, 30.0, 300.0, 1 / config.failure_rate_per_s)
    p = in_job.in_job_goodput(600.0, 30.0, 300.0, 0.0, 300.0, 600.0, config.failure_rate_per_s, groups=1)
    assert abs(r.goodput_mean - exact) < 3 * r.goodput_stderr + end_effects(config, p)


def test_a_domain_inside_a_group_is_one_group_failing():
    # domains of 16 = the groups: an event takes exactly one group, at the event rate
    config = job(replica_groups=4, min_groups=3, domain_size=16, interval_s=1.0, save_s=0.0)
    r = simulate(config)
    p = in_job.in_job_goodput(1.0, 0.0, 300.0, 0.0, 300.0, 600.0, config.failure_rate_per_s, groups=4, min_groups=3)
    assert abs(r.goodput_mean - p.goodput) < 3 * r.goodput_stderr + p.error_bound + end_effects(config, p)
    assert r.devices_lost_mean == pytest.approx(16 * r.interruptions_mean)


# --- the rest of the simulator's settings under in-job recovery -----------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"replica_groups": 2, "save_s": 120.0, "save_blocking_s": 5.0, "restore_s": 60.0, "startup_s": 900.0},
        {"replica_groups": 8, "min_groups": 6, "hot_spares": 50, "spare_restart_s": 30.0, "data_stall_fraction": 0.1},
        {"replica_groups": 4, "failure_shape": 0.7, "domain_size": 8, "domain_share": 0.5},
        {"replica_groups": 4, "straggler_factor": 2.0, "straggler_share": 0.01, "heal_s": 0.0, "restart_s": 0.0},
        {"replica_groups": 2, "interval_s": 10 * LONG},  # never a checkpoint: a stop loses everything
        {"replica_groups": 2, "device_mtbf_s": math.inf},
    ],
)
def test_ledger_closes_under_in_job_recovery(overrides):
    r = simulate(job(trials=40, **overrides))
    assert_closes(r)
    assert list(r.buckets) == list(CATEGORIES)
    np.testing.assert_allclose(r.goodput, r.buckets_per_trial["productive"] / r.config.duration_s)
    assert np.all(r.job_restarts <= r.interruptions)


def test_hot_spares_shorten_the_groups_time_away():
    cold = simulate(job(replica_groups=4))
    spared = simulate(job(replica_groups=4, hot_spares=100_000, spare_restart_s=30.0))
    # the relaunch (degraded) shrinks tenfold; the heal does not change
    assert spared.buckets[DEGRADED] == pytest.approx(cold.buckets[DEGRADED] / 10, rel=0.1)
    assert spared.buckets[CHECKPOINT_RESTORE] == pytest.approx(cold.buckets[CHECKPOINT_RESTORE], rel=0.1)
    assert spared.goodput_mean > cold.goodput_mean


def test_causes_and_determinism_under_in_job_recovery():
    config = job(replica_groups=2, device_mtbf_s=None, failure_causes=[("GPU", 3), ("network", 1)],
                 causes_reference_s=HOUR, causes_reference_devices=256, trials=30, seed=9)
    a, b = simulate(config), simulate(config)
    np.testing.assert_array_equal(a.goodput, b.goodput)
    np.testing.assert_array_equal(a.cause_counts["GPU"] + a.cause_counts["network"], a.interruptions)
    assert a.causes_mean["GPU"] == pytest.approx(3 * a.causes_mean["network"], rel=0.1)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"recovery": "torchft"}, "recovery"),
        ({"replica_groups": 3}, "replica_groups"),  # 64 devices do not split into 3
        ({"replica_groups": 0}, "replica_groups"),
        ({"replica_groups": 128}, "replica_groups"),
        ({"recovery": "restart", "heal_s": None, "replica_groups": 2}, "replica_groups"),
        ({"replica_groups": 2, "min_groups": 3}, "min_groups"),
        ({"replica_groups": 2, "min_groups": 0}, "min_groups"),
        ({"heal_s": None}, "heal_s"),
        ({"heal_s": -1.0}, "heal_s"),
        ({"recovery": "restart"}, "heal_s"),  # a heal without in-job recovery
        ({"domain_size": 0}, "domain_size"),
        ({"domain_size": 5}, "domain_size"),
        ({"domain_size": 8, "domain_share": 1.5}, "domain_share"),
        ({"domain_share": 0.5}, "domain_share"),  # without domains
    ],
)
def test_bad_in_job_settings_name_the_field(overrides, field):
    with pytest.raises(ConfigError) as info:
        job(**overrides)
    assert info.value.field == field
