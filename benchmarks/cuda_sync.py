"""Where a CUDA step's time lands in the ledger, with and without ``Recorder(cuda_sync=True)`` (needs a GPU).

    python benchmarks/cuda_sync.py [--steps 200] [--size 4096]

A step queues matrix products on the GPU and returns at once (CUDA is asynchronous); the next data wait
copies a tensor to the host, which waits for the GPU. Without ``cuda_sync`` the recorder's blocks time the
host clock, so the step's GPU time is booked to that data wait; with ``cuda_sync=True`` the recorder waits
for the GPU at each step's end, so the step's time is booked to the step. The script records the same job
both ways into temporary folders and prints, side by side:

* each ledger's productive and data_wait seconds, and the GPU time that moved between them;
* what the synchronisation costs: the job's wall time with it against without it (the host can no
  longer queue the next step while the GPU runs the last one), as a ratio.

Without CUDA it says so and stops (nothing runs on the CPU: the question does not arise there).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def job(run_dir: Path, steps: int, size: int, cuda_sync: bool) -> float:
    """The job recorded into ``run_dir``; its wall time (s)."""
    import torch

    import goodputlab as gl

    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")
    out = a
    torch.cuda.synchronize()
    start = time.perf_counter()
    with gl.Recorder(run_dir, total_steps=steps, cuda_sync=cuda_sync) as rec:
        for step in range(steps):
            with rec.data_wait():
                out.sum().item()  # the host waits here for whatever the GPU has queued
            with rec.step(step):
                for _ in range(4):
                    out = torch.tanh(out @ b) * 0.5 + a * 0.5  # queued, not waited for
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="steps of each job")
    p.add_argument("--size", type=int, default=4096, help="the matrices' side")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device here: this benchmark measures where a GPU step's time is booked; run it on a GPU")
        return 0
    import goodputlab as gl

    job(Path(tempfile.mkdtemp()), 5, args.size, False)  # warm-up: CUDA context, kernels
    rows = {}
    for cuda_sync in (False, True):
        run_dir = Path(tempfile.mkdtemp(prefix=f"cuda-sync-{cuda_sync}-"))
        wall = job(run_dir, args.steps, args.size, cuda_sync)
        s = gl.load_run(run_dir).summary
        rows[cuda_sync] = (wall, s["buckets"]["productive"], s["buckets"]["data_wait"], s["wall_s"])
    print(f"{torch.cuda.get_device_name()}, {args.steps} steps of 4 products of {args.size}x{args.size} (float32)")
    print(f"{'cuda_sync':<10}{'wall s':>9}{'productive s':>14}{'data_wait s':>13}{'goodput':>9}")
    for cuda_sync, (wall, prod, wait, ledger_wall) in rows.items():
        print(f"{str(cuda_sync):<10}{wall:>9.3f}{prod:>14.3f}{wait:>13.3f}{prod / ledger_wall:>9.1%}")
    moved = rows[True][1] - rows[False][1]
    print(f"GPU time booked to the step instead of the next data wait: {moved:.3f} s "
          f"({moved / args.steps * 1000:.2f} ms a step)")
    print(f"the synchronisation's cost: wall with / without = {rows[True][0] / rows[False][0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
