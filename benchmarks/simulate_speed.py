"""How fast is the simulator at Llama 3 scale, and what is in-job recovery worth there?

Times :func:`goodputlab.theory.simulate` for 16,384 GPUs x 54 days x 1,000
trials at Llama 3's interruption rate (466 in 54 days), with Llama-3-like
checkpoint settings, and prints the time and the resulting figures. Then the
same job with in-job recovery (torchft's replica groups: a failed group
relaunches in the same 5 minutes and heals from a peer in ``--heal-s``) for
2, 4, 8, 16 and 64 replica groups: the time per call beside the restart
model's, measured in the same run, and the goodput each gives against
restarting from a checkpoint, with the closed form's
(:func:`goodputlab.theory.in_job.predict`).

    python benchmarks/simulate_speed.py              (package installed, or PYTHONPATH=.)
    python benchmarks/simulate_speed.py --restart-only   (the figures of the restart model only)
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from goodputlab import theory
from goodputlab.theory import SimConfig, simulate

GROUPS = (2, 4, 8, 16, 64)


def llama3_config(seed: int = 0) -> SimConfig:
    """Llama 3's cluster and rate; checkpoint every 10 min, async saves
    (5 s blocking, 60 s persist), 60 s restore, 5 min restart."""
    return SimConfig(
        devices=theory.LLAMA3_GPUS,
        device_mtbf_s=theory.device_mtbf_for_count(
            theory.LLAMA3_GPUS, theory.LLAMA3_DURATION_S, theory.LLAMA3_INTERRUPTIONS
        ),
        duration_s=theory.LLAMA3_DURATION_S,
        interval_s=600.0,
        save_s=60.0,
        save_blocking_s=5.0,
        restore_s=60.0,
        restart_s=300.0,
        trials=1000,
        seed=seed,
    )


def seconds_per_call(config: SimConfig, repeats: int) -> tuple[float, object]:
    """Mean wall seconds of :func:`simulate` over ``repeats`` seeds, and the last result."""
    start = time.perf_counter()
    for seed in range(repeats):
        result = simulate(dataclasses.replace(config, seed=seed))
    return (time.perf_counter() - start) / repeats, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restart-only", action="store_true", help="only the restart model (as before in-job recovery)")
    parser.add_argument("--heal-s", type=float, default=60.0, help="seconds a group takes to heal from a peer (default 60)")
    parser.add_argument("--repeats", type=int, default=5, help="calls timed per configuration (default 5)")
    args = parser.parse_args()
    config = llama3_config()
    simulate(dataclasses.replace(config, trials=10))  # warm up numpy
    seconds, result = seconds_per_call(config, args.repeats)

    print(f"simulate: {config.devices:,} devices x {config.duration_s / 86400:g} days x {config.trials:,} trials")
    print(f"  time per call      {seconds:.3f} s (mean of {args.repeats})")
    print(f"  interruptions      mean {result.interruptions_mean:.1f} (expected {config.expected_failures:.1f})")
    print(
        f"  goodput            mean {result.goodput_mean:.4f}"
        f"  p5 {result.goodput_p5:.4f}  p95 {result.goodput_p95:.4f}"
    )
    for category, share in ((r["category"], r["share"]) for r in result.breakdown_rows()):
        print(f"  {category:<18} {share:7.2%}")
    if args.restart_only:
        return

    print()
    print(f"in-job recovery: a group relaunches in {config.restart_s:g} s and heals from a peer in {args.heal_s:g} s")
    print(f"  {'recovery':<10}{'s/call':>8}{'x restart':>10}{'goodput':>9}{'+-2se':>8}{'closed form':>12}"
          f"{'job restarts':>13}{'degraded':>10}{'lost':>8}{'gain':>8}")
    baseline = theory.in_job.predict(config).goodput
    print(f"  {'restart':<10}{seconds:>8.3f}{1.0:>10.2f}{result.goodput_mean:>9.4f}{2 * result.goodput_stderr:>8.4f}"
          f"{baseline:>12.4f}{result.job_restarts_mean:>13.1f}{0.0:>10.2%}"
          f"{result.buckets['lost_work'] / config.duration_s:>8.2%}{0.0:>8.2%}")
    for groups in GROUPS:
        in_job = dataclasses.replace(config, recovery="in-job", replica_groups=groups, heal_s=args.heal_s)
        t, r = seconds_per_call(in_job, args.repeats)
        model = theory.in_job.predict(in_job).goodput
        print(f"  {f'{groups} groups':<10}{t:>8.3f}{t / seconds:>10.2f}{r.goodput_mean:>9.4f}{2 * r.goodput_stderr:>8.4f}"
              f"{model:>12.4f}{r.job_restarts_mean:>13.1f}{r.buckets['degraded'] / config.duration_s:>10.2%}"
              f"{r.buckets['lost_work'] / config.duration_s:>8.2%}{r.goodput_mean - result.goodput_mean:>8.2%}")
    print("  gain: goodput points over restarting from a checkpoint; the last seed's result shown")


if __name__ == "__main__":
    main()
