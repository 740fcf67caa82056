"""What coming back costs the lab: a cold restart, the hot spare as it was, and the hot spare forked and preloaded.

Three real runs of the same job in one go, on the same seeded Poisson failures (no added rescheduling delay,
so what is measured is the lab's own cost): a cold restart (a new process imports torch and reads the
checkpoint), a hot spare launched as a new process that reads the checkpoint at the handover
(``GOODPUTLAB_WARM_SPARES=0``, the lab before the fork server), and the hot spare as it is now (forked
from a server that imported torch once, holding the newest checkpoint before it is needed). For each it
prints a failure's restart and restore (mean and median), how often the standby was not ready, and the
first launch; then restart plus restore as a share of an MTBF of 10, 20 and 30 s (the aim: at most 5%).

    python benchmarks/restart_costs.py                 # about 6 minutes on 2 cores
    python benchmarks/restart_costs.py --steps 400     # shorter (fewer failures)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import goodputlab as gl
from goodputlab.measure import events as E

MODES = {
    "cold restart": {"hot_spare": False},
    "hot spare, launched": {"hot_spare": True, "env": {"GOODPUTLAB_WARM_SPARES": "0"}},
    "hot spare, forked + preloaded": {"hot_spare": True},
}


def recoveries(result) -> list[float]:
    """Seconds from each failure to the next first step (restart and restore, no lost work)."""
    out, since = [], None
    for e in result.events:
        if e["kind"] == E.SUP_FAILURE:
            since = e["t"]
        elif e["kind"] == E.W_COMPUTE and since is not None:
            out.append(e["t"] - since)
            since = None
    return out


def measure(mode: str, args, root: Path) -> dict:
    settings = dict(MODES[mode])
    env = settings.pop("env", {})
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t = time.monotonic()
        r = gl.run(model=args.model, batch_size=args.batch_size, threads=1, steps=args.steps, ckpt_every=args.ckpt_every,
                   mtbf=args.mtbf, restart_delay=0.0, seed=args.seed, max_failures=500, out=root / mode.replace(" ", "-"),
                   progress=False, **settings)
        took = time.monotonic() - t
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    each = recoveries(r)
    acts = [e for e in r.events if e["kind"] == "activate"]
    b = r.buckets
    return {
        "mode": mode, "failures": r.summary["failures"], "took_s": took, "goodput": r.goodput,
        "per_failure_s": (b["restart"] + b["checkpoint_restore"]) / max(1, r.summary["failures"]),
        "median_s": statistics.median(each) if each else float("nan"),
        "max_s": max(each) if each else float("nan"),
        "not_ready": sum(not a["standby_ready"] for a in acts), "handovers": len(acts),
        "startup_s": b["startup"], "sha": r.summary["final_state_sha256"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="small")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--mtbf", type=float, default=10.0, help="the runs' MTBF, seconds (failures soon after each other test the standby)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores; {args.model} model, batch {args.batch_size}, "
          f"{args.steps} steps, sync saves every {args.ckpt_every}, MTBF {args.mtbf:g} s, no rescheduling delay")
    with tempfile.TemporaryDirectory(prefix="goodputlab-restart-costs-") as root:
        rows = [measure(mode, args, Path(root)) for mode in MODES]
    print(f"\n{'mode':<31}{'fails':>6}{'mean s':>8}{'median s':>9}{'max s':>7}{'not ready':>10}{'startup s':>10}"
          f"{'10 s':>7}{'20 s':>7}{'30 s':>7}")
    for r in rows:
        ready = f"{r['not_ready']}/{r['handovers']}" if r["handovers"] else "-"
        shares = "".join(f"{r['per_failure_s'] / m:>7.1%}" for m in (10, 20, 30))
        print(f"{r['mode']:<31}{r['failures']:>6}{r['per_failure_s']:>8.3f}{r['median_s']:>9.3f}{r['max_s']:>7.2f}"
              f"{ready:>10}{r['startup_s']:>10.2f}{shares}")
    print("(the last three columns: restart + restore per failure over an MTBF of 10, 20 and 30 s; aim <= 5%)")
    cold, now = rows[0]["per_failure_s"], rows[-1]["per_failure_s"]
    print(f"forked + preloaded against cold: {now / cold:.3f}x; against the launched spare: {now / rows[1]['per_failure_s']:.3f}x")
    print(f"same final model in all three: {len({r['sha'] for r in rows}) == 1}")
    print(f"load average after: {os.getloadavg()[0]:.2f}; wall {sum(r['took_s'] for r in rows):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
