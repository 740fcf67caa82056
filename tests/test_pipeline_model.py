"""The model of the data stall against hand-computed values, and the device prefetcher on CPU."""

import math

import numpy as np
import pytest

from goodputlab.engine.config import RunConfig
from goodputlab.pipeline.loader import SlowStorageDataset, StepSampler, data_file, make_loader
from goodputlab.errors import ConfigError
from goodputlab.theory.data_stall import (
    batch_bytes,
    cpu_bound_period_s,
    depth_for_share,
    emulated_latencies,
    pipeline_memory_bytes,
    predict_stall,
    simulate_waits,
    steady_state_wait_s,
    supply_ratio,
    workers_needed,
)
from goodputlab.pipeline.prefetch import DevicePrefetcher, device_batches
from goodputlab.training.workload import PRESETS

MS = 1e-3


@pytest.fixture(scope="module")
def tokens_path(tmp_path_factory):
    return data_file(tmp_path_factory.mktemp("data"), PRESETS["tiny"], seed=0)


# --- closed forms -------------------------------------------------------------------------------


def test_steady_state_wait_by_hand():
    # 0 workers: the loop reads (0.4), waits on storage (30) and transforms (10) itself
    assert steady_state_wait_s(30 * MS, 10 * MS, 0, 15 * MS, read_s=0.4 * MS) == pytest.approx(40.4 * MS)
    # 2 workers deliver a batch every (30 + 10) / 2 = 20 ms; the step takes 15: 5 ms wait
    assert steady_state_wait_s(30 * MS, 10 * MS, 2, 15 * MS) == pytest.approx(5 * MS)
    # 4 workers: one every 10 ms, faster than the step: only the hand-off remains
    assert steady_state_wait_s(30 * MS, 10 * MS, 4, 15 * MS, handoff_s=0.5 * MS) == pytest.approx(0.5 * MS)


def test_cores_bound_the_period_when_workers_burn_cpu():
    # 2 workers x 30 ms transform: 15 ms per batch, as fast as the step: no wait on paper
    assert steady_state_wait_s(0.0, 30 * MS, 2, 15 * MS) == pytest.approx(0.0)
    # but a step (15 ms CPU) plus a transform (30 ms CPU) on 2 cores take at least 22.5 ms
    assert cpu_bound_period_s(15 * MS, 30 * MS, cores=2) == pytest.approx(22.5 * MS)
    assert steady_state_wait_s(0.0, 30 * MS, 2, 15 * MS, cores=2) == pytest.approx(7.5 * MS)
    # storage latency is a sleep, not CPU: it does not enter the bound
    assert steady_state_wait_s(20 * MS, 0.0, 4, 15 * MS, cores=2) == pytest.approx(0.0)


def test_supply_ratio_and_workers_needed():
    assert supply_ratio(25 * MS, 5 * MS, 3, 20 * MS) == pytest.approx(2.0)
    assert supply_ratio(25 * MS, 5 * MS, 0, 20 * MS) == 0.0
    assert supply_ratio(0.0, 0.0, 2, 20 * MS) == math.inf
    assert workers_needed(45 * MS, 5 * MS, 20 * MS) == 3  # 50 / 20 = 2.5 -> 3
    assert workers_needed(40 * MS, 0.0, 20 * MS) == 2  # exactly 2, not 3
    assert workers_needed(40 * MS, 0.0, 20 * MS, headroom=1.2) == 3  # 2.4 -> 3
    assert workers_needed(0.0, 0.0, 20 * MS) == 1


def test_memory_of_the_depth():
    mb = 1_000_000
    assert pipeline_memory_bytes(mb, workers=4, prefetch=3) == 12 * mb
    assert pipeline_memory_bytes(mb, workers=4, prefetch=3, pin_memory=True) == 24 * mb
    assert pipeline_memory_bytes(mb, workers=2) == 4 * mb  # PyTorch's default prefetch is 2
    assert pipeline_memory_bytes(mb, workers=0) == 0
    # ImageNet-like: 256 images of 3x224x224 bytes, 8 workers x 4 ahead = 32 batches, about 1.2 GB
    assert pipeline_memory_bytes(256 * 3 * 224 * 224, 8, 4) == pytest.approx(1.233e9, rel=1e-3)


def test_batch_bytes_is_the_real_batch(tokens_path):
    ds = SlowStorageDataset(tokens_path, seed=0)
    batch = next(iter(make_loader(ds, StepSampler(len(ds), 16, 0, 0, 1), 0, None)))
    storage = batch["x"].untyped_storage()
    # the whole batch is one storage (one hand-off from a worker), exactly batch_bytes long
    assert batch["y"].untyped_storage().data_ptr() == storage.data_ptr() == batch["idx"].untyped_storage().data_ptr()
    assert storage.nbytes() == batch_bytes(16, PRESETS["tiny"].context) == 16 * 34 * 8


