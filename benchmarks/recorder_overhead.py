"""What does gl.Recorder cost a training loop? Per-step time with and without it, side by side.

    python benchmarks/recorder_overhead.py [--steps 20000] [--rounds 7] [--torch-steps 6000]

Part 1 (no torch): the loop's bodies are empty, so the difference is the recorder and nothing
else. Rounds alternate a bare loop and a recorded loop of ``--steps`` steps each (a
``data_wait`` block, a ``step`` block with the loss set, a ``checkpoint_save`` block every
1000 steps, writing to a real event log in a temporary folder); per-step times are the
medians over rounds, so both see the same machine drift.

Part 2 (with torch, skipped if it is not installed): a small MLP's real training step, each
step run bare or recorded at random, medians of each, as in ``ledger_overhead.py``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goodputlab.engine.recorder import Recorder  # noqa: E402

SAVE_EVERY = 1000


def bare_loop(steps: int) -> float:
    clock = time.perf_counter
    t = clock()
    for step in range(steps):
        batch = step
        loss = float(batch)
        if step % SAVE_EVERY == 0:
            pass
    return (clock() - t) / steps


def recorded_loop(steps: int, run_dir: Path) -> float:
    clock = time.perf_counter
    rec = Recorder(run_dir / f"r{random.random()}")
    t = clock()
    for step in range(steps):
        with rec.data_wait():
            batch = step
        with rec.step(step) as s:
            loss = float(batch)
            s.loss = loss
        if step % SAVE_EVERY == 0:
            with rec.checkpoint_save(step):
                pass
    elapsed = (clock() - t) / steps
    rec.close()
    return elapsed


def torch_part(steps: int, run_dir: Path) -> None:
    try:
        import torch
    except ImportError:
        print("\n(torch is not installed: part 2 skipped)")
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 1)

    def train_step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    rec = Recorder(run_dir / "torch")
    rng = random.Random(0)
    times = {False: [], True: []}
    clock = time.perf_counter
    for step in range(steps):
        recorded = rng.random() < 0.5
        t = clock()
        if recorded:
            with rec.data_wait():
                batch = (x, y)
            with rec.step(step) as s:
                s.loss = train_step()
        else:
            batch = (x, y)
            train_step()
        if step >= 50:  # allocator warm-up
            times[recorded].append(clock() - t)
    rec.close()
    bare, inst = statistics.median(times[False]) * 1e6, statistics.median(times[True]) * 1e6
    print(f"\npart 2: a small MLP's training step (torch {torch.__version__}, 1 thread), {steps} steps, "
          "bare or recorded at random")
    print(f"{'loop':<12}{'median us/step':>16}")
    print(f"{'bare':<12}{bare:>16.1f}")
    print(f"{'recorded':<12}{inst:>16.1f}")
    print(f"difference {inst - bare:+.1f} us a step ({(inst / bare - 1) * 100:+.1f}% of the step; "
          "this includes the step-to-step noise of a shared machine)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20000, help="steps per round of part 1")
    p.add_argument("--rounds", type=int, default=7, help="rounds of part 1 (each: one bare loop, one recorded)")
    p.add_argument("--torch-steps", type=int, default=6000, help="steps of part 2 (0: skip)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="recorder-overhead-"))
    try:
        bare, recorded = [], []
        for _ in range(args.rounds):
            bare.append(bare_loop(args.steps))
            recorded.append(recorded_loop(args.steps, work))
        b, r = statistics.median(bare) * 1e6, statistics.median(recorded) * 1e6
        print(f"part 1: empty loop bodies, {args.rounds} rounds x {args.steps} steps, Python {sys.version.split()[0]}")
        print(f"{'loop':<12}{'median us/step':>16}{'min':>8}{'max':>8}")
        print(f"{'bare':<12}{b:>16.2f}{min(bare) * 1e6:>8.2f}{max(bare) * 1e6:>8.2f}")
        print(f"{'recorded':<12}{r:>16.2f}{min(recorded) * 1e6:>8.2f}{max(recorded) * 1e6:>8.2f}")
        print(f"recorder cost per step: {r - b:.2f} us (3 events a step: data_wait, compute, step_end; "
              f"a save every {SAVE_EVERY} steps adds ckpt_save, ckpt_commit, an fsync and loop)")
        print(f"aim: under 20 us a step -> {'met' if r - b < 20 else 'NOT met'}")
        if args.torch_steps:
            torch_part(args.torch_steps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
