"""The training worker: one process, one attempt, read top to bottom.

The supervisor (``goodputlab.engine.supervisor``) launches ``python -m goodputlab.engine.worker``
for every attempt and may SIGKILL it at any moment. The worker resumes from the
newest valid checkpoint, trains until ``config.steps`` are done, and records
every phase change in the event log, from which the ledger is built.

:func:`train` reads like nanoGPT's ``train.py``: a few named steps set up the run
(:func:`set_up`: the training objects, the data and the checkpoint store;
:func:`resume`; :func:`start_pipeline`; :func:`make_checkpointer`), then the training
loop, whole, top to bottom.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..procs import die_with_parent
from ..safe_io import read_regular
from . import events as E
from .config import AUTO, RunConfig
from .events import EventWriter


@dataclass
class Run:
    """What one attempt trains with, built by :func:`set_up`."""

    config: RunConfig
    run_dir: Path
    device: Any
    model: Any
    optimizer: Any
    scheduler: Any
    batch_size: int
    dataset: Any
    store: Any  # the checkpoint store on disk
    tier: Any  # the strategy's tier before the disk (the RAM tier), or None
    state_bytes: int


def set_up(config: RunConfig, run_dir: Path, events) -> Run:
    """The device, deterministic seeding, model, optimizer, schedule, data set and checkpoint store."""
    import torch

    from ..checkpoints import strategies
    from ..checkpoints.store import CheckpointStore
    from ..pipeline.loader import SlowStorageDataset, data_file
    from ..training.model import count_params
    from ..training.objects import build_training, make_deterministic, resolve_device
    from ..training.workload import PRESETS

    preset = PRESETS[config.model]
    device = resolve_device(config.device)
    if config.threads:
        torch.set_num_threads(config.threads)
    make_deterministic(config.seed, device)
    model, optimizer, scheduler = build_training(config, device)
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
    tier = strategies.open_tier(config, max_file_bytes)  # e.g. the supervisor's RAM tier for --ckpt memory
    events.emit(
        E.M_WORKER_INFO,
        device=str(device),
        params=count_params(model),
        state_bytes=preset.state_bytes,
        torch=torch.__version__,
        pid=os.getpid(),
    )
    return Run(
        config, run_dir, device, model, optimizer, scheduler, config.resolved_batch_size(), dataset, store, tier,
        preset.state_bytes,
    )


def resume(run: Run, events) -> int:
    """Load the newest valid checkpoint into the run's objects; the step to start from (0: none)."""
    from ..checkpoints.restore import load_newest
    from ..checkpoints.state import apply_state, check_training_state

    if not (run.store.list() or (run.tier is not None and run.tier.has_snapshot())):
        return 0
    events.emit(E.W_RESTORE)
    found = load_newest(
        run.store,
        run.tier,
        on_invalid=lambda c, why: events.emit(E.M_CKPT_INVALID, ckpt_step=c.step, tier=c.tier, reason=why),
        device=run.device,
        # a state that verified but is not this model's is skipped like a damaged one
        accept=lambda c, state: check_training_state(state, c.step, run.model, run.optimizer),
    )
    if found is None:
        return 0
    ckpt, state = found
    if state["data"]["batch_size"] != run.batch_size:
        raise RuntimeError(
            f"checkpoint {ckpt.path} was written with batch size {state['data']['batch_size']}, "
            f"this run uses {run.batch_size}: the data position would not line up"
        )
    start = apply_state(state, run.model, run.optimizer, run.scheduler)
    del state
    events.emit(E.M_RESTORED, ckpt_step=start, source=ckpt.tier, path=ckpt.path.name)
    return start


def start_pipeline(run: Run, start: int, events):
    """The input pipeline from step ``start``: the loader (its workers start here) and the device prefetcher."""
    from ..pipeline.loader import StepSampler, make_loader
    from ..pipeline.prefetch import DevicePrefetcher, device_batches

    config = run.config
    events.emit(E.W_WARMUP, step=start)
    sampler = StepSampler(len(run.dataset), run.batch_size, config.seed, start, config.steps)
    loader = make_loader(
        run.dataset,
        sampler,
        config.workers,
        config.prefetch,
        pin_memory=config.pin_memory and run.device.type == "cuda",
        persistent_workers=config.persistent_workers,
        seed=config.seed,
    )
    batches = device_batches(loader, run.device, config.device_prefetch)  # starts the loader's workers
    events.emit(
        E.M_PIPELINE_INFO,
        workers=loader.num_workers,
        prefetch_factor=loader.prefetch_factor,
        pin_memory=loader.pin_memory,
        persistent_workers=loader.persistent_workers,
        device_prefetch=isinstance(batches, DevicePrefetcher),
    )
    return batches


def make_checkpointer(run: Run, events):
    """The checkpointer of the run's strategy; each durable save is a ``ckpt_commit`` event."""
    from ..checkpoints import strategies

    on_commit = lambda s, **info: events.emit(E.M_CKPT_COMMIT, ckpt_step=s, **info)  # noqa: E731
    return strategies.make_checkpointer(
        run.config.ckpt, run.store, on_commit, tier=run.tier, **strategies.options(run.config)
    )


def auto_interval(run: Run, start: int, events):
    """With ``--ckpt-every auto``, the estimator of Daly's interval, primed from the event log; else None."""
    from ..checkpoints.interval import AutoInterval

    if run.config.ckpt_every != AUTO:
        return None
    auto = AutoInterval.from_event_log(run.run_dir / "events.jsonl", state_bytes=run.state_bytes)
    events.emit(E.M_CKPT_INTERVAL, step=start, **auto.describe(events.now()))
    return auto


def should_save(config: RunConfig, done: int, since_last_save_s: float, auto=None, now_s: float = 0.0) -> bool:
    """Checkpoint after ``done`` completed steps? Every ``ckpt_every`` steps, every
    ``ckpt_every_s`` seconds, and after the final step. With ``ckpt_every="auto"``,
    ``auto`` (a :class:`~goodputlab.checkpoints.interval.AutoInterval`) decides from the seconds
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

    ``events`` is an :class:`~goodputlab.engine.events.EventWriter` (or a ``NullWriter``
    for an uninstrumented loop). The caller has already emitted ``init``.
    """
    from ..checkpoints.state import capture_state
    from ..training.model import state_sha256
    from ..training.step import train_step

    run = set_up(config, run_dir, events)
    model, optimizer, scheduler, device, batch_size = run.model, run.optimizer, run.scheduler, run.device, run.batch_size
    start = resume(run, events)
    batches = start_pipeline(run, start, events)
    checkpointer = make_checkpointer(run, events)
    auto = auto_interval(run, start, events)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goodputlab.engine.worker", description=__doc__)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--attempt", type=int, required=True)
    p.add_argument("--t0", type=float, required=True, help="the run's start on the monotonic clock")
    p.add_argument("--parent", type=int, required=True, help="supervisor pid")
    args = p.parse_args(argv)
    events = EventWriter(args.run_dir / "events.jsonl", args.t0, args.attempt)
    events.emit(E.W_INIT)
    die_with_parent(args.parent)
    config = RunConfig.from_dict(json.loads(read_regular(args.run_dir / "config.json", 1 << 20)))
    train(config, args.run_dir, events)
    events.close()
    # Results are on disk and the DataLoader workers are gone; skip the interpreter's
    # slow teardown of torch (about half a second), which would only be booked as "other".
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
