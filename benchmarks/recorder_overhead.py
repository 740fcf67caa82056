"""What does gl.Recorder cost a training loop? Per-step time with and without it, side by side.

    python benchmarks/recorder_overhead.py [--steps 20000] [--rounds 7] [--torch-steps 6000]

Part 1 (no torch): the loop's bodies are empty, so the difference is the recorder and nothing
else. Rounds alternate a bare loop and two recorded loops, with step records (the default) and
with JSON lines only (``step_records=False``), of ``--steps`` steps each (a
``data_wait`` block, a ``step`` block with the loss set, a ``checkpoint_save`` block every
1000 steps, writing to a real event log in a temporary folder); per-step times are the
medians over rounds, so both see the same machine drift.

Part 2 (with torch, skipped if it is not installed): a small MLP's real training step, each
step run bare or recorded at random, medians of each, as in ``ledger_overhead.py``.

``--breakdown``: where a recorded step's time goes: each piece of work a step does, timed
alone in a loop (the clock, formatting a line the old way and the new way, one ``write``, the
per-line ``flock`` pair the recorder no longer takes, an empty ``with`` block).
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

from goodputlab.measure.recorder import Recorder  # noqa: E402

SAVE_EVERY = 1000


def bare_loop(steps: int) -> float:
    clock = time.perf_counter
    t = clock()
    for step in range(steps):
        batch = step
        loss = float(batch)
        if SAVE_EVERY and step % SAVE_EVERY == 0:
            pass
    return (clock() - t) / steps


def recorded_loop(steps: int, run_dir: Path, step_records: bool = True) -> float:
    clock = time.perf_counter
    rec = Recorder(run_dir / f"r{random.random()}", step_records=step_records)
    t = clock()
    for step in range(steps):
        with rec.data_wait():
            batch = step
        with rec.step(step) as s:
            loss = float(batch)
            s.loss = loss
        if SAVE_EVERY and step % SAVE_EVERY == 0:
            with rec.checkpoint_save(step):
                pass
    elapsed = (clock() - t) / steps
    rec.close()
    return elapsed


def breakdown(n: int = 200_000) -> None:
    """Each piece of a recorded step's work, timed alone (us per call, median of 5 loops of ``n``)."""
    import fcntl
    import os

    from goodputlab.measure import step_records as SR
    from goodputlab.measure.events import event_line

    work = Path(tempfile.mkdtemp(prefix="recorder-breakdown-"))
    fd = os.open(work / "log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = event_line(12.3456789, 0, 12345, "compute", {})
    fmt = b'{"t":%.7f,"attempt":0,"step":%d,"kind":"step_end","loss":%r}\n'
    record = SR.RECORD.pack(12.3456789, 12345, 1.25, 9, 0, 3, 1)

    class Empty:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    empty = Empty()

    def flock_pair():
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)

    def block():
        with empty:
            pass

    pieces = {
        "time.monotonic()": lambda: time.monotonic(),
        "event_line: a compute line": lambda: event_line(12.3456789, 0, 12345, "compute", {}),
        "event_line: a step_end line with its loss": lambda: event_line(12.3456789, 0, 12345, "step_end", {"loss": 1.25}),
        "bytes %: a step_end line (JSON lines only)": lambda: fmt % (12.3456789, 12345, 1.25),
        "os.write of one line": lambda: os.write(fd, line),
        "round(t, 7) + struct pack: a step record (now)": lambda: SR.RECORD.pack(round(12.34567891, 7), 12345, 1.25, 9, 0, 3, 1),
        "os.write of one 40-byte record": lambda: os.write(fd, record),
        "flock + unlock (per line before)": flock_pair,
        "an empty with block": block,
    }
    print(f"\nwhere a step's time goes: each piece alone, median of 5 loops of {n:,} calls")
    print(f"{'piece':<46}{'us a call':>10}")
    for name, fn in pieces.items():
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            runs.append((time.perf_counter() - t) / n * 1e6)
        print(f"{name:<46}{statistics.median(runs):>10.3f}")
    os.close(fd)
    shutil.rmtree(work, ignore_errors=True)
    print("a step writes 3 events (data_wait, compute, step_end) in 2 with blocks: first 3 x (format + flock pair + "
          "write); then 3 x (bytes % + write); now 3 x (round + pack + write) of a 40-byte record, no lock (one live "
          "Recorder per log holds its own lock file)")


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
    p.add_argument("--breakdown", action="store_true", help="also time each piece of a step's work alone")
    p.add_argument("--save-every", type=int, default=SAVE_EVERY,
                   help="steps between saves in part 1 (each save fsyncs the log and the records; 0: no saves)")
    args = p.parse_args(argv)
    if args.save_every < 0:
        p.error(f"--save-every {args.save_every}: must be >= 0")
    globals()["SAVE_EVERY"] = args.save_every
    work = Path(tempfile.mkdtemp(prefix="recorder-overhead-"))
    try:
        bare, recorded, lines = [], [], []
        for _ in range(args.rounds):
            bare.append(bare_loop(args.steps))
            recorded.append(recorded_loop(args.steps, work))
            lines.append(recorded_loop(args.steps, work, step_records=False))
        b, r, j = (statistics.median(x) * 1e6 for x in (bare, recorded, lines))
        print(f"part 1: empty loop bodies, {args.rounds} rounds x {args.steps} steps, a save every {SAVE_EVERY or 'no'} "
              f"steps, Python {sys.version.split()[0]}")
        print(f"{'loop':<26}{'median us/step':>16}{'min':>8}{'max':>8}")
        for name, med, runs in (("bare", b, bare), ("recorded, step records", r, recorded), ("recorded, JSON lines", j, lines)):
            print(f"{name:<26}{med:>16.2f}{min(runs) * 1e6:>8.2f}{max(runs) * 1e6:>8.2f}")
        saves = (f"; a save every {SAVE_EVERY} steps adds ckpt_save, ckpt_commit, loop and the fsyncs (one per "
                 "file)") if SAVE_EVERY else ""
        print(f"recorder cost per step: {r - b:.2f} us with step records, {j - b:.2f} us with JSON lines only "
              f"(3 events a step: data_wait, compute, step_end{saves})")
        print(f"aim: at most 5 us a step -> {'met' if r - b <= 5 else 'NOT met'} (step records), "
              f"{'met' if j - b <= 5 else 'NOT met'} (JSON lines)")
        if args.breakdown:
            breakdown()
        if args.torch_steps:
            torch_part(args.torch_steps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
