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
from ..measure import events as E
from .config import AUTO, RunConfig
from ..recovery.modes import TRAIN_CLOCK
from ..measure.events import W_ACTIVATE, W_CRASH, W_LOADER_REBUILD, EventWriter


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
    data_start: int = 0  # the input stream's position at the first step (the step, unless --ckpt-omit data)
    prestarted: Any = None  # a hot spare's loader, its workers started before it knew its first step
    preload: Any = None  # a hot spare's copy of the newest checkpoint (checkpoints.restore.Preload)


def set_up(config: RunConfig, run_dir: Path, events) -> Run:
    """The device, deterministic seeding, model, optimizer, schedule, data set and checkpoint store."""
    import torch

    from ..checkpoints import strategies
    from ..checkpoints.store import CheckpointStore, state_file_cap
    from ..pipeline.loader import SlowStorageDataset, data_file
    from ..training.model import count_params
    from ..training.eager import skip_compiler_import
    from ..training.objects import build_training, make_deterministic, resolve_device
    from ..training.threads import choose_threads
    from ..training.workload import PRESETS

    skip_compiler_import()  # a worker never compiles: building and stepping AdamW need not import TorchDynamo
    preset = PRESETS[config.model]
    device = resolve_device(config.device)
    # the supervisor chose the count (config.threads); a run trained in this process without one gets
    # the same rule, not torch's default of every core
    torch.set_num_threads(config.threads or choose_threads(config)[0])
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
    max_file_bytes = state_file_cap(preset.state_bytes)
    store = CheckpointStore.of_run(run_dir, keep=config.keep, max_file_bytes=max_file_bytes,  # this job's
                                   storage_bps=config.storage_bps())
    tier = strategies.open_tier(config, max_file_bytes)  # e.g. the supervisor's RAM tier for --ckpt memory
    events.emit(
        E.M_WORKER_INFO,
        device=str(device),
        params=count_params(model),
        state_bytes=preset.state_bytes,
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        pid=os.getpid(),
    )
    return Run(
        config, run_dir, device, model, optimizer, scheduler, config.resolved_batch_size(), dataset, store, tier,
        preset.state_bytes,
    )


def resume(run: Run, events) -> int:
    """Load the newest valid checkpoint into the run's objects; the step to start from (0: none)."""
    from ..checkpoints.restore import load_newest
    from ..checkpoints.state import apply_state
    from ..recovery import omit

    if not (run.store.list() or (run.tier is not None and run.tier.has_snapshot())):
        return 0
    events.emit(E.W_RESTORE)
    found = preloaded = run.preload.take() if run.preload is not None else None
    if found is None:
        found = load_newest(
            run.store,
            run.tier,
            on_invalid=lambda c, why: events.emit(E.M_CKPT_INVALID, ckpt_step=c.step, tier=c.tier, reason=why),
            device=run.device,
            accept=accept_state(run),
        )
    if found is None:
        return 0
    ckpt, state = found
    if "data" in state and state["data"]["batch_size"] != run.batch_size:
        raise RuntimeError(
            f"checkpoint {ckpt.path} was written with batch size {state['data']['batch_size']}, "
            f"this run uses {run.batch_size}: the data position would not line up"
        )
    start = apply_state(state, run.model, run.optimizer, run.scheduler)
    run.data_start = omit.data_start(state, start)  # without a data position the stream starts over
    omitted = list(omit.omitted_parts(state))
    del state
    events.emit(E.M_RESTORED, ckpt_step=start, source=ckpt.tier, path=ckpt.path.name,
                **({"omitted": omitted} if omitted else {}), **({"preloaded": True} if preloaded else {}))
    return start


def accept_state(run: Run):
    """The check a loaded state must pass: a state that verified but is not this model's is skipped like a damaged one."""
    from ..checkpoints.state import check_training_state

    return lambda c, state: check_training_state(state, c.step, run.model, run.optimizer)


