"""The training worker on every rank of a distributed job, read top to bottom.

``torchrun`` starts ``python -m goodputlab.distributed.worker`` once per rank; the
supervisor (:mod:`goodputlab.engine.supervisor`) started ``torchrun`` and may SIGKILL any rank
at any moment, after which ``torchrun`` stops the others and starts the whole group
again (``TORCHELASTIC_RESTART_COUNT`` is the job's attempt). Each rank:

1. joins the job's process groups (:mod:`~goodputlab.distributed.ranks`) and builds the
   same model from the same seed, wrapped for data parallelism
   (:mod:`~goodputlab.distributed.parallel`), with its own dropout stream (seeded by rank);
2. restores, with every other rank, the newest checkpoint they all find sound, written by
   any number of ranks (:mod:`~goodputlab.distributed.sharded`);
3. trains on its shard of every step's batch (:mod:`~goodputlab.distributed.sharding`);
   each step is ``compute`` (forward and its own backward) -> ``sync_wait`` (in the
   gradient all-reduce, waiting for the slowest rank) -> ``compute`` (the optimizer step);
4. saves sharded checkpoints with the others, and records every phase in its own event
   log, ``ranks/events-rank{R}.jsonl``, which the supervisor merges into the job's.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..measure import events as E
from ..engine.config import RunConfig
from ..measure.events import EventWriter
from ..procs import die_with_parent
from .joblog import RANK_LOG, RANKS_DIR, SUPERVISOR_LOG


@dataclass
class RankRun:
    """What one rank trains with, built by :func:`set_up`."""

    config: RunConfig
    rank: Any  # ranks.Rank: this rank's place in the job and its process groups
    device: Any
    model: Any
    wrapped: Any  # the model wrapped for data parallelism
    optimizer: Any
    scheduler: Any
    kind: str  # parallel.DDP or FSDP
    clock: Any  # parallel.SyncClock: times the wait in the all-reduce
    dataset: Any
    store: Any
    batch_size: int
    state_bytes: int


def train(config: RunConfig, run_dir: Path, events: EventWriter, env) -> dict:
    """Resume or start, train to ``config.steps`` with the job's other ranks; returns what this rank ended with."""
    import torch.distributed as dist

    from ..engine.worker import should_save
    from . import parallel, ranks

    run = set_up(config, run_dir, events, env)
    start, ram = resume(run, events)
    batches = start_pipeline(run, start, events)
    checkpointer, auto, time_based = make_checkpointer(run, start, events, env, run_dir, ram)

    # --- the training loop ---------------------------------------------------------------------
    run.wrapped.train()
    loop = (run.config, start, batches, events, run.clock, run.device, run.wrapped, run.optimizer, run.scheduler,
            checkpointer, auto, time_based, run.batch_size, should_save)
    if config.ckpt_jit and run.kind == parallel.DDP:  # a failure seen here: save before the group restarts (jit.py)
        loss_value = _loop_saving_just_in_time(run, start, loop, events, env)
    else:
        loss_value = _loop(*loop, None)
    final = _finish(run, checkpointer, ram, loss_value, events)
    del batches
    dist.barrier(group=run.rank.ckpt_group)  # no rank leaves while another still needs the groups
    ranks.teardown()
    return final


