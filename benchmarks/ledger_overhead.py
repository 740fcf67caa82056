"""What does the ledger cost? The training loop's steps with and without their events, side by side.

    python benchmarks/ledger_overhead.py [--steps 2000] [--model tiny]

Whole runs on a shared machine differ by 10-20% from one to the next, far more than the
ledger could cost, so this benchmark interleaves at the finest grain: in one process, with
one model, one optimizer and one input pipeline, each step is run either *bare* or
*instrumented* (the three events a worker writes per step: ``data_wait``, ``compute``,
``step_end`` with the loss and the sample indices, to a real JSON-lines file), the mode
drawn at random per step. Both modes see the same drift, so the per-step medians compare
like with like. It prints both medians, the overhead ratio, and the cost of one event write
measured on its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goodputlab.measure import events as E  # noqa: E402
from goodputlab.engine.config import RunConfig  # noqa: E402
from goodputlab.pipeline.loader import SlowStorageDataset, StepSampler, data_file, make_loader  # noqa: E402
from goodputlab.measure.events import EventWriter  # noqa: E402
from goodputlab.training.workload import PRESETS  # noqa: E402
from goodputlab.training.step import train_step  # noqa: E402
from goodputlab.training.objects import build_training, make_deterministic, resolve_device  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000, help="steps in all, about half in each mode")
    p.add_argument("--model", default="tiny")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch

    config = RunConfig(steps=args.steps, model=args.model, seed=args.seed, ckpt_every=0)
    work = Path(tempfile.mkdtemp(prefix="ledger-overhead-"))
    device = resolve_device("auto")
    make_deterministic(config.seed, device)
    model, optimizer, scheduler = build_training(config, device)
    preset = PRESETS[config.model]
    dataset = SlowStorageDataset(data_file(work / "data", preset, config.seed), config.seed)
    batch_size = config.resolved_batch_size()
    batches = iter(make_loader(dataset, StepSampler(len(dataset), batch_size, config.seed, 0, args.steps), 0, None))
    events = EventWriter(work / "events.jsonl", time.monotonic(), attempt=0)
    instrumented_steps = np.random.default_rng(args.seed).random(args.steps) < 0.5

    times = {True: [], False: []}
    inside = []  # seconds spent in the instrumentation itself, per instrumented step
    clock = time.perf_counter
    model.train()
    for step in range(args.steps):
        instrumented = bool(instrumented_steps[step])
        t = clock()
        spent = 0.0
        if instrumented:
            a = clock()
            events.emit(E.W_DATA_WAIT, step=step)
            spent += clock() - a
        batch = next(batches)
        if instrumented:
            a = clock()
            events.emit(E.W_COMPUTE, step=step)
            spent += clock() - a
        loss = train_step(model, optimizer, scheduler, batch, device)
        loss_value = loss.item()  # a real loop reads the loss either way (and it waits for a GPU)
        if instrumented:
            a = clock()
            events.emit(E.W_STEP_END, step=step, loss=loss_value, samples=batch["idx"].tolist())
            spent += clock() - a
        if step >= 20:  # skip the first steps: allocator and kernel warm-up
            times[instrumented].append(clock() - t)
            if instrumented:
                inside.append(spent)
    events.close()

    with EventWriter(work / "micro.jsonl", time.monotonic(), attempt=0) as ev:  # one event write on its own
        n = 20000
        t = time.perf_counter()
        for i in range(n):
            ev.emit(E.W_COMPUTE, step=i)
        per_event_us = (time.perf_counter() - t) / n * 1e6

    bare, inst = statistics.median(times[False]) * 1e3, statistics.median(times[True]) * 1e3
    print(f"model {args.model}, {args.steps} steps interleaved at random ({len(times[False])} bare, "
          f"{len(times[True])} instrumented timed), torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"device {device}")
    print(f"{'steps':<14}{'median ms':>10}{'p10 ms':>9}{'p90 ms':>9}")
    for name, key in (("bare", False), ("instrumented", True)):
        xs = np.array(times[key]) * 1e3
        print(f"{name:<14}{np.median(xs):>10.3f}{np.percentile(xs, 10):>9.3f}{np.percentile(xs, 90):>9.3f}")
    print(f"per-step overhead ratio (instrumented / bare, medians): {inst / bare:.4f}  ({(inst / bare - 1) * 100:+.2f}%)")
    direct_us = statistics.median(inside) * 1e6
    print(f"time inside the instrumentation (3 events, sample list, JSON, write), median per step: "
          f"{direct_us:.1f} us = {direct_us / 1e3 / bare * 100:.3f}% of a bare step")
    print(f"one event write on its own: {per_event_us:.2f} us")
    print("(the ratio of medians carries the machine's step-to-step noise; the time inside the "
          "instrumentation is its direct cost)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
