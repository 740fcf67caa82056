"""CLI sub-commands for the theory and the simulator: ``optimal`` and ``simulate``.

The main CLI calls :func:`register` with its sub-parsers; each sub-command sets
``func`` to a handler that takes the parsed arguments and returns an exit code.
Bad input raises :class:`~goodputlab.errors.ConfigError`, uncaught here: the
main CLI prints it as one line and exits with 2. :data:`FLAGS` maps the
``field`` of such an error to the flag the user typed; the main CLI echoes the
value as the user typed it (quoted when it could not be read at all).

Every flag is read as text and converted here, not by argparse, so a value that
is not a number gets the same one-line message as one out of range.

Run standalone for testing: ``python -m goodputlab.cli.theory optimal --save-s 60 --mtbf-s 10000``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

from .. import theory
from ..categories import CATEGORIES
from ..errors import ConfigError
from ..theory import SimConfig, simulate
from ..validate import ascii_number
from .common import UnreadableValue

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
}

#: What the two goodput columns of ``optimal`` mean, printed under its table.
GOODPUT_LEGEND = (
    "first-order goodput: 1 - save/interval - (interval/2 + restart)/MTBF, the back-of-envelope model behind Young",
    "Daly goodput: Daly's (2006) complete model, failures also during saves and restarts (exact for Poisson failures)",
)

OPTIMAL_EXAMPLES = """\
examples:
  goodputlab optimal --save-s 60 --mtbf-s 10000
      a 1-minute save, a failure every 2.8 hours (Llama 3's rate)
  goodputlab optimal --save-s 300 --mtbf-s 86400 --restart-s 600 --json
      the same as JSON (inputs and, per optimum, the interval and both goodputs)
"""

SIMULATE_EXAMPLES = """\
examples:
  goodputlab simulate --devices 16384 --device-mtbf-h 45566 --days 54 --interval-min 10 \\
      --save-s 60 --restart-s 300 --trials 1000
      Llama 3's cluster: 45,566 h per GPU gives its 466 interruptions in 54 days
  goodputlab simulate --devices 1024 --device-mtbf-h 20000 --days 30 --interval-min 30 \\
      --save-s 120 --save-blocking-s 5 --restart-s 600 --hot-spares 8 --spare-restart-s 60 --json
      asynchronous saves (5 s of each 120 s blocks) and 8 hot spares, as JSON
  goodputlab simulate --devices 16384 --device-mtbf-h 45566 --days 54 --interval-min 10 \
      --save-s 60 --save-blocking-s 5 --restore-s 60 --restart-s 300 \
      --recovery in-job --heal-s 60 --replica-groups 2,4,8,16,64
      in-job recovery (torchft): goodput against the number of replica groups, and restart beside it
  goodputlab simulate --devices 1024 --device-mtbf-h 20000 --days 30 --interval-min 30 --save-s 60 \
      --restart-s 600 --failure-dist weibull --weibull-shape 0.7 --domain-size 8 --domain-share 0.3
      failures that cluster after restarts, and 30% of device losses taking a host of 8 at once
"""


@dataclass(frozen=True)
class _Reader:
    """How one flag's text becomes a value: the type, and what is allowed if it cannot."""

    kind: Callable[[str], Any]
    allowed: str


_SECONDS = _Reader(float, "a finite number of seconds >= 0")
_POSITIVE_SECONDS = _Reader(float, "a finite number of seconds > 0")
_AT_LEAST_ONE = _Reader(int, "a whole number >= 1")
_AT_LEAST_ZERO = _Reader(int, "a whole number >= 0")


def _add(parser: argparse.ArgumentParser, flag: str, metavar: str, help: str, **kwargs: Any) -> None:
    """A flag read as text (converted by :func:`_value`), shown in ``--help`` with its unit as metavar."""
    parser.add_argument(flag, metavar=metavar, help=help, **kwargs)


def _value(args: argparse.Namespace, field: str, reader: _Reader) -> Any:
    """The value of ``field`` read from its text (``None`` stays ``None``); an error quoting the text if it is not one."""
    text = getattr(args, field)
    if text is None:
        return None
    try:
        value = reader.kind(ascii_number(text, whole=reader.kind is int))  # no 1_000, no other scripts' digits
    except ValueError:
        raise UnreadableValue(field, text, reader.allowed) from None
    if isinstance(value, float) and math.isnan(value):
        raise ConfigError(field, text, reader.allowed)
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``optimal`` and ``simulate`` sub-commands to ``subparsers``."""
    _register_optimal(subparsers)
    _register_simulate(subparsers)


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
    optimal.add_argument("--json", action="store_true", help="print a JSON object (inputs and results) instead of a table")
    optimal.set_defaults(func=run_optimal)


def _register_simulate(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="Monte Carlo simulation of a long job on N devices",
        description="Simulate a checkpointed job whose devices fail at random; print goodput and where the time went.",
        epilog=SIMULATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add(sim, "--devices", "N", "devices in the job", required=True)
    _add(sim, "--device-mtbf-h", "HOURS", "mean time between failures of one device, hours", required=True)
    _add(sim, "--days", "DAYS", "the job's wall-clock length, days", required=True)
    _add(sim, "--interval-min", "MINUTES", "compute between checkpoints, minutes", required=True)
    _add(sim, "--save-s", "SECONDS", "seconds to persist a checkpoint", required=True)
    _add(sim, "--restart-s", "SECONDS", "seconds from a failure to a ready process", required=True)
    _add(sim, "--trials", "N", "independent simulated runs (default 1000)", default="1000")
    _add(sim, "--seed", "N", "random seed (default 0)", default="0")
    _add(sim, "--save-blocking-s", "SECONDS", "part of a save that blocks training; less than --save-s means async "
         "(default: all of it)", default=None)
    _add(sim, "--restore-s", "SECONDS", "seconds to load a checkpoint after a restart (default 0)", default="0")
    _add(sim, "--startup-s", "SECONDS", "seconds from first launch to first step (default 0)", default="0")
    _add(sim, "--hot-spares", "N", "failures absorbed by warm spares (default 0)", default="0")
    _add(sim, "--spare-restart-s", "SECONDS", "restart seconds while spares last (required with --hot-spares)", default=None)
    _add(sim, "--data-stall-fraction", "SHARE", "share of compute spent waiting for data, 0 to 1 (default 0)", default="0")
    _add_failure_and_recovery_flags(sim)
    sim.add_argument("--json", action="store_true", help="print a JSON object (the configuration and the results)")
    sim.set_defaults(func=run_simulate)


def save_warning(save_s: float, mtbf_s: float) -> str | None:
    """Why the optimum means little when a save costs more than the MTBF (seconds); ``None`` otherwise."""
    if save_s <= mtbf_s:
        return None
    return (f"a save ({_secs(save_s)}) costs more than the MTBF ({_secs(mtbf_s)}): most saves would be cut short by a "
            "failure, so no interval helps much (Young's and Daly's formulas assume a save far shorter than the MTBF); "
            "make saves cheaper (--ckpt async or memory in a run) or the job's MTBF longer")


def _add_failure_and_recovery_flags(sim: argparse.ArgumentParser) -> None:
    """The flags of failure laws, failure domains and in-job recovery (docs/IN_JOB_RECOVERY.md)."""
    _add(sim, "--failure-dist", "LAW", "time between the job's failures: poisson (default) or weibull "
         "(the clock restarts at each failure; needs --weibull-shape)", default="poisson")
    _add(sim, "--weibull-shape", "K", "Weibull shape, 0.2 to 5: below 1 failures cluster after restarts, "
         "1 is Poisson (only with --failure-dist weibull)", default=None)
    _add(sim, "--domain-size", "N", "devices one failure can take at once (a host, a switch), dividing --devices "
         "(default 1)", default="1")
    _add(sim, "--domain-share", "SHARE", "share of device losses that take a whole domain, 0 to 1 "
         "(default 1; only with --domain-size > 1)", default=None)
    _add(sim, "--recovery", "MODE", "restart (default): a failure restarts the whole job from its last checkpoint; "
         "in-job: the failed replica group relaunches and heals from a peer while the others train on (torchft)",
         default="restart")
    _add(sim, "--replica-groups", "G[,G...]", "replica groups of equal size (only with --recovery in-job); "
         "a list such as 2,4,8 prints goodput against the number of groups, beside restart (default 1)", default=None)
    _add(sim, "--min-groups", "N", "the fewest replica groups the job trains on; below it the whole job "
         "restarts from its checkpoint (default 1; only with --recovery in-job)", default=None)
    _add(sim, "--heal-s", "SECONDS", "seconds a relaunched group takes to fetch the live state from a peer "
         "(required with --recovery in-job)", default=None)


def run_optimal(args: argparse.Namespace) -> int:
    """Print Young's, Daly's and the numeric optimum interval with their goodput."""
    save = _value(args, "save_s", _SECONDS)
    mtbf = _value(args, "mtbf_s", _POSITIVE_SECONDS)
    restart = _value(args, "restart_s", _SECONDS)
    optima = _optima(save, restart, mtbf)
    warning = save_warning(save, mtbf)
    if warning:  # one line on stderr: the table still prints, but the formulas are past their range
        print(f"goodputlab optimal: warning: {warning}", file=sys.stderr)
    if args.json:
        inputs = {"save_s": save, "mtbf_s": mtbf, "restart_s": restart}
        print(json.dumps({"inputs": inputs, "optima": optima, **({"warning": warning} if warning else {})}, indent=2))
        return 0
    print(f"save {_secs(save)}, MTBF {_secs(mtbf)}, restart {_secs(restart)}")
    print(f"{'':<18}{'interval':>22}  {'first-order goodput':>19}  {'Daly goodput':>12}")
    for row in optima.values():
        print(f"{row['name']:<18}{_secs(row['interval_s']):>22}  {row['first_order_goodput']:>19.4f}  {row['daly_goodput']:>12.4f}")
    print()
    for line in GOODPUT_LEGEND:
        print(line)
    return 0


def _optima(save: float, restart: float, mtbf: float) -> dict[str, dict[str, Any]]:
    """Young's, Daly's and the numeric optimum: ``{key: {name, interval_s, first_order_goodput, daly_goodput}}``."""
    intervals = {
        "young": ("Young (1974)", theory.young_interval(save, mtbf)),
        "daly": ("Daly (2006)", theory.daly_interval(save, mtbf)),
        "numeric": ("numeric optimum", theory.optimal_interval_numeric(save, restart, mtbf)),
    }
    rows = {}
    for key, (name, interval) in intervals.items():
        if interval > 0:
            first_order = theory.expected_goodput(interval, save, restart, mtbf)
            full = theory.daly_goodput(interval, save, restart, mtbf)
        else:  # free saves: checkpoint continuously, lose only the restarts
            first_order, full = max(0.0, 1.0 - restart / mtbf), math.exp(-restart / mtbf)
        rows[key] = {"name": name, "interval_s": interval, "first_order_goodput": first_order, "daly_goodput": full}
    return rows


def run_simulate(args: argparse.Namespace) -> int:
    """Run the simulator from command-line units; print a table or JSON."""
    groups = _replica_groups(args)
    config = _sim_config(args, groups[0])
    if len(groups) > 1:
        return _print_group_sweep(config, groups, args.json)
    result = simulate(config, tqdm=sys.stderr.isatty())  # a progress bar only where someone watches
    if args.json:
        print(result.to_json(indent=2))
        return 0
    print(
        f"{config.devices:,} devices, device MTBF {float(args.device_mtbf_h):g} h "
        f"(job MTBF {_secs(config.job_mtbf_s)}), {float(args.days):g} days, "
        f"checkpoint every {_secs(config.interval_s)}, {config.trials:,} trials"
    )
    for line in _failure_lines(config):
        print(line)
    print(f"goodput        mean {result.goodput_mean:.4f}   p5 {result.goodput_p5:.4f}   p95 {result.goodput_p95:.4f}")
    print(f"interruptions  mean {result.interruptions_mean:.1f}   (expected {config.expected_failures:.1f})")
    if config.recovery == "in-job" or config.domain_size > 1:
        print(f"job restarts   mean {result.job_restarts_mean:.1f}   devices lost mean {result.devices_lost_mean:.1f}")
    model = _closed_form(config)
    if model is not None and config.recovery == "in-job":
        print(f"closed form    goodput {model.goodput:.4f}   ({theory.in_job.REGIMES[model.regime]})")
    print()
    print(f"{'category':<20}{'seconds':>14}{'hours':>10}{'share':>9}")
    buckets = result.buckets
    for category in CATEGORIES:
        seconds = buckets[category]
        print(f"{category:<20}{seconds:>14,.0f}{seconds / 3600:>10.1f}{seconds / config.duration_s:>9.2%}")
    total = sum(buckets.values())
    print(f"{'total':<20}{total:>14,.0f}{total / 3600:>10.1f}{total / config.duration_s:>9.2%}")
    return 0


def _sim_config(args: argparse.Namespace, replica_groups: int = 1) -> SimConfig:
    """The :class:`SimConfig` the flags describe; errors name the flag and echo its text."""
    # Flags in hours, days and minutes are checked in those units, so the
    # error repeats what the user typed.
    in_units = {}
    for field, unit in (("device_mtbf_h", "hours"), ("days", "days"), ("interval_min", "minutes")):
        value = _value(args, field, _Reader(float, f"a number of {unit} > 0"))
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(field, getattr(args, field), f"a number of {unit} > 0")
        in_units[field] = value
    hot_spares = _value(args, "hot_spares", _AT_LEAST_ZERO)
    if hot_spares is not None and hot_spares > 0 and args.spare_restart_s is None:
        raise ConfigError(
            "hot_spares", args.hot_spares, "only with --spare-restart-s SECONDS (the seconds a hot spare takes to take over)"
        )
    values = {
        "devices": _value(args, "devices", _AT_LEAST_ONE),
        "device_mtbf_s": in_units["device_mtbf_h"] * 3600.0,
        "duration_s": in_units["days"] * 86400.0,
        "interval_s": in_units["interval_min"] * 60.0,
        "hot_spares": hot_spares,
        "data_stall_fraction": _value(args, "data_stall_fraction", _Reader(float, "a share >= 0 and < 1")),
        "trials": _value(args, "trials", _AT_LEAST_ONE),
        "seed": _value(args, "seed", _AT_LEAST_ZERO),
    }
    for field in ("save_s", "save_blocking_s", "restore_s", "restart_s", "startup_s", "spare_restart_s"):
        values[field] = _value(args, field, _SECONDS)
    values.update(_failure_and_recovery_values(args, replica_groups))
    return SimConfig(**values)


_RECOVERIES = ("restart", "in-job")
_SHARE_OF_LOSSES = _Reader(float, "a share between 0 and 1 of device losses that take a whole domain")
_LAWS = ("poisson", "weibull")


def _replica_groups(args: argparse.Namespace) -> list[int]:
    """``--replica-groups`` as a list of group counts (``[1]`` when not given); one line if unreadable."""
    allowed = "a whole number of replica groups >= 1, or a comma-separated list of them such as 2,4,8"
    text = args.replica_groups
    if text is None:
        return [1]
    try:
        groups = [int(part) for part in text.split(",")]
    except ValueError:
        raise UnreadableValue("replica_groups", text, allowed) from None
    if any(g < 1 for g in groups):
        raise ConfigError("replica_groups", text, allowed)
    if len(set(groups)) != len(groups):
        raise ConfigError("replica_groups", text, allowed + ", each once")
    if args.recovery != "in-job":
        raise ConfigError("replica_groups", text, "only with --recovery in-job (in-job recovery works group by group)")
    return groups


def _failure_and_recovery_values(args: argparse.Namespace, replica_groups: int) -> dict[str, Any]:
    """The SimConfig fields of ``--failure-dist`` to ``--heal-s``, with the rules between the flags."""
    if args.failure_dist not in _LAWS:
        raise ConfigError("failure_dist", args.failure_dist, "one of " + ", ".join(_LAWS))
    weibull = args.failure_dist == "weibull"
    if weibull and args.weibull_shape is None:
        raise ConfigError("failure_dist", args.failure_dist, "weibull only with --weibull-shape K (its shape, 0.2 to 5)")
    if not weibull and args.weibull_shape is not None:
        raise ConfigError("weibull_shape", args.weibull_shape, "only with --failure-dist weibull")
    if args.recovery not in _RECOVERIES:
        raise ConfigError("recovery", args.recovery, "one of " + ", ".join(_RECOVERIES))
    in_job = args.recovery == "in-job"
    if in_job and args.heal_s is None:
        raise ConfigError("heal_s", None, "the seconds a relaunched group takes to fetch the live state from a peer "
                                          "(required with --recovery in-job)")
    for flag in ("heal_s", "min_groups"):
        if not in_job and getattr(args, flag) is not None:
            raise ConfigError(flag, getattr(args, flag), "only with --recovery in-job")
    domain_size = _value(args, "domain_size", _AT_LEAST_ONE)
    if args.domain_share is not None and domain_size == 1:
        raise ConfigError("domain_share", args.domain_share,
                          "only with --domain-size > 1 (a domain of one device is no domain)")
    shape = _value(args, "weibull_shape", _Reader(float, "a finite number between 0.2 and 5 (the Weibull shape of the time "
                                                         "between failures: 1 is Poisson)"))
    values = {
        "failure_shape": 1.0 if shape is None else shape,
        "domain_size": domain_size,
        "domain_share": 1.0 if args.domain_share is None else _value(args, "domain_share", _SHARE_OF_LOSSES),
        "recovery": args.recovery,
        "replica_groups": replica_groups,
        "min_groups": 1 if args.min_groups is None else _value(args, "min_groups", _AT_LEAST_ONE),
        "heal_s": _value(args, "heal_s", _SECONDS),
    }
    return values


def _failure_lines(config: SimConfig) -> list[str]:
    """What the table's header says about failure laws, domains and replica groups (nothing for the defaults)."""
    lines = []
    if config.failure_shape != 1.0:
        lines.append(f"failures: Weibull, shape {config.failure_shape:g} (the clock restarts at each failure)")
    if config.domain_size > 1:
        lines.append(
            f"failure domains of {config.domain_size:,} devices take {config.domain_share:.0%} of device losses: "
            f"{config.expected_failures:,.1f} events expected"
        )
    if config.recovery == "in-job":
        lines.append(
            f"in-job recovery: {config.replica_groups:,} replica groups of {config.group_devices:,} devices, "
            f"heal {_secs(config.heal_s)}, the job restarts below {config.min_groups} group(s)"
        )
    return lines


def _closed_form(config: SimConfig) -> Any:
    """:func:`goodputlab.theory.in_job.predict` where the closed form covers ``config``, else ``None``."""
    if config.failure_shape != 1.0 or config.domain_size > 1 or config.hot_spares > 0 or math.isinf(config.job_mtbf_s):
        return None
    return theory.in_job.predict(config)


def _print_group_sweep(config: SimConfig, groups: list[int], as_json: bool) -> int:
    """Goodput against the number of replica groups, restart beside it: a table or JSON."""
    results = theory.sweep_replica_groups(config, groups)
    rows = theory.sweep_rows(results)
    for row, result in zip(rows, results):
        model = _closed_form(result.config)
        row["closed_form_goodput"] = None if model is None else model.goodput
        row["closed_form_regime"] = None if model is None else model.regime
    if as_json:
        print(json.dumps({"config": config.to_dict(), "rows": rows}, indent=2))
        return 0
    print(
        f"{config.devices:,} devices, job MTBF {_secs(config.job_mtbf_s)}, {config.duration_s / 86400:g} days, "
        f"checkpoint every {_secs(config.interval_s)}, heal {_secs(config.heal_s)}, {config.trials:,} trials"
    )
    for line in _failure_lines(config)[:-1]:
        print(line)
    print(f"{'recovery':<12}{'devices/group':>14}{'goodput':>9}{'+-':>8}{'p5':>8}{'job restarts':>13}"
          f"{'degraded':>10}{'heal':>8}{'lost':>8}{'restart':>9}{'closed form':>12}")
    for row, result in zip(rows, results):
        heal = row["share_checkpoint_restore"] if row["recovery"] == "in-job" else 0.0
        model = "" if row["closed_form_goodput"] is None else f"{row['closed_form_goodput']:.4f}"
        print(
            f"{row['label']:<12}{result.config.group_devices:>14,}{row['goodput_mean']:>9.4f}"
            f"{2 * row['goodput_stderr']:>8.4f}{row['goodput_p5']:>8.4f}{row['job_restarts_mean']:>13.1f}"
            f"{row['share_degraded']:>10.2%}{heal:>8.2%}{row['share_lost_work']:>8.2%}"
            f"{row['share_restart']:>9.2%}{model:>12}"
        )
    print()
    print("+- two standard errors of the mean goodput; degraded, heal, lost and restart are shares of the wall time")
    print("(heal: the in-job rows' checkpoint_restore, a relaunched group fetching the live state from a peer)")
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
