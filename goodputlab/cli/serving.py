"""CLI sub-command ``serve-bench``: serve the lab's model under latency SLOs and measure goodput.

The main CLI calls :func:`register` with its sub-parsers; the handler raises
:class:`~goodputlab.errors.ConfigError` on bad input (the main CLI prints one line naming the
flag from :data:`FLAGS`, and exits with 2). Workers start only after the input is checked, and
never outlive the command (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..errors import check
from ..serving.config import MAX_SEED
from .common import number, whole

MAX_DURATION_S = 3600.0  # an hour of arrivals per measured rate; longer only keeps the machine busy

#: ConfigError.field -> command-line flag, for the fields whose flag is not simply
#: ``--`` + the field with dashes (``ttft_ms`` is ``--ttft-ms``).
FLAGS: dict[str, str] = {
    "start_rps": "--rate",
    "max_rps": "--max-rate",
    "rel_tol": "--tolerance",
    "duration_s": "--duration",
}

EXIT_SERVER_ERROR = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve-bench`` sub-command to ``subparsers``."""
    from ..serving.workload import MIXES, SERVING_PRESETS

    p = subparsers.add_parser(
        "serve-bench",
        help="serve the lab's model at a request rate; SLO attainment, and goodput with --search",
        description="Serve a small GPT (KV cache, continuous batching) to seeded Poisson arrivals; print the share "
        "of requests meeting both latency SLOs (TTFT, TPOT). With --search, find the goodput: the highest rate "
        "whose attainment meets --target, each rate measured for real.",
    )
    g = p.add_argument_group("load and objectives")
    g.add_argument("--rate", type=number, default=None, help="requests per second (with --search: the first rate tried, default 4)")
    g.add_argument("--ttft-ms", type=number, required=True, help="time-to-first-token objective, ms")
    g.add_argument("--tpot-ms", type=number, required=True, help="time-per-output-token objective, ms")
    g.add_argument("--duration", type=number, default=4.0, help="seconds of arrivals per measured rate, longer when fewer than 10 requests would arrive (default 4)")
    g.add_argument("--mix", default="chat", help=f"prompt and output lengths: {', '.join(MIXES)}, or ranges such as 64-128/16-32 (default chat)")
    g.add_argument("--seed", type=whole, default=0, help="seeds arrivals, lengths, prompts and weights (default 0)")
    g = p.add_argument_group("server")
    g.add_argument("--mode", default="colocated", help="colocated (prefill and decode in each worker) or disaggregated (default colocated)")
    g.add_argument("--model", default="serve", help=f"model size: {', '.join(SERVING_PRESETS)} (default serve)")
    g.add_argument("--max-batch", type=whole, default=32, help="sequences decoding at once across the server (default 32)")
    g = p.add_argument_group("goodput search")
    g.add_argument("--search", action="store_true", help="find the highest rate meeting --target (bracket, then bisect)")
    g.add_argument("--target", type=number, default=0.9, help="share of requests that must meet both SLOs (default 0.9)")
    g.add_argument("--max-rate", type=number, default=256.0, help="highest rate the search tries (default 256)")
    g.add_argument("--tolerance", type=number, default=0.1, help="stop bisecting when the bracket is this close, relative (default 0.1)")
    g.add_argument("--max-probes", type=whole, default=12, help="rates measured at most (default 12)")
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run_serve_bench, flags=FLAGS)


def _positive(field: str, value: float | None, allowed: str) -> None:
    check(value is not None and math.isfinite(value) and value > 0, field, value, allowed)


def run_serve_bench(args: argparse.Namespace) -> int:
    """Check the input, start the workers, measure one rate or search; print text or JSON."""
    from ..serving.cluster import ServerError, ServingCluster

    slo, mix, config, start = _checked_bench_input(args)

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    def on_probe(m) -> None:
        say(f"  {m.rate_rps:g} req/s for {m.duration_s:.3g} s: {m.requests} requests, attainment {m.attainment:.3f}")

    try:
        say(f"starting the server ({config.mode}, model {config.model})...")
        with ServingCluster(config) as server:
            say(server.describe())
            if args.search:
                result = server.search(slo, args.duration, mix, args.seed, target=args.target, start_rps=start,
                                       min_rps=min(0.25, start), max_rps=args.max_rate, rel_tol=args.tolerance,
                                       max_probes=args.max_probes, on_probe=on_probe)
                best = result.best
            else:
                result = None
                best = server.measure_rate(args.rate, args.duration, slo, mix, args.seed)
                on_probe(best)
            description = server.describe()
    except ServerError as e:
        print(f"goodputlab serve-bench: the server failed: {e}", file=sys.stderr)
        return EXIT_SERVER_ERROR
    if args.json:
        _print_bench_json(args, config, mix, slo, description, result, best)
    else:
        _print_bench_text(args, mix, slo, description, result, best)
    return 0