def start_pipeline(run: Run, start: int, events):
    """The input pipeline from step ``start``: the loader (its workers start here) and the device prefetcher.

    Returns a :class:`~goodputlab.recovery.hooks.RebuildingBatches`: ``next_for(step)`` is the
    batch of ``step`` (with ``--failure-mode loader-death``, from a loader rebuilt in place when
    one of its worker processes died).
    """
    from ..pipeline.prefetch import DevicePrefetcher, device_batches
    from ..recovery.hooks import RebuildingBatches

    config = run.config
    events.emit(E.W_WARMUP, step=start)
    info: dict = {}

    def make(step: int):
        loader = _loader_from(run, start, step)
        batches = device_batches(loader, run.device, config.device_prefetch)  # starts the loader's workers
        if not info:  # (plain values only: a reference would keep a replaced loader's workers alive)
            info.update(
                workers=loader.num_workers,
                prefetch_factor=loader.prefetch_factor,
                pin_memory=loader.pin_memory,
                persistent_workers=loader.persistent_workers,
                device_prefetch=isinstance(batches, DevicePrefetcher),
            )
        return batches

    batches = RebuildingBatches(
        make, start, RebuildingBatches.wanted(config), on_rebuild=lambda step: events.emit(W_LOADER_REBUILD, step=step)
    )
    events.emit(E.M_PIPELINE_INFO, **info)
    return batches


def _loader_from(run: Run, start: int, step: int):
    """A DataLoader whose first batch is loop step ``step``'s (the data position is the step, shifted by
    ``run.data_start - start`` when a checkpoint left the data position out). A hot spare's loader,
    whose workers started before it knew where to start, is used once."""
    from ..pipeline.loader import StepSampler, make_loader

    config = run.config
    first = step - start + run.data_start
    last = config.steps - start + run.data_start
    if run.prestarted is not None:
        loader, run.prestarted = run.prestarted, None
        loader.batch_sampler.start_step, loader.batch_sampler.end_step = first, last
        return loader
    sampler = StepSampler(len(run.dataset), run.batch_size, config.seed, first, last)
    return make_loader(
        run.dataset,
        sampler,
        config.workers,
        config.prefetch,
        pin_memory=config.pin_memory and run.device.type == "cuda",
        persistent_workers=config.persistent_workers,
        seed=config.seed,
    )


def prestart_loader(run: Run):
    """A hot spare's loader: its worker processes started now, its first step set at activation.

    The workers are kept between iterations (persistent), so setting the sampler's range
    and iterating again reuses them. None without loader workers (nothing to start).
    """
    from ..pipeline.loader import StepSampler, make_loader

    config = run.config
    if config.workers == 0:
        return None
    sampler = StepSampler(len(run.dataset), run.batch_size, config.seed, 0, 0)  # empty until activation
    loader = make_loader(
        run.dataset, sampler, config.workers, config.prefetch,
        pin_memory=config.pin_memory and run.device.type == "cuda", persistent_workers=True, seed=config.seed,
    )
    iter(loader)  # starts the workers; the empty sampler gives them nothing to load yet
    return loader


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
    auto = AutoInterval.from_event_log(run.run_dir / "events.jsonl", state_bytes=run.state_bytes, clock=run.config.failure_clock)
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