# --- the queue, replayed -------------------------------------------------------------------------


def test_one_worker_keeps_pace_or_not_by_hand():
    # W=1, p=1, L=10 ms, S=4 ms: the worker starts batch k+1 when the loop takes k,
    # so each later batch is ready 10 ms after the previous was taken: 6 ms wait
    waits = simulate_waits([10 * MS] * 6, 0.0, 1, 1, 4 * MS)
    assert waits == pytest.approx(np.array([10, 6, 6, 6, 6, 6]) * MS)
    # L=4 ms < S=10 ms: never a wait after the first batch
    assert simulate_waits([4 * MS] * 6, 0.0, 1, 1, 10 * MS)[1:] == pytest.approx(np.zeros(5))


def test_two_workers_in_lockstep_by_hand():
    # both start at 0 and finish batches 0 and 1 together at 40 ms; the loop (15 ms + 1 ms hand-off)
    # takes 0 at 41, asks for 1 at 56 (ready: waits 1), for 2 at 72 (ready at 81: waits 9), ...
    waits = simulate_waits([40 * MS] * 8, 0.0, 2, 2, 15 * MS, handoff_s=1 * MS)
    assert waits == pytest.approx(np.array([41, 1, 9, 1, 9, 1, 9, 1]) * MS)
    # on average (over whole pairs of steps) the steady state: max(H, 40/2 - 15) = 5 ms
    waits = simulate_waits([40 * MS] * 41, 0.0, 2, 2, 15 * MS, handoff_s=1 * MS)
    assert waits[1:].mean() == pytest.approx(steady_state_wait_s(40 * MS, 0.0, 2, 15 * MS, handoff_s=1 * MS))


def test_depth_absorbs_a_slow_read_by_hand():
    # one 30 ms read among 2 ms reads, a 10 ms step, one worker
    latencies = [2 * MS] * 4 + [30 * MS] + [2 * MS] * 5
    waits = {p: simulate_waits(latencies, 0.0, 1, p, 10 * MS) for p in (1, 2, 3)}
    # p=1: batch 4 is dispatched when batch 3 is taken (32 ms) and ready at 62; asked for at 42
    assert waits[1][4] == pytest.approx(20 * MS) and waits[1][5:].sum() == 0
    # p=2: dispatched a step earlier: half the stall; p=3: started early enough to hide it
    assert waits[2][4] == pytest.approx(10 * MS)
    assert waits[3][1:].sum() == pytest.approx(0.0)


def test_zero_workers_load_in_the_loop():
    latencies = [5 * MS, 7 * MS, 9 * MS]
    assert simulate_waits(latencies, 2 * MS, 0, None, 15 * MS, read_s=0.5 * MS) == pytest.approx(
        np.array([7.5, 9.5, 11.5]) * MS
    )


def test_long_replay_converges_to_the_steady_state():
    waits = simulate_waits([50 * MS] * 3000, 0.0, 3, 2, 10 * MS)
    assert waits[100:].mean() == pytest.approx(50 * MS / 3 - 10 * MS, rel=1e-3)


def test_deeper_prefetch_never_waits_longer():
    latencies = emulated_latencies(30 * MS, 1.0, seed=3, steps=3000)
    totals = [simulate_waits(latencies, 1 * MS, 3, p, 12 * MS).sum() for p in (1, 2, 4, 8)]
    assert all(a >= b - 1e-12 for a, b in zip(totals, totals[1:]))
    assert totals[0] > 2 * totals[-1]  # and depth matters a lot at this jitter


def test_prediction_share_by_hand():
    # 2 workers, 40 ms reads, 10 ms step: period 20 ms, wait 10 ms: half the loop is waiting
    pred = predict_stall(40 * MS, 0.0, 2, 2, 10 * MS, steps=400, batch_size=16)
    assert pred.wait_share == pytest.approx(0.5, abs=0.01)
    assert pred.samples_per_s == pytest.approx(16 / 0.020, rel=0.01)
    assert pred.ceiling_samples_per_s == pytest.approx(16 / 0.010)


def test_emulated_latencies_are_the_datasets_draws(tokens_path):
    ds = SlowStorageDataset(tokens_path, seed=11, io_latency_s=0.025, io_jitter=0.7)
    expected = np.array([ds.read_latency(s) for s in range(40, 90)])
    assert emulated_latencies(0.025, 0.7, seed=11, steps=50, start_step=40) == pytest.approx(expected, rel=0, abs=0)


