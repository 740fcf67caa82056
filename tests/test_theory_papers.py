"""The parameters papers use, in the theory and the simulator: a queue after each failure, ETTR,
rates per 1,000 node-days and a per-job part, just-in-time checkpoints, in-job recovery's detection
stall and per-step overhead, and what a degraded step is worth at torchft's fixed learning rate."""

from __future__ import annotations

import dataclasses
import math

import pytest

from goodputlab import theory
from goodputlab.errors import ConfigError
from goodputlab.labs.lab11 import llama3_in_job
from goodputlab.theory import SimConfig, failure_rates, in_job, in_job_costs, simulate
from goodputlab.theory.jit import restart_goodput

M, TAU, SAVE, REC = 10_000.0, 600.0, 60.0, 300.0


def _sim(**changes) -> SimConfig:
    base = dict(devices=1, device_mtbf_s=M, duration_s=2e7, interval_s=TAU, save_s=SAVE, restart_s=240.0,
                restore_s=60.0, trials=200, seed=3)
    base.update(changes)
    return SimConfig(**base)


def _agrees(result, model: float, field: str = "goodput") -> None:
    values = result.goodput if field == "goodput" else result.ettr
    stderr = float(values.std(ddof=1)) / math.sqrt(len(values))
    # three standard errors, and the ends of a finite job (its first period has no restore to pay)
    assert abs(float(values.mean()) - model) <= 3 * stderr + 2e-4, (field, float(values.mean()), model, stderr)


# --- closed forms ----------------------------------------------------------------------------------


def test_queue_stretches_the_wall_by_one_plus_q_over_m():
    for q in (0.0, 600.0, 3600.0):
        assert theory.daly_goodput(TAU, SAVE, REC, M, queue_s=q) == pytest.approx(theory.daly_goodput(TAU, SAVE, REC, M) / (1 + q / M))
        assert theory.expected_goodput(TAU, SAVE, REC, M, queue_s=q) == pytest.approx(
            theory.expected_goodput(TAU, SAVE, REC, M) / (1 + q / M))
    with pytest.raises(ConfigError, match="queue_s"):
        theory.daly_goodput(TAU, SAVE, REC, M, queue_s=-1)


def test_first_order_ettr_is_expected_goodput_when_the_save_is_free():
    """The issue's check: Kokolis's first-order E[ETTR] and expected_goodput agree with a free save."""
    for tau, rec, q in ((3600.0, 300.0, 0.0), (300.0, 300.0, 0.0), (1800.0, 120.0, 60.0)):
        assert theory.first_order_ettr(tau, rec, 6646.0, queue_s=q) == pytest.approx(
            theory.expected_goodput(tau, 0.0, rec, 6646.0, queue_s=q), rel=1e-12)
    # a save counts as training: ETTR is above goodput when it is not free
    assert theory.first_order_ettr(TAU, REC, M, save_s=SAVE) > theory.expected_goodput(TAU, SAVE, REC, M)


def test_llama3_sixty_second_saves_reach_ninety_percent_ettr_but_not_goodput():
    """With a 60 s synchronous save at Llama 3's MTBF no interval gives 90% goodput; ETTR passes it."""
    m = theory.llama3_mtbf_s()
    tau = theory.optimal_interval_numeric(60.0, 0.0, m)
    assert theory.daly_goodput(tau, 60.0, 0.0, m) == pytest.approx(0.894, abs=5e-4)
    assert theory.daly_ettr(tau, 60.0, 0.0, m) > 0.94


def test_daly_ettr_is_goodput_plus_the_saves():
    assert theory.daly_ettr(TAU, 0.0, REC, M) == pytest.approx(theory.daly_goodput(TAU, 0.0, REC, M))
    assert theory.daly_ettr(TAU, SAVE, REC, M) == pytest.approx(restart_goodput(TAU, SAVE, REC, M).ettr, rel=1e-12)


def test_restart_goodput_without_jit_or_queue_is_dalys_and_the_renewal_models():
    assert restart_goodput(TAU, SAVE, REC, M).goodput == pytest.approx(theory.daly_goodput(TAU, SAVE, REC, M), rel=1e-12)
    async_ = restart_goodput(TAU, 5.0, REC, M, durable_lag_s=60.0).goodput
    assert async_ == pytest.approx(theory.renewal.periodic_goodput(TAU, 5.0, REC, M, durable_lag_s=60.0), rel=1e-12)
    assert restart_goodput(TAU, SAVE, REC, M, queue_s=900).goodput == pytest.approx(
        theory.daly_goodput(TAU, SAVE, REC, M, queue_s=900), rel=1e-12)