def train(config: RunConfig, run_dir: Path, events, control=None, run: Run | None = None) -> dict:
    """Resume or start, train to ``config.steps``, and return what the run ended with.

    ``events`` is an :class:`~goodputlab.measure.events.EventWriter` (or a ``NullWriter``
    for an uninstrumented loop). The caller has already emitted ``init``. ``control``: the
    supervisor's control pipe (:mod:`goodputlab.recovery.control`), for injected failures.
    ``run``: a hot spare's objects, set up before it was activated.
    """
    from ..checkpoints.state import capture_state
    from ..recovery.hooks import StepHooks
    from ..recovery.omit import omit_from_state
    from ..training.model import state_sha256
    from ..training.step import train_step

    run = run or set_up(config, run_dir, events)
    model, optimizer, scheduler, device, batch_size = run.model, run.optimizer, run.scheduler, run.device, run.batch_size
    start = resume(run, events)
    batches = start_pipeline(run, start, events)
    checkpointer = make_checkpointer(run, events)
    auto = auto_interval(run, start, events)
    hooks = StepHooks(config, events, control)
    last_save = time.monotonic()
    loss_value = float("nan")
    saved = False  # whether the newest save went through

    def save(done: int) -> None:
        data_position = {"step": done + run.data_start - start, "samples_consumed": done * batch_size,
                         "batch_size": batch_size}
        state = omit_from_state(capture_state(model, optimizer, scheduler, done, data_position), config.ckpt_omit)
        checkpointer.save(state, done)

    # --- the training loop -------------------------------------------------------------
    model.train()
    for step in range(start, config.steps):
        hooks.before_step(step)  # an injected hang stops here; an injected exception is armed
        if step > start:  # the first batch was waited for during warm-up
            events.emit(E.W_DATA_WAIT, step=step)
        batch = batches.next_for(step)
        if batch["step"] != step - start + run.data_start:
            raise RuntimeError(f"input pipeline out of order: expected step {step}, got {batch['step']}")

        t_compute = events.emit(E.W_COMPUTE, step=step)
        if auto is not None and step == start and config.failure_clock == TRAIN_CLOCK:
            auto.training_started(t_compute)  # the train clock starts here: the time before was not exposed
        hooks.in_step(step)
        loss = train_step(model, optimizer, scheduler, batch, device, non_blocking=config.pin_memory)
        loss_value = loss.item()  # also waits for the device, so compute time is real
        hooks.after_compute(step, events.now() - t_compute)
        events.emit(E.W_STEP_END, step=step, loss=loss_value, samples=batch["idx"].tolist())

        done = step + 1
        if should_save(config, done, time.monotonic() - last_save, auto, events.now()):
            save_started = time.monotonic()
            events.emit(E.W_CKPT_SAVE, step=step)
            saved = hooks.save(lambda: save(done), done)  # an injected full disk is reported; training goes on
            last_save = time.monotonic()
            if auto is not None:
                auto.observe_save(last_save - save_started)
                events.emit(E.M_CKPT_INTERVAL, step=done, **auto.describe(events.now()))

    _finish_saves(run, checkpointer, hooks, lambda: save(config.steps), final_saved=start == config.steps or saved)
    final = {"final_state_sha256": state_sha256(model), "final_loss": loss_value}
    events.emit(E.M_FINISH, step=config.steps, **final)
    events.emit(E.W_EXIT)
    checkpointer.close()
    batches.close()  # shuts down DataLoader workers
    return final


FINAL_SAVE_WAIT_S = 60.0  # how long the final save waits for disk space before the worker gives up


def _finish_saves(run: Run, checkpointer, hooks, save_final, final_saved: bool) -> None:
    """Wait until the final state is durable. With an injected full disk (``--failure-mode disk-full``) a
    final save the disk refused is reported and made again once there is room, for up to
    :data:`FINAL_SAVE_WAIT_S`; after that, or with any other error, the worker stops with the error."""
    from ..recovery.disk_full import is_disk_full
    from ..recovery.hooks import wait_for_space

    deadline = time.monotonic() + FINAL_SAVE_WAIT_S
    while True:
        try:
            checkpointer.finalize()
            if final_saved:
                return
        except Exception as e:
            if not (hooks.survive_full_disk and is_disk_full(e)) or time.monotonic() > deadline:
                raise
            hooks.report_failed_save(run.config.steps, e)
        if time.monotonic() > deadline:
            raise OSError(28, f"No space left on device: the final checkpoint of step {run.config.steps} could not be saved")
        wait_for_space(run.run_dir / "ckpt", 2 * run.state_bytes, max(0.0, deadline - time.monotonic()))
        final_saved = hooks.save(save_final, run.config.steps)


