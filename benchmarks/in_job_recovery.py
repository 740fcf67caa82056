"""In-job recovery against restart from a checkpoint: the same job, the same kills, side by side.

    python benchmarks/in_job_recovery.py                       # 2 replicas, kills at steps 100 and 200, 2 rounds
    python benchmarks/in_job_recovery.py --rounds 1 --json out.json
    python benchmarks/in_job_recovery.py --loss-gap --seeds 0,1,2   # what the degraded steps cost the model
    python benchmarks/in_job_recovery.py --modes none,jit           # just-in-time checkpoints against periodic ones
    python benchmarks/in_job_recovery.py --modes torchft,torchft-hot  # a killed replica relaunched cold or from a hot spare
    python benchmarks/in_job_recovery.py --modes torchft,torchft-2x2,torchft-ckpt  # groups of 2 ranks; periodic saves

Each round runs the same job twice, one right after the other (so machine load hits both):
``goodputlab run --nproc 2 --fault-tolerance none`` (torchrun restarts the whole group from its
last checkpoint, every 50 steps) and ``--fault-tolerance torchft`` (the killed replica relaunches
and heals from its peer while the other trains on; docs/IN_JOB_RECOVERY.md). Printed per run:
goodput, wall, and the buckets that differ: ``restart``, ``degraded``, ``checkpoint_restore``,
``checkpoint_save``, ``lost_work`` (and, for torchft, the survivors' share of it).

``--modes torchft,torchft-hot``: the killed replica group relaunched as a new process (cold) or handed
to a hot spare (``--hot-spare``: a standby replica process set up beforehand); per run also the mean
of each kill's ``away`` (from the kill to the relaunch's heal: detection, the 0.5 s ``--restart-delay``,
respawn or hand-over, set-up, joining the quorum) and ``heal`` (fetching the live state from a peer).

``--modes torchft,torchft-2x2,torchft-ckpt``: groups of one rank against groups of two (``--group-size 2``,
each group a torchrun job: 4 ranks, the same global batch in quarters), and against groups of one rank that
also save a checkpoint every 50 steps from one group (``checkpoint_save``, the others waiting in the quorum).

``--loss-gap``: per seed, a torchft run with the kills against the same torchft run without any,
compared by the mean training loss over the last ``--tail`` steps (every replica's committed steps;
both runs see the same batches at the same steps, so the pair differs only by the steps a replica
was missing, whose global batch was smaller: its gradient averaged over fewer samples).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = ["--model", "tiny", "--nproc", "2", "--threads", "1", "--io-latency-ms", "20", "--quiet"]
MODES = {
    "none": ["--fault-tolerance", "none", "--ckpt-every", "50"],
    "torchft": ["--fault-tolerance", "torchft", "--ckpt-every", "0"],
    "jit": ["--fault-tolerance", "none", "--ckpt-every", "50", "--ckpt-jit"],  # restart, from a just-in-time save
    "torchft-hot": ["--fault-tolerance", "torchft", "--ckpt-every", "0", "--hot-spare"],  # relaunched from a standby
    # 2 groups of 2 ranks (4 ranks in all, each group a torchrun job): a kill takes a whole group
    "torchft-2x2": ["--fault-tolerance", "torchft", "--ckpt-every", "0", "--group-size", "2"],
    "torchft-ckpt": ["--fault-tolerance", "torchft", "--ckpt-every", "50"],  # one group saves every 50 steps
}
SHOWN = ("restart", "degraded", "checkpoint_restore", "checkpoint_save", "lost_work", "startup")


def run_once(mode: str, steps: int, kills: str, folder: Path, seed: int = 0) -> dict:
    """One run of ``mode`` (no kills when ``kills`` is empty); its summary."""
    out = folder / mode
    cmd = [sys.executable, "-m", "goodputlab.cli", "run", *JOB, *MODES[mode], "--steps", str(steps),
           "--seed", str(seed), "--out", str(out), "--overwrite"] + (["--kill-at-steps", kills] if kills else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode}: exit {done.returncode}\n{done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    summary["step_losses"] = [(e["step"], e["loss"]) for e in map(json.loads, (out / "events.jsonl").read_text().splitlines())
                              if e["kind"] == "step_end" and e.get("committed", True)]
    return summary


def tail_loss(summary: dict, steps: int, tail: int) -> float:
    """Mean training loss of the committed steps in the last ``tail`` steps."""
    losses = [loss for step, loss in summary["step_losses"] if step >= steps - tail]
    return sum(losses) / len(losses)


def loss_gap(seeds: list[int], steps: int, kills: str, tail: int, folder: Path) -> list[dict]:
    """Per seed: the tail loss of torchft with ``kills`` and without, and how many steps ran degraded."""
    rows = []
    for seed in seeds:
        with_kills = run_once("torchft", steps, kills, folder, seed)
        clean = run_once("torchft", steps, "", folder, seed)
        degraded_steps = len({s for s, _ in with_kills["step_losses"]}) * 2 - len(with_kills["step_losses"])
        rows.append({"seed": seed, "loss_with_kills": tail_loss(with_kills, steps, tail),
                     "loss_failure_free": tail_loss(clean, steps, tail), "degraded_steps": degraded_steps,
                     "heal_steps": with_kills["heal_steps"]})
        r = rows[-1]
        print(f"seed {seed}: tail loss {r['loss_with_kills']:.4f} with kills, {r['loss_failure_free']:.4f} failure-free, "
              f"gap {r['loss_with_kills'] - r['loss_failure_free']:+.4f}  ({degraded_steps} steps on one replica, "
              f"heals at {r['heal_steps']})", flush=True)
    gaps = [r["loss_with_kills"] - r["loss_failure_free"] for r in rows]
    print(f"mean gap {sum(gaps) / len(gaps):+.4f} over {len(gaps)} seeds (min {min(gaps):+.4f}, max {max(gaps):+.4f})")
    return rows


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def row(mode: str, s: dict) -> dict:
    b = s["buckets"]
    recoveries = s.get("recoveries") or []
    return {"mode": mode, "goodput": s["goodput"], "wall_s": s["wall_s"], "failures": s["failures"],
            **{k: b[k] for k in SHOWN}, "productive": b["productive"], "steps_executed": s.get("steps_executed"),
            "lost_work_survivors_s": s.get("lost_work_survivors_s"), "recoveries": recoveries,
            "away_s": _mean([r["away_s"] for r in recoveries]), "heal_s": _mean([r["heal_s"] for r in recoveries])}


def _recovery_text(r: dict) -> str:
    if r["away_s"] is None:
        return ""
    hot = sum(1 for x in r["recoveries"] if x["hot"])
    return f"  away {r['away_s']:.2f} s  heal {r['heal_s']:.3f} s  ({hot}/{len(r['recoveries'])} from a hot spare)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--kill-at-steps", default="100,200")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", default="none,torchft", help=f"two or more of {', '.join(MODES)}, run side by side")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--loss-gap", action="store_true", help="the loss gap of torchft with the kills against without")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--tail", type=int, default=100, help="steps at the end whose training loss is compared")
    args = ap.parse_args(argv)
    rows = []
    if args.loss_gap:
        with tempfile.TemporaryDirectory(prefix="in-job-loss-gap-") as tmp:
            rows = loss_gap([int(s) for s in args.seeds.split(",")], args.steps, args.kill_at_steps, args.tail, Path(tmp))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    with tempfile.TemporaryDirectory(prefix="in-job-recovery-") as tmp:
        for i in range(args.rounds):
            modes = args.modes.split(",")
            for mode in modes if i % 2 == 0 else modes[::-1]:
                rows.append({"round": i, **row(mode, run_once(mode, args.steps, args.kill_at_steps, Path(tmp)))})
                r = rows[-1]
                print(f"round {i} {mode:8s} goodput {r['goodput']:6.1%}  wall {r['wall_s']:6.1f} s  failures {r['failures']}  executed {r['steps_executed']}  "
                      + "  ".join(f"{k} {r[k]:.2f}" for k in SHOWN)
                      + (f"  lost_work_survivors {r['lost_work_survivors_s']:.3f}" if r["lost_work_survivors_s"] is not None else "")
                      + _recovery_text(r), flush=True)
    for mode in args.modes.split(","):
        mine = [r for r in rows if r["mode"] == mode]
        away, heal = _mean([r["away_s"] for r in mine]), _mean([r["heal_s"] for r in mine])
        print(f"mean {mode:8s} goodput {sum(r['goodput'] for r in mine) / len(mine):6.1%}  "
              + "  ".join(f"{k} {sum(r[k] for r in mine) / len(mine):.2f}" for k in SHOWN)
              + (f"  away {away:.2f} s  heal {heal:.3f} s" if away is not None else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