def _checked_bench_input(args: argparse.Namespace):
    """``(slo, mix, server config, the first rate)`` from the flags; a bad value raises a ConfigError naming it."""
    from ..serving import SLO, parse_mix
    from ..serving.cluster import ServerConfig

    if not args.search:
        check(args.rate is not None, "rate", "(missing)", "requests per second > 0 (required unless --search)")
    if args.rate is not None:
        _positive("rate", args.rate, "requests per second > 0")
    slo = SLO(args.ttft_ms, args.tpot_ms)
    check(args.duration is not None and math.isfinite(args.duration) and 0 < args.duration <= MAX_DURATION_S, "duration",
          args.duration, f"seconds > 0 and <= {MAX_DURATION_S:g}")
    check(0 <= args.seed <= MAX_SEED, "seed", args.seed, f"a whole number between 0 and 2**64-1 ({MAX_SEED})")
    check(math.isfinite(args.target) and 0 < args.target <= 1, "target", args.target, "a share of requests in (0, 1]")
    _positive("max_rate", args.max_rate, "requests per second > 0")
    _positive("tolerance", args.tolerance, "a relative width > 0")
    check(args.max_probes >= 1, "max_probes", args.max_probes, "a whole number >= 1")
    start = args.rate if args.rate is not None else min(4.0, args.max_rate)
    check(start <= args.max_rate, "rate", start, f"at most --max-rate ({args.max_rate:g})")
    mix = parse_mix(args.mix)
    config = ServerConfig(mode=args.mode, model=args.model, seed=args.seed, max_batch=args.max_batch)
    config.check_mix(mix)
    return slo, mix, config, start


def _print_bench_json(args, config, mix, slo, description: str, result, best) -> None:
    out = {"mode": config.mode, "model": config.model, "mix": mix.name, "seed": args.seed,
           "ttft_slo_ms": slo.ttft_ms, "tpot_slo_ms": slo.tpot_ms, "server": description}
    if result is not None:
        out.update({"goodput_rps": result.goodput_rps, "target": result.target, "capped": result.capped,
                    "floored": result.floored, "statement": result.statement(),
                    "probes": [p.summary() for p in result.probes]})
    out.update(_headline(best))
    print(json.dumps(out, indent=1))


def _print_bench_text(args, mix, slo, description: str, result, best) -> None:
    print(description)
    print(f"workload: {mix.describe()}; Poisson arrivals, seed {args.seed}")
    print(f"SLOs: {slo.describe()}")
    if result is not None:
        print()
        print(result.table())
        print()
        print(result.statement())
        print(f"\n{'goodput_rps':<13}{result.goodput_rps:g}" + ("  (at least)" if result.capped else ""))
        if best is None:
            return
        print(f"at the goodput rate ({best.rate_rps:g} req/s for {best.duration_s:.3g} s):")
    else:
        print(f"rate {best.rate_rps:g} req/s for {best.duration_s:.3g} s of arrivals, measured until {best.horizon_s:.2f} s")
    h = _headline(best)
    print(f"{'attainment':<13}{h['attainment']:.3f}   (TTFT met {best.ttft_met:.3f}, TPOT met {best.tpot_met:.3f})")
    for key in ("ttft_p90_ms", "tpot_p90_ms"):
        value = h[key]
        print(f"{key:<13}{'never (unfinished requests)' if value is None else f'{value:.1f}'}")
    print(f"{'requests':<13}{h['requests']}   ({best.finished} finished)")


def _headline(m) -> dict:
    """The four figures the command promises, for the measured rate (or the goodput rate)."""
    if m is None:
        return {"attainment": None, "ttft_p90_ms": None, "tpot_p90_ms": None, "requests": 0}
    s = m.summary()
    return {"rate_rps": m.rate_rps, "duration_s": m.duration_s, "attainment": s["attainment"],
            "ttft_p90_ms": s["ttft_p90_ms"], "tpot_p90_ms": s["tpot_p90_ms"], "requests": s["requests"]}
