"""Serving goodput of the two modes on the same workload: colocated against disaggregated.

    python benchmarks/serving.py             # the chapter's setting, each search twice (about 5 minutes on 2 cores)
    python benchmarks/serving.py --quick     # the tiny model, short rates: for the tests

Both modes run on two worker processes with one torch thread each (the same cores) and serve
the same seeded Poisson arrivals (same prompts, same answer lengths). For each mode a goodput
search (``ServingCluster.search``) brackets and bisects the request rate; every rate is a real
measurement of ``--duration`` seconds of arrivals. On a shared machine the speed drifts, so
the searches run in the order colocated, disaggregated, disaggregated, colocated (ABBA, with
``--repeats 2``): a drift over the run then weighs on both modes alike, and the spread between
a mode's two searches shows how noisy the machine was.

Printed: each search's probes (rate, seconds of arrivals, requests, attainment, p90 TTFT and
TPOT), each goodput, the mean per mode and the ratio disaggregated / colocated, and, at the
highest rate both modes measured in their first searches, how long prefills kept decoding
requests waiting (only colocated workers do).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

from goodputlab.serving import SLO, parse_mix
from goodputlab.serving.analysis import interference
from goodputlab.serving.cluster import ServingCluster

MODES = ("colocated", "disaggregated")


def order(repeats: int) -> list[str]:
    """ABBA...: colocated, disaggregated, disaggregated, colocated, colocated, ..."""
    out: list[str] = []
    for i in range(repeats):
        out += list(MODES) if i % 2 == 0 else list(reversed(MODES))
    return out


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny model, short rates, one search per mode")
    p.add_argument("--model", default=None, help="serving preset (default serve; tiny with --quick)")
    p.add_argument("--mix", default="long-prompt")
    p.add_argument("--ttft-ms", type=float, default=400.0)
    p.add_argument("--tpot-ms", type=float, default=12.0)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--duration", type=float, default=None, help="seconds of arrivals per rate (default 4; 0.4 with --quick)")
    p.add_argument("--start-rps", type=float, default=8.0)
    p.add_argument("--min-rps", type=float, default=1.0)
    p.add_argument("--max-rps", type=float, default=None, help="highest rate tried (default 256; 64 with --quick)")
    p.add_argument("--tolerance", type=float, default=None, help="relative bracket width (default 0.1; 0.5 with --quick)")
    p.add_argument("--max-probes", type=int, default=10)
    p.add_argument("--repeats", type=int, default=None, help="searches per mode, in ABBA order (default 2; 1 with --quick)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    model = a.model or ("tiny" if a.quick else "serve")
    duration = a.duration or (0.4 if a.quick else 4.0)
    tolerance = a.tolerance or (0.5 if a.quick else 0.1)
    repeats = a.repeats or (1 if a.quick else 2)
    max_rps = a.max_rps or (64.0 if a.quick else 256.0)
    slo, mix = SLO(a.ttft_ms, a.tpot_ms), parse_mix(a.mix)
    t_start = time.monotonic()

    import torch

    print("serving goodput: colocated against disaggregated, on the same workload")
    print(f"machine: {os.cpu_count()} cores, {'GPU' if torch.cuda.is_available() else 'no GPU'} (the server runs on CPU threads), "
          f"torch {torch.__version__}, Python {platform.python_version()}, "
          f"{datetime.datetime.now().isoformat(timespec='minutes')}, load average at start {os.getloadavg()[0]:.2f}")
    servers = {mode: ServingCluster(mode=mode, model=model, seed=a.seed) for mode in MODES}
    try:
        for s in servers.values():
            s.launch()
        for s in servers.values():
            s.wait_ready()
        for s in servers.values():
            print(s.describe())
        print(f"workload: {mix.describe()}; Poisson arrivals, seed {a.seed}; SLOs {slo.describe()}; target {a.target:.0%}")
        print(f"each rate: {duration:g} s of arrivals (at least 10 requests); search from {a.start_rps:g} req/s, "
              f"bisect until within {tolerance:.0%}, at most {a.max_probes} rates")
        runs = []
        for i, mode in enumerate(order(repeats), 1):
            t = time.monotonic()
            result = servers[mode].search(slo, duration, mix, a.seed, target=a.target, start_rps=a.start_rps, min_rps=a.min_rps,
                                          max_rps=max_rps, rel_tol=tolerance, max_probes=a.max_probes)
            runs.append((mode, result, time.monotonic() - t))
            print(f"\nsearch {i}: {mode} ({time.monotonic() - t:.0f} s)")
            print(f"{'rate req/s':>10}  {'arrivals s':>10}  {'requests':>8}  {'attainment':>10}  {'p90 TTFT ms':>11}  {'p90 TPOT ms':>11}  meets")
            for m in result.probes:
                s = m.summary()
                print(f"{m.rate_rps:>10.3g}  {m.duration_s:>10.3g}  {m.requests:>8}  {m.attainment:>10.3f}  "
                      f"{fmt(s['ttft_p90_ms'], '.0f'):>11}  {fmt(s['tpot_p90_ms'], '.1f'):>11}  {'yes' if result.passed(m) else 'no'}")
            print(result.statement())
    finally:
        for s in servers.values():
            s.close()

    print(f"\n{'mode':<15}{'goodput req/s (each search)':>30}{'mean':>8}")
    means = {}
    for mode in MODES:
        values = [r.goodput_rps for m, r, _ in runs if m == mode]
        means[mode] = statistics.fmean(values)
        capped = any(r.capped for m, r, _ in runs if m == mode)
        print(f"{mode:<15}{', '.join(f'{v:g}' for v in values):>30}{means[mode]:>8.3g}" + ("  (at least: capped)" if capped else ""))
    if means["colocated"] > 0:
        print(f"disaggregated / colocated goodput: {means['disaggregated'] / means['colocated']:.2f}x")
    else:
        print("disaggregated / colocated goodput: colocated met the target at no rate tried")

    first = {mode: next(r for m, r, _ in runs if m == mode) for mode in MODES}
    common = sorted({p.rate_rps for p in first["colocated"].probes} & {p.rate_rps for p in first["disaggregated"].probes})
    if common:
        rate = common[-1]
        print(f"\nat {rate:g} req/s (same arrivals in both modes, first searches):")
        for mode in MODES:
            m = next(p for p in first[mode].probes if p.rate_rps == rate)
            e, s = interference(m), m.summary()
            print(f"  {mode:<14} attainment {m.attainment:.3f}, p90 TTFT {fmt(s['ttft_p90_ms'], '.0f')} ms, p90 TPOT "
                  f"{fmt(s['tpot_p90_ms'], '.1f')} ms; decode step {fmt(e['decode_step_ms_median'], '.1f')} ms, prefill "
                  f"{fmt(e['prefill_ms_median'], '.1f')} ms (medians); {e['prefills_interrupting']} prefills kept "
                  f"running requests waiting ({e['stall_seq_s']:.2f} sequence-seconds)")
    print(f"\nload average at end {os.getloadavg()[0]:.2f}; total {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