def set_up(config: RunConfig, run_dir: Path, events: EventWriter, env) -> RankRun:
    """Join the job, build the same model from the same seed on every rank (wrapped for data parallelism),
    the data set and the checkpoint store; write the rank's ``worker_info``."""
    import torch

    from ..checkpoints.store import CheckpointStore, state_file_cap
    from ..pipeline.loader import SlowStorageDataset, data_file
    from ..training.eager import skip_compiler_import
    from ..training.model import count_params
    from ..training.objects import build_training, make_deterministic
    from ..training.workload import PRESETS
    from . import parallel, ranks, sharded
    from .straggler import Straggler

    skip_compiler_import()  # a rank never compiles: its AdamW need not import TorchDynamo (DDP imports it anyway)
    preset = PRESETS[config.model]
    rank = ranks.setup(config.device, env)
    device = rank.device
    if config.threads:
        torch.set_num_threads(config.threads)
    make_deterministic(config.seed, device)  # the same initial model on every rank
    model, optimizer, scheduler = build_training(config, device)
    kind = parallel.parallelism_for(config.model, device)
    straggler = Straggler(config.straggler_rank, config.straggler_factor, config.straggler_prob, config.seed)
    clock = parallel.SyncClock(rank.rank, device, straggler)
    wrapped = parallel.wrap(model, device, kind, clock)
    if kind == parallel.FSDP:  # the parameters are sharded now: the optimizer must hold the shards
        optimizer, scheduler = _rebuild_optimizer(optimizer, scheduler, wrapped.parameters())
    sharded.seed_rank_rng(config.seed, rank.rank, 0)  # each rank draws its own dropout masks
    if rank.is_coordinator:  # generated once (a pure function of the seed), then read by all
        data_file(run_dir / "data", preset, config.seed)
    rank.agree(True)
    dataset = SlowStorageDataset(
        data_file(run_dir / "data", preset, config.seed),
        config.seed,
        io_latency_s=config.io_latency_ms / 1000,
        io_jitter=config.io_jitter,
        transform_s=config.transform_ms / 1000,
    )
    store = CheckpointStore.of_run(run_dir, keep=config.keep, max_file_bytes=state_file_cap(preset.state_bytes),  # this job's
                                   storage_bps=config.storage_bps())
    events.emit(
        E.M_WORKER_INFO, device=str(device), params=count_params(model), state_bytes=preset.state_bytes,
        torch=torch.__version__, pid=os.getpid(), rank=rank.rank, world_size=rank.world_size, backend=rank.backend,
        parallelism=kind,
    )
    return RankRun(config, rank, device, model, wrapped, optimizer, scheduler, kind, clock, dataset, store,
                   config.resolved_batch_size(), preset.state_bytes)


def resume(run: RankRun, events: EventWriter) -> tuple[int, Any]:
    """All ranks restore the same checkpoint (or the RAM tier's snapshot): ``(the step to start from, the RAM
    tier or None)``."""
    from . import sharded

    config, rank, store, batch_size = run.config, run.rank, run.store, run.batch_size
    start = 0
    if store.list():
        events.emit(E.W_RESTORE)

        def on_invalid(c, why):
            if rank.is_coordinator:
                events.emit(E.M_CKPT_INVALID, ckpt_step=c.step, tier=c.tier, reason=why)

        found = sharded.restore_newest(store, rank, run.wrapped, run.optimizer, run.scheduler, seed=config.seed,
                                       on_invalid=on_invalid)
        if found is not None:
            if found.data.get("batch_size") != batch_size:
                raise RuntimeError(
                    f"checkpoint {found.checkpoint.path} was written with batch size {found.data.get('batch_size')}, "
                    f"this run uses {batch_size}: the data position would not line up"
                )
            start = found.step
            events.emit(E.M_RESTORED, ckpt_step=start, source="disk", path=found.checkpoint.path.name,
                        layout=found.layout, written_by=found.world_size, rng=found.rng)
    ram = None
    if config.ckpt == "memory":  # the RAM tier of many ranks: this node's RAM, and a copy on its neighbour
        from . import node_ram

        ram = node_ram.NodeRam(rank.rank)
        if not store.list() and ram.offers():  # (with disk checkpoints, the restore began above)
            events.emit(E.W_RESTORE)
        restored = node_ram.restore(ram, rank, run.wrapped, run.optimizer, run.scheduler, run.device, start, events)
        if restored is not None:
            start, data = restored
            if data.get("batch_size") != batch_size:
                raise RuntimeError(f"the RAM snapshot was written with batch size {data.get('batch_size')}, "
                                   f"this run uses {batch_size}: the data position would not line up")
    return start, ram


def start_pipeline(run: RankRun, start: int, events: EventWriter):
    """The input pipeline from step ``start``: this rank's shard of every step's batch."""
    from ..pipeline.loader import make_loader
    from ..pipeline.prefetch import DevicePrefetcher, device_batches
    from .sharding import ShardedStepSampler

    config, device = run.config, run.device
    events.emit(E.W_WARMUP, step=start)
    sampler = ShardedStepSampler(len(run.dataset), run.batch_size, config.seed, start, config.steps, run.rank.rank,
                                 run.rank.world_size)
    loader = make_loader(
        run.dataset, sampler, config.workers, config.prefetch, pin_memory=config.pin_memory and device.type == "cuda",
        persistent_workers=config.persistent_workers, seed=config.seed,
    )
    batches = device_batches(loader, device, config.device_prefetch)
    events.emit(
        E.M_PIPELINE_INFO, workers=loader.num_workers, prefetch_factor=loader.prefetch_factor,
        pin_memory=loader.pin_memory, persistent_workers=loader.persistent_workers,
        device_prefetch=isinstance(batches, DevicePrefetcher), shard=[sampler.start, sampler.stop],
    )
    return batches