def test_jit_keeps_all_but_the_step_in_flight():
    jit = restart_goodput(TAU, SAVE, REC, M, jit_share=1.0, jit_save_s=30.0, step_s=6.0)
    plain = restart_goodput(TAU, SAVE, REC, M)
    assert jit.goodput > plain.goodput
    assert jit.lost_per_failure_s < 6.0  # about half a step, of a 6 s step
    with pytest.raises(ConfigError, match="step_s"):
        restart_goodput(TAU, SAVE, REC, M, jit_share=1.0, step_s=2 * TAU)


# --- the simulator against them ----------------------------------------------------------------------


@pytest.mark.parametrize("changes", [
    dict(queue_s=1800.0),
    dict(jit_share=0.8, jit_save_s=30.0, step_s=6.0),
    dict(jit_share=1.0, jit_save_s=30.0, step_s=60.0, queue_s=600.0),
    dict(jit_share=0.5, jit_save_s=10.0, save_s=60.0, save_blocking_s=5.0),
])
def test_simulator_agrees_with_the_restart_closed_form(changes):
    config = _sim(**changes)
    result = simulate(config)
    model = restart_goodput(TAU, config.blocking_save_s, 300.0, M, durable_lag_s=config.save_s if config.is_async else 0.0,
                            queue_s=config.queue_s, jit_share=config.jit_share, jit_save_s=config.jit_save_s,
                            step_s=config.step_s)
    _agrees(result, model.goodput)
    _agrees(result, model.ettr, "ettr")
    # every failure queues once, the last cut short by the end of the job
    assert result.queue_s_mean <= config.queue_s * result.interruptions_mean
    assert result.queue_s_mean == pytest.approx(config.queue_s * result.interruptions_mean, rel=1e-3)
    assert (result.ettr >= result.goodput).all()


def test_a_per_job_rate_adds_to_the_per_device_rate():
    config = SimConfig(devices=1024, device_mtbf_s=1024 * 50_000.0, job_failure_rate_per_s=1 / 50_000.0,
                       duration_s=1e7, interval_s=TAU, trials=50)
    assert config.job_mtbf_s == pytest.approx(25_000.0)
    assert simulate(config).interruptions_mean == pytest.approx(400.0, rel=0.02)


def test_simconfig_refuses_what_a_mode_cannot_do():
    with pytest.raises(ConfigError, match="jit_share"):
        dataclasses.replace(llama3_in_job(2), jit_share=0.5)
    with pytest.raises(ConfigError, match="collective_timeout_s"):
        _sim(collective_timeout_s=60.0)
    with pytest.raises(ConfigError, match="jit_save_s"):
        _sim(jit_save_s=30.0)
    with pytest.raises(ConfigError, match="step_s"):
        _sim(step_s=2 * TAU)


@pytest.mark.parametrize("groups", [2, 8])
@pytest.mark.parametrize("changes", [dict(collective_timeout_s=60.0), dict(collective_timeout_s=600.0, step_overhead_share=0.02),
                                     dict(queue_s=1800.0)])
def test_in_job_simulator_agrees_with_its_closed_form(groups, changes):
    config = dataclasses.replace(llama3_in_job(groups, trials=200, seed=5), **changes)
    result, model = simulate(config), in_job.predict(config)
    _agrees(result, model.goodput)
    stall = result.buckets["straggler_wait"] / config.duration_s
    assert stall == pytest.approx(model.stall_share, rel=0.05, abs=1e-4)


# --- failure rates -----------------------------------------------------------------------------------


def test_node_day_rates_give_kokolis_projections():
    assert failure_rates.job_mtbf_from_node_rate(16_384, 6.50) / 3600 == pytest.approx(1.803, abs=5e-4)
    assert failure_rates.job_mtbf_from_node_rate(131_072, 6.50) / 3600 == pytest.approx(0.2254, abs=5e-4)
    mtbf = failure_rates.device_mtbf_from_node_rate(6.50)
    assert failure_rates.node_rate_from_device_mtbf(mtbf) == pytest.approx(6.50)
    assert theory.cluster_mtbf(1024, mtbf) == pytest.approx(failure_rates.job_mtbf_from_node_rate(1024, 6.50))
    llama = failure_rates.node_rate_from_count(466, theory.LLAMA3_DURATION_S, theory.LLAMA3_GPUS)
    assert llama == pytest.approx(4.21, abs=0.005)


