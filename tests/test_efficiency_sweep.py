"""The real sweep: gradients by halves, the noise scale through torch, determinism, missed targets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from goodputlab.efficiency.analysis import SweepResult

from goodputlab.efficiency.noise import simple_noise_scale

from goodputlab.efficiency.sweep_config import SweepConfig
from goodputlab.efficiency.sweep import Lab, half_batch_step, run_sweep, train_to_target

from efficiency_helpers import TINY, tiny_sweep  # noqa: F401  (a session fixture)
from test_efficiency_analysis import D, NOISE_SD, exact_regression


def test_half_batch_step_gives_the_full_gradient_and_the_exact_noise_scale():
    """Linear regression in torch: the step leaves the full batch's gradient, and the norms it
    returns give the known noise scale ((d + 1)|delta|^2 + d s^2) / |delta|^2."""
    gen = torch.Generator().manual_seed(0)
    delta = torch.linspace(-1, 1, D, dtype=torch.float64)
    w = torch.nn.Parameter(delta.clone())  # w* = 0, so w - w* = delta
    small, big = [], []
    for _ in range(3000):
        x = torch.randn(32, D, generator=gen, dtype=torch.float64)
        y = NOISE_SD * torch.randn(32, generator=gen, dtype=torch.float64)

        def loss_of(sl):
            return 0.5 * ((x[sl] @ w - y[sl]) ** 2).mean()

        loss, s, b = half_batch_step([w], loss_of, 32)
        full = torch.autograd.grad(loss_of(slice(0, 32)), [w])[0]
        assert torch.allclose(w.grad, full) and loss == pytest.approx(float(loss_of(slice(0, 32)).detach()))
        assert b == pytest.approx(float(full @ full))
        small.append(s)
        big.append(b)
    assert simple_noise_scale(small, big, 16, 32) == pytest.approx(exact_regression(delta.numpy())[2], rel=0.08)
    with pytest.raises(ValueError):
        half_batch_step([w], loss_of, 7)


def test_sweep_records_every_batch_size(tiny_sweep):
    cfg = tiny_sweep.config
    assert sorted(tiny_sweep.trajectories) == list(cfg.batch_sizes)
    for m, t in tiny_sweep.trajectories.items():
        assert t.batch_size == m and t.steps[0] == 0 and t.steps == sorted(set(t.steps))
        assert t.losses[0] == pytest.approx(math.log(64), abs=0.15)  # the initial model knows nothing
        assert t.stopped == "target" and t.losses[-1] <= cfg.target_loss < min(t.losses[:-1])
        assert t.steps_run == t.steps[-1] <= cfg.max_steps
        assert all(b > 0 for b in t.noise_scales[1:])
        assert t.lrs[-1] == pytest.approx(cfg.lr_at(m))
        assert len(tiny_sweep.throughput.times_s[m]) == cfg.rounds * cfg.timed_steps
    assert tiny_sweep.machine["threads"] == cfg.threads and tiny_sweep.machine["torch"] == torch.__version__
    a = tiny_sweep.analyse()
    assert a.reference_batch_size == 4 and not a.missed
    # the bigger batch takes fewer steps but more samples
    assert a.row(16)["steps_to_target"] < a.row(4)["steps_to_target"]
    assert a.row(16)["samples_to_target"] > a.row(4)["samples_to_target"]
    assert 0 < a.row(16)["statistical_efficiency"] < 1 and 0 < a.noise_scale < math.inf
    again = SweepResult.from_dict(json.loads(json.dumps(tiny_sweep.to_dict())))
    assert again.analyse().to_json() == a.to_json()


def test_sweep_is_deterministic(tiny_sweep):
    """The same config trains the same model step for step (timing aside)."""
    cfg = tiny_sweep.config
    rerun = run_sweep(cfg, throughput=tiny_sweep.throughput, base_run=tiny_sweep.trajectories[4])
    assert rerun.trajectories[4] is tiny_sweep.trajectories[4]
    first, second = tiny_sweep.trajectories[16], rerun.trajectories[16]
    assert second.steps == first.steps and second.losses == first.losses
    assert second.noise_scales[1:] == first.noise_scales[1:]
    assert rerun.analyse().to_json()["rows"][1]["steps_to_target"] == tiny_sweep.analyse().row(16)["steps_to_target"]


def test_a_batch_that_misses_the_target_is_reported(tiny_sweep):
    steps4 = tiny_sweep.analyse().row(4)["steps_to_target"]
    steps16 = tiny_sweep.analyse().row(16)["steps_to_target"]
    budget = (steps4 + steps16) // 2  # enough for 16, not for 4
    short = run_sweep(tiny_sweep.config.replace(max_steps=budget), throughput=tiny_sweep.throughput)
    t4 = short.trajectories[4]
    assert t4.stopped == "max_steps" and t4.steps_run == budget and min(t4.losses) > short.config.target_loss
    a = short.analyse()
    assert a.missed == [4] and a.reference_batch_size == 16
    row = a.row(4)
    assert row["reached"] is False and row["steps_to_target"] is None and row["goodput"] is None
    assert a.best_batch_size == 16 and a.row(16)["statistical_efficiency"] == 1.0
    out = json.loads(json.dumps(a.to_json(), allow_nan=False))
    assert out["rows"][0]["samples_to_target"] is None and out["missed"] == [4]


def test_rules_set_the_learning_rate(tiny_sweep):
    cfg = tiny_sweep.config
    lab = Lab(cfg.replace(lr_rule="adascale", max_steps=8))
    previous = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        t = train_to_target(lab, 16)
    finally:
        torch.set_num_threads(previous)
    assert t.stopped == "max_steps" and t.steps[-1] == 8
    # the first step has no estimate yet (the sqrt rule); then the gain of the running noise scale
    assert t.lrs[1] == pytest.approx(cfg.lr * 2.0)
    assert all(cfg.lr <= lr < cfg.lr * 2.0 for lr in t.lrs[2:])
    assert cfg.replace(lr_rule="linear").lr_at(16) == pytest.approx(4 * cfg.lr)


def test_sweep_restores_threads_and_checks_what_it_reuses(tiny_sweep):
    previous = torch.get_num_threads()
    cfg = tiny_sweep.config
    with pytest.raises(ValueError):
        run_sweep(cfg.replace(batch_sizes=(4, 8)), throughput=tiny_sweep.throughput)
    with pytest.raises(ValueError):
        run_sweep(cfg, throughput=tiny_sweep.throughput, base_run=tiny_sweep.trajectories[16])
    assert torch.get_num_threads() == previous


def test_lab_streams_are_shared_across_batch_sizes():
    """Sample i of the stream is the same whatever the batch size, and the held-out set is apart."""
    lab = Lab(SweepConfig(**TINY))
    x4 = torch.cat([x for x, _ in lab.batches(4, 8)])
    x16 = torch.cat([x for x, _ in lab.batches(16, 2)])
    assert torch.equal(x4, x16)
    held = {tuple(r) for r in lab.held_out.tolist()}
    assert not held & {tuple(r) for r in lab.tokens.tolist()}
    assert np.isfinite(lab.held_out_loss(lab.fresh_model(1e-3)[0]))
