"""The capstone model: Llama 3 405B's defaults reproduce >90% effective training time; the breakdown matches the simulator."""

import pytest

from goodputlab.categories import CATEGORIES
from goodputlab.errors import ConfigError
from goodputlab.theory import LLAMA3_DURATION_S, SimConfig, capstone as C, simulate


@pytest.fixture(scope="module")
def llama():
    return C.evaluate()


def test_llama3_defaults_reproduce_more_than_90_percent(llama):
    s = llama.scenario
    assert s.gpus == 16_384 and s.parameters == 405e9 and s.storage_bps == 2e12
    assert s.failures_per_day * 54 == pytest.approx(466)
    f = llama.figures()
    assert f["checkpoint_tb"] == pytest.approx(5.67) and f["write_s"] == pytest.approx(2.835)
    assert llama.ettr > 0.90 and llama.goodput > 0.90  # "effective training time higher than 90%"
    assert f["ettr"] == pytest.approx(0.950, abs=0.002) and f["goodput"] == pytest.approx(0.939, abs=0.002)
    assert f["interval_min"] == pytest.approx(3.94, abs=0.05)  # Daly's optimum for a 2.8 s save and a 2.8 h MTBF
    assert f["recovery_min"] == pytest.approx((90 + 300 + 2.835) / 60)
    assert f["gpu_hours_lost_per_day"] == pytest.approx(16_384 * 24 * (1 - llama.goodput))
    assert f["money_lost_per_day"] == pytest.approx(2.0 * f["gpu_hours_lost_per_day"])
    assert f["useful_flops_share"] == pytest.approx(0.4 * llama.goodput)
    assert sum(llama.breakdown.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("strategy", ["sync", "async"])
def test_breakdown_matches_the_simulator(strategy):
    r = C.evaluate(C.ClusterScenario(strategy=strategy, data_stall_share=0.02))
    s = r.scenario
    config = SimConfig(
        devices=s.gpus, device_mtbf_s=s.gpu_mtbf_years * C.SECONDS_PER_YEAR, duration_s=4 * LLAMA3_DURATION_S,
        interval_s=r.interval_s, save_s=r.checkpoint.write_s if strategy == "async" else r.blocking_s,
        save_blocking_s=r.blocking_s, restart_s=r.restart_mean_s, restore_s=r.storage_restore_s,
        data_stall_fraction=s.data_stall_share, trials=100, seed=4,
    )
    sim = simulate(config)
    assert sim.goodput_mean == pytest.approx(r.goodput, abs=max(0.002, 4 * sim.goodput_stderr))
    for c in CATEGORIES:
        assert sim.buckets[c] / config.duration_s == pytest.approx(r.breakdown[c], abs=0.002), c


def test_levers_move_goodput_the_right_way(llama):
    base = llama.goodput
    assert C.evaluate(C.ClusterScenario(spares=200, spare_swap_s=30)).goodput > base + 0.01
    assert C.evaluate(C.ClusterScenario(detect_s=600)).goodput < base - 0.03  # hangs found by a 10-minute watchdog
    assert C.evaluate(C.ClusterScenario(storage_bps=2e10)).goodput < base - 0.05  # 100x slower storage
    assert C.evaluate(C.ClusterScenario(gpus=131_072)).goodput < base - 0.2
    assert C.evaluate(C.ClusterScenario(strategy="async")).goodput > base
    # a RAM tier that dies with its node keeps most of the gain only when storage copies are frequent
    same = C.evaluate(C.ClusterScenario(strategy="memory, same node"))
    peer = C.evaluate(C.ClusterScenario(strategy="memory, peer copy"))
    assert peer.goodput >= same.goodput and same.node_loss_share == pytest.approx(321 / 466)
    assert C.evaluate(C.ClusterScenario(data_stall_share=0.1)).goodput == pytest.approx(0.9 * base, rel=1e-9)


def test_lab_ratios(llama):
    lab = {"save_s": 0.02, "restart_s": 3.0, "mtbf_s": 8.0}
    rows = {r["ratio"]: r for r in C.lab_ratio_rows(lab, llama)}
    assert rows["recovery / MTBF"]["lab"] == pytest.approx(0.375)
    assert rows["recovery / MTBF"]["cluster"] == pytest.approx(llama.recovery_s / llama.scenario.job_mtbf_s)
    assert "63-minute" in rows["recovery / MTBF"]["lab_at_cluster_scale"]  # 3/8 of 2.78 hours


def test_bad_scenarios_are_refused():
    with pytest.raises(ConfigError, match="strategy"):
        C.ClusterScenario(strategy="tape")
    with pytest.raises(ConfigError, match="gpu_mtbf_years"):
        C.ClusterScenario(gpus=10_000_000, gpu_mtbf_years=0.01)
