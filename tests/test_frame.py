"""The frame around the ledger: MPG's product, ETTR from a ledger, goodput x MFU."""

import pytest

from goodputlab.errors import ConfigError
from goodputlab.theory import frame

BUCKETS = {"productive": 70.0, "data_wait": 5.0, "checkpoint_save": 3.0, "checkpoint_restore": 2.0,
           "lost_work": 8.0, "restart": 6.0, "startup": 5.0, "other": 1.0}  # 100 s of wall time


def test_runtime_goodput_and_ettr_from_a_ledger():
    assert frame.runtime_goodput(BUCKETS) == pytest.approx(0.70)
    # ETTR leaves out lost work, restarts, restores and start-up: (100 - 21) / 100
    assert frame.effective_training_time_ratio(BUCKETS) == pytest.approx(0.79)
    assert frame.effective_training_time_ratio(BUCKETS, queue_s=100.0) == pytest.approx(0.395)
    assert frame.effective_training_time_ratio(BUCKETS) >= frame.runtime_goodput(BUCKETS)


def test_mpg_is_a_product_and_mfu_from_throughput():
    assert frame.ml_productivity_goodput(0.95, 0.9, 0.4) == pytest.approx(0.342)
    assert frame.scheduling_goodput(100.0, 95.0) == pytest.approx(0.95)
    # Llama 3 405B, Table 4: 400 TFLOPs per GPU of 989 peak is about 40%
    gpus, per_gpu = 16_384, 400e12
    tokens_per_s = gpus * per_gpu / (6 * 405e9)
    assert frame.model_flops_utilization(tokens_per_s, 405e9, gpus, frame.H100_BF16_PEAK_FLOPS) == pytest.approx(0.404, abs=1e-3)
    for n, tflops, mfu in frame.LLAMA3_405B_THROUGHPUT:
        assert tflops * 1e12 / frame.H100_BF16_PEAK_FLOPS == pytest.approx(mfu, abs=0.006)
    assert frame.useful_flops_share(0.9, 0.38) == pytest.approx(0.342)


def test_ledger_frame_rows():
    rows = {r["metric"]: r["value"] for r in frame.ledger_frame(BUCKETS, mfu=0.4, queue_s=25.0)}
    assert rows["scheduling goodput"] == pytest.approx(0.8)
    assert rows["ML Productivity Goodput"] == pytest.approx(0.8 * 0.7 * 0.4)
    assert [s["chapters"] for s in frame.SENSES] == ["1-5, 10", "8", "9"]


def test_bad_input():
    with pytest.raises(ConfigError, match="category"):
        frame.runtime_goodput({"useful": 1.0})
    with pytest.raises(ConfigError, match="runtime"):
        frame.ml_productivity_goodput(1.0, 1.5, 0.4)
