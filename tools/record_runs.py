"""Make the recorded runs that ship with the package (``goodputlab/recorded/``).

    python tools/record_runs.py              # every recording (about 10 minutes on 2 cores)
    python tools/record_runs.py lab01 every-5  # only these (the others stay as they are)
    python tools/record_runs.py --list         # what there is to record

Each recording is a real run (``gl.run``): its event log, gzipped, and its summary; no
checkpoints. ``index.json`` lists them with the settings they ran with and the machine they ran
on, which :func:`goodputlab.recorded_runs` reads. The labs and the workshop dashboard load
them with ``gl.recorded_run(name)`` when a machine is too slow to train.

Record on a quiet machine: the timings are the recording's, and a participant's own run is
compared with them.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import goodputlab as gl  # noqa: E402
from goodputlab.engine.recorded import EVENTS_NAME, INDEX_NAME, RECORDED_DIR, SUMMARY_NAME  # noqa: E402

# The dashboard's defaults (goodputlab/widgets/dashboard.py): a tiny GPT on one thread.
DASH = dict(steps=500, threads=1, seed=1, io_latency_ms=5.0)
# Lab 3's interval sweep: a hot spare takes over at each failure, so the restart no longer dominates
# and the interval's two costs (saves, lost work) show; failures twice as often as the dashboard's.
LAB3 = dict(DASH, mtbf=5.0, hot_spare=True)
# Chapter 4's comparison: the same run per strategy, killed at the same steps.
STRATEGY = dict(model="small", batch_size=2, steps=120, ckpt_every=10, kill_at_steps=[45, 95], memory_disk_every=4,
                seed=1, threads=1, restart_delay=0.1)
# Chapter 5's pipeline: slow, jittery storage and a CPU transform; saves only at the end.
PIPE = dict(steps=150, threads=1, seed=0, ckpt_every=0, io_latency_ms=45.0, io_jitter=0.5, transform_ms=10.0)
# Chapter 6's recovery, Lab 6: the same job killed once at step 45, between two checkpoints (at step 40, a kill could
# race the save that ends step 39); a hot spare takes over in the runs that leave a part out.
RECOVERY = dict(steps=60, ckpt_every=10, kill_at_steps=[45], restart_delay=0.0, threads=1, seed=3, hot_spare=True)

#: name -> (what it shows, chapters, settings for gl.run)
RECORDINGS: dict[str, tuple[str, tuple[int, ...], dict]] = {
    "lab01": ("Lab 1's run: one kill at step 220, a checkpoint every 20 steps", (1,),
              dict(steps=300, ckpt_every=20, kill_at_steps=[220], io_latency_ms=4.0, seed=3, threads=1)),
    "every-5": ("a checkpoint every 5 steps, random failures (MTBF 10 s)", (1, 3), dict(DASH, ckpt_every=5, mtbf=10.0)),
    "every-25": ("a checkpoint every 25 steps, random failures (MTBF 10 s)", (1, 3), dict(DASH, ckpt_every=25, mtbf=10.0)),
    "every-100": ("a checkpoint every 100 steps, random failures (MTBF 10 s)", (1, 3), dict(DASH, ckpt_every=100, mtbf=10.0)),
    "no-failures": ("a checkpoint every 25 steps, no failures", (1, 3), dict(DASH, ckpt_every=25, mtbf=0.0)),
    "async-every-25": ("async saves every 25 steps, random failures (MTBF 10 s)", (4,),
                       dict(DASH, ckpt="async", ckpt_every=25, mtbf=10.0)),
    "dcp-every-25": ("dcp saves every 25 steps, random failures (MTBF 10 s), a shorter run", (4,),
                     dict(DASH, ckpt="dcp", ckpt_every=25, mtbf=10.0, steps=200)),
    "memory-every-25": ("memory saves every 25 steps, random failures (MTBF 10 s), a shorter run", (4,),
                        dict(DASH, ckpt="memory", ckpt_every=25, mtbf=10.0, steps=200)),
    "lab03-every-5": ("Lab 3: a hot spare, a checkpoint every 5 steps, random failures (MTBF 5 s)", (3,),
                      dict(LAB3, ckpt_every=5)),
    "lab03-every-25": ("Lab 3: a hot spare, a checkpoint every 25 steps, random failures (MTBF 5 s)", (3,),
                      dict(LAB3, ckpt_every=25)),
    "lab03-every-100": ("Lab 3: a hot spare, a checkpoint every 100 steps, random failures (MTBF 5 s)", (3,),
                      dict(LAB3, ckpt_every=100)),
    "hot-spare-every-25": ("a hot spare takes over at each failure; sync saves every 25 steps, MTBF 10 s", (6,),
                           dict(DASH, ckpt_every=25, mtbf=10.0, hot_spare=True)),
    "hang-every-25": ("every failure a hang, found by the watchdog; sync saves every 25 steps, MTBF 10 s", (6,),
                      dict(DASH, ckpt_every=25, mtbf=10.0, failure_mode="hang")),
    "deep-pipeline": ("2 loader workers x prefetch 4 against 40 ms storage, random failures (MTBF 10 s)", (5,),
                      dict(DASH, ckpt_every=25, mtbf=10.0, workers=2, prefetch=4, io_latency_ms=40.0)),
    "strategy-sync": ("chapter 4: sync saves, killed at steps 45 and 95", (4,), dict(STRATEGY, ckpt="sync")),
    "strategy-async": ("chapter 4: async saves, killed at steps 45 and 95", (4,), dict(STRATEGY, ckpt="async")),
    "strategy-dcp": ("chapter 4: dcp saves, killed at steps 45 and 95", (4,), dict(STRATEGY, ckpt="dcp")),
    "strategy-memory": ("chapter 4: memory saves (disk every 4th), killed at steps 45 and 95", (4,),
                        dict(STRATEGY, ckpt="memory")),
    "pipeline-0-workers": ("chapter 5: the loop loads every batch itself", (5,), dict(PIPE, workers=0)),
    "pipeline-2x1": ("chapter 5: 2 workers, each one batch ahead", (5,), dict(PIPE, workers=2, prefetch=1)),
    "pipeline-4x4": ("chapter 5: 4 workers, each 4 batches ahead", (5,), dict(PIPE, workers=4, prefetch=4)),
    "lab06-reference": ("chapter 6: the recovery lab's job without failures", (6,),
                        dict(RECOVERY, kill_at_steps=[], hot_spare=False)),
    "lab06-optimizer": ("chapter 6: killed at step 45, checkpoints without the optimizer's state; a hot spare", (6,),
                        dict(RECOVERY, ckpt_omit=["optimizer"])),
    "lab06-data": ("chapter 6: killed at step 45, checkpoints without the data position; a hot spare", (6,),
                   dict(RECOVERY, ckpt_omit=["data"])),
    "lab06-rng": ("chapter 6: killed at step 45, checkpoints without the RNG states; a hot spare", (6,),
                  dict(RECOVERY, ckpt_omit=["rng"])),
    "lab06-cold": ("chapter 6: killed at step 45, complete checkpoints, a cold restart", (6,),
                   dict(RECOVERY, hot_spare=False)),
    "lab07-straggler": ("chapter 7: two ranks under torchrun, rank 1 three times as slow on half its steps", (7,),
                        dict(nproc=2, steps=60, ckpt_every=20, model="tiny", seed=0, restart_delay=0.0, threads=1,
                             straggler_rank=1, straggler_factor=3.0, straggler_prob=0.5)),
}


def machine() -> dict:
    import torch

    return {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": datetime.date.today().isoformat(),
    }


def record(name: str, folder: Path) -> dict:
    title, chapters, settings = RECORDINGS[name]
    with tempfile.TemporaryDirectory(prefix=f"record-{name}-") as tmp:
        result = gl.run(out=Path(tmp) / "run", progress=False, **{
            k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
        dest = folder / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        raw = (result.out / "events.jsonl").read_bytes()
        # mtime 0: the same events give the same bytes, so an unchanged recording makes no diff
        with open(dest / EVENTS_NAME, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0) as gz:
            gz.write(raw)
        shutil.copyfile(result.out / "summary.json", dest / SUMMARY_NAME)
    s = result.summary
    print(f"{name}: goodput {s['goodput']:.1%}, {s['failures']} failures, {s['wall_s']:.1f} s, "
          f"{(dest / EVENTS_NAME).stat().st_size / 1024:.0f} KB", flush=True)
    return {"title": title, "chapters": list(chapters), "settings": settings, "goodput": s["goodput"],
            "wall_s": s["wall_s"], "failures": s["failures"], "machine": machine()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="recordings to make (default: all)")
    parser.add_argument("--list", action="store_true", help="list the recordings and exit")
    parser.add_argument("--out", type=Path, default=RECORDED_DIR, help="folder of the recordings")
    args = parser.parse_args(argv)
    if args.list:
        for name, (title, chapters, _) in RECORDINGS.items():
            print(f"{name:<20} chapters {','.join(map(str, chapters)):<6} {title}")
        return 0
    unknown = [n for n in args.names if n not in RECORDINGS]
    if unknown:
        print(f"record_runs: unknown recording {unknown[0]!r}; one of {', '.join(RECORDINGS)}", file=sys.stderr)
        return 2
    index_path = args.out / INDEX_NAME
    index = json.loads(index_path.read_text()) if index_path.exists() else {"recordings": {}}
    for name in args.names or list(RECORDINGS):
        index["recordings"][name] = record(name, args.out)
        # keep the catalogue's order; drop recordings the catalogue no longer has
        index["recordings"] = {n: index["recordings"][n] for n in RECORDINGS if n in index["recordings"]}
        index_path.write_text(json.dumps(index, indent=1, sort_keys=False) + "\n")
    total = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"{len(index['recordings'])} recordings, {total / 1024:.0f} KB in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
