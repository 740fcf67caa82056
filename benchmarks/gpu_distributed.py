"""The distributed runs on GPUs: NCCL, DDP for the small preset, FSDP for the large one. A short prepared check.

For a machine with one or more CUDA GPUs. With ``N`` GPUs it runs ``N`` ranks (one per GPU) under
torchrun; with one GPU it runs one rank under torchrun (``launcher="torchrun"``): NCCL, DDP or FSDP,
the sync-wait clock and the sharded checkpoints are all on that path (two NCCL ranks cannot share a
GPU). Each part prints its figures; paste the output into ``benchmarks/RESULTS.md``.

1. small preset, DDP, NCCL: a failure-free run and a run with one rank killed at step 40;
   the final states must be bit-identical (deterministic cuBLAS and kernels, as the worker sets);
2. the same with rank 0 a straggler (x3 on half its steps) when there are two or more GPUs;
3. large preset (FSDP, ~1.8 GB of state), sync sharded checkpoints: the save per rank, and a kill.

    python benchmarks/gpu_distributed.py             # about 3-5 minutes on one H100/H200
    python benchmarks/gpu_distributed.py --quick     # parts 1 and 3 shorter

Run from the repository root (``PYTHONPATH=.`` if goodputlab is not installed).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def table(label: str, s: dict) -> None:
    b = s["buckets"]
    parts = "  ".join(f"{k} {v:.2f}" for k, v in b.items() if v > 0.0005)
    print(f"{label}: world {s.get('world_size')}, {s.get('parallelism')}, launcher {s.get('launcher')}, "
          f"device {s.get('device')}, wall {s['wall_s']:.2f} s, goodput {s['goodput']:.1%}, failures {s['failures']}, "
          f"steps {s['steps_completed']} (executed {s['steps_executed']}), closes "
          f"{abs(sum(b.values()) - s['wall_s']) < 1e-6}\n    {parts}\n    sha {s['final_state_sha256']}")


def main(argv: list[str] | None = None) -> int:
    import torch

    from goodputlab.engine.api import run
    from goodputlab.engine.config import RunConfig
    from goodputlab.experiments import scaling as X

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU (the CPU path is benchmarks/distributed.py)")
        return 2
    gpus = torch.cuda.device_count()
    out = args.out or Path(tempfile.mkdtemp(prefix="goodputlab-gpu-distributed-"))
    print(f"machine: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} cores, {gpus} x "
          f"{torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL "
          f"{'.'.join(map(str, torch.cuda.nccl.version()))}), Python {platform.python_version()}")
    ranks = dict(nproc=gpus, launcher="torchrun", device="cuda", restart_delay=0.0)
    steps = 80 if args.quick else 200
    t0 = time.monotonic()

    print(f"\n1. small preset, DDP over NCCL, {gpus} rank(s), {steps} steps, sync sharded checkpoints every 20")
    base = RunConfig(steps=steps, model="small", ckpt_every=20, seed=3, **ranks)
    clean = run(base, out=out / "small-clean", progress=False)
    table("failure-free", clean.summary)
    killed = run(base.replace(kill_at_steps=(40,)), out=out / "small-killed", progress=False)
    table("killed at 40", killed.summary)
    print(f"bit-identical after the kill: {killed.summary['final_state_sha256'] == clean.summary['final_state_sha256']}")

    if gpus >= 2:
        print("\n2. the same, rank 0 a straggler (x3 on half its steps)")
        slow = run(base.replace(straggler_rank=0, straggler_factor=3.0, straggler_prob=0.5), out=out / "small-straggler",
                   progress=False)
        table("straggler", slow.summary)
        cost = X.straggler_cost(slow)
        print(f"straggler wait measured {cost['measured_s']:.3f} s; model {cost['model_s']:.3f} s, on the slowed steps "
              f"{cost['model_given_slowed_s']:.3f} s; healthy compute {1000 * cost['own_compute_s']:.2f} ms a step")
    else:
        print("\n2. skipped: a straggler needs two or more ranks (GPUs)")

    big_steps = 20 if args.quick else 40
    print(f"\n3. large preset, FSDP over NCCL, {gpus} rank(s), {big_steps} steps, sync sharded checkpoints every 10, "
          "a kill at step 15")
    big = run(RunConfig(steps=big_steps, model="large", ckpt_every=10, seed=3, kill_at_steps=(15,), **ranks),
              out=out / "large-fsdp", progress=False)
    table("large, killed at 15", big.summary)
    for row in X.save_cost_per_rank(big):
        print(f"    rank {row['rank']}: {row['bytes'] / 1e9 if row['bytes'] else 0:.3f} GB a save, persist "
              f"{(row['persist_s'] or 0) * 1e3:.0f} ms, blocking {row['blocking_s'] * 1e3:.0f} ms")
    print(f"\nresults in {out}; total {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
