"""Scaling out on torchrun, measured side by side: 1 process against 2 ranks, a straggler against its model.

Three parts, each printing its figures next to each other:

1. **The same work on 1 and on 2 ranks** (the same global batch every step, the same checkpoints):
   each run's ledger, category by category, and the ratio of the 2-rank run to the 1-process run.
2. **A straggler**: rank 1 slowed by ``--factor`` on a ``--share`` of its steps. The job ledger's
   ``straggler_wait`` (measured from the ranks' own ``sync_wait`` phases) against
   :func:`goodputlab.theory.scaling.straggler_wait_s` on the healthy rank's measured compute;
   a run without straggler gives the floor (the two ranks' natural jitter and the transfer).
3. **What a sharded save costs a rank**: bytes written and blocking time per rank, 1 rank against 2.
4. **Failures at job scale** (skipped with ``--quick``): per-rank MTBF ``--mtbf`` with 2 ranks,
   failures seen against expected, and the simulator on the run's measured costs.

    python benchmarks/distributed.py              # small preset, about 3 minutes on 2 cores
    python benchmarks/distributed.py --quick      # tiny preset, about a minute

Run from the repository root (``PYTHONPATH=.`` if goodputlab is not installed). CPU and gloo; the
NCCL path is ``benchmarks/gpu_distributed.py``.
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

from goodputlab import categories as C  # noqa: E402
from goodputlab.engine.api import run  # noqa: E402
from goodputlab.engine.config import RunConfig  # noqa: E402
from goodputlab.experiments import scaling as X  # noqa: E402


def machine() -> str:
    import torch

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} cores, GPU none, torch {torch.__version__}, "
            f"Python {platform.python_version()}, load average {load:.2f}")


def ledger_table(results: dict[int, object]) -> str:
    ones, twos = results[1].summary, results[2].summary
    lines = [f"{'category':<20}{'1 process s':>13}{'2 ranks s':>12}{'2/1':>8}"]
    for cat in C.CATEGORIES:
        a, b = ones["buckets"][cat], twos["buckets"][cat]
        ratio = f"{b / a:8.2f}" if a > 1e-9 else f"{'-':>8}"
        lines.append(f"{cat:<20}{a:>13.3f}{b:>12.3f}{ratio}")
    lines.append(f"{'wall':<20}{ones['wall_s']:>13.3f}{twos['wall_s']:>12.3f}{twos['wall_s'] / ones['wall_s']:8.2f}")
    lines.append(f"{'goodput':<20}{ones['goodput']:>13.1%}{twos['goodput']:>12.1%}")
    lines.append(f"{'closes to wall':<20}{sum(ones['buckets'].values()) - ones['wall_s']:>13.1e}"
                 f"{sum(twos['buckets'].values()) - twos['wall_s']:>12.1e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny preset, fewer steps, no failure part")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--factor", type=float, default=3.0, help="the straggler's slowdown (default 3)")
    p.add_argument("--share", type=float, default=0.5, help="share of its steps slowed (default 0.5)")
    p.add_argument("--mtbf", type=float, default=90.0, help="per-rank MTBF of part 4, seconds (default 90)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--parts", default="1,2,3,4", help="which parts to run, e.g. 4 (default 1,2,3,4; 2 and 3 need 1)")
    args = p.parse_args(argv)
    parts = {int(x) for x in args.parts.split(",") if x.strip()}
    if args.quick:
        parts.discard(4)
    if parts & {2, 3}:
        parts.add(1)
    model = "tiny" if args.quick else "small"
    steps = args.steps or (60 if args.quick else 120)
    out = args.out or Path(tempfile.mkdtemp(prefix="goodputlab-distributed-"))
    base = RunConfig(steps=steps, model=model, ckpt_every=steps // 4, seed=11, restart_delay=0.0, threads=1)
    print(f"machine: {machine()}")
    print(f"work: {model} preset, {steps} steps of a global batch of {base.resolved_batch_size()}, "
          f"a sync checkpoint every {base.ckpt_every} steps; 1 torch thread per process\n")
    t_start = time.monotonic()

    same = {}
    if 1 in parts:
        print("1. the same work on 1 process and on 2 ranks (torchrun, gloo, DDP)")
        same = X.run_ranks(base, out / "same", ranks=(1, 2))
        print(ledger_table(same))
        one, two = same[1].summary, same[2].summary
        print(f"final loss: 1 process {one['final_loss']:.4f}, 2 ranks {two['final_loss']:.4f} (same batches; "
              f"dropout masks differ)\n")
    if 2 in parts:
        part2(args, base, out, same)
    if 3 in parts:
        part3(same)
    if 4 in parts:
        part4(args, base, out, same)
    print(f"results in {out}; total {time.monotonic() - t_start:.0f} s")
    return 0


def part2(args, base, out, same) -> None:
    two = same[2].summary
    print(f"2. a straggler: rank 1 slowed x{args.factor:g} on a {args.share:.0%} share of its steps")
    slow = run(base.replace(nproc=2, straggler_rank=1, straggler_factor=args.factor, straggler_prob=args.share),
               out=out / "straggler", progress=False)
    floor = X.straggler_cost(same[2])
    cost = X.straggler_cost(slow)
    print(f"{'':<40}{'no straggler':>14}{'straggler':>12}")
    print(f"{'job straggler_wait, s (measured)':<40}{floor['measured_s']:>14.3f}{cost['measured_s']:>12.3f}")
    print(f"{'healthy rank in sync_wait, s':<40}{floor['healthy_wait_s']:>14.3f}{cost['healthy_wait_s']:>12.3f}")
    print(f"{'healthy compute per step, ms':<40}{floor['own_compute_s'] * 1e3:>14.2f}{cost['own_compute_s'] * 1e3:>12.2f}")
    print(f"{'steps slowed':<40}{'-':>14}{cost['slowed_steps']:>7} of {cost['steps']}")
    extra = cost["measured_s"] - floor["measured_s"]
    print(f"{'model: (f-1) x share x compute x steps, s':<40}{'':>14}{cost['model_s']:>12.3f}")
    print(f"{'model on the steps actually slowed, s':<40}{'':>14}{cost['model_given_slowed_s']:>12.3f}")
    print(f"{'injected (the straggler slept), s':<40}{'':>14}{cost['slept_s']:>12.3f}")
    print(f"measured above the floor: {extra:.3f} s = {extra / cost['model_given_slowed_s']:.2f} x the model "
          f"on the slowed steps ({extra / cost['model_s']:.2f} x the expectation, {extra / cost['slept_s']:.2f} x the "
          f"injected sleep); wall "
          f"{slow.summary['wall_s']:.2f} s against {two['wall_s']:.2f} s, goodput {slow.summary['goodput']:.1%} "
          f"against {two['goodput']:.1%}\n")


def part3(same) -> None:
    print("3. what a sharded save costs each rank (sync, DCP)")
    print(f"{'ranks':>5}{'rank':>6}{'bytes':>14}{'persist ms':>12}{'blocking ms':>13}")
    for n in (1, 2):
        for row in X.save_cost_per_rank(same[n]):
            size = f"{row['bytes']:.0f}" if row["bytes"] is not None else "-"
            persist = f"{row['persist_s'] * 1e3:.1f}" if row["persist_s"] is not None else "-"
            print(f"{n:>5}{row['rank']:>6}{size:>14}{persist:>12}{row['blocking_s'] * 1e3:>13.1f}")
    print("(1 process writes the torch_save layout and reports no parts; its blocking time is the whole save)\n")


def part4(args, base, out, same) -> None:
    print(f"4. failures at job scale: 2 ranks, each with an MTBF of {args.mtbf:g} s (the job's: {args.mtbf / 2:g} s), "
          f"rank 1 a straggler as in part 2")
    failing = run(base.replace(nproc=2, mtbf=args.mtbf, straggler_rank=1, straggler_factor=args.factor,
                               straggler_prob=args.share, max_failures=100), out=out / "failures", progress=False)
    f = X.failure_count(failing)
    s = failing.summary
    same_sha = s["final_state_sha256"] == same[2].summary["final_state_sha256"] if 2 in same else "(part 1 not run)"
    print(f"failures {f['failures']} (expected {f['expected']:.1f} over the exposed time), attempts {s['attempts']}, "
          f"final sha256 equals the failure-free 2-rank run's: {same_sha}")
    b = s["buckets"]
    observed = X.simulate_run(failing, trials=4000)
    configured = X.simulate_run(failing, trials=4000, rate="configured")
    share = b["straggler_wait"] / (b["straggler_wait"] + b["productive"] + b["lost_work"])
    print(f"healthy ranks waiting, share of the job's compute: measured {share:.1%}, model "
          f"{observed.config.straggler_wait_share:.1%} (effective factor {observed.config.straggler_factor:.2f})")
    print(f"{'':<20}{'measured':>10}{'sim, rate seen':>16}{'sim, MTBF set':>15}")
    for cat in C.CATEGORIES:
        print(f"{cat:<20}{s['shares'][cat]:>10.1%}{observed.buckets[cat] / observed.config.duration_s:>16.1%}"
              f"{configured.buckets[cat] / configured.config.duration_s:>15.1%}")
    print(f"{'goodput':<20}{s['goodput']:>10.1%}{observed.goodput_mean:>16.1%}{configured.goodput_mean:>15.1%}")
    print(f"{'failures':<20}{s['failures']:>10}{observed.interruptions_mean:>16.2f}{configured.interruptions_mean:>15.2f}\n")


if __name__ == "__main__":
    sys.exit(main())
