"""The training worker: one process, one attempt, read top to bottom.

The supervisor (``goodputlab.supervisor``) launches ``python -m goodputlab.worker``
for every attempt and may SIGKILL it at any moment. The worker resumes from the
newest valid checkpoint, trains until ``config.steps`` are done, and records
every phase change in the event log, from which the ledger is built.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from . import events as E
from .config import RunConfig
from .events import EventWriter
from .safe_io import read_regular


class WarmupCosine:
    """LR multiplier: linear warm-up, then cosine decay to 10%. A class (not a lambda) so it checkpoints."""

    def __init__(self, warmup_steps: int, total_steps: int):
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def resolve_device(name: str):
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    return torch.device(name)


def make_deterministic(seed: int, device) -> None:
    """Seed every RNG and ask torch for deterministic kernels (bit-exact resume depends on it)."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if device.type == "cuda":
        # CPU kernels used here are deterministic already; this call costs ~1 s, so only on CUDA.
        # Strict, not warn_only: with warn_only=True some kernels only warn and stay
        # non-deterministic (the memory-efficient attention backward that fp32 SDPA uses
        # on CUDA), and resumed runs then drift apart from the failure-free run.
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def build_training(config: RunConfig, device):
    """Model, optimizer and LR schedule for ``config``, freshly initialised from its seed."""
    import torch

    from .model import GPT
    from .workload import PRESETS

    preset = PRESETS[config.model]
    model = GPT(preset).to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.resolved_lr(), betas=(0.9, 0.95), weight_decay=0.1
    )
    warmup = max(1, min(100, config.steps // 10))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup, config.steps))
    return model, optimizer, scheduler


def train_step(model, optimizer, scheduler, batch: dict, device, non_blocking: bool = False):
    """One optimisation step; returns the loss tensor (not yet synchronised)."""
    x = batch["x"].to(device, non_blocking=non_blocking)
    y = batch["y"].to(device, non_blocking=non_blocking)
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss


def should_save(config: RunConfig, done: int, since_last_save_s: float, auto=None, now_s: float = 0.0) -> bool:
    """Checkpoint after ``done`` completed steps? Every ``ckpt_every`` steps, every
    ``ckpt_every_s`` seconds, and after the final step. With ``ckpt_every="auto"``,
    ``auto`` (a :class:`~goodputlab.adaptive.AutoInterval`) decides from the seconds
    since the last save and the run time ``now_s``."""
    if done == config.steps:
        return True
    if auto is not None:
        if auto.due(since_last_save_s, now_s):
            return True
    elif config.ckpt_every and done % config.ckpt_every == 0:
        return True
    return config.ckpt_every_s is not None and since_last_save_s >= config.ckpt_every_s


def train(config: RunConfig, run_dir: Path, events) -> dict:
    """Resume or start, train to ``config.steps``, and return what the run ended with.

    ``events`` is an :class:`~goodputlab.events.EventWriter` (or a ``NullWriter``
    for an uninstrumented loop). The caller has already emitted ``init``.
    """
    import torch

    from .adaptive import AutoInterval
    from .checkpoint import (
        CheckpointStore,
        apply_state,
        capture_state,
        check_training_state,
        load_newest,
        make_checkpointer,
    )
    from .config import AUTO
    from .data import SlowStorageDataset, StepSampler, data_file, make_loader
    from .memory_checkpoint import open_memory_tier
    from .model import count_params, state_sha256
    from .prefetch import DevicePrefetcher, device_batches
    from .workload import PRESETS

    preset = PRESETS[config.model]
    device = resolve_device(config.device)
    if config.threads:
        torch.set_num_threads(config.threads)
    make_deterministic(config.seed, device)
    model, optimizer, scheduler = build_training(config, device)
    batch_size = config.resolved_batch_size()
    dataset = SlowStorageDataset(
        data_file(run_dir / "data", preset, config.seed),
        config.seed,
        io_latency_s=config.io_latency_ms / 1000,
        io_jitter=config.io_jitter,
        transform_s=config.transform_ms / 1000,
    )
    # A file far larger than this model's state is damage (or an attack), not something to read.
    max_file_bytes = 4 * preset.state_bytes + (256 << 20)
    store = CheckpointStore(run_dir / "ckpt", keep=config.keep, max_file_bytes=max_file_bytes)
    memory_tier = open_memory_tier(config.ckpt, max_file_bytes)  # the supervisor's RAM tier for --ckpt memory
    events.emit(
        E.M_WORKER_INFO,
        device=str(device),
        params=count_params(model),
        state_bytes=preset.state_bytes,
        torch=torch.__version__,
        pid=os.getpid(),
    )

    # --- resume from the newest valid checkpoint ---------------------------------------
    start = 0
    if store.list() or (memory_tier is not None and memory_tier.has_snapshot()):
        events.emit(E.W_RESTORE)
        found = load_newest(
            store,
            memory_tier,
            on_invalid=lambda c, why: events.emit(E.M_CKPT_INVALID, ckpt_step=c.step, tier=c.tier, reason=why),
            device=device,
            # a state that verified but is not this model's is skipped like a damaged one
            accept=lambda c, state: check_training_state(state, c.step, model, optimizer),
        )
        if found is not None:
            ckpt, state = found
            if state["data"]["batch_size"] != batch_size:
                raise RuntimeError(
                    f"checkpoint {ckpt.path} was written with batch size {state['data']['batch_size']}, "
                    f"this run uses {batch_size}: the data position would not line up"
                )
            start = apply_state(state, model, optimizer, scheduler)
            del state
            events.emit(E.M_RESTORED, ckpt_step=start, source=ckpt.tier, path=ckpt.path.name)

    # --- start the input pipeline ------------------------------------------------------
    events.emit(E.W_WARMUP, step=start)
    sampler = StepSampler(len(dataset), batch_size, config.seed, start, config.steps)
    loader = make_loader(
        dataset,
        sampler,
        config.workers,
        config.prefetch,
        pin_memory=config.pin_memory and device.type == "cuda",
        persistent_workers=config.persistent_workers,
        seed=config.seed,
    )
    batches = device_batches(loader, device, config.device_prefetch)  # starts the loader's workers
    events.emit(
        E.M_PIPELINE_INFO,
        workers=loader.num_workers,
        prefetch_factor=loader.prefetch_factor,
        pin_memory=loader.pin_memory,
        persistent_workers=loader.persistent_workers,
        device_prefetch=isinstance(batches, DevicePrefetcher),
    )
    checkpointer = make_checkpointer(
        config.ckpt,
        store,
        on_commit=lambda s, **info: events.emit(E.M_CKPT_COMMIT, ckpt_step=s, **info),
        memory_tier=memory_tier,
        memory_disk_every=config.memory_disk_every,
    )
    auto = None
    if config.ckpt_every == AUTO:  # failures and earlier save costs come from the event log
        auto = AutoInterval.from_event_log(run_dir / "events.jsonl", state_bytes=preset.state_bytes)
        events.emit(E.M_CKPT_INTERVAL, step=start, **auto.describe(events.now()))
    last_save = time.monotonic()
    loss_value = float("nan")

    # --- the training loop -------------------------------------------------------------
    model.train()
    for step in range(start, config.steps):
        if step > start:  # the first batch was waited for during warm-up
            events.emit(E.W_DATA_WAIT, step=step)
        batch = next(batches)
        if batch["step"] != step:
            raise RuntimeError(f"input pipeline out of order: expected step {step}, got {batch['step']}")

        events.emit(E.W_COMPUTE, step=step)
        loss = train_step(model, optimizer, scheduler, batch, device, non_blocking=config.pin_memory)
        loss_value = loss.item()  # also waits for the device, so compute time is real
        events.emit(E.W_STEP_END, step=step, loss=loss_value, samples=batch["idx"].tolist())

        done = step + 1
        if should_save(config, done, time.monotonic() - last_save, auto, events.now()):
            save_started = time.monotonic()
            events.emit(E.W_CKPT_SAVE, step=step)
            data_position = {"step": done, "samples_consumed": done * batch_size, "batch_size": batch_size}
            checkpointer.save(capture_state(model, optimizer, scheduler, done, data_position), done)
            last_save = time.monotonic()
            if auto is not None:
                auto.observe_save(last_save - save_started)
                events.emit(E.M_CKPT_INTERVAL, step=done, **auto.describe(events.now()))

    checkpointer.finalize()
    final = {"final_state_sha256": state_sha256(model), "final_loss": loss_value}
    events.emit(E.M_FINISH, step=config.steps, **final)
    events.emit(E.W_EXIT)
    checkpointer.close()
    del batches  # shuts down DataLoader workers
    return final


def _die_with_parent(parent_pid: int) -> None:
    """On Linux, have the kernel SIGKILL this process if the supervisor dies (no orphans)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goodputlab.worker", description=__doc__)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--attempt", type=int, required=True)
    p.add_argument("--t0", type=float, required=True, help="the run's start on the monotonic clock")
    p.add_argument("--parent", type=int, required=True, help="supervisor pid")
    args = p.parse_args(argv)
    events = EventWriter(args.run_dir / "events.jsonl", args.t0, args.attempt)
    events.emit(E.W_INIT)
    _die_with_parent(args.parent)
    config = RunConfig.from_dict(json.loads(read_regular(args.run_dir / "config.json", 1 << 20)))
    train(config, args.run_dir, events)
    events.close()
    # Results are on disk and the DataLoader workers are gone; skip the interpreter's
    # slow teardown of torch (about half a second), which would only be booked as "other".
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
