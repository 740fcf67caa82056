"""The input pipeline: deterministic order, exact resume position, real latency and CPU cost."""

import time

import numpy as np
import pytest

from goodputlab.pipeline.loader import SlowStorageDataset, StepSampler, data_file, make_loader
from goodputlab.training.workload import PRESETS


@pytest.fixture(scope="module")
def tokens_path(tmp_path_factory):
    return data_file(tmp_path_factory.mktemp("data"), PRESETS["tiny"], seed=0)


def test_each_epoch_visits_every_sample_once():
    s = StepSampler(n_samples=64, batch_size=8, seed=1, start_step=0, end_step=16)
    batches = [r.indices for r in s]
    for epoch in range(2):
        seen = sorted(i for b in batches[epoch * 8 : (epoch + 1) * 8] for i in b)
        assert seen == list(range(64))
    assert batches[:8] != batches[8:]  # a new order each epoch


def test_resuming_at_a_step_yields_exactly_the_remaining_batches():
    full = [tuple(r.indices) for r in StepSampler(100, 10, 3, 0, 25)]
    resumed = [tuple(r.indices) for r in StepSampler(100, 10, 3, 13, 25)]
    assert resumed == full[13:]
    assert StepSampler(100, 10, 3, 13, 25).indices_for(13) == list(full[13])


def test_data_file_is_generated_once_and_deterministic(tmp_path):
    a = data_file(tmp_path / "a", PRESETS["tiny"], seed=5)
    b = data_file(tmp_path / "b", PRESETS["tiny"], seed=5)
    assert np.array_equal(np.load(a), np.load(b))
    mtime = a.stat().st_mtime_ns
    assert data_file(tmp_path / "a", PRESETS["tiny"], seed=5) == a and a.stat().st_mtime_ns == mtime
    tokens = np.load(a)
    assert tokens.shape == (PRESETS["tiny"].n_samples, PRESETS["tiny"].context + 1)
    assert tokens.max() < PRESETS["tiny"].vocab


def test_batches_are_the_same_with_or_without_worker_processes(tokens_path):
    ds = SlowStorageDataset(tokens_path, seed=0)
    plain = [b for b in make_loader(ds, StepSampler(len(ds), 16, 0, 5, 17), 0, None)]
    parallel = [b for b in make_loader(ds, StepSampler(len(ds), 16, 0, 5, 17), 2, 3)]
    assert [b["step"] for b in parallel] == list(range(5, 17))
    for a, b in zip(plain, parallel):
        assert a["step"] == b["step"]
        assert a["x"].equal(b["x"]) and a["y"].equal(b["y"]) and a["idx"].equal(b["idx"])
    tokens = np.load(tokens_path)
    first = plain[0]
    assert np.array_equal(first["x"].numpy(), tokens[first["idx"].numpy(), :-1])  # order kept after the sorted read
    assert first["y"][:, :-1].equal(first["x"][:, 1:])  # targets are the next tokens


def test_read_latency_is_seeded_and_has_the_configured_mean(tokens_path):
    ds = SlowStorageDataset(tokens_path, seed=0, io_latency_s=0.010, io_jitter=0.5)
    lat = np.array([ds.read_latency(s) for s in range(4000)])
    assert lat.mean() == pytest.approx(0.010, rel=0.05)
    assert lat.std() / lat.mean() == pytest.approx(0.5, rel=0.15)
    assert ds.read_latency(17) == ds.read_latency(17)
    assert SlowStorageDataset(tokens_path, seed=0, io_latency_s=0.01).read_latency(3) == 0.01


def test_latency_waits_and_transform_burns_cpu(tokens_path):
    from goodputlab.pipeline.loader import BatchRequest

    slow_io = SlowStorageDataset(tokens_path, seed=0, io_latency_s=0.05)
    slow_io.__getitems__(BatchRequest(1, list(range(16))))  # first read opens the memory map
    t, c = time.perf_counter(), time.process_time()
    slow_io.__getitems__(BatchRequest(0, list(range(16))))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    assert wall >= 0.05 and cpu < 0.04  # waiting on "storage" costs no CPU

    slow_cpu = SlowStorageDataset(tokens_path, seed=0, transform_s=0.05)
    c = time.process_time()
    slow_cpu.__getitems__(BatchRequest(0, list(range(16))))
    assert time.process_time() - c >= 0.05  # the transform is real CPU work, however busy the machine


def test_batch_larger_than_the_data_set_is_refused():
    with pytest.raises(ValueError, match="exceeds"):
        StepSampler(10, 20, 0, 0, 5)
