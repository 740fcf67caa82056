"""What does the ledger cost? The same training loop with and without its event log.

    python benchmarks/ledger_overhead.py [--steps 400] [--rounds 3] [--model tiny]

Runs ``goodputlab.worker.train`` in this process, alternating a bare loop (events go to a
``NullWriter``) and the instrumented loop (every phase change written to a JSON-lines file,
as in a real run), ``--rounds`` times each, and prints the per-step time of both, the
overhead ratio, and the cost of one event write measured on its own.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goodputlab.config import RunConfig  # noqa: E402
from goodputlab.events import EventWriter, NullWriter, read_events  # noqa: E402
from goodputlab.worker import train  # noqa: E402


def timed_train(config: RunConfig, work: Path, events) -> float:
    """Seconds to train ``config`` from scratch in a fresh directory that shares the generated data."""
    run_dir = Path(tempfile.mkdtemp(dir=work))
    if (work / "data").exists():
        shutil.copytree(work / "data", run_dir / "data")
    t = time.perf_counter()
    train(config, run_dir, events)
    elapsed = time.perf_counter() - t
    shutil.rmtree(run_dir)
    return elapsed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model", default="tiny")
    args = p.parse_args(argv)

    import torch

    config = RunConfig(steps=args.steps, ckpt_every=0, model=args.model, seed=0)
    work = Path(tempfile.mkdtemp(prefix="ledger-overhead-"))
    train(config.replace(steps=5), work, NullWriter())  # warm up: data file, allocator, kernels
    bare, instrumented = [], []
    events_per_run = 0
    for r in range(args.rounds):
        bare.append(timed_train(config, work, NullWriter()))
        log = work / f"events-{r}.jsonl"  # the instrumented loop writes its log like a real worker
        with EventWriter(log, time.monotonic(), attempt=0) as ev:
            instrumented.append(timed_train(config, work, ev))
        events_per_run = len(read_events(log))

    # one event write on its own
    with EventWriter(work / "micro.jsonl", time.monotonic(), attempt=0) as ev:
        n = 20000
        t = time.perf_counter()
        for i in range(n):
            ev.emit("compute", step=i)
        per_event_us = (time.perf_counter() - t) / n * 1e6

    # The minimum over rounds is the least disturbed by other processes; the median is printed beside it.
    b = min(bare) / args.steps * 1e3
    i = min(instrumented) / args.steps * 1e3
    b_med = statistics.median(bare) / args.steps * 1e3
    i_med = statistics.median(instrumented) / args.steps * 1e3
    print(f"model {args.model}, {args.steps} steps x {args.rounds} rounds, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, device cpu")
    print(f"{'loop':<14}{'ms/step min':>12}{'median':>10}   all rounds (ms/step)")
    print(f"{'bare':<14}{b:>12.3f}{b_med:>10.3f}   {'  '.join(f'{x / args.steps * 1e3:.3f}' for x in bare)}")
    print(f"{'instrumented':<14}{i:>12.3f}{i_med:>10.3f}   {'  '.join(f'{x / args.steps * 1e3:.3f}' for x in instrumented)}")
    print(f"per-step overhead ratio (instrumented / bare), min over rounds: {i / b:.4f}  ({(i / b - 1) * 100:+.2f}%)")
    print(f"                                              median of rounds: {i_med / b_med:.4f}  ({(i_med / b_med - 1) * 100:+.2f}%)")
    per_step_events = events_per_run / args.steps
    print(f"one event write: {per_event_us:.2f} us; {per_step_events:.1f} events per step "
          f"=> {per_event_us * per_step_events / 1e3 / b * 100:.3f}% of a bare step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
