"""Shared material of the statistical-efficiency tests: a synthetic sweep whose answers are known,
and one tiny real sweep per test session (real torch training, a few seconds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from goodputlab.efficiency.analysis import SweepResult, Throughput, Trajectory

from goodputlab.efficiency.sweep_config import SweepConfig

SYNTHETIC_SIZES = (8, 16, 32, 64, 128)
E_MIN = 6000.0  # samples the smallest batches need (McCandlish's E_min)
OVERHEAD_S, PER_SAMPLE_S = 0.0015, 0.0003


def synthetic_result(noise: float = 40.0, missed=(), growing: bool = False, target: float = 1.4) -> SweepResult:
    """A sweep whose runs need exactly ``samples = E_MIN (1 + M / noise)`` to reach ``target``.

    Each loss curve falls linearly from 4.0 to the target at that (fractional) step and is
    measured at steps 0, 1, 2, 4, ... and just past the crossing; batch sizes in ``missed``
    level off above the target until the budget. The noise-scale estimate is ``noise``
    throughout, or with ``growing`` rises as the loss falls, reaching ``noise`` at the target.
    Step times follow ``t(M) = OVERHEAD_S + PER_SAMPLE_S M`` with a little seeded jitter.
    """
    config = SweepConfig(batch_sizes=SYNTHETIC_SIZES, target_loss=target, max_steps=2000)
    rng = np.random.default_rng(0)
    times = {m: list((OVERHEAD_S + PER_SAMPLE_S * m) * (1 + 0.01 * rng.standard_normal(9))) for m in SYNTHETIC_SIZES}
    start = 4.0

    def noise_at(loss: float) -> float:
        return noise * math.exp(-1.5 * (loss - target)) if growing else noise

    trajectories = {}
    for m in SYNTHETIC_SIZES:
        crossing = E_MIN * (1 + m / noise) / m
        t = Trajectory(m)
        if m in missed:
            steps = [0] + [2**k for k in range(12) if 2**k < config.max_steps] + [config.max_steps]
            for s in steps:
                loss = target + 0.1 + (start - target - 0.1) * math.exp(-s / crossing)
                t.add(s, loss, noise_at(loss) if s else float("nan"), 1.0, noise_at(loss), config.lr)
            t.stopped = "max_steps"
        else:
            steps = [0] + [2**k for k in range(12) if 2**k < crossing] + [math.floor(crossing) + 1]
            for s in steps:
                loss = start - (start - target) * s / crossing
                t.add(s, loss, noise_at(loss) if s else float("nan"), 1.0, noise_at(loss), config.lr)
            t.stopped = "target"
        t.steps_run = t.steps[-1]
        trajectories[m] = t
    return SweepResult(config, Throughput(times), trajectories, {"threads": 1, "torch": "none"}, 0.0)


#: A real sweep small enough for the tests: a few hundred steps of the tiny GPT in all.
TINY = dict(
    batch_sizes=(4, 16),
    target_loss=2.2,
    max_steps=60,
    rounds=1,
    timed_steps=2,
    warmup_steps=1,
    eval_sequences=32,
    eval_growth=1.2,
    pool_sequences=2048,
    lr=3e-3,
)


@pytest.fixture(scope="session")
def tiny_sweep():
    """One real sweep shared by the tests of the sweep, the CLI's analysis and the panel."""
    from goodputlab.efficiency.sweep import run_sweep

    return run_sweep(SweepConfig(**TINY))
