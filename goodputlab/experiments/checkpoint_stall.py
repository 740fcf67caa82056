"""Measure what a checkpoint costs the training loop, per strategy: the stall benchmark's engine.

For one model preset (its real training state: weights, AdamW moments, scheduler,
data position, RNGs) and one strategy, :func:`measure_strategy` reports, in seconds
and bytes:

* ``blocking_over_floor``: the median over saves of blocking time / memcpy
  floor, the floor timed just before each save (``floor_s``: its median);
* ``blocking_s``: how long ``save`` holds the training loop (state capture +
  snapshot; the previous save has finished, so no waiting is included), the
  median over the saves after :data:`WARMUP_SAVES` warm-up saves, and
  ``first_blocking_s``, the very first save (which allocates buffers);
* ``durable_s``: from the start of the save to its ``on_commit`` (on disk for
  sync, async and dcp; in the RAM tier for memory);
* ``peak_extra_bytes``: the largest resident memory above the level before the
  first save, during saves (host buffers, staging copies, RAM-tier slots mapped
  by the process); measured with the kernel's peak-RSS counter (``VmHWM``);
* ``restore_s``: finding, verifying and loading the newest checkpoint and
  copying it into the model and optimizer, with the files in the page cache,
  and ``restore_cold_s`` after evicting them from it (a replacement node reads
  from storage, not from cache);
* ``step_slowdown``: a training step's median time while a persist runs in the
  background, over its median time alone, and ``gil_hold_max_s``: the longest
  a sleeping training thread waited to wake while the persist ran (the longest
  stretch the background writer kept the interpreter).

:func:`memcpy_floor_s` is the floor a snapshot cannot beat: copying the same
tensors once into buffers that already exist. :func:`leak_check` makes many
consecutive saves and reports resident memory, open descriptors and threads
at the start and the end.

Each measurement runs in a fresh process (``python -m goodputlab.experiments.checkpoint_stall``) so
strategies do not inherit each other's memory or page cache; the benchmark
script (``benchmarks/checkpoint_stall.py``) starts them and prints the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..checkpoints.registry import names as _strategy_names

STRATEGIES = _strategy_names()  # every strategy the registry lists, the baseline first

WARMUP_SAVES = 2
"""Saves before the timed ones: the first allocates the async buffers, the first two touch the RAM tier's two slots.
Their cost is reported separately (``first_blocking_s``)."""


# --- process-level gauges (Linux /proc) ----------------------------------------------------------
def rss_bytes() -> int:
    """Resident memory of this process now, bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (``VmHWM``) to the current RSS; False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    """Peak resident memory since the last :func:`reset_peak_rss`, bytes."""
    return _status_kb("VmHWM") * 1024


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def trim_heap() -> None:
    """Return freed heap memory to the system, so RSS reflects what is really held."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def evict_from_page_cache(root: Path) -> None:
    """Drop the clean cached pages of every file under ``root`` (the next read comes from storage)."""
    for p in Path(root).rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def cold_read_bytes_per_s(root: Path) -> float:
    """Sequential read speed of the files under ``root`` after evicting them from the page cache, bytes/s."""
    evict_from_page_cache(root)
    total, t = 0, time.perf_counter()
    for p in Path(root).rglob("*"):
        if p.is_file():
            with open(p, "rb", buffering=0) as f:
                while chunk := f.read(8 << 20):
                    total += len(chunk)
    return total / max(1e-9, time.perf_counter() - t)


# --- the training state under test --------------------------------------------------------------
def build_training_state(model: str, device: str = "cpu", seed: int = 0):
    """``(model, optimizer, scheduler)`` of a preset after one optimizer step (so AdamW has its moments).

    The step uses one short sequence: only the state matters here, not the loss.
    """
    import torch

    from ..engine.config import RunConfig
    from ..training.objects import build_training, resolve_device

    dev = resolve_device(device)
    torch.manual_seed(seed)
    objs = build_training(RunConfig(model=model, steps=100, device=device), dev)
    one_step(objs, dev)
    return objs, dev


def one_step(objs, device, tokens: int = 32) -> None:
    """One training step (:func:`goodputlab.training.step.train_step`) on one short, fixed sequence."""
    import torch

    from ..training.step import train_step

    model, optimizer, scheduler = objs
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, model.preset.vocab, (1, min(tokens, model.preset.context) + 1), generator=g)
    train_step(model, optimizer, scheduler, {"x": x[:, :-1], "y": x[:, 1:]}, device)
    if device.type == "cuda":
        torch.cuda.synchronize()


def training_state(objs, step: int) -> dict[str, Any]:
    from ..checkpoints.state import capture_state

    return capture_state(*objs, step, {"step": step, "samples_consumed": step, "batch_size": 1})


def memcpy_floor_s(objs, repeats: int = 7) -> tuple[float, int, int]:
    """``(seconds, bytes, tensors)``: the median time of ``repeats`` copies of the state's tensors
    into host buffers that already exist (pinned, for device-to-host copies on CUDA).

    The median, like the strategies' blocking time, so the ratio compares like with like.
    """
    from ..checkpoints.snapshot import HostBuffers, flatten

    _, tensors = flatten(training_state(objs, 0))
    buffers = HostBuffers(pin=True)
    buffers.copy_in(tensors)  # allocate and touch the buffers once
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        buffers.copy_in(tensors)
        times.append(time.perf_counter() - t)
    nbytes = buffers.nbytes
    buffers.release()
    return statistics.median(times), nbytes, len(tensors)


# --- one strategy ---------------------------------------------------------------------------------
def _strategy(strategy: str, memory_disk_every: int):
    """The configuration a strategy is measured with, and its run-level resource (the RAM tier for memory)."""
    from ..checkpoints import strategies
    from ..engine.config import RunConfig

    config = RunConfig(ckpt=strategy, memory_disk_every=memory_disk_every)
    return config, strategies.prepare_run(config)


def _make(config, root: Path, on_commit, resource):
    """The store, the tier (if the strategy has one) and the checkpointer, as a worker makes them."""
    from ..checkpoints import strategies
    from ..checkpoints.store import CheckpointStore

    store = CheckpointStore(root / "ckpt", keep=2)
    tier = strategies.open_tier(config, env=resource.env)
    ckpt = strategies.make_checkpointer(config.ckpt, store, on_commit, tier=tier, **strategies.options(config))
    return store, tier, ckpt


def _wait_background(ckpt) -> None:
    """Wait for the save in flight without the memory strategy's final disk write."""
    writer = getattr(ckpt, "writer", None)
    if writer is not None:
        writer.wait()