def serve_as_standby(config: RunConfig, run_dir: Path, t0: float, control) -> tuple[Run, Any, int]:
    """A hot spare: set up everything a worker needs, then wait on ``control`` for the job.

    Returns ``(run, events, attempt)`` once activated: the run's objects, the event log opened as
    ``attempt`` (its ``activate`` event written), ready for :func:`train`. See
    :mod:`goodputlab.recovery.standby` for the protocol.
    """
    import select

    from ..recovery import standby

    low = standby.enter_idle_priority()  # start-up on spare CPU only, when we can come back
    deferred = standby.DeferredEvents(t0, E.PHASES)
    started = deferred.emit(E.W_INIT)
    run = set_up(config, run_dir, deferred)
    if run.tier is not None and hasattr(run.tier, "warm"):
        run.tier.warm(run.device)
    run.prestarted = prestart_loader(run)
    from ..recovery.zygote import warm_spares

    if run.tier is None and warm_spares():  # a RAM tier is restored from memory already; a disk checkpoint is read ahead
        from ..checkpoints.restore import Preload

        run.preload = Preload(run.store, accept_state(run))
        run.preload.start()  # reads each new checkpoint soon after its commit, while this waits
    ready = deferred.now()
    early = bool(select.select([control.fd], [], [], 0)[0])  # the word came before we were ready
    warm = (lambda: run.tier.warm(run.device)) if run.tier is not None and hasattr(run.tier, "warm") else None
    attempt = control.wait_for_activation(idle=warm, idle_every_s=0.2)
    if low:
        standby.leave_idle_priority()
    events = EventWriter(run_dir / "events.jsonl", t0, attempt)
    events.emit(
        W_ACTIVATE,
        standby_startup_s=round(ready - started, 6),
        standby_waited_s=round(max(0.0, events.now() - ready), 6),
        standby_ready=not early,
    )
    deferred.replay(events)
    return run, events, attempt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goodputlab.engine.worker", description=__doc__)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--attempt", type=int, default=None, help="the attempt this worker is (not for --standby)")
    p.add_argument("--t0", type=float, required=True, help="the run's start on the monotonic clock")
    p.add_argument("--parent", type=int, required=True, help="supervisor pid")
    p.add_argument("--control-fd", type=int, default=None, help="the supervisor's control pipe (recovery.control)")
    p.add_argument("--standby", action="store_true", help="a hot spare: set up, then wait for the job on the control pipe")
    p.add_argument("--fork-server", type=int, default=None, metavar="FD",
                   help="fork standbys on request over this socket (recovery.zygote)")
    args = p.parse_args(argv)
    if args.fork_server is not None:
        from ..recovery.zygote import serve_forks

        def become(attempt: int | None, control_fd: int):
            if attempt is None:
                _standby_main(args.run_dir, args.t0, control_fd)
            _worker_main(args.run_dir, args.t0, attempt, control_fd)

        serve_forks(args.fork_server, args.parent, become)
    if args.standby:
        die_with_parent(args.parent)
        _standby_main(args.run_dir, args.t0, args.control_fd)
    _worker_main(args.run_dir, args.t0, args.attempt, args.control_fd, parent=args.parent)


def _worker_main(run_dir: Path, t0: float, attempt: int, control_fd: int | None, parent: int | None = None):
    """A worker's life, launched or forked: train as ``attempt``, exit (never returns)."""
    from ..recovery.control import ControlChannel

    control = ControlChannel(control_fd) if control_fd is not None else None
    events = EventWriter(run_dir / "events.jsonl", t0, attempt)
    events.emit(E.W_INIT)
    if parent is not None:
        die_with_parent(parent)
    config = RunConfig.from_dict(json.loads(read_regular(run_dir / "config.json", 1 << 20)))
    _train_or_crash(config, run_dir, events, control, None)
    _exit(events)


def _standby_main(run_dir: Path, t0: float, control_fd: int):
    """A hot spare's life, launched or forked: wait for the job, train it, exit (never returns)."""
    from ..recovery.control import ControlChannel, ControlClosed

    control = ControlChannel(control_fd)
    config = RunConfig.from_dict(json.loads(read_regular(run_dir / "config.json", 1 << 20)))
    try:
        run, events, _ = serve_as_standby(config, run_dir, t0, control)
    except ControlClosed:  # never needed: the run ended first
        sys.stdout.flush()
        os._exit(0)
    _train_or_crash(config, run_dir, events, control, run)
    _exit(events)


def _exit(events) -> None:
    """Results are on disk and the DataLoader workers are gone: skip the interpreter's slow teardown of
    torch (about half a second), which would only be booked as "other"."""
    events.close()
    sys.stdout.flush()
    os._exit(0)


def _train_or_crash(config: RunConfig, run_dir: Path, events, control, run) -> None:
    """:func:`train`; an error is written to the log as a ``crash`` phase (the unwinding is ``restart``
    time), its traceback printed, and the process ends with status 1 at once (no slow torch teardown)."""
    try:
        train(config, run_dir, events, control, run)
    except Exception as e:
        import traceback

        try:
            events.emit(W_CRASH, error=f"{type(e).__name__}: {e}"[:500])
        except OSError:
            pass  # a full disk may refuse even this line; the traceback below still says why
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
