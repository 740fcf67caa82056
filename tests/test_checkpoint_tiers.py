"""A RAM tier lost with its node, and the async lag: the exact chain against the Monte Carlo and the limits."""

import pytest

from goodputlab.errors import ConfigError
from goodputlab.theory import LLAMA3_INTERRUPTION_CAUSES, checkpoint_tiers as T, renewal

M = 10.0  # the lab's scale: seconds
COSTS = dict(interval_s=0.2, blocking_s=0.002, ram_restart_s=1.0, disk_restart_s=4.0, mtbf_s=M)


def test_node_loss_share_of_llama3_causes():
    # GPU (268) + host (21) + host maintenance (32) of the 419 unexpected interruptions
    assert T.node_loss_share() == pytest.approx(321 / 419)
    assert T.node_loss_share(include_planned=True) == pytest.approx(321 / 466)
    assert T.node_loss_share([r for r in LLAMA3_INTERRUPTION_CAUSES if r["component"] == "Network"]) == 0.0


def test_limits_reduce_to_one_tier():
    # nothing takes the node: a RAM tier is the only tier
    g = T.tiered_goodput(**COSTS, disk_every=4, node_loss_share=0.0, ram_lag_s=0.003)
    assert g == pytest.approx(renewal.periodic_goodput(0.2, 0.002, 1.0, M, durable_lag_s=0.003), rel=1e-12)
    # every failure takes the node, every checkpoint is on disk: one storage tier with the disk restart
    g = T.tiered_goodput(**COSTS, disk_every=1, node_loss_share=1.0, disk_lag_s=0.02)
    assert g == pytest.approx(renewal.periodic_goodput(0.2, 0.002, 4.0, M, durable_lag_s=0.02), rel=1e-12)
    # the async case is the renewal model with the persist as its lag
    assert T.async_goodput(0.2, 0.002, 0.05, 4.0, M) == pytest.approx(
        renewal.periodic_goodput(0.2, 0.002, 4.0, M, durable_lag_s=0.05))


@pytest.mark.parametrize("p,k,shape", [(0.3, 4, 1.0), (0.77, 4, 1.0), (0.5, 8, 0.7)])
def test_chain_matches_the_monte_carlo(p, k, shape):
    kw = dict(disk_every=k, node_loss_share=p, ram_lag_s=0.003, disk_lag_s=0.02, shape=shape)
    model = T.tiered_goodput(**COSTS, **kw)
    mc = T.simulate_tiered(**COSTS, failures=1500, trials=60, seed=2, **kw)
    assert mc["goodput"] == pytest.approx(model, abs=max(0.003, 4 * mc["goodput_se"]))


def test_poisson_closed_form_matches_the_series():
    kw = dict(disk_every=4, node_loss_share=0.4, ram_lag_s=0.003, disk_lag_s=0.02)
    assert T.tiered_goodput(**COSTS, **kw) == pytest.approx(T.tiered_goodput(**COSTS, shape=1.0 + 1e-9, **kw), rel=1e-6)


def test_losing_the_ram_tier_costs_goodput_and_rarer_disk_copies_cost_more():
    safe = T.tiered_goodput(**COSTS, disk_every=4, node_loss_share=0.0)
    lost = T.tiered_goodput(**COSTS, disk_every=4, node_loss_share=0.77)
    rarer = T.tiered_goodput(**COSTS, disk_every=16, node_loss_share=0.77)
    assert safe > lost + 0.1 and lost > rarer
    best = T.tiered_optimum(0.002, 1.0, 4.0, M, disk_every=4, node_loss_share=0.77)
    assert best["goodput"] >= lost and 0.01 < best["interval_s"] < 1.0


def test_bad_input():
    with pytest.raises(ConfigError, match="node_loss_share"):
        T.tiered_goodput(**COSTS, disk_every=4, node_loss_share=1.5)
    with pytest.raises(ConfigError, match="disk_lag_s"):
        T.tiered_goodput(**COSTS, disk_every=2, node_loss_share=0.5, disk_lag_s=5.0)
