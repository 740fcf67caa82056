"""The default torch thread count on a busy machine: a run's step with the default threads against
``--threads 1``, side by side, with busy neighbours this script starts itself.

    python benchmarks/threads.py [--neighbours 2] [--steps 150] [--rounds 3] [--model tiny] [--also 2]

It starts ``--neighbours`` busy Python loops (``python -c 'while True: pass'``), then runs
``goodputlab run --steps S --ckpt-every 0 --mtbf 0`` in rounds, each round once with the default
thread count and once with ``--threads 1`` (and, with ``--also N``, once with ``--threads N``,
torch's own default on an N-core machine, over fewer steps: it is the slow one), and reads every
step's compute time from the run's event log. Printed: the median step per setting, and the
ratio default / ``--threads 1`` (the aim: at most 1.5). The neighbours are killed at the end,
however the script ends.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from goodputlab.engine.api import load_run  # noqa: E402


def start_neighbours(n: int) -> list[subprocess.Popen]:
    """``n`` busy Python loops: neighbours that want a core each, as another user's job would."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(neighbours: list[subprocess.Popen]) -> None:
    for p in neighbours:
        p.kill()
        p.wait()


def one_run(out: Path, model: str, steps: int, threads: int | None) -> dict:
    """One failure-free run; its median compute time per step (seconds) and the threads it used."""
    cmd = [sys.executable, "-m", "goodputlab.cli", "run", "--model", model, "--steps", str(steps), "--ckpt-every", "0",
           "--mtbf", "0", "--seed", "1", "--out", str(out), "--quiet", "--json"]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    started = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")
    result = load_run(out)
    steps_s = [row["compute_s"] for row in result.per_step()]
    return {"step_s": statistics.median(steps_s), "threads": result.summary["threads"],
            "wall_s": time.perf_counter() - started}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neighbours", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--also", type=int, default=0, help="also time --threads N (torch's default on N cores), fewer steps")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="goodputlab-threads-"))
    neighbours = start_neighbours(args.neighbours)
    try:
        time.sleep(2)  # the neighbours are running (and in the load average the default reads)
        settings = {"default": None, "--threads 1": 1}
        if args.also:
            settings[f"--threads {args.also}"] = args.also
        times: dict[str, list[float]] = {k: [] for k in settings}
        for rnd in range(args.rounds):
            for name, threads in settings.items():
                steps = args.steps if threads != args.also else max(10, args.steps // 10)
                r = one_run(work / f"{rnd}-{name.replace(' ', '')}", args.model, steps, threads)
                times[name].append(r["step_s"])
                print(f"round {rnd}: {name:>12}: {r['threads']} thread(s), median step {r['step_s'] * 1e3:8.1f} ms "
                      f"({steps} steps, {r['wall_s']:.0f} s)", flush=True)
        load = os.getloadavg()
    finally:
        stop(neighbours)
        shutil.rmtree(work, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{args.neighbours} busy neighbours, {os.cpu_count()} cores, load average {load[0]:.1f}; "
          f"model {args.model}; median of {args.rounds} rounds' median steps:")
    for k, v in medians.items():
        print(f"  {k:>12}: {v * 1e3:8.1f} ms")
    ratio = medians["default"] / medians["--threads 1"]
    print(f"default / --threads 1: {ratio:.2f}x (aim: at most 1.5x)")
    print(json.dumps({"ratio_default_to_one": round(ratio, 3), **{k: round(v, 6) for k, v in medians.items()}}))


if __name__ == "__main__":
    main()
