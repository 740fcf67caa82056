"""The real experiment behind chapter 8: train the lab's GPT at each batch size to a target loss.

For every batch size of a :class:`~goodputlab.efficiency.sweep_config.SweepConfig`:

1. **throughput**: the plain training step (gather the batch, forward, backward, AdamW)
   is timed after a warm-up, in rounds that visit every batch size in turn, so a busy
   patch of a shared machine slows all of them alike. The median step gives samples/s.
2. **steps to the target**: a fresh copy of the same seeded model trains on the same
   stream of sequences (every batch size sees sample ``i`` at position ``i``) with the
   rule's learning rate, until the loss on a fixed held-out set reaches the target or
   the step budget runs out. Each step's gradient is taken as two halves of the batch:
   their mean is exactly the full batch's gradient (what the optimizer uses), and the
   squared norms at ``M/2`` and ``M`` feed the noise-scale estimator. That costs a
   little more per step, which is why throughput is timed on the plain step.

Everything is seeded, and the thread count is fixed, so a sweep on a given machine
repeats step for step. Runs in the calling process (no supervisor: nothing fails here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import platform
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from ..pipeline.loader import StepSampler
from ..training.model import GPT
from ..training.workload import PRESETS, MarkovSource
from .analysis import SweepResult, Throughput, Trajectory
from .noise import NoiseScaleTracker
from .sweep_config import SweepConfig

_EVAL_SEED_OFFSET = 1_000_003  # the held-out set comes from another stream of the same source


@dataclass(frozen=True)
class SweepProgress:
    """What a progress display is told: the phase (``throughput`` or ``train``), the batch
    size, and for training the steps done, the last held-out loss and noise scale.
    ``done`` of ``total`` units are finished (the throughput phase is one unit, each batch
    size's training one more)."""

    phase: str
    batch_size: int
    done: int
    total: int
    step: int = 0
    loss: float = float("nan")
    noise_scale: float = float("nan")


ProgressCallback = Callable[[SweepProgress], None]


class Lab:
    """The data and the model factory a sweep shares across batch sizes.

    ``tokens``: ``pool_sequences`` training sequences of ``context + 1`` tokens from the
    seed's Markov source; ``held_out``: ``eval_sequences`` more from another stream.
    """

    def __init__(self, config: SweepConfig):
        self.config = config
        self.preset = dataclasses.replace(PRESETS[config.model], dropout=0.0)  # the data's noise only
        source = MarkovSource.make(config.seed, self.preset.vocab)
        width = self.preset.context + 1
        self.tokens = torch.from_numpy(source.sample(config.pool_sequences, width, config.seed).astype(np.int64))
        held = source.sample(config.eval_sequences, width, config.seed + _EVAL_SEED_OFFSET).astype(np.int64)
        self.held_out = torch.from_numpy(held)

    def fresh_model(self, lr: float):
        """The seeded initial model and its AdamW (constant ``lr``, no weight decay): identical on every call."""
        torch.manual_seed(self.config.seed)
        model = GPT(self.preset)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
        return model, optimizer

    def batches(self, batch_size: int, steps: int, start_step: int = 0):
        """Token batches ``(x, y)`` of steps ``start_step ..``: sample ``i`` of the stream at position ``i``."""
        sampler = StepSampler(self.config.pool_sequences, batch_size, self.config.seed, start_step, start_step + steps)
        for request in sampler:
            b = self.tokens[torch.as_tensor(request.indices)]
            yield b[:, :-1], b[:, 1:]

    @torch.no_grad()
    def held_out_loss(self, model) -> float:
        """Mean cross-entropy per token on the held-out sequences (nats)."""
        _, loss = model(self.held_out[:, :-1], self.held_out[:, 1:])
        return float(loss)


def half_batch_step(params: Sequence[torch.Tensor], loss_of: Callable[[slice], torch.Tensor], batch_size: int):
    """Gradients of a batch taken as two equal halves; leaves the full batch's gradient in ``.grad``.

    ``loss_of(sl)`` returns the mean loss over the samples ``sl`` of the batch. Returns
    ``(loss, small_sq, big_sq)``: the batch's mean loss, the mean over the two halves of
    the squared gradient norm at ``batch_size / 2`` samples, and the squared norm of
    their mean, the gradient at ``batch_size`` samples (norms summed in float64).
    """
    if batch_size < 2 or batch_size % 2:
        raise ValueError(f"batch_size must be even and >= 2, got {batch_size}")
    half = batch_size // 2
    total = None
    small_sq = 0.0
    losses = []
    for sl in (slice(0, half), slice(half, batch_size)):
        loss = loss_of(sl)
        grads = torch.autograd.grad(loss, params)
        small_sq += float(sum(g.pow(2).sum(dtype=torch.float64) for g in grads))
        total = list(grads) if total is None else [a + b for a, b in zip(total, grads)]
        losses.append(float(loss.detach()))
    big_sq = 0.0
    for p, g in zip(params, total):
        p.grad = g / 2
        big_sq += float(p.grad.pow(2).sum(dtype=torch.float64))
    return sum(losses) / 2, small_sq / 2, big_sq


def measure_throughput(lab: Lab, progress: ProgressCallback | None = None) -> Throughput:
    """Seconds per plain training step for every batch size of the sweep (see the module docstring).

    Every batch size trains at the base learning rate here: a step's cost does not depend
    on it, and no rule can make a timing run diverge.
    """
    cfg = lab.config
    runs = {m: lab.fresh_model(cfg.lr) for m in cfg.batch_sizes}
    times: dict[int, list[float]] = {m: [] for m in cfg.batch_sizes}
    per_round = cfg.warmup_steps + cfg.timed_steps
    total = len(cfg.batch_sizes) + 1
    for r in range(cfg.rounds):
        for m in cfg.batch_sizes:
            model, optimizer = runs[m]
            batches = lab.batches(m, per_round, start_step=r * per_round)
            for i in range(per_round):
                start = time.perf_counter()
                x, y = next(batches)
                _, loss = model(x, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                elapsed = time.perf_counter() - start
                if i >= cfg.warmup_steps:
                    times[m].append(elapsed)
            if progress is not None:
                progress(SweepProgress("throughput", m, 0, total))
    return Throughput(times)


def train_to_target(lab: Lab, batch_size: int, progress: ProgressCallback | None = None, done: int = 0,
                    lr: float | None = None) -> Trajectory:
    """Train a fresh model at ``batch_size`` until the held-out loss reaches the target (or the budget runs out).

    The held-out loss is measured after step 1, 2, ... and then at steps growing by
    ``eval_growth``; the noise-scale tracker's state is recorded beside it. ``lr``: one learning
    rate for every step and batch size (a degraded step of in-job recovery, chapter 11); None: the
    sweep's rule.
    """
    cfg = lab.config
    m = batch_size
    model, optimizer = lab.fresh_model(cfg.lr_at(m) if lr is None else lr)
    params = [p for p in model.parameters() if p.requires_grad]
    tracker = NoiseScaleTracker(cfg.noise_window)
    traj = Trajectory(m)
    nan = float("nan")
    traj.add(0, lab.held_out_loss(model), nan, nan, nan, nan)
    total = len(cfg.batch_sizes) + 1
    next_eval = 1
    start = time.perf_counter()
    for i, (x, y) in enumerate(lab.batches(m, cfg.max_steps)):
        step_lr = cfg.lr_at(m, tracker.noise_scale if tracker.updates else float("inf")) if lr is None else lr
        for group in optimizer.param_groups:
            group["lr"] = step_lr
        loss, small_sq, big_sq = half_batch_step(params, lambda sl: model(x[sl], y[sl])[1], m)
        tracker.update(small_sq, big_sq, m // 2, m)
        optimizer.step()
        steps = i + 1
        diverged = not math.isfinite(loss)
        if steps == next_eval or steps == cfg.max_steps or diverged:
            held = lab.held_out_loss(model)
            traj.add(steps, held, tracker.noise_scale, tracker.grad_sq, tracker.trace_sigma, step_lr)
            if progress is not None:
                progress(SweepProgress("train", m, done, total, steps, held, tracker.noise_scale))
            if held <= cfg.target_loss:
                traj.stopped = "target"
                break
            if diverged or not math.isfinite(held):
                traj.stopped = "diverged"
                break
            next_eval = max(steps + 1, math.ceil(steps * cfg.eval_growth))
    else:
        traj.stopped = "max_steps"
    traj.steps_run = traj.steps[-1]
    traj.wall_s = time.perf_counter() - start
    return traj


class SweepBar:
    """A progress callback that draws a tqdm bar over the sweep's parts (timing, then one
    training run per batch size), with the current step, loss and noise scale beside it.
    ``tqdm.auto``: a text bar on a terminal (on stderr), a widget in a notebook."""

    def __init__(self, config: SweepConfig):
        import sys

        from tqdm.auto import tqdm

        total = len(config.batch_sizes) + 1
        self.bar = tqdm(total=total, unit="part", desc=f"sweep ({config.lr_rule})", leave=True, file=sys.stderr)

    def __call__(self, p) -> None:
        if p.done > self.bar.n:
            self.bar.update(p.done - self.bar.n)
        if p.phase == "throughput":
            self.bar.set_description("timing steps")
            self.bar.set_postfix(batch=p.batch_size)
        elif p.phase == "train":
            self.bar.set_description(f"training batch {p.batch_size}")
            self.bar.set_postfix(step=p.step, loss=f"{p.loss:.3f}", noise_scale=f"{p.noise_scale:.0f}")
        else:
            self.bar.set_description("sweep done")
            self.bar.set_postfix()
            self.close()

    def close(self) -> None:
        self.bar.close()


def machine_info(threads: int) -> dict:
    """What the figures came from: cores, torch threads, torch version, processor."""
    return {
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "device": "cpu",
    }


@contextlib.contextmanager
def torch_threads(threads: int):
    """``torch``'s thread count set to ``threads`` for a block, and restored after (a busy machine's cores
    oversubscribed by torch's default threads slow a small model's steps many times over)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_sweep(
    config: SweepConfig | None = None,
    progress: ProgressCallback | None = None,
    throughput: Throughput | None = None,
    base_run: Trajectory | None = None,
    **overrides,
) -> SweepResult:
    """Measure throughput, then train every batch size to the target; returns the raw results.

    ``config`` (or keyword overrides of the defaults: ``run_sweep(lr_rule="linear")``)
    says what to sweep. ``throughput`` reuses a measurement of the same batch sizes
    (throughput does not depend on the learning-rate rule), so comparing rules times
    the steps once; it may hold more batch sizes than the sweep (all go into the fit).
    ``base_run`` reuses the smallest batch size's run from a sweep of the same
    configuration under another rule: every rule trains it at the base learning rate,
    so the run would repeat step for step. ``torch``'s thread count is set to ``config.threads`` for the
    sweep and restored after.
    """
    config = (config or SweepConfig()).replace(**overrides) if overrides else (config or SweepConfig())
    if throughput is not None and not set(config.batch_sizes) <= set(throughput.times_s):
        raise ValueError(f"throughput measured for {throughput.batch_sizes}, not for all of {list(config.batch_sizes)}")
    if base_run is not None and base_run.batch_size != config.base_batch:
        raise ValueError(f"base_run trained batch {base_run.batch_size}, not the base batch {config.base_batch}")
    started = time.perf_counter()
    with torch_threads(config.threads):
        lab = Lab(config)
        if throughput is None:
            throughput = measure_throughput(lab, progress)
        trajectories = {}
        for k, m in enumerate(config.batch_sizes):
            if k == 0 and base_run is not None:
                trajectories[m] = base_run
                continue
            trajectories[m] = train_to_target(lab, m, progress, done=k + 1)
        if progress is not None:
            progress(SweepProgress("done", config.batch_sizes[-1], len(config.batch_sizes) + 1, len(config.batch_sizes) + 1))
    return SweepResult(config, throughput, trajectories, machine_info(config.threads), time.perf_counter() - started)
