"""The GPU check of the cheap-checkpoint work, as one script of at most about five minutes.

On a CUDA machine it measures what the CPU lab cannot:

1. the stall benchmark with device-to-host copies (pinned buffers, ``non_blocking``)
   for the medium (474 MB) and large (1.8 GB) states, plus a short leak check;
2. real runs of the GPU-sized model (``--model large``) with failures through
   ``goodputlab.run``, one per strategy, all killed at the same steps: goodput,
   blocking save time, restore time, where each restart restored from, and
   whether every strategy ends with the same final model (bit-exact resume on CUDA);
3. the input pipeline on CUDA: the stall anatomy (compute-only, prep-only, full)
   of a loader that cannot keep up, beside the stall model's prediction, and the
   same loop with and without pinned memory and the device-side prefetcher.

Every stage checks the time left (``--budget-s``, default 290 s) and is skipped,
saying so, when it would not fit. On an H200 the whole suite takes about ten
minutes, because a synchronous save of the 1.8 GB state takes 4-4.5 s there: one
call with the default budget runs the stall stage and the runs that fit, and
``--stages runs,pipeline`` in a second call does the rest. A stage that fails prints its traceback and
the suite goes on; with ``--json`` the figures are written after every stage, so a
run stopped at its time limit still leaves what it measured. Without CUDA (or with ``--cpu-smoke``) the same
stages run on the CPU with small sizes, to prove the script works; those are not
GPU figures.

    python benchmarks/gpu_suite.py                      # on the GPU machine
    python benchmarks/gpu_suite.py --cpu-smoke          # anywhere, ~1-2 minutes
    python benchmarks/gpu_suite.py --json $OUT/gpu.json # keep every figure
    python benchmarks/gpu_suite.py --stages runs,pipeline --run-steps 32   # the second call
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
    from goodputlab.experiments import strategy_compare as sc

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
            "step_s": b["productive"] / max(1, r.summary["steps_completed"]),
        }
        o = out[s]
        print(f"{s:<9}{o['goodput']:>9.1%}{o['wall_s']:>8.1f}{o['save_s'] * 1000:>9.1f}{o['checkpoint_save_s']:>13.2f}"
              f"{o['checkpoint_restore_s']:>11.2f}{', '.join(sources):>26}", flush=True)
    return out


def pipeline_stage(device: str, model: str, steps: int, step_s: float, root: Path) -> dict:
    """Stall anatomy of a one-worker loader whose storage is 1.5x slower than the step, and the model beside it."""
    import goodputlab as gl
    from goodputlab.experiments import data_stall as pl

    load_ms = round(1.5 * step_s * 1000, 1)
    config = gl.RunConfig(model=model, device=device, steps=steps, workers=1, prefetch=2, io_latency_ms=load_ms,
                          pin_memory=True, device_prefetch=True, seed=0)
    print(f"\ninput pipeline: {model} on {device}, {steps} steps, 1 worker x prefetch 2, storage {load_ms} ms per batch "
          f"(step ~{1000 * step_s:.0f} ms), pinned memory and device prefetcher on")
    anatomy = pl.stall_anatomy(config, out=root / "anatomy")
    print(anatomy.table(), flush=True)
    calibration = pl.calibrate(anatomy.loops["compute_only"], anatomy.loops["prep_only"])
    predicted = pl.predict_stall_for(config, calibration)
    replayed = pl.predict_stall_for(config, calibration, step_times_s=pl.busy_times_s(anatomy.results["full"]))
    full = anatomy.loops["full"]
    print(f"data wait share: measured {full.wait_share:.1%}; model a priori (compute-only step time) "
          f"{predicted.wait_share:.1%}, error {100 * abs(full.wait_share - predicted.wait_share):.1f} pts; "
          f"replayed with the run's own step times {replayed.wait_share:.1%}, "
          f"error {100 * abs(full.wait_share - replayed.wait_share):.1f} pts")
    out = {"load_ms": load_ms, "step_s": step_s, "rows": anatomy.rows(), "prep_stall_s": anatomy.prep_stall_s,
           "fetch_stall_s": anatomy.fetch_stall_s, "measured_wait_share": full.wait_share,
           "predicted_wait_share": predicted.wait_share, "replayed_wait_share": replayed.wait_share, "copy": {}}
    print(f"\nhost-to-device copy: 2 workers x prefetch 2, no storage latency, {steps} steps")
    print(f"{'pin_memory + device prefetch':<30}{'period ms':>10}{'data wait ms':>14}{'samples/s':>11}")
    for on in (False, True):
        r = gl.run(config.replace(workers=2, io_latency_ms=0.0, pin_memory=on, device_prefetch=on, ckpt_every=0),
                   out=root / f"copy-{on}", progress=False)
        s = pl.loop_stats(r)
        out["copy"][str(on)] = {"period_s": s.period_s, "wait_per_step_s": s.wait_per_step_s,
                                "samples_per_s": s.samples_per_s}
        print(f"{'on' if on else 'off':<30}{1000 * s.period_s:>10.1f}{1000 * s.wait_per_step_s:>14.2f}"
              f"{s.samples_per_s:>11.0f}", flush=True)
    return out


def guarded(results: dict, name: str, save_to: Path | None, stage, *args, **kwargs):
    """Run one stage; on failure print the traceback and record it, never stop the suite."""
    t = time.monotonic()
    try:
        results[name] = stage(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - a failed stage must not cost the others on a short GPU lease
        import traceback

        traceback.print_exc()
        results.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
        print(f"[{name}] FAILED: {type(e).__name__}: {e}", flush=True)
    results.setdefault("stage_seconds", {})[name] = round(time.monotonic() - t, 1)
    if save_to is not None:
        save_to.parent.mkdir(parents=True, exist_ok=True)
        save_to.write_text(json.dumps(results, indent=1, default=str))
    return results.get(name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu-smoke", action="store_true", help="run on the CPU with small sizes even if CUDA is present")
    p.add_argument("--budget-s", type=float, default=290.0, help="wall-clock budget in seconds (default 290)")
    p.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    p.add_argument("--stages", default="stall,runs,pipeline", help="which stages, comma-separated (default: all three)")
    p.add_argument("--strategies", default="sync,async,memory,dcp", help="strategies for the runs stage")
    p.add_argument("--run-steps", type=int, default=40, help="steps of each GPU run (default 40; kills at 3/8 and 3/4)")
    args = p.parse_args(argv)
    stages = set(args.stages.split(","))
    strategies = tuple(x for x in args.strategies.split(",") if x)
    if not stages <= {"stall", "runs", "pipeline"}:
        p.error(f"--stages {args.stages}: choose from stall, runs, pipeline (comma-separated)")
    if not strategies or not set(strategies) <= {"sync", "async", "dcp", "memory"}:
        p.error(f"--strategies {args.strategies}: choose from sync, async, dcp, memory (comma-separated)")
    if args.run_steps < 16:
        p.error(f"--run-steps {args.run_steps}: at least 16 (two kills after the first checkpoint at step 10)")

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
        needs = 270  # measured on an H200: 263 s (1.8 GB sync saves take 4-4.5 s)
    else:
        stall_args = dict(models="tiny", saves=2, leak_model="tiny", leak_saves=10)
        needs = 20
    if "stall" in stages and budget.allows("stall", needs):
        guarded(results, "stall", args.json, stall_stage, device, json_path=work / "stall.json", **stall_args)

    # 2. real runs with failures on the GPU-sized model: the failure-free reference first
    if gpu:
        n = args.run_steps
        run_args = dict(model="large", steps=n, ckpt_every=10, kills=(3 * n // 8, 3 * n // 4))
        needs = 70  # an H200 run of 32 steps with two kills: 55-77 s; the reference without kills 37 s
    else:
        run_args = dict(model="tiny", steps=30, ckpt_every=10, kills=(15,))
        needs = 10
    runs: dict = {}
    if "runs" in stages and budget.allows("reference run without failures", needs * 0.7):
        clean = guarded(results, "runs_clean", args.json, runs_stage, device, root=work / "runs-clean",
                        **{**run_args, "kills": (), "strategies": ("sync",)})
        if clean:
            results["reference_sha256"] = clean["sync"]["final_state_sha256"]
        for s in strategies:
            if budget.allows(f"{s} run", needs):
                runs.update(guarded(results, f"runs_{s}", args.json, runs_stage, device, root=work / f"runs-{s}",
                                    **{**run_args, "strategies": (s,)}) or {})
        if runs:
            results["runs"] = runs
            ref = results.get("reference_sha256")
            for s, o in runs.items():
                o["same_as_reference"] = ref is not None and o["final_state_sha256"] == ref
            hashes = {o["final_state_sha256"] for o in runs.values()} | ({ref} - {None})
            results["bit_exact"] = len(hashes) == 1 and all(o["final_state_sha256"] for o in runs.values())
            against = "and the run without failures " if ref else ""
            finals = ", ".join(f"{s}: {o['final_state_sha256'][:12]}" for s, o in runs.items())
            finals += f", reference: {ref[:12]}" if ref else ""
            print(f"\nevery killed strategy {against}ends with the same final model: {results['bit_exact']} ({finals})",
                  flush=True)

    # 3. the input pipeline: stall anatomy, the model, pinned memory and the device prefetcher
    step_s = None
    for o in runs.values():  # the runs' productive seconds per step: the step's appetite
        if o.get("step_s"):
            step_s = o["step_s"]
            break
    pipe_args = dict(model="large", steps=30) if gpu else dict(model="tiny", steps=30)
    if "pipeline" in stages and budget.allows("pipeline", 60 if gpu else 25):
        guarded(results, "pipeline", args.json, pipeline_stage, device, step_s=step_s or (0.05 if gpu else 0.015),
                root=work / "pipeline", **pipe_args)

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