def measure_strategy(
    strategy: str, objs, device, root: Path, saves: int = 5, probe: bool = True, restore: bool = True
) -> dict[str, Any]:
    """Time ``saves`` saves of ``strategy`` (after :data:`WARMUP_SAVES`) and, with ``restore``, its restore;
    ``probe`` adds the background-writer probe. See the module docstring for the figures."""
    from ..checkpoints.snapshot import HostBuffers, flatten

    root = Path(root)
    # disk_every large: memory's figures are its RAM tier; its disk tier costs what an async persist costs
    config, resource = _strategy(strategy, memory_disk_every=10**6)
    committed: dict[int, float] = {}
    on_commit = lambda step, **info: committed.setdefault(step, time.perf_counter())  # noqa: E731 first tier wins
    # The memcpy floor is timed right before every save, into buffers of its own (allocated before
    # the baseline, so they are not counted as the strategy's memory).
    floor_buffers = HostBuffers(pin=True)
    floor_buffers.copy_in(flatten(training_state(objs, 0))[1])
    try:
        trim_heap()
        baseline = rss_bytes()
        store, tier, ckpt = _make(config, root, on_commit, resource)
        result = {"strategy": strategy, **_time_saves(ckpt, objs, saves, committed, baseline, floor_buffers)}
        if probe and strategy != "sync":
            result.update(_probe_background(ckpt, objs, device, WARMUP_SAVES + saves + 1))
        ckpt.finalize()
        ckpt.close()
        del ckpt
        if restore:
            trim_heap()
            result.update(_restore_times(strategy, store, tier, objs, device))
        return result
    finally:
        floor_buffers.release()
        resource.cleanup()


def _time_saves(ckpt, objs, saves: int, committed: dict[int, float], baseline_rss: int, floor_buffers) -> dict[str, Any]:
    """Blocking, time to durable and the memcpy floor of each save, and the peak memory above ``baseline_rss``.

    The memcpy floor is timed right before every save into ``floor_buffers``: on a shared machine
    the speed of memory drifts from second to second, and a paired ratio cancels the drift.
    """
    from ..checkpoints.snapshot import flatten

    blocking, durable, floor = [], [], []
    peak: int | None = 0
    for step in range(1, WARMUP_SAVES + saves + 1):
        state = training_state(objs, step)
        t = time.perf_counter()
        floor_buffers.copy_in(flatten(state)[1])
        floor.append(time.perf_counter() - t)
        del state
        can_reset = reset_peak_rss()
        t = time.perf_counter()
        ckpt.save(training_state(objs, step), step)
        blocking.append(time.perf_counter() - t)
        _wait_background(ckpt)
        durable.append(committed[step] - t)
        peak = max(peak, peak_rss_bytes() - baseline_rss) if can_reset and peak is not None else None
    timed = slice(WARMUP_SAVES, None)
    return {
        "first_blocking_s": blocking[0],
        "blocking_s": statistics.median(blocking[timed]),
        "blocking_min_s": min(blocking[timed]),
        "blocking_all_s": blocking,
        "floor_s": statistics.median(floor[timed]),
        "blocking_over_floor": statistics.median([b / f for b, f in zip(blocking[timed], floor[timed])]),
        "durable_s": statistics.median(durable[timed]),
        "peak_extra_bytes": peak,
    }


