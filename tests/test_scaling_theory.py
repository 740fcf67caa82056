"""The scaling-out models (goodputlab.theory.scaling) and the simulator's stragglers."""

from __future__ import annotations

import math

import pytest

from goodputlab import categories as C
from goodputlab.errors import ConfigError
from goodputlab.theory import SimConfig, cluster_mtbf, simulate
from goodputlab.theory import scaling as S


def test_a_step_is_slowed_when_any_straggler_is_slow():
    assert S.step_slowed_probability(0.5, 1) == pytest.approx(0.5)
    assert S.step_slowed_probability(0.5, 2) == pytest.approx(0.75)
    assert S.step_slowed_probability(1.0, 3) == 1.0 and S.step_slowed_probability(0.3, 0) == 0.0
    # the tail at scale: one slow step in a thousand per GPU, and 16,384 GPUs are slow in nearly every step
    assert S.step_slowed_probability(0.001, 16_384) > 0.9999


def test_the_healthy_ranks_wait_for_the_slowest():
    assert S.straggler_step_factor(3.0, 1.0) == pytest.approx(3.0)
    assert S.straggler_step_factor(3.0, 0.5) == pytest.approx(2.0)
    assert S.straggler_wait_share(3.0, 0.5) == pytest.approx(0.5)
    assert S.straggler_wait_share(1.0, 1.0) == 0.0
    assert S.straggler_wait_s(0.02, 100, 3.0, 0.5) == pytest.approx(100 * 0.02 * 1.0)
    with pytest.raises(ConfigError):
        S.straggler_step_factor(0.5)


def test_a_sharded_save_writes_a_share_per_rank():
    assert S.sharded_save_bytes_per_rank(1e9, 4) == pytest.approx(2.5e8)
    # parallel paths: 4 ranks save 4x faster; one shared path: no faster
    assert S.sharded_save_s(1e9, 4, 1e9) == pytest.approx(0.25)
    assert S.sharded_save_s(1e9, 4, 1e9, shared_bandwidth_Bps=1e9, overhead_s=0.1) == pytest.approx(1.1)


def test_one_failure_stops_every_rank():
    assert cluster_mtbf(2, 60.0) == pytest.approx(30.0)


def test_the_simulator_books_the_wait_for_stragglers_and_still_closes():
    base = dict(devices=2, duration_s=3600.0, interval_s=60.0, device_mtbf_s=7200.0, save_s=2.0, trials=300, seed=1)
    plain = simulate(SimConfig(**base))
    slow = simulate(SimConfig(**base, straggler_factor=3.0, straggler_share=0.5, straggler_devices=1))
    assert plain.buckets[C.STRAGGLER_WAIT] == 0.0
    b = slow.buckets
    assert sum(b.values()) == pytest.approx(3600.0)
    assert b[C.STRAGGLER_WAIT] == pytest.approx(b[C.PRODUCTIVE])  # (3 - 1) x 0.5 = 1: as long waiting as computing
    assert slow.goodput_mean == pytest.approx(plain.goodput_mean / 2, rel=1e-9)
    everyone = SimConfig(**{**base, "devices": 1024}, straggler_factor=2.0, straggler_share=0.01)
    assert everyone.straggler_wait_share == pytest.approx(0.5, rel=1e-4)  # some rank is slow in nearly every step


@pytest.mark.parametrize("field, value", [("straggler_factor", 0.5), ("straggler_factor", math.nan),
                                          ("straggler_share", 1.5), ("straggler_devices", 3)])
def test_bad_straggler_settings_are_refused(field, value):
    with pytest.raises(ConfigError) as e:
        SimConfig(devices=2, duration_s=10.0, interval_s=1.0, device_mtbf_s=100.0, **{field: value})
    assert e.value.field == field
