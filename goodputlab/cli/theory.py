"""CLI sub-commands for the theory and the simulator: ``optimal`` here, ``simulate`` in :mod:`goodputlab.cli.simulate`.

The main CLI calls :func:`register` with its sub-parsers; each sub-command sets
``func`` to a handler that takes the parsed arguments and returns an exit code.
Bad input raises :class:`~goodputlab.errors.ConfigError`, uncaught here: the
main CLI prints it as one line and exits with 2. :data:`FLAGS` maps the
``field`` of such an error to the flag the user typed; the main CLI echoes the
value as the user typed it (quoted when it could not be read at all).

Every flag is read as text and converted (:mod:`goodputlab.cli.theory_read`), not by
argparse, so a value that is not a number gets the same one-line message as one out of range.

Run standalone for testing: ``python -m goodputlab.cli.theory optimal --save-s 60 --mtbf-s 10000``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .. import theory
from .simulate import SIMULATE_EXAMPLES, register_simulate
from .theory_read import DEFINITIONS, POSITIVE_SECONDS as _POSITIVE_SECONDS, SECONDS as _SECONDS
from .theory_read import add as _add, definition_lines, read_value as _value, secs as _secs

__all__ = ["FLAGS", "OPTIMAL_EXAMPLES", "SIMULATE_EXAMPLES", "main", "register", "save_warning"]

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
    "recovery": "--recovery",
    "replica_groups": "--replica-groups",
    "min_groups": "--min-groups",
    "heal_s": "--heal-s",
    "failure_dist": "--failure-dist",
    "failure_shape": "--weibull-shape",
    "weibull_shape": "--weibull-shape",
    "domain_size": "--domain-size",
    "domain_share": "--domain-share",
    "queue_s": "--queue-s",
    "node_failures_per_1000_days": "--node-failures-per-1000-days",
    "gpus_per_node": "--gpus-per-node",
    "job_failures_per_day": "--job-failures-per-day",
    "job_failure_rate_per_s": "--job-failures-per-day",
    "jit_share": "--jit-share",
    "jit_save_s": "--jit-save-s",
    "step_s": "--step-s",
    "collective_timeout_s": "--collective-timeout-s",
    "step_overhead": "--step-overhead",
    "step_overhead_share": "--step-overhead",
}

#: What the columns of ``optimal`` mean, printed under its table.
GOODPUT_LEGEND = (
    "first order: goodput 1 - save/interval - (interval/2 + restart)/MTBF, the back-of-envelope model behind Young; "
    "ETTR the same with the save counted as training (Kokolis et al.'s E[ETTR])",
    "Daly: Daly's (2006) complete model, failures also during saves and restarts (exact for Poisson failures); "
    "its ETTR counts every save, even one a failure cut short, as training",
    "a queue (--queue-s) divides both by 1 + queue/MTBF and does not move the optimum",
)

OPTIMAL_EXAMPLES = """\
examples:
  goodputlab optimal --save-s 60 --mtbf-s 10000
      a 1-minute save, a failure every 2.8 hours (Llama 3's rate)
  goodputlab optimal --save-s 300 --mtbf-s 86400 --restart-s 600 --queue-s 1800 --json
      as JSON (inputs and, per optimum, the interval, both goodputs and both ETTRs), half an hour queued
      after each failure
"""

def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``optimal`` and ``simulate`` sub-commands to ``subparsers``."""
    _register_optimal(subparsers)
    register_simulate(subparsers)


def _register_optimal(subparsers: argparse._SubParsersAction) -> None:
    optimal = subparsers.add_parser(
        "optimal",
        help="optimal checkpoint interval (Young, Daly, numeric) and its goodput",
        description="Optimal checkpoint interval for a save cost and an MTBF, and the goodput it gives.",
        epilog=OPTIMAL_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add(optimal, "--save-s", "SECONDS", "seconds a save blocks training", required=True)
    _add(optimal, "--mtbf-s", "SECONDS", "job-level mean time between failures, seconds", required=True)
    _add(optimal, "--restart-s", "SECONDS", "seconds from a failure to training again (default 0)", default="0")
    _add(optimal, "--queue-s", "SECONDS", "seconds waiting to be scheduled again after each failure, when no failure "
         "strikes (default 0)", default="0")
    optimal.add_argument("--json", action="store_true", help="print a JSON object (inputs and results) instead of a table")
    optimal.set_defaults(func=run_optimal)


def save_warning(save_s: float, mtbf_s: float) -> str | None:
    """Why the optimum means little when a save costs more than the MTBF (seconds); ``None`` otherwise."""
    if save_s <= mtbf_s:
        return None
    return (f"a save ({_secs(save_s)}) costs more than the MTBF ({_secs(mtbf_s)}): most saves would be cut short by a "
            "failure, so no interval helps much (Young's and Daly's formulas assume a save far shorter than the MTBF); "
            "make saves cheaper (--ckpt async or memory in a run) or the job's MTBF longer")


def run_optimal(args: argparse.Namespace) -> int:
    """Print Young's, Daly's and the numeric optimum interval with their goodput and ETTR."""
    save = _value(args, "save_s", _SECONDS)
    mtbf = _value(args, "mtbf_s", _POSITIVE_SECONDS)
    restart = _value(args, "restart_s", _SECONDS)
    queue = _value(args, "queue_s", _SECONDS)
    optima = _optima(save, restart, mtbf, queue)
    warning = save_warning(save, mtbf)
    if warning:  # one line on stderr: the table still prints, but the formulas are past their range
        print(f"goodputlab optimal: warning: {warning}", file=sys.stderr)
    if args.json:
        inputs = {"save_s": save, "mtbf_s": mtbf, "restart_s": restart, "queue_s": queue}
        print(json.dumps({"inputs": inputs, "optima": optima, "definitions": DEFINITIONS,
                          **({"warning": warning} if warning else {})}, indent=2))
        return 0
    queued = f", queue {_secs(queue)}" if queue else ""
    print(f"save {_secs(save)}, MTBF {_secs(mtbf)}, restart {_secs(restart)}{queued}")
    print(f"{'':<18}{'interval':>22}  {'goodput: first order':>20}{'Daly':>8}  {'ETTR: first order':>17}{'Daly':>8}")
    for row in optima.values():
        print(f"{row['name']:<18}{_secs(row['interval_s']):>22}  {row['first_order_goodput']:>20.4f}"
              f"{row['daly_goodput']:>8.4f}  {row['first_order_ettr']:>17.4f}{row['daly_ettr']:>8.4f}")
    print()
    for line in (*GOODPUT_LEGEND, *definition_lines()):
        print(line)
    return 0


def _optima(save: float, restart: float, mtbf: float, queue: float = 0.0) -> dict[str, dict[str, Any]]:
    """Young's, Daly's and the numeric optimum: ``{key: {name, interval_s, first_order_goodput, daly_goodput,
    first_order_ettr, daly_ettr}}``."""
    intervals = {
        "young": ("Young (1974)", theory.young_interval(save, mtbf)),
        "daly": ("Daly (2006)", theory.daly_interval(save, mtbf)),
        "numeric": ("numeric optimum", theory.optimal_interval_numeric(save, restart, mtbf)),
    }
    rows = {}
    for key, (name, interval) in intervals.items():
        if interval > 0:
            first_order = theory.expected_goodput(interval, save, restart, mtbf, queue_s=queue)
            full = theory.daly_goodput(interval, save, restart, mtbf, queue_s=queue)
            first_ettr = theory.first_order_ettr(interval, restart, mtbf, queue_s=queue, save_s=save)
            full_ettr = theory.daly_ettr(interval, save, restart, mtbf, queue_s=queue)
        else:  # free saves: checkpoint continuously, lose only the restarts
            first_order = first_ettr = max(0.0, 1.0 - restart / mtbf) / (1.0 + queue / mtbf)
            full = full_ettr = math.exp(-restart / mtbf) / (1.0 + queue / mtbf)
        rows[key] = {"name": name, "interval_s": interval, "first_order_goodput": first_order, "daly_goodput": full,
                     "first_order_ettr": first_ettr, "daly_ettr": full_ettr}
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` with just these sub-commands and run one (for testing)."""
    parser = argparse.ArgumentParser(prog="goodputlab-theory")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
