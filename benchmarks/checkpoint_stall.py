"""How long does each checkpoint strategy stall training? sync, async, dcp and memory side by side.

For each state size (a model preset's real training state: weights, AdamW moments,
scheduler, data position, RNGs) and each strategy it prints:

* blocking time per save (what training waits for) and its ratio to the memcpy
  floor (copying the same tensors once into existing buffers);
* time until the save is durable (on disk; in the RAM tier for memory);
* peak extra resident memory during saves;
* restore time, with the checkpoint files in the page cache and evicted from it;
* for the background strategies: the longest GIL hold by the writer and the
  training-step slowdown while it writes;

then 100 consecutive saves per strategy, with resident memory, open file
descriptors and threads at the start and the end, and the issue's aims as
PASS/MISS lines. Every measurement runs in a fresh process (``--in-process``
runs them in this one, faster and less isolated; ``--quick`` does that with a
small state and fewer saves, for the test suite).

    python benchmarks/checkpoint_stall.py                # CPU: small (38 MB) and medium (474 MB)
    python benchmarks/checkpoint_stall.py --quick        # ~20 s
    python benchmarks/checkpoint_stall.py --device cuda  # adds large (1.8 GB); device-to-host copies

Run from the repository root (``PYTHONPATH=.`` if goodputlab is not installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from goodputlab.experiments.checkpoint_stall import STRATEGIES  # noqa: E402

MB = 1e6


def machine(device: str, threads: int | None) -> dict:
    import torch

    gpu = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else "none"
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cores": os.cpu_count(),
        "gpu": gpu,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": threads or torch.get_num_threads(),
        "device": device,
    }


class Runner:
    """Runs one measurement, in a child process (default) or in this process."""

    def __init__(self, device: str, threads: int | None, root: Path, in_process: bool):
        self.device, self.threads, self.root, self.in_process = device, threads, root, in_process
        self._objs: dict[str, tuple] = {}

    def __call__(self, what: str, model: str, strategy: str = "sync", saves: int = 5, probe: bool = True) -> dict:
        if self.in_process:
            return self._here(what, model, strategy, saves, probe)
        cmd = [sys.executable, "-m", "goodputlab.experiments.checkpoint_stall", what, "--model", model, "--strategy", strategy,
               "--device", self.device, "--saves", str(saves), "--root", str(self.root)]
        if not probe:
            cmd.append("--no-probe")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[2:])} failed:\n{r.stderr[-3000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def _here(self, what, model, strategy, saves, probe) -> dict:
        import torch

        from goodputlab.experiments import checkpoint_stall as stall

        if self.threads:
            torch.set_num_threads(self.threads)
        if model not in self._objs:
            self._objs[model] = stall.build_training_state(model, self.device)
        objs, device = self._objs[model]
        root = Path(tempfile.mkdtemp(prefix="goodputlab-stall-", dir=self.root))
        if what == "floor":
            seconds, nbytes, n = stall.memcpy_floor_s(objs)
            return {"memcpy_floor_s": seconds, "state_bytes": nbytes, "tensors": n}
        if what == "strategy":
            return stall.measure_strategy(strategy, objs, device, root, saves=saves, probe=probe)
        return stall.leak_check(strategy, objs, root, saves=saves)


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:.1f}"


def _mb(b: int | None) -> str:
    return "-" if b is None else f"{b / MB:.1f}"


def print_state_table(model: str, floor: dict, rows: list[dict]) -> None:
    print(
        f"\nstate: {model} preset, {floor['state_bytes'] / MB:.1f} MB in {floor['tensors']} tensors; "
        f"memcpy floor {_ms(floor['memcpy_floor_s'])} ms"
    )
    head = (
        f"{'strategy':<9}{'blocking ms':>12}{'x floor':>9}{'first ms':>10}{'to durable ms':>15}{'peak extra MB':>15}"
        f"{'restore ms':>12}{'cold ms':>9}{'GIL hold ms':>13}{'step slowdown':>15}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        slow = f"{r['step_slowdown']:.2f}x" if "step_slowdown" in r else "-"
        print(
            f"{r['strategy']:<9}{_ms(r['blocking_s']):>12}{r['blocking_over_floor']:>8.2f}x"
            f"{_ms(r['first_blocking_s']):>10}{_ms(r['durable_s']):>15}{_mb(r['peak_extra_bytes']):>15}"
            f"{_ms(r['restore_s']):>12}{_ms(r['restore_cold_s']):>9}{_ms(r.get('gil_hold_max_s')):>13}{slow:>15}"
        )
    read = next((r["storage_read_bytes_per_s"] for r in rows if r["strategy"] == "sync"), None)
    if read:
        print(f"  storage: the checkpoint files read back at {read / 1e9:.2f} GB/s with a cold page cache")
    print(
        "  blocking: median after 2 warm-up saves; x floor: median of blocking / memcpy floor timed just before each save;\n"
        "  first: the very first save (allocates buffers, touches RAM slots).\n"
        "  durable: on disk (sync, async, dcp); in the RAM tier (memory). cold: files evicted from the page cache first."
    )


def aims(results: dict) -> list[tuple[str, bool]]:
    """The issue's targets, per state size: (line, met)."""
    lines = []
    for model, res in results["states"].items():
        by = {r["strategy"]: r for r in res["rows"]}
        if {"async", "dcp", "sync", "memory"} <= set(by):
            a = by["async"]["blocking_over_floor"]
            lines.append(
                (f"{model}: async blocks {a:.2f}x the memcpy floor (median of per-save ratios, floor timed before each "
                 f"save; aim <= 1.5x)", a <= 1.5)
            )
            d = by["dcp"]["blocking_s"]
            lines.append(
                (f"{model}: async blocks {_ms(by['async']['blocking_s'])} ms vs dcp async_save {_ms(d)} ms "
                 f"({d / by['async']['blocking_s']:.1f}x; aim: async less)", by["async"]["blocking_s"] < d)
            )
            m = by["memory"]["restore_s"]
            cold, warm = by["sync"]["restore_cold_s"], by["sync"]["restore_s"]
            lines.append(
                (f"{model}: memory restores {cold / m:.1f}x faster than disk with a cold cache, {warm / m:.1f}x with "
                 f"the files cached ({_ms(m)} vs {_ms(cold)} / {_ms(warm)} ms; aim >= 5x)", cold / m >= 5)
            )
    return lines


