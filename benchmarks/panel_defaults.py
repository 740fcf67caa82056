"""What a reader's first Run of a chapter's panel shows: the old defaults against the new, side by side.

A panel's Run starts a short real experiment. Sized too small, the run is mostly the worker's
start-up (importing PyTorch, building the model) and cold restarts, and the lever the reader moved
(the interval, the strategy, the loader's depth) hardly shows. This runs each chapter's first panel
run at its full-size default, as the chapter constructs it, under the old sizes and the new ones,
in turns (old, new, old, new...), and prints where the time went.

    .venv/bin/python benchmarks/panel_defaults.py            # 2 rounds (about 4 minutes on 2 cores)
    .venv/bin/python benchmarks/panel_defaults.py --rounds 1 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import goodputlab as gl  # noqa: E402

SHOWN = ("productive", "data_wait", "checkpoint_save", "lost_work", "restart", "startup")

# Each panel's first run as its chapter starts it (the settings the panel's controls and fixed
# arguments give), before and after: chapter 1's RunPanel, chapter 4's CheckpointPanel (async,
# the small state), chapter 5's PipelinePanel (two loader workers, two batches each).
PANELS = {
    "ch1 RunPanel": (
        dict(steps=200, mtbf=20.0, ckpt_every=25, workers=0, io_latency_ms=10.0, seed=1, threads=1),
        dict(steps=500, mtbf=8.0, ckpt_every=25, workers=0, io_latency_ms=10.0, seed=1, threads=1, hot_spare=True),
    ),
    "ch4 CheckpointPanel": (
        dict(steps=120, mtbf=8.0, model="small", ckpt="async", ckpt_every=20, batch_size=2, seed=1, threads=1),
        dict(steps=300, mtbf=8.0, model="small", ckpt="async", ckpt_every=20, batch_size=2, seed=1, threads=1,
             hot_spare=True),
    ),
    "ch5 PipelinePanel": (
        dict(steps=100, io_latency_ms=45.0, io_jitter=0.5, transform_ms=10.0, workers=2, prefetch=2, ckpt_every=0,
             seed=0, threads=1),
        dict(steps=250, io_latency_ms=45.0, io_jitter=0.5, transform_ms=10.0, workers=2, prefetch=2, ckpt_every=0,
             seed=0, threads=1),
    ),
}


def shares(settings: dict) -> dict:
    result = gl.run(out=tempfile.mkdtemp(prefix="panel-defaults-"), progress=False, **settings)
    wall = result.summary["wall_s"]
    return {"wall_s": wall, "goodput": result.goodput, "failures": result.summary["failures"],
            **{k: result.buckets.get(k, 0.0) / wall for k in SHOWN}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="old/new pairs per panel (default 2)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, not {args.rounds}")
    figures = {}
    for name, (old, new) in PANELS.items():
        runs = {"old": [], "new": []}
        for _ in range(args.rounds):
            for which, settings in (("old", old), ("new", new)):
                runs[which].append(shares(settings))
        figures[name] = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in runs.items()}
        print(f"\n{name} (median of {args.rounds}; shares of the run's wall time)")
        print(f"  {'':4} {'steps':>5} {'wall s':>7} {'fails':>5} {'goodput':>8} " + " ".join(f"{k[:10]:>10}" for k in SHOWN))
        for which, settings in (("old", old), ("new", new)):
            f = figures[name][which]
            print(f"  {which:4} {settings['steps']:>5} {f['wall_s']:>7.1f} {f['failures']:>5.0f} {f['goodput']:>8.1%} "
                  + " ".join(f"{f[k]:>10.1%}" for k in SHOWN), flush=True)
        o, n = figures[name]["old"], figures[name]["new"]
        print(f"  start-up + restart: {o['startup'] + o['restart']:.1%} -> {n['startup'] + n['restart']:.1%} of the run")
    if args.json:
        print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
