"""Statistical efficiency against batch size: the full sweep under each learning-rate rule, side by side.

    python benchmarks/batch_sweep.py                    # 8..256, three rules (about 10 minutes on 2 busy cores)
    python benchmarks/batch_sweep.py --rules sqrt       # one rule
    python benchmarks/batch_sweep.py --json out.json    # also keep every measurement

For each rule: the lab's GPT trains at every batch size until the held-out loss reaches
the target (``goodputlab.efficiency.sweep.run_sweep``; the same as ``goodputlab batch-sweep``).
Throughput is timed once, in interleaved rounds, and shared by the rules (it does not
depend on the learning rate); the smallest batch's run is shared too (every rule trains
it at the base learning rate). Printed per rule: the table of ``goodputlab batch-sweep``;
then, side by side: the measured efficiency curves against the noise scale's prediction,
the best batch size measured and predicted, the noise scale against the fitted critical
batch size, and the best batch size as the loss falls.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

from goodputlab.efficiency.analysis import adaptive_batch_sizes, report

from goodputlab.efficiency.noise import LR_RULES

from goodputlab.efficiency.sweep_config import DEFAULT_TARGET_LOSS, SweepConfig, parse_batch_sizes
from goodputlab.efficiency.sweep import SweepBar, run_sweep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-sizes", default="8,16,32,64,128,256")
    ap.add_argument("--target-loss", type=float, default=DEFAULT_TARGET_LOSS)
    ap.add_argument("--rules", default="sqrt,adascale,linear", help="comma-separated, the first one is the headline")
    ap.add_argument("--max-steps", type=int, default=SweepConfig().max_steps)
    ap.add_argument("--threads", type=int, default=SweepConfig().threads)
    ap.add_argument("--levels", default="2.5,2.0,1.7,1.5,1.42,1.37", help="loss levels for the adaptivity table (the target is added)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    for r in rules:
        if r not in LR_RULES:
            ap.error(f"--rules: {r!r} is not one of {', '.join(LR_RULES)}")
    base = SweepConfig(
        batch_sizes=parse_batch_sizes(args.batch_sizes),
        target_loss=args.target_loss,
        lr_rule=rules[0],
        max_steps=args.max_steps,
        threads=args.threads,
    )
    started = time.time()
    print(
        f"batch_sweep: {datetime.datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at start, python {platform.python_version()}, {platform.machine()}"
    )
    results = {}
    for rule in rules:
        config = base.replace(lr_rule=rule)
        first = next(iter(results.values()), None)
        bar = None if args.quiet else SweepBar(config)
        try:
            results[rule] = run_sweep(
                config,
                progress=bar,
                throughput=None if first is None else first.throughput,
                base_run=None if first is None else first.trajectories[config.base_batch],
            )
        finally:
            if bar is not None:
                bar.close()
        print()
        print(report(results[rule], results[rule].analyse()))
        sys.stdout.flush()

    analyses = {rule: r.analyse() for rule, r in results.items()}
    head = analyses[rules[0]]
    sizes = list(base.batch_sizes)
    print("\nside by side")
    print(f"{'':<28}" + "".join(f"{m:>8}" for m in sizes))
    print(f"{'samples/s (measured)':<28}" + "".join(f"{r['samples_per_s']:>8.0f}" for r in head.rows))
    for rule, a in analyses.items():
        cells = "".join(f"{'-' if r['statistical_efficiency'] is None else format(r['statistical_efficiency'], '.3f'):>8}" for r in a.rows)
        print(f"{'efficiency, ' + rule:<28}" + cells)
    for rule, a in analyses.items():
        cells = "".join(f"{'-' if r['predicted_efficiency'] is None else format(r['predicted_efficiency'], '.3f'):>8}" for r in a.rows)
        print(f"{'predicted, ' + rule:<28}" + cells)
    for rule, a in analyses.items():
        cells = "".join(f"{'-' if r['time_to_target_s'] is None else format(r['time_to_target_s'], '.1f'):>8}" for r in a.rows)
        print(f"{'time to target s, ' + rule:<28}" + cells)
    print()
    print(f"{'rule':<10}{'B_noise':>9}{'B_crit':>9}{'ratio':>7}{'best measured':>15}{'predicted':>11}{'closed form':>13}{'missed':>10}")
    for rule, a in analyses.items():
        crit = None if a.critical_batch is None else a.critical_batch["b_crit"]
        ratio = "-" if crit is None or not a.noise_scale else f"{crit / a.noise_scale:.2f}"
        print(
            f"{rule:<10}{a.noise_scale or float('nan'):>9.1f}{crit or float('nan'):>9.1f}{ratio:>7}{str(a.best_batch_size):>15}"
            f"{str(a.predicted_best_batch_size):>11}{a.optimal_batch_size or float('nan'):>13.1f}{','.join(map(str, a.missed)) or '-':>10}"
        )
    levels = [float(x) for x in args.levels.split(",") if x.strip()] + [base.target_loss]
    print(f"\nthe best batch size as the loss falls ({rules[0]}): measured over each stretch, predicted from the noise scale")
    print(f"{'loss':>7}{'B_noise':>9}{'predicted':>11}{'closed form':>13}{'measured':>10}")
    for row in adaptive_batch_sizes(results[rules[0]], [x for x in levels if x >= base.target_loss]):
        noise = row["noise_scale"]
        print(
            f"{row['loss']:>7.2f}{noise if noise is not None else float('nan'):>9.1f}{str(row['predicted']):>11}"
            f"{row['optimal'] if row['optimal'] is not None else float('nan'):>13.1f}{str(row['measured']):>10}"
        )
    print(f"\ntotal {time.time() - started:.0f} s, load average {os.getloadavg()[0]:.2f} at the end")
    if args.json is not None:
        args.json.write_text(json.dumps({rule: {"result": r.to_dict(), "analysis": analyses[rule].to_json()} for rule, r in results.items()}, indent=1))
        print(f"every measurement in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