# --- how deep must the pipeline be --------------------------------------------------------------


def test_depth_for_share_constant_latency_needs_one_batch_per_worker():
    advice = depth_for_share(0.02, 30 * MS, 0.0, 4, 15 * MS, batch_nbytes=1000)
    assert advice.feasible and advice.prefetch == 1 and advice.depth == 4 and advice.memory_bytes == 4000


def test_depth_for_share_with_jitter_is_the_smallest_sufficient_depth():
    args = dict(target_share=0.02, load_s=30 * MS, transform_s=0.0, workers=3, step_s=15 * MS, jitter=1.0)
    advice = depth_for_share(**args)
    assert advice.feasible and advice.prefetch > 1 and advice.predicted_share <= 0.02
    one_less = depth_for_share(**args, max_prefetch=advice.prefetch - 1)
    assert not one_less.feasible and one_less.predicted_share > 0.02


def test_depth_cannot_fix_too_few_workers():
    advice = depth_for_share(0.02, 50 * MS, 0.0, 2, 15 * MS, max_prefetch=16)
    assert not advice.feasible and advice.prefetch is None and advice.memory_bytes is None
    assert advice.workers_needed == 4  # 1.2 x 50 / 15 = 4.0
    assert advice.predicted_share == pytest.approx((25 - 15) / 25, abs=0.01)


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: simulate_waits([-1 * MS], 0.0, 1, 1, 10 * MS), "latencies_s"),
        (lambda: simulate_waits([1 * MS], 0.0, 1, 0, 10 * MS), "prefetch"),
        (lambda: simulate_waits([1 * MS], 0.0, 0, 2, 10 * MS), "prefetch"),
        (lambda: steady_state_wait_s(1 * MS, -1.0, 1, 10 * MS), "transform_s"),
        (lambda: steady_state_wait_s(1 * MS, 0.0, -1, 10 * MS), "workers"),
        (lambda: depth_for_share(1.5, 1 * MS, 0.0, 1, 10 * MS), "target_share"),
        (lambda: workers_needed(1 * MS, 0.0, 0.0), "step_s"),
        (lambda: cpu_bound_period_s(1 * MS, 0.0, cores=0), "cores"),
        (lambda: pipeline_memory_bytes(100, 0, prefetch=2), "prefetch"),
    ],
)
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ConfigError) as e:
        call()
    assert e.value.field == field


def test_device_prefetch_is_a_validated_switch():
    assert RunConfig(device_prefetch=True).device_prefetch is True  # allowed on CPU: a pass-through
    with pytest.raises(ConfigError) as e:
        RunConfig(device_prefetch="yes")
    assert e.value.field == "device_prefetch"


# --- the device prefetcher on CPU ----------------------------------------------------------------


def test_device_batches_is_a_pass_through_on_cpu(tokens_path):
    ds = SlowStorageDataset(tokens_path, seed=0)
    loader = make_loader(ds, StepSampler(len(ds), 16, 0, 0, 4), 0, None)
    it = device_batches(loader, "cpu", enabled=True)
    assert not isinstance(it, DevicePrefetcher)
    assert type(it) is type(iter(loader))  # the loader's own iterator, untouched
    assert [b["step"] for b in it] == [0, 1, 2, 3]


def test_prefetcher_yields_the_loaders_batches_in_order(tokens_path):
    ds = SlowStorageDataset(tokens_path, seed=0)
    plain = list(make_loader(ds, StepSampler(len(ds), 16, 0, 3, 11), 0, None))
    ahead = DevicePrefetcher(make_loader(ds, StepSampler(len(ds), 16, 0, 3, 11), 2, 2), "cpu")
    got = list(ahead)
    assert [b["step"] for b in got] == list(range(3, 11))
    for a, b in zip(plain, got):
        assert a["x"].equal(b["x"]) and a["y"].equal(b["y"]) and a["idx"].equal(b["idx"])
    with pytest.raises(StopIteration):  # stays exhausted
        next(ahead)
    assert list(DevicePrefetcher([], "cpu")) == []


def test_prefetcher_takes_the_next_batch_one_step_ahead():
    import torch

    pulled = []

    def source():
        for k in range(3):
            pulled.append(k)
            yield {"step": k, "x": torch.zeros(1), "y": torch.zeros(1)}

    it = DevicePrefetcher(source(), "cpu")
    assert pulled == []  # nothing is read before the first next()
    assert next(it)["step"] == 0 and pulled == [0, 1]  # batch 1 is staged before step 0 runs
    assert next(it)["step"] == 1 and pulled == [0, 1, 2]
    assert next(it)["step"] == 2
    with pytest.raises(StopIteration):
        next(it)
