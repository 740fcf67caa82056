"""The lab's measured costs, for chapter 10 to set beside a cluster's: one real run, its phase costs read from its log.

A real supervised run of the ``small`` preset (38 MB of weights and AdamW
moments) with synchronous saves and a hot spare (forked, holding the newest
checkpoint: the lab's restart as the chapters run it, with no added pause),
killed twice at known steps so a handover and a restore are measured. Its
event log gives the cost of every phase (:func:`goodputlab.measure_timings`);
the script prints them and writes them as JSON (default ``book/data/lab_costs.json``), with the machine it ran on.
Chapter 10 reads that file: the ratios save / MTBF and recovery / MTBF are
what carry over from this lab to a cluster.

    python benchmarks/lab_costs.py                      # ~25 s on 2 cores
    python benchmarks/lab_costs.py --json /tmp/x.json   # write elsewhere
    (package installed, or PYTHONPATH=.)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
from pathlib import Path

import goodputlab as gl
from goodputlab.training.workload import PRESETS

ROOT = Path(__file__).resolve().parent.parent
LAB_MTBF_S = 8.0  # the MTBF of chapters 1 and 3's lab runs (seconds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", default=str(ROOT / "book" / "data" / "lab_costs.json"), help="where to write the figures")
    p.add_argument("--model", default="small", choices=sorted(PRESETS), help="the state size")
    p.add_argument("--steps", type=int, default=120)
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="goodputlab-lab-costs-") as out:
        result = gl.run(model=args.model, steps=args.steps, ckpt_every=10, kill_at_steps=(45, 95), threads=1, seed=0,
                        batch_size=2, hot_spare=True, restart_delay=0.0, out=out, progress=False)
    t = gl.measure_timings(result.events)
    import torch

    figures = {
        "command": f"python benchmarks/lab_costs.py --model {args.model} --steps {args.steps}",
        "date": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, no GPU" if not torch.cuda.is_available()
        else f"{os.cpu_count()} cores, {torch.cuda.get_device_name()}",
        "torch": torch.__version__,
        "model": args.model,
        "state_bytes": PRESETS[args.model].state_bytes,
        "failures": result.summary["failures"],
        "step_s": t.step_s,
        "save_s": t.save_s,
        "launch_s": t.launch_s,
        "relaunch_delay_s": t.relaunch_delay_s,
        "restore_s": t.restore_s,
        "handover_s": t.relaunch_s,
        # kill to training again: the hot spare's handover and the restore (no added pause)
        "restart_s": t.relaunch_delay_s + t.relaunch_s + t.restore_s,
        "mtbf_s": LAB_MTBF_S,
    }
    figures["save_bytes_per_s"] = figures["state_bytes"] / figures["save_s"]
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{args.model}: {figures['state_bytes'] / 1e6:.1f} MB of state on {figures['machine']}, torch {figures['torch']}")
    print(f"step {1e3 * t.step_s:.1f} ms, sync save {1e3 * t.save_s:.1f} ms ({figures['save_bytes_per_s'] / 1e6:.0f} MB/s), "
          f"restore {1e3 * t.restore_s:.1f} ms, first launch {t.launch_s:.2f} s, handover {t.relaunch_s:.3f} s")
    print(f"kill to training again: {figures['restart_s']:.2f} s; against the lab's {LAB_MTBF_S:g} s MTBF: "
          f"save/MTBF {t.save_s / LAB_MTBF_S:.4f}, recovery/MTBF {figures['restart_s'] / LAB_MTBF_S:.3f}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
