"""Checkpoint cost from first principles: bytes per parameter, sharding, bandwidth; Llama 3 405B."""

import pytest

from goodputlab.errors import ConfigError
from goodputlab.theory import checkpoint_cost as CC


def test_bytes_per_parameter():
    mixed = CC.bytes_per_parameter("bf16", "adam")
    assert (mixed.weights, mixed.master, mixed.gradients, mixed.optimizer) == (2, 4, 2, 8)
    assert mixed.in_memory == 16 and mixed.checkpoint == 14  # ZeRO's 16 bytes; gradients are not saved
    fp32 = CC.bytes_per_parameter("fp32", "adam")
    assert fp32.master == 0 and fp32.checkpoint == 12 and fp32.in_memory == 16
    assert CC.bytes_per_parameter("bf16", "sgd", master_weights=False).checkpoint == 2
    assert sum(r["bytes_per_parameter"] for r in mixed.rows() if r["saved"]) == 14


def test_llama3_405b():
    c = CC.llama3_405b_checkpoint()
    assert c.total_bytes == pytest.approx(405e9 * 14)  # 5.67 TB
    assert c.rank_bytes == pytest.approx(5.67e12 / 16_384)  # 346 MB per GPU on average
    assert CC.LLAMA3_RANK_BYTES_RANGE[0] < c.rank_bytes < CC.LLAMA3_RANK_BYTES_RANGE[1]  # the paper: 1 MB to 4 GB
    assert c.write_s == pytest.approx(2.835)  # at the sustained 2 TB/s
    assert CC.llama3_405b_checkpoint(CC.LLAMA3_STORAGE_PEAK_BPS).write_s == pytest.approx(0.81)
    assert c.in_memory_bytes == pytest.approx(405e9 * 16)  # 6.48 TB of training state
    # an async snapshot copies one rank's share to host memory at the measured H200 rate
    assert c.snapshot_s == pytest.approx(c.rank_bytes / (1.8e9 / 0.037))


def test_the_slowest_rank_can_bind():
    c = CC.checkpoint_cost(405e9, 16_384, 2e12, largest_rank_bytes=4e9, rank_link_bps=1e9)
    assert c.write_s == pytest.approx(4.0)  # 4 GB through a 1 GB/s link, longer than 2.8 s in aggregate
    assert CC.bandwidth_for_save(5.67e12, 2.835) == pytest.approx(2e12)


def test_bad_input():
    with pytest.raises(ConfigError, match="precision"):
        CC.bytes_per_parameter("int3")
    with pytest.raises(ConfigError, match="largest_rank_bytes"):
        CC.checkpoint_cost(1e9, 8, 1e9, largest_rank_bytes=1.0)