def print_leak_table(leaks: list[dict], model: str, state_bytes: int | None) -> None:
    size = f", {state_bytes / MB:.1f} MB" if state_bytes else ""
    print(f"\n{leaks[0]['saves']} consecutive saves ({model} preset{size}); start = after 5 warm-up saves")
    head = f"{'strategy':<9}{'RSS start MB':>13}{'RSS end MB':>12}{'fds start':>11}{'fds end':>9}{'threads':>10}{'RAM tier MB':>13}{'seconds':>9}"
    print(head)
    print("-" * len(head))
    for r in leaks:
        s, e = r["start"], r["end"]
        print(
            f"{r['strategy']:<9}{s['rss'] / MB:>13.1f}{e['rss'] / MB:>12.1f}{s['fds']:>11}{e['fds']:>9}"
            f"{str(s['threads']) + '->' + str(e['threads']):>10}{r['ram_tier_bytes'] / MB:>13.1f}{r['seconds']:>9.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small state, few saves, in this process (~20 s)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    p.add_argument("--models", default=None, help="presets to measure (default: small,medium; plus large on CUDA)")
    p.add_argument("--saves", type=int, default=None, help="timed saves per strategy (default 7; quick 3)")
    p.add_argument("--leak-saves", type=int, default=None, help="consecutive saves in the leak check (default 100; quick 20)")
    p.add_argument("--leak-model", default=None, help="preset for the leak check (default small; quick tiny)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: stable timings on shared machines)")
    p.add_argument("--in-process", action="store_true", help="measure in this process instead of one process each")
    p.add_argument("--root", type=Path, default=None, help="where checkpoints are written (default: the temp directory)")
    p.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    args = p.parse_args(argv)

    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if args.models:
        models = args.models.split(",")
    elif args.quick:
        models = ["small"]
    else:
        models = ["small", "medium"] + (["large"] if device == "cuda" else [])
    saves = args.saves or (3 if args.quick else 7)
    leak_saves = args.leak_saves or (20 if args.quick else 100)
    leak_model = args.leak_model or ("tiny" if args.quick else "small")
    root = Path(tempfile.mkdtemp(prefix="goodputlab-bench-", dir=args.root))
    run = Runner(device, args.threads, root, in_process=args.in_process or args.quick)
    if run.in_process and args.threads:
        torch.set_num_threads(args.threads)

    info = machine(device, args.threads)
    t0 = time.monotonic()
    print(
        f"checkpoint stall benchmark: {info['device']}, {info['cores']} cores, GPU {info['gpu']}, torch {info['torch']}, "
        f"{info['threads']} torch thread(s), {info['date']}"
    )
    print(f"checkpoints written under {root}; {'one process per measurement' if not run.in_process else 'in-process'}")
    results: dict = {"machine": info, "states": {}, "leaks": []}
    for model in models:
        floor = run("floor", model)
        rows = [run("strategy", model, strategy=s, saves=saves) for s in STRATEGIES]
        results["states"][model] = {"floor": floor, "rows": rows}
        print_state_table(model, floor, rows)
    results["leaks"] = [run("leak", leak_model, strategy=s, saves=leak_saves) for s in STRATEGIES]
    leak_bytes = results["states"].get(leak_model, {}).get("floor", {}).get("state_bytes")
    print_leak_table(results["leaks"], leak_model, leak_bytes)

    print("\naims")
    results["aims"] = []
    for line, ok in aims(results):
        print(f"  {'PASS' if ok else 'MISS'}  {line}")
        results["aims"].append({"line": line, "met": ok})
    results["seconds"] = time.monotonic() - t0
    print(f"\ntotal {results['seconds']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