def make_checkpointer(run: RankRun, start: int, events: EventWriter, env, run_dir: Path, ram):
    """The rank's sharded checkpointer (behind the RAM tier with ``--ckpt memory``), and with
    ``--ckpt-every auto`` the interval's estimator (rank 0 decides for all): ``(checkpointer, auto, time_based)``."""
    from ..checkpoints.interval import AutoInterval
    from ..engine.config import AUTO
    from . import sharded

    config = run.config
    checkpointer = sharded.ShardedCheckpointer(
        run.store,
        run.rank,
        on_commit=lambda s, **info: events.emit(E.M_CKPT_COMMIT, ckpt_step=s, **info),
        asynchronous=config.ckpt in ("async", "dcp"),
        attempt=env.restart_count,
        parallelism=run.kind,
        on_part=lambda s, **info: events.emit(E.M_CKPT_PART, ckpt_step=s, **info),
    )
    if ram is not None:
        from . import node_ram

        checkpointer = node_ram.RamCheckpointer(ram, checkpointer, events, config.memory_disk_every, start)
    auto = None
    if config.ckpt_every == AUTO and run.rank.is_coordinator:  # rank 0 decides for all (see _save_now)
        auto = AutoInterval.from_events(_earlier_events(run_dir, events.path), state_bytes=run.state_bytes)
        events.emit(E.M_CKPT_INTERVAL, step=start, **auto.describe(events.now()))
    return checkpointer, auto, config.ckpt_every == AUTO or config.ckpt_every_s is not None


