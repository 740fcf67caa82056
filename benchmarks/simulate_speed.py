"""How fast is the simulator at Llama 3 scale?

Times :func:`goodputlab.theory.simulate` for 16,384 GPUs x 54 days x 1,000
trials at Llama 3's interruption rate (466 in 54 days), with Llama-3-like
checkpoint settings, and prints the time and the resulting figures.

    python benchmarks/simulate_speed.py   (package installed, or PYTHONPATH=.)
"""

from __future__ import annotations

import dataclasses
import time

from goodputlab import theory
from goodputlab.theory import SimConfig, simulate


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


def main() -> None:
    config = llama3_config()
    simulate(dataclasses.replace(config, trials=10))  # warm up numpy
    repeats = 5
    start = time.perf_counter()
    for seed in range(repeats):
        result = simulate(llama3_config(seed))
    seconds = (time.perf_counter() - start) / repeats

    print(f"simulate: {config.devices:,} devices x {config.duration_s / 86400:g} days x {config.trials:,} trials")
    print(f"  time per call      {seconds:.3f} s (mean of {repeats})")
    print(f"  interruptions      mean {result.interruptions_mean:.1f} (expected {config.expected_failures:.1f})")
    print(
        f"  goodput            mean {result.goodput_mean:.4f}"
        f"  p5 {result.goodput_p5:.4f}  p95 {result.goodput_p95:.4f}"
    )
    for category, share in ((r["category"], r["share"]) for r in result.breakdown_rows()):
        print(f"  {category:<18} {share:7.2%}")


if __name__ == "__main__":
    main()