def test_fits_to_the_measured_mttfs_at_8_and_1024_gpus():
    two_part, power = failure_rates.kokolis_fits()
    # a per-job part cannot explain them: the exact fit wants a negative one
    assert two_part.unconstrained_per_job_per_s < 0 and two_part.rate.per_job_per_s == 0
    assert 0.04 < two_part.worst_error < 0.08
    # the power law passes through both, growing a little faster than N
    assert power.worst_error < 1e-9 and power.rate.exponent == pytest.approx(1.026, abs=5e-4)
    # a fit with a real per-job part when the data have one
    truth = failure_rates.FailureRate(per_device_per_s=1e-7, per_job_per_s=1e-5)
    fit = failure_rates.fit_two_part([(n, truth.job_mtbf_s(n)) for n in (8, 64, 1024)])
    assert fit.rate.per_job_per_s == pytest.approx(1e-5) and fit.rate.per_device_per_s == pytest.approx(1e-7)
    with pytest.raises(ConfigError, match="points"):
        failure_rates.fit_power_law([(8, 100.0)])


# --- in-job costs ------------------------------------------------------------------------------------


def test_degraded_step_at_a_fixed_learning_rate():
    """Half the batch at B_noise = B0: 0.50 of a full step at the full batch's rate, 0.67 retuned (AdaScale)."""
    assert in_job_costs.degraded_step_progress(0.5, 1.0, 1.0) == pytest.approx(0.5)
    assert in_job_costs.degraded_step_progress(0.5, 1.0, 1.0, "retuned") == pytest.approx(2 / 3)
    # the AdaScale form is the package's adascale_gain
    from goodputlab.efficiency import adascale_gain
    for noise in (0.25, 1.0, 4.0):
        assert in_job_costs.degraded_step_progress(0.5, 1.0, noise, "retuned") == pytest.approx(float(adascale_gain(0.5, noise, 1.0)))
    # limits: no noise, a full step; all noise, nothing for half the batch, worse than nothing for a quarter
    assert in_job_costs.degraded_step_progress(0.5, 1.0, 0.0) == pytest.approx(1.0)
    assert in_job_costs.degraded_step_progress(0.5, 1.0, math.inf) == pytest.approx(0.0)
    assert in_job_costs.degraded_step_progress(0.25, 1.0, math.inf) == pytest.approx(-2.0)
    # 303 steps on one of two groups cost 61 to 242 full steps over noise scales 1/4 to 4 of the batch
    costs = [in_job_costs.degraded_steps_cost(303, 1, 2, r) for r in (0.25, 1.0, 4.0)]
    assert costs == pytest.approx([60.6, 151.5, 242.4])


def test_detection_stall_at_llama3_costs_more_than_the_missing_groups():
    rate = theory.LLAMA3_INTERRUPTIONS / theory.LLAMA3_DURATION_S
    stall = in_job_costs.detection_stall_share(rate, in_job_costs.TORCHFT_DEFAULT_TIMEOUT_S)
    assert stall == pytest.approx(0.0060, abs=1e-4)
    assert stall > in_job.away_share(rate / 8, 360.0)


def test_more_replica_groups_cost_memory_and_a_cross_group_all_reduce():
    one = in_job_costs.replica_group_costs(405e9, 16_384, 1, 6.0, 50e9)
    many = in_job_costs.replica_group_costs(405e9, 16_384, 64, 6.0, 50e9)
    assert one.allreduce_s == 0 and one.step_overhead_share == 0
    assert many.state_bytes_per_device == pytest.approx(64 * one.state_bytes_per_device)
    assert many.allreduce_bytes_per_device == pytest.approx(2 * 63 / 64 * 2 * 405e9 * 64 / 16_384)
    assert 0 < many.step_overhead_share < 0.05 and many.fits
    hidden = in_job_costs.replica_group_costs(405e9, 16_384, 64, 6.0, 50e9, hidden_share=1.0)
    assert hidden.step_overhead_share == 0


def test_more_groups_pay_a_cross_group_all_reduce_in_the_at_scale_model():
    """At Llama 3's scale (405B, ~6 s steps, 50 GB/s a GPU) with a 60 s timeout: 64 groups fall below 8 or 16."""
    step = 6 * 405e9 * 16e6 / (16_384 * 400e12)
    goodput = {}
    for groups in (8, 16, 64):
        config = dataclasses.replace(llama3_in_job(groups), collective_timeout_s=60.0)
        model, costs = in_job.with_group_costs(config, 405e9, step, 50e9)
        goodput[groups] = model.goodput
        assert model.goodput < in_job.predict(config).goodput and costs.fits
        rows = {r["cost"]: r["share"] for r in in_job.cost_rows(model)}
        assert rows["per-step overhead"] == pytest.approx(model.overhead_share)
        assert rows["detection stall (collective timeout)"] > rows["missing groups: relaunch (degraded)"]
    assert goodput[64] < min(goodput[8], goodput[16])
