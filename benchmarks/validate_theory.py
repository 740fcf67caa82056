"""Does the theory predict the lab? Real runs over checkpoint intervals, the model beside each.

For every checkpoint interval and seed, a real supervised run (a worker
process SIGKILLed at Poisson failure times and restarted) is measured; its
phase costs (step, save, launch, restore, the pause after a kill) are read
from its own event log and fed to the lab model
(:func:`goodputlab.theory.predict_run`). Printed per interval:

- ``measured``: pooled goodput of the seeds (total productive / total wall);
- ``model``: the model's expected goodput, ``+-`` its standard error for the
  pooled seeds, and ``z`` = error / standard error: a few runs of a few
  seconds see only a handful of failures, so luck moves the measurement by
  several points and ``z`` says whether an error is luck or a wrong model;
- ``replay``: the same model walked through the failure times the runs drew,
  which takes luck out of the comparison;
- ``Daly`` and ``1st order``: the textbook formulas with the same costs.

Then the largest errors and the best interval: measured, the model's, Young's
and Daly's.

    python benchmarks/validate_theory.py            # 5 intervals x 3 seeds, ~5 min on 2 cores
    python benchmarks/validate_theory.py --seeds 0 1 2 3 4 5 6 7 8   # 9 seeds, ~14 min: luck averages out
    python benchmarks/validate_theory.py --quick    # 3 intervals x 1 seed, ~1 min
    (package installed, or PYTHONPATH=.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from goodputlab import theory
from goodputlab.experiments.interval_sweep import SweepRun, mean_timings, pool_sweep, run_sweep

FULL = dict(intervals=(1, 5, 25, 100, 400), seeds=(0, 1, 2), steps=400, mtbf=8.0)
QUICK = dict(intervals=(2, 20, 120), seeds=(0,), steps=120, mtbf=8.0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a short sweep (3 intervals x 1 seed, 120 steps)")
    p.add_argument("--intervals", type=int, nargs="+", help="checkpoint intervals, steps")
    p.add_argument("--seeds", type=int, nargs="+", help="seeds (each one a run per interval)")
    p.add_argument("--steps", type=int, help="steps per run")
    p.add_argument("--mtbf", type=float, help="mean time between failures, seconds")
    p.add_argument("--json", metavar="PATH", help="also write the rows and runs as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    for name in plan:
        if getattr(args, name) is not None:
            plan[name] = tuple(getattr(args, name)) if name in ("intervals", "seeds") else getattr(args, name)

    print(
        f"sweep: intervals {list(plan['intervals'])} steps, seeds {list(plan['seeds'])}, "
        f"{plan['steps']} steps per run, MTBF {plan['mtbf']:g} s, torch threads 1",
        flush=True,
    )
    started = time.monotonic()

    def report(run: SweepRun) -> None:
        print(
            f"  ckpt every {run.ckpt_every:>4} seed {run.seed}: goodput {run.goodput:.3f}"
            f" (model {run.expected.goodput:.3f}, replay {run.replayed.goodput:.3f}),"
            f" {run.summary['failures']} failures, wall {run.wall_s:.1f} s",
            flush=True,
        )

    runs = run_sweep(
        plan["intervals"], plan["seeds"], steps=plan["steps"], mtbf=plan["mtbf"], threads=1, on_run=report
    )
    elapsed = time.monotonic() - started
    rows = pool_sweep(runs)
    timings = mean_timings(runs)
    first = runs[0].summary

    print()
    print(
        f"machine: {os.cpu_count()} CPU cores, device {first['device']}, torch {first['torch_version']}; "
        f"sweep took {elapsed:.0f} s"
    )
    print(
        f"measured costs (mean of runs): step {timings.step_s * 1e3:.1f} ms (compute {timings.compute_s * 1e3:.1f}),"
        f" save {timings.save_s * 1e3:.1f} ms, launch {timings.launch_s:.2f} s, restore {timings.restore_s * 1e3:.1f} ms,"
        f" pause after a kill {timings.relaunch_delay_s:.2f} s"
    )
    print()
    header = (
        f"{'ckpt every':>10} {'tau (s)':>8} {'measured':>9} {'(min-max)':>13} {'model':>7} {'+-se':>6} {'z':>5}"
        f" {'replay':>7} {'Daly':>6} {'1st ord':>7} {'failures':>8} {'(model)':>7} {'err pts':>7} {'replay err':>10}"
    )
    print(header)
    for r in rows:
        spread = f"({r['measured_min']:.2f}-{r['measured_max']:.2f})"
        print(
            f"{r['ckpt_every']:>10} {r['interval_s']:>8.3f} {r['measured']:>9.3f}"
            f" {spread:>13} {r['expected']:>7.3f} {r['expected_se']:>6.3f}"
            f" {r['z']:>+5.1f} {r['replayed']:>7.3f} {r['daly']:>6.3f} {r['first_order']:>7.3f}"
            f" {r['failures']:>8.1f} {r['failures_expected']:>7.1f} {r['error_pts']:>+7.1f} {r['replay_error_pts']:>+10.1f}"
        )
    worst = max(rows, key=lambda r: abs(r["error_pts"]))
    worst_replay = max(rows, key=lambda r: abs(r["replay_error_pts"]))
    worst_z = max(rows, key=lambda r: abs(r["z"]))
    print()
    print(
        f"largest error, model (expected):   {abs(worst['error_pts']):.1f} points at ckpt every {worst['ckpt_every']}"
        f" ({worst['z']:+.1f} standard errors; largest |z| {abs(worst_z['z']):.1f})"
    )
    print(
        f"largest error, model (replay):     {abs(worst_replay['replay_error_pts']):.1f} points"
        f" at ckpt every {worst_replay['ckpt_every']}"
    )

    best_measured = max(rows, key=lambda r: r["measured"])
    mtbf = plan["mtbf"]
    model_best = theory.optimal_ckpt_every(timings, plan["steps"], mtbf)
    young = theory.young_interval(timings.save_s, mtbf) / timings.step_s
    daly = theory.daly_interval(timings.save_s, mtbf) / timings.step_s
    print(
        f"best interval (steps): measured {best_measured['ckpt_every']} (of {[r['ckpt_every'] for r in rows]}),"
        f" lab model {model_best}, Young {young:.1f}, Daly {daly:.1f}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "plan": plan,
                    "rows": rows,
                    "timings": timings.to_dict(),
                    "runs": [
                        {
                            "ckpt_every": r.ckpt_every,
                            "seed": r.seed,
                            "goodput": r.goodput,
                            "wall_s": r.wall_s,
                            "failures": r.summary["failures"],
                            "expected": r.expected.goodput,
                            "replayed": r.replayed.goodput,
                            "timings": r.timings.to_dict(),
                        }
                        for r in runs
                    ],
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
