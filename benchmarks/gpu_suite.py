"""The GPU check of the cheap-checkpoint work, as one script of at most about five minutes.

On a CUDA machine it measures what the CPU lab cannot:

1. the stall benchmark with device-to-host copies (pinned buffers, ``non_blocking``)
   for the medium (474 MB) and large (1.8 GB) states, plus a short leak check;
2. real runs of the GPU-sized model (``--model large``) with failures through
   ``goodputlab.run``, one per strategy, all killed at the same steps: goodput,
   blocking save time, restore time, where each restart restored from, and
   whether every strategy ends with the same final model (bit-exact resume on CUDA).

Every stage checks the time left (``--budget-s``, default 290 s) and is skipped,
saying so, when it would not fit. Without CUDA (or with ``--cpu-smoke``) the same
stages run on the CPU with small sizes, to prove the script works; those are not
GPU figures.

    python benchmarks/gpu_suite.py                      # on the GPU machine
    python benchmarks/gpu_suite.py --cpu-smoke          # anywhere, ~1-2 minutes
    python benchmarks/gpu_suite.py --json $OUT/gpu.json # keep every figure
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


class Budget:
    """Seconds left of the suite's wall-clock budget."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def allows(self, stage: str, needs_s: float) -> bool:
        if self.left() >= needs_s:
            return True
        print(f"\n[{stage}] SKIPPED: needs about {needs_s:.0f} s, {self.left():.0f} s left of the budget", flush=True)
        return False


def environment(device: str) -> dict:
    import torch

    info = {"torch": torch.__version__, "device": device, "cores": os.cpu_count()}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_memory_gb=round(p.total_memory / 2**30, 1), cuda=torch.version.cuda)
    return info


def stall_stage(device: str, models: str, saves: int, leak_model: str, leak_saves: int, json_path: Path) -> dict:
    import checkpoint_stall

    args = ["--device", device, "--models", models, "--saves", str(saves), "--leak-saves", str(leak_saves),
            "--leak-model", leak_model, "--in-process", "--json", str(json_path)]
    if device == "cuda":
        args += ["--threads", "0"]  # torch's default threads: copies on a GPU machine are not contended
    checkpoint_stall.main(args)
    return json.loads(json_path.read_text())


def runs_stage(device: str, model: str, steps: int, ckpt_every: int, kills: tuple[int, ...], strategies, root: Path) -> dict:
    import goodputlab as gl
    from goodputlab import strategy_compare as sc

    out = {}
    base = gl.RunConfig(model=model, device=device, steps=steps, ckpt_every=ckpt_every, kill_at_steps=kills,
                        memory_disk_every=2, restart_delay=0.2, seed=0)
    print(f"\nreal runs: {model} on {device}, {steps} steps, checkpoint every {ckpt_every}, kills at {list(kills)}")
    print(f"{'strategy':<9}{'goodput':>9}{'wall s':>8}{'save ms':>9}{'ckpt_save s':>13}{'restore s':>11}{'restored from':>26}")
    for s in strategies:
        t = time.monotonic()
        r = gl.run(base.replace(ckpt=s), out=root / s, progress=False)
        sources = [f"{e['source']}@{e['ckpt_step']}" for e in r.events if e["kind"] == "restored"]
        b = r.summary["buckets"]
        out[s] = {
            "goodput": r.goodput, "wall_s": r.summary["wall_s"], "save_s": sc.save_cost_s(r),
            "checkpoint_save_s": b["checkpoint_save"], "checkpoint_restore_s": b["checkpoint_restore"],
            "failures": r.summary["failures"], "restored_from": sources, "completed": r.summary["completed"],
            "final_state_sha256": r.summary["final_state_sha256"], "seconds": time.monotonic() - t,
        }
        o = out[s]
        print(f"{s:<9}{o['goodput']:>9.1%}{o['wall_s']:>8.1f}{o['save_s'] * 1000:>9.1f}{o['checkpoint_save_s']:>13.2f}"
              f"{o['checkpoint_restore_s']:>11.2f}{', '.join(sources):>26}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu-smoke", action="store_true", help="run on the CPU with small sizes even if CUDA is present")
    p.add_argument("--budget-s", type=float, default=290.0, help="wall-clock budget in seconds (default 290)")
    p.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    args = p.parse_args(argv)

    import torch

    t0 = time.monotonic()
    budget = Budget(args.budget_s)
    gpu = torch.cuda.is_available() and not args.cpu_smoke
    device = "cuda" if gpu else "cpu"
    results: dict = {"environment": environment(device), "gpu": gpu}
    print("goodputlab GPU suite:", json.dumps(results["environment"]))
    if not gpu:
        print("no CUDA device used: CPU smoke run with small sizes. These are NOT GPU figures.")
    work = Path(tempfile.mkdtemp(prefix="goodputlab-gpu-suite-"))

    # 1. stall benchmark with device-to-host copies
    if gpu:
        stall_args = dict(models="medium,large", saves=3, leak_model="small", leak_saves=30)
        needs = 150
    else:
        stall_args = dict(models="tiny", saves=2, leak_model="tiny", leak_saves=10)
        needs = 20
    if budget.allows("stall", needs):
        results["stall"] = stall_stage(device, json_path=work / "stall.json", **stall_args)

    # 2. real runs with failures on the GPU-sized model
    if gpu:
        run_args = dict(model="large", steps=60, ckpt_every=10, kills=(25, 45), strategies=("sync", "async", "memory"))
        needs = 100
    else:
        run_args = dict(model="tiny", steps=30, ckpt_every=10, kills=(15,), strategies=("sync", "async", "memory"))
        needs = 25
    if budget.allows("runs", needs):
        results["runs"] = runs_stage(device, root=work / "runs", **run_args)
        if budget.allows("dcp run", needs / 3):
            results["runs"].update(runs_stage(device, root=work / "runs-dcp", **{**run_args, "strategies": ("dcp",)}))
        if budget.allows("reference run without failures", needs / 3):
            clean = runs_stage(device, root=work / "runs-clean", **{**run_args, "kills": (), "strategies": ("sync",)})
            results["reference_sha256"] = clean["sync"]["final_state_sha256"]
        hashes = {o["final_state_sha256"] for o in results["runs"].values()} | {results.get("reference_sha256")} - {None}
        results["bit_exact"] = len(hashes) == 1 and all(o["final_state_sha256"] for o in results["runs"].values())
        against = "and the run without failures " if "reference_sha256" in results else ""
        print(f"\nevery killed strategy {against}ends with the same final model: {results['bit_exact']}")

    results["seconds"] = time.monotonic() - t0
    print(f"\nGPU suite done in {results['seconds']:.0f} s ({'GPU' if gpu else 'CPU smoke'})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
