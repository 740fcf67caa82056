"""CLI sub-commands for the theory and the simulator: ``optimal`` and ``simulate``.

The main CLI calls :func:`register` with its sub-parsers; each sub-command sets
``func`` to a handler that takes the parsed arguments and returns an exit code.
Bad input raises :class:`~goodputlab.errors.ConfigError`, uncaught here: the
main CLI prints it as one line and exits with 2. :data:`FLAGS` maps the
``field`` of such an error to the flag the user typed.

Run standalone for testing: ``python -m goodputlab.cli_theory optimal --save-s 60 --mtbf-s 10000``.
"""

from __future__ import annotations

import argparse
import math
import sys

from goodputlab import theory
from goodputlab.categories import CATEGORIES
from goodputlab.errors import check
from goodputlab.theory.simulator import SimConfig, simulate

#: ConfigError.field -> command-line flag. Fields in seconds on the command
#: line share the flag's name; the flags given in other units (hours, days,
#: minutes) are checked in those units first, under the flag's name.
FLAGS: dict[str, str] = {
    "save_s": "--save-s",
    "mtbf_s": "--mtbf-s",
    "restart_s": "--restart-s",
    "devices": "--devices",
    "device_mtbf_h": "--device-mtbf-h",
    "device_mtbf_s": "--device-mtbf-h",
    "days": "--days",
    "duration_s": "--days",
    "interval_min": "--interval-min",
    "interval_s": "--interval-min",
    "save_blocking_s": "--save-blocking-s",
    "restore_s": "--restore-s",
    "startup_s": "--startup-s",
    "hot_spares": "--hot-spares",
    "spare_restart_s": "--spare-restart-s",
    "data_stall_fraction": "--data-stall-fraction",
    "trials": "--trials",
    "seed": "--seed",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``optimal`` and ``simulate`` sub-commands to ``subparsers``."""
    optimal = subparsers.add_parser(
        "optimal",
        help="optimal checkpoint interval (Young, Daly, numeric) and its goodput",
        description="Optimal checkpoint interval for a save cost and an MTBF, and the goodput it gives.",
    )
    optimal.add_argument("--save-s", type=float, required=True, help="seconds a save blocks training")
    optimal.add_argument("--mtbf-s", type=float, required=True, help="job-level mean time between failures, seconds")
    optimal.add_argument(
        "--restart-s", type=float, default=0.0, help="seconds from a failure to training again (default 0)"
    )
    optimal.set_defaults(func=run_optimal)

    sim = subparsers.add_parser(
        "simulate",
        help="Monte Carlo simulation of a long job on N devices",
        description="Simulate a checkpointed job whose devices fail at random; print goodput and where the time went.",
    )
    sim.add_argument("--devices", type=int, required=True, help="devices in the job")
    sim.add_argument(
        "--device-mtbf-h", type=float, required=True, help="mean time between failures of one device, hours"
    )
    sim.add_argument("--days", type=float, required=True, help="the job's wall-clock length, days")
    sim.add_argument("--interval-min", type=float, required=True, help="compute between checkpoints, minutes")
    sim.add_argument("--save-s", type=float, required=True, help="seconds to persist a checkpoint")
    sim.add_argument("--restart-s", type=float, required=True, help="seconds from a failure to a ready process")
    sim.add_argument("--trials", type=int, default=1000, help="independent simulated runs (default 1000)")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument(
        "--save-blocking-s",
        type=float,
        default=None,
        help="part of a save that blocks training; less than --save-s means async (default: all of it)",
    )
    sim.add_argument(
        "--restore-s", type=float, default=0.0, help="seconds to load a checkpoint after a restart (default 0)"
    )
    sim.add_argument("--startup-s", type=float, default=0.0, help="seconds from first launch to first step (default 0)")
    sim.add_argument("--hot-spares", type=int, default=0, help="failures absorbed by warm spares (default 0)")
    sim.add_argument(
        "--spare-restart-s",
        type=float,
        default=None,
        help="restart seconds while spares last (required with --hot-spares)",
    )
    sim.add_argument(
        "--data-stall-fraction", type=float, default=0.0, help="share of compute spent waiting for data (default 0)"
    )
    sim.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    sim.set_defaults(func=run_simulate)


def run_optimal(args: argparse.Namespace) -> int:
    """Print Young's, Daly's and the numeric optimum interval with their goodput."""
    save, mtbf, restart = args.save_s, args.mtbf_s, args.restart_s
    young = theory.young_interval(save, mtbf)
    daly = theory.daly_interval(save, mtbf)
    numeric = theory.optimal_interval_numeric(save, restart, mtbf)

    print(f"save {_secs(save)}, MTBF {_secs(mtbf)}, restart {_secs(restart)}")
    print(f"{'':<18}{'interval':>22}  {'first-order goodput':>19}  {'Daly goodput':>12}")
    for name, interval in (("Young (1974)", young), ("Daly (2006)", daly), ("numeric optimum", numeric)):
        if interval > 0:
            first_order = f"{theory.expected_goodput(interval, save, restart, mtbf):.4f}"
            full = f"{theory.daly_goodput(interval, save, restart, mtbf):.4f}"
        else:  # free saves: checkpoint continuously, lose only the restarts
            first_order = f"{max(0.0, 1.0 - restart / mtbf):.4f}"
            full = f"{math.exp(-restart / mtbf):.4f}"
        print(f"{name:<18}{_secs(interval):>22}  {first_order:>19}  {full:>12}")
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    """Run the simulator from command-line units; print a table or JSON."""
    # Flags in hours, days and minutes are checked in those units, so the
    # error repeats what the user typed.
    for field, unit in (("device_mtbf_h", "hours"), ("days", "days"), ("interval_min", "minutes")):
        value = getattr(args, field)
        check(math.isfinite(value) and value > 0, field, value, f"a number of {unit} > 0")
    config = SimConfig(
        devices=args.devices,
        device_mtbf_s=args.device_mtbf_h * 3600.0,
        duration_s=args.days * 86400.0,
        interval_s=args.interval_min * 60.0,
        save_s=args.save_s,
        save_blocking_s=args.save_blocking_s,
        restore_s=args.restore_s,
        restart_s=args.restart_s,
        startup_s=args.startup_s,
        hot_spares=args.hot_spares,
        spare_restart_s=args.spare_restart_s,
        data_stall_fraction=args.data_stall_fraction,
        trials=args.trials,
        seed=args.seed,
    )
    result = simulate(config)
    if args.json:
        print(result.to_json(indent=2))
        return 0

    print(
        f"{config.devices:,} devices, device MTBF {args.device_mtbf_h:g} h "
        f"(job MTBF {_secs(config.job_mtbf_s)}), {args.days:g} days, "
        f"checkpoint every {_secs(config.interval_s)}, {config.trials:,} trials"
    )
    print(f"goodput        mean {result.goodput_mean:.4f}   p5 {result.goodput_p5:.4f}   p95 {result.goodput_p95:.4f}")
    print(f"interruptions  mean {result.interruptions_mean:.1f}   (expected {config.expected_failures:.1f})")
    print()
    print(f"{'category':<20}{'seconds':>14}{'hours':>10}{'share':>9}")
    buckets = result.buckets
    for category in CATEGORIES:
        seconds = buckets[category]
        print(f"{category:<20}{seconds:>14,.0f}{seconds / 3600:>10.1f}{seconds / config.duration_s:>9.2%}")
    total = sum(buckets.values())
    print(f"{'total':<20}{total:>14,.0f}{total / 3600:>10.1f}{total / config.duration_s:>9.2%}")
    return 0


def _secs(seconds: float) -> str:
    """``"4320 s (1h 12m)"``: seconds, and the human form when it helps."""
    if math.isinf(seconds):
        return "inf"
    if seconds < 60:
        return f"{seconds:.3g} s"
    return f"{seconds:,.0f} s ({theory.human_duration(seconds)})"


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` with just these sub-commands and run one (for testing)."""
    parser = argparse.ArgumentParser(prog="goodputlab-theory")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
