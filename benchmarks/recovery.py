"""Recovery, measured side by side in one run of this script: a hot spare against a cold restart,
and a restore from the RAM tier against one from disk.

    python benchmarks/recovery.py [--quick] [--json]

1. **Hot spare vs cold restart.** The same training run (tiny preset, one torch thread, 15 ms of
   emulated storage latency per batch so the kills are a few seconds apart) is killed at the same
   steps twice through the command line: once with cold restarts, once with ``--hot-spare``; no
   restart delay in either, so only the mechanism differs. For every kill: the seconds from the
   kill to the first step the next worker computes. Aim: the hot spare takes at most a quarter of
   the cold restart.
2. **RAM tier vs disk.** The small preset (38 MB of state) with a hot spare, killed at the same
   steps with ``--ckpt memory`` (every save in RAM, none on disk until the end) and with
   ``--ckpt sync`` (every save on disk): the restore phase of each restarted worker. Aim: the RAM
   tier restores at least 5x faster.
3. With ``--medium``, also the restore of the medium preset's 474 MB state in a process set up as
   a hot spare (its RAM-tier memory warm) against a restore from disk, outside a run (a CPU step of
   that model takes seconds).

Both runs of each pair must end with the same ``final_state_sha256``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from goodputlab.measure.events import read_events  # noqa: E402
from goodputlab.experiments.recovery import kill_to_first_step, restore_times as restores  # noqa: E402


def cli() -> list[str]:
    exe = Path(sys.executable).parent / "goodputlab"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "goodputlab.cli"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def machine() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return (f"{platform.machine()}, {os.cpu_count()} cores, GPU {gpu}, torch {torch.__version__}, "
            f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def run(out: Path, *flags: str) -> tuple[dict, list[dict]]:
    r = subprocess.run([*cli(), "run", *flags, "--out", str(out), "--json", "--quiet"], capture_output=True, text=True, env=env())
    if r.returncode != 0:
        raise SystemExit(f"goodputlab run {' '.join(flags)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return json.loads(r.stdout), read_events(out / "events.jsonl")


def hot_vs_cold(work: Path, quick: bool) -> dict:
    steps, kills = (600, "150,300,450") if quick else (1200, "200,400,600,800,1000")
    flags = ["--steps", str(steps), "--seed", "5", "--threads", "1", "--io-latency-ms", "15", "--ckpt-every", "50",
             "--kill-at-steps", kills, "--restart-delay", "0"]
    cold, cold_ev = run(work / "cold", *flags)
    hot, hot_ev = run(work / "hot", *flags, "--hot-spare")
    c, h = kill_to_first_step(cold_ev), kill_to_first_step(hot_ev)
    mc, mh = statistics.median(r["seconds"] for r in c), statistics.median(r["seconds"] for r in h)
    return {
        "kills": kills, "cold_s": [r["seconds"] for r in c], "hot_s": [r["seconds"] for r in h],
        "spare_ready": [r["spare_ready"] for r in h], "median_cold_s": mc, "median_hot_s": mh, "ratio": mh / mc,
        "goodput_cold": cold["goodput"], "goodput_hot": hot["goodput"],
        "restart_s_cold": cold["buckets"]["restart"], "restart_s_hot": hot["buckets"]["restart"],
        "same_model": cold["final_state_sha256"] == hot["final_state_sha256"],
        "standby_startup_s": hot["recovery"]["standby_startup_s"],
    }


def ram_vs_disk(work: Path, quick: bool) -> dict:
    steps, kills = (60, "25,45") if quick else (100, "30,55,80,95")
    flags = ["--model", "small", "--steps", str(steps), "--seed", "5", "--threads", "1", "--ckpt-every", "5",
             "--kill-at-steps", kills, "--restart-delay", "0", "--hot-spare"]
    mem, mem_ev = run(work / "memory", *flags, "--ckpt", "memory", "--memory-disk-every", "1000")
    disk, disk_ev = run(work / "disk", *flags, "--ckpt", "sync")
    m, d = restores(mem_ev), restores(disk_ev)
    mm, md = statistics.median(r["seconds"] for r in m), statistics.median(r["seconds"] for r in d)
    return {
        "kills": kills, "memory_s": [r["seconds"] for r in m], "memory_sources": [r["source"] for r in m],
        "disk_s": [r["seconds"] for r in d], "median_memory_s": mm, "median_disk_s": md, "ratio": md / mm,
        "same_model": mem["final_state_sha256"] == disk["final_state_sha256"],
    }


_MEDIUM = r"""
import json, os, sys, time
from pathlib import Path
out = Path(sys.argv[1]); os.environ["GOODPUTLAB_MEMORY_TIER"] = sys.argv[2]; kind = sys.argv[3]
from goodputlab.engine.config import RunConfig
from goodputlab.engine import worker as W
from goodputlab.measure.events import NullWriter
from goodputlab.checkpoints.state import apply_state, check_training_state
import torch
torch.set_num_threads(1)
c = RunConfig.from_dict(json.loads((out / "config.json").read_text()))
run = W.set_up(c, out, NullWriter())
if kind == "setup":
    from goodputlab.checkpoints.state import capture_state
    from goodputlab.training.step import train_step
    from goodputlab.pipeline.loader import BatchRequest
    batch = run.dataset.__getitems__(BatchRequest(0, list(range(run.batch_size))))
    train_step(run.model, run.optimizer, run.scheduler, batch, run.device)
    state = capture_state(run.model, run.optimizer, run.scheduler, 1, {"step": 1, "samples_consumed": run.batch_size, "batch_size": run.batch_size})
    ck = W.make_checkpointer(run, NullWriter()); ck.save(state, 1); ck.finalize(); ck.close()
    run.store.save(state, 1)
    sys.exit(0)