def _loop_saving_just_in_time(run: RankRun, start: int, loop: tuple, events: EventWriter, env) -> float:
    """:func:`_loop` with ``--ckpt-jit``: a failure seen by this rank is a just-in-time save of the state it
    holds, then an exit at once (torchrun restarts the group)."""
    from . import jit

    jit.raise_on_sigterm()
    progress = {"done": start}
    try:
        _loop(*loop, progress)
    except (RuntimeError, jit.GroupStopping):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # torchrun's stop waits for the save (then SIGKILL)
        done, saved, store, batch_size = progress["done"], False, run.store, run.batch_size
        if done > start and done not in {c.step for c in store.list()}:  # newer than every checkpoint
            t = events.now()
            saved = jit.save_just_in_time(store, run.wrapped, run.optimizer, run.scheduler, done,
                                          {"step": done, "samples_consumed": done * batch_size, "batch_size": batch_size},
                                          env.restart_count, run.kind,
                                          lambda s, **info: events.emit(E.M_CKPT_COMMIT, ckpt_step=s, jit=True,
                                                                        save_s=round(events.now() - t, 6), **info))
        # leave at once, as a SIGTERM would have: the interpreter's teardown of torch and the broken
        # group takes seconds, and torchrun's restart waits for every rank to be gone
        events.close()
        traceback.print_exc()  # what was seen (a bug that is no failure shows here too)
        print(f"rank {run.rank.rank}: a failure seen after {done} steps; "
              + ("saved a just-in-time checkpoint" if saved else "no just-in-time save by this rank"), file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    return progress["loss"]


def _finish(run: RankRun, checkpointer, ram, loss_value: float, events: EventWriter) -> dict:
    """The final save made durable, the final state's hash, and the end of the rank's log."""
    from . import parallel

    config, batch_size = run.config, run.batch_size
    if ram is not None:
        checkpointer.finalize(run.wrapped, run.optimizer, run.scheduler, config.steps,
                              {"step": config.steps, "samples_consumed": config.steps * batch_size, "batch_size": batch_size})
    else:
        checkpointer.finalize()
    final = {"final_state_sha256": parallel.full_state_sha256(run.wrapped, run.kind), "final_loss": loss_value}
    events.emit(E.M_FINISH, step=config.steps, **final)
    events.emit(E.W_EXIT)
    checkpointer.close()
    return final


def _loop(config, start, batches, events, clock, device, wrapped, optimizer, scheduler, checkpointer, auto,
          time_based, batch_size, should_save, progress) -> float:
    """Train from ``start`` to ``config.steps``; returns the last loss. ``progress`` (with
    ``--ckpt-jit``) follows the steps done, the optimizer's step held from SIGTERM."""
    from .jit import SigtermHeld

    last_save = time.monotonic()
    loss_value = float("nan")
    held = SigtermHeld() if progress is not None else contextlib.nullcontext()
    for step in range(start, config.steps):
        if step > start:  # the first batch was waited for during warm-up
            events.emit(E.W_DATA_WAIT, step=step)
        batch = next(batches)
        if batch["step"] != step:
            raise RuntimeError(f"input pipeline out of order: expected step {step}, got {batch['step']}")

        t = events.emit(E.W_COMPUTE, step=step)
        clock.begin(step, events.t0 + t)
        x = batch["x"].to(device, non_blocking=config.pin_memory)
        y = batch["y"].to(device, non_blocking=config.pin_memory)
        _, loss = wrapped(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # returns once every rank's gradients are averaged
        if clock.ready_at is not None:  # this rank's backward was done at ready_at; since then it waited
            events.emit(E.W_SYNC_WAIT, step=step, t=clock.ready_at - events.t0, own_s=round(clock.own_s, 6),
                        slowed_s=round(clock.delayed_s, 6))
            events.emit(E.W_COMPUTE, step=step)
        with held:  # a SIGTERM waits until the model, optimizer and schedule are one step on together
            optimizer.step()
            scheduler.step()
            if progress is not None:
                progress["done"] = step + 1
        loss_value = loss.item()
        events.emit(E.W_STEP_END, step=step, loss=loss_value, samples=batch["idx"].tolist())

        done = step + 1
        if _save_now(config, done, time.monotonic() - last_save, auto, events, time_based, device, should_save):
            save_started = time.monotonic()
            events.emit(E.W_CKPT_SAVE, step=step)
            data_position = {"step": done, "samples_consumed": done * batch_size, "batch_size": batch_size}
            checkpointer.save(wrapped, optimizer, scheduler, done, data_position)
            last_save = time.monotonic()
            if auto is not None:
                auto.observe_save(last_save - save_started)
                events.emit(E.M_CKPT_INTERVAL, step=done, **auto.describe(events.now()))
        if progress is not None:
            progress["loss"] = loss_value
    return loss_value


def _save_now(config, done, since_last_save_s, auto, events, time_based, device, should_save) -> bool:
    """Every rank must save at the same step. A step-based interval agrees by itself; a time-based
    one (``--ckpt-every-s``, ``--ckpt-every auto``) is decided by rank 0 and broadcast."""
    import torch
    import torch.distributed as dist

    if not time_based:
        return should_save(config, done, since_last_save_s)
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    if dist.get_rank() == 0:
        flag[0] = int(should_save(config, done, since_last_save_s, auto, events.now()))
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def _earlier_events(run_dir: Path, own_log: Path) -> list[dict]:
    """The supervisor's events and this rank's from earlier attempts, in time order (for ``--ckpt-every auto``)."""
    found = []
    for path in (run_dir / RANKS_DIR / SUPERVISOR_LOG, own_log):
        try:
            found += E.read_events(path)
        except FileNotFoundError:
            pass
    return sorted(found, key=lambda e: e["t"])


def _rebuild_optimizer(optimizer, scheduler, params):
    """The same optimizer and LR schedule over ``params`` (FSDP's sharded parameters)."""
    import torch

    new = type(optimizer)(params, **optimizer.defaults)
    lam = scheduler.lr_lambdas[0]
    return new, torch.optim.lr_scheduler.LambdaLR(new, lam)


def main(argv: list[str] | None = None) -> int:
    from ..safe_io import read_regular
    from .ranks import RankEnv

    p = argparse.ArgumentParser(prog="python -m goodputlab.distributed.worker", description=__doc__)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--t0", type=float, required=True, help="the run's start on this machine's monotonic clock")
    args = p.parse_args(argv)
    env = RankEnv.from_environ()
    die_with_parent(os.getppid())  # the kernel kills this rank if torchrun's agent (its parent) dies: no orphans
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID` prints where a rank is stuck
    (args.run_dir / RANKS_DIR).mkdir(exist_ok=True)
    events = EventWriter(args.run_dir / RANKS_DIR / RANK_LOG.format(rank=env.rank), args.t0, env.restart_count)
    config = RunConfig.from_dict(json.loads(read_regular(args.run_dir / "config.json", 1 << 20)))
    if env.restart_count > 0 and config.restart_delay > 0:
        events.emit(E.SUP_RESTART_DELAY)  # emulated rescheduling, before this attempt starts
        time.sleep(config.restart_delay)
    events.emit(E.W_INIT, rank=env.rank, world_size=env.world_size, pid=os.getpid(), host=socket.gethostname())
    train(config, args.run_dir, events, env)
    events.close()
    sys.stdout.flush()
    os._exit(0)  # skip the interpreter's slow teardown of torch, booked as "other" otherwise


if __name__ == "__main__":
    sys.exit(main())