def _restore_times(strategy: str, store, tier, objs, device) -> dict[str, float]:
    """The fastest of three restores with the files cached and, from disk, of two after evicting them."""
    from ..checkpoints.restore import load_newest
    from ..checkpoints.state import apply_state

    def restore_once() -> float:
        t = time.perf_counter()
        found = load_newest(store, tier, device=device)
        assert found is not None
        apply_state(found[1], *objs)
        if device.type == "cuda":
            import torch

            torch.cuda.synchronize()
        return time.perf_counter() - t

    restore_once()  # the first load imports what it needs (DCP's reader) and warms the cache
    result = {"restore_s": min(restore_once() for _ in range(3))}
    if strategy == "memory":
        result["restore_cold_s"] = result["restore_s"]  # RAM has no cold cache; it is the RAM
        return result
    cold = []
    for _ in range(2):
        evict_from_page_cache(store.root)
        cold.append(restore_once())
    result["restore_cold_s"] = min(cold)
    result["storage_read_bytes_per_s"] = cold_read_bytes_per_s(store.root)
    return result


def _probe_background(ckpt, objs, device, step: int) -> dict[str, float]:
    """Training-step slowdown and longest GIL hold while one save persists in the background."""
    steps_alone = []
    for _ in range(3):
        t = time.perf_counter()
        one_step(objs, device)
        steps_alone.append(time.perf_counter() - t)
    # longest wake-up delay of a sleeping thread while the writer runs (the GIL is the usual culprit)
    ckpt.save(training_state(objs, step), step)
    waits = []
    while ckpt.in_flight:
        t = time.perf_counter()
        time.sleep(0.001)
        waits.append(time.perf_counter() - t - 0.001)
    _wait_background(ckpt)
    # training steps while the next save persists
    ckpt.save(training_state(objs, step + 1), step + 1)
    steps_during = []
    while ckpt.in_flight or not steps_during:
        t = time.perf_counter()
        one_step(objs, device)
        steps_during.append(time.perf_counter() - t)
    _wait_background(ckpt)
    return {
        "gil_hold_max_s": max(waits) if waits else 0.0,
        "step_alone_s": statistics.median(steps_alone),
        "step_during_persist_s": statistics.median(steps_during),
        "step_slowdown": statistics.median(steps_during) / statistics.median(steps_alone),
    }


def leak_check(strategy: str, objs, root: Path, saves: int = 100) -> dict[str, Any]:
    """``saves`` back-to-back saves; resident memory, open descriptors and threads at the start and the end.

    "Start" is after the first 5 saves (buffers allocated, allocator warm), "end" after the last.
    """
    config, resource = _strategy(strategy, memory_disk_every=4)
    try:
        store, tier, ckpt = _make(config, Path(root), lambda step, **i: None, resource)
        warm = min(5, saves)
        for step in range(1, warm + 1):
            ckpt.save(training_state(objs, step), step)
        _wait_background(ckpt)
        trim_heap()
        start = {"rss": rss_bytes(), "fds": open_fds(), "threads": threading.active_count()}
        t = time.perf_counter()
        for step in range(warm + 1, saves + 1):
            ckpt.save(training_state(objs, step), step)
        ckpt.finalize()
        seconds = time.perf_counter() - t
        trim_heap()
        end = {"rss": rss_bytes(), "fds": open_fds(), "threads": threading.active_count()}
        ckpt.close()
        shm = tier.slot_bytes() if tier is not None else 0
        return {"strategy": strategy, "saves": saves, "start": start, "end": end, "seconds": seconds, "ram_tier_bytes": shm}
    finally:
        resource.cleanup()


# --- child process entry point ------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """``python -m goodputlab.experiments.checkpoint_stall {floor,strategy,leak} --model M ...``: one measurement, printed as JSON."""
    p = argparse.ArgumentParser(prog="python -m goodputlab.experiments.checkpoint_stall")
    p.add_argument("what", choices=("floor", "strategy", "leak"))
    p.add_argument("--model", required=True)
    p.add_argument("--strategy", default="sync", choices=STRATEGIES)
    p.add_argument("--device", default="cpu")
    p.add_argument("--saves", type=int, default=5)
    p.add_argument("--no-probe", action="store_true")
    p.add_argument("--root", type=Path, default=None, help="directory for checkpoints (default: a temporary one)")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="goodputlab-stall-", dir=args.root))
    try:
        objs, device = build_training_state(args.model, args.device)
        if args.what == "floor":
            seconds, nbytes, n = memcpy_floor_s(objs)
            out: dict[str, Any] = {"memcpy_floor_s": seconds, "state_bytes": nbytes, "tensors": n}
        elif args.what == "strategy":
            out = measure_strategy(args.strategy, objs, device, root, saves=args.saves, probe=not args.no_probe)
        else:
            out = leak_check(args.strategy, objs, root, saves=args.saves)
        out.update(model=args.model, device=str(device))
        print(json.dumps(out))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()
    os._exit(0)  # skip torch's slow interpreter teardown


if __name__ == "__main__":
    sys.exit(main())