if kind == "ram":
    run.tier.warm(run.device)  # what a hot spare does while it waits
t = time.perf_counter()
found = run.tier.load(run.device) if kind == "ram" else run.store.load_newest_valid()
check_training_state(found[1], found[0].step, run.model, run.optimizer)
apply_state(found[1], run.model, run.optimizer, run.scheduler)
print(time.perf_counter() - t)
"""


def medium_restore(work: Path, repeats: int = 3) -> dict:
    from goodputlab.engine.config import RunConfig

    out = work / "medium"
    (out / "ckpt").mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(RunConfig(model="medium", ckpt="memory", threads=1).to_dict()))
    tier = Path(tempfile.mkdtemp(prefix="goodputlab-bench-tier-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        def once(kind: str) -> float:
            r = subprocess.run([sys.executable, "-c", _MEDIUM, str(out), str(tier), kind], capture_output=True, text=True, env=env())
            if r.returncode != 0:
                raise SystemExit(r.stderr[-2000:])
            return float(r.stdout.strip() or 0)

        once("setup")
        ram = sorted(once("ram") for _ in range(repeats))
        disk = sorted(once("disk") for _ in range(repeats))
    finally:
        shutil.rmtree(tier, ignore_errors=True)
    return {"memory_s": ram, "disk_s": disk, "ratio": statistics.median(disk) / statistics.median(ram)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer steps and kills")
    p.add_argument("--medium", action="store_true", help="also the medium preset's restore, outside a run")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="goodputlab-bench-recovery-"))
    t0 = time.monotonic()
    try:
        result = {"machine": machine(), "hot_vs_cold": hot_vs_cold(work, args.quick), "ram_vs_disk": ram_vs_disk(work, args.quick)}
        if args.medium:
            result["medium_restore"] = medium_restore(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - t0, 1)
    hc, rd = result["hot_vs_cold"], result["ram_vs_disk"]
    result["aims"] = {"hot_spare_at_most_a_quarter": hc["ratio"] <= 0.25, "ram_at_least_5x": rd["ratio"] >= 5}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"recovery benchmark: {result['machine']}\n")
    print(f"1. kill -> first resumed step (tiny preset, kills after steps {hc['kills']}, no restart delay)")
    print(f"   {'kill':>4} {'cold restart s':>15} {'hot spare s':>12} {'spare ready':>12}")
    for i, (c, h, ready) in enumerate(zip(hc["cold_s"], hc["hot_s"], hc["spare_ready"]), 1):
        print(f"   {i:>4} {c:>15.3f} {h:>12.3f} {'yes' if ready else 'no':>12}")
    print(f"   median {hc['median_cold_s']:.3f} s cold, {hc['median_hot_s']:.3f} s hot: the hot spare takes "
          f"{hc['ratio']:.1%} of the cold restart (aim <= 25%: {'met' if result['aims']['hot_spare_at_most_a_quarter'] else 'missed'})")
    print(f"   goodput {hc['goodput_cold']:.1%} cold, {hc['goodput_hot']:.1%} hot; restart booked {hc['restart_s_cold']:.2f} s "
          f"vs {hc['restart_s_hot']:.2f} s; standby start-up off the critical path: "
          f"{', '.join(f'{s:.2f}' for s in hc['standby_startup_s'])} s; same final model: {hc['same_model']}\n")
    print(f"2. restore (small preset, 38 MB of state, hot spare, kills after steps {rd['kills']})")
    print(f"   RAM tier: {', '.join(f'{1e3 * s:.1f}' for s in rd['memory_s'])} ms ({', '.join(rd['memory_sources'])})")
    print(f"   disk:     {', '.join(f'{1e3 * s:.1f}' for s in rd['disk_s'])} ms")
    print(f"   median {1e3 * rd['median_memory_s']:.1f} ms vs {1e3 * rd['median_disk_s']:.1f} ms: the RAM tier restores "
          f"{rd['ratio']:.1f}x faster (aim >= 5x: {'met' if result['aims']['ram_at_least_5x'] else 'missed'}); "
          f"same final model: {rd['same_model']}")
    if "medium_restore" in result:
        mr = result["medium_restore"]
        print(f"\n3. restore of the medium preset (474 MB), a warm standby process vs disk, {len(mr['memory_s'])} each:")
        print(f"   RAM tier {', '.join(f'{1e3 * s:.0f}' for s in mr['memory_s'])} ms, disk "
              f"{', '.join(f'{1e3 * s:.0f}' for s in mr['disk_s'])} ms: {mr['ratio']:.1f}x")
    print(f"\ntotal {result['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
