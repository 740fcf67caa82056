"""``goodputlab simulate``: the cluster-scale Monte Carlo simulator from the command line.

Flags in the units people use (devices, hours, days, minutes, seconds, shares), read as text
(:mod:`goodputlab.cli.theory_read`) into a :class:`~goodputlab.theory.SimConfig`. The failure rate
comes as papers give it: a device MTBF (``--device-mtbf-h``) or failures per 1,000 node-days with
the GPUs of a node (``--node-failures-per-1000-days``, ``--gpus-per-node``), and a per-job part
(``--job-failures-per-day``). The table and ``--json`` give goodput and the effective training time
ratio side by side, each defined under the table (``definitions`` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .. import theory
from ..categories import CATEGORIES
from ..errors import ConfigError
from ..theory import SimConfig, failure_rates, simulate
from ..theory.jit import restart_goodput
from .common import UnreadableValue
from .theory_read import (
    AT_LEAST_ONE as _AT_LEAST_ONE,
    AT_LEAST_ZERO as _AT_LEAST_ZERO,
    DEFINITIONS,
    SECONDS as _SECONDS,
    Reader as _Reader,
    add as _add,
    definition_lines,
    read_value as _value,
    secs as _secs,
)

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
      --recovery in-job --heal-s 60 --replica-groups 2,4,8,16,64 --collective-timeout-s 60
      in-job recovery (torchft): goodput against the number of replica groups, and restart beside it;
      every failure stalls the groups for torchft's 60 s collective timeout
  goodputlab simulate --devices 16384 --node-failures-per-1000-days 4.21 --days 54 --interval-min 10 \
      --save-s 60 --restart-s 300 --queue-s 600 --jit-share 0.8 --jit-save-s 20 --step-s 6
      Llama 3's rate as papers give it (per 1,000 node-days of 8 GPUs), 10 minutes queued after each
      failure, and just-in-time checkpoints for 80% of failures
  goodputlab simulate --devices 1024 --device-mtbf-h 20000 --days 30 --interval-min 30 --save-s 60 \
      --restart-s 600 --failure-dist weibull --weibull-shape 0.7 --domain-size 8 --domain-share 0.3
      failures that cluster after restarts, and 30% of device losses taking a host of 8 at once
"""

def register_simulate(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="Monte Carlo simulation of a long job on N devices",
        description="Simulate a checkpointed job whose devices fail at random; print goodput and where the time went.",
        epilog=SIMULATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add(sim, "--devices", "N", "devices in the job", required=True)
    _add(sim, "--device-mtbf-h", "HOURS", "mean time between failures of one device, hours (or give "
         "--node-failures-per-1000-days)", default=None)
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
    _add_papers_flags(sim)
    _add_failure_and_recovery_flags(sim)
    sim.add_argument("--json", action="store_true", help="print a JSON object (the configuration and the results)")
    sim.set_defaults(func=run_simulate)

def _add_papers_flags(sim: argparse.ArgumentParser) -> None:
    """The parameters papers use: rates per node-day, a per-job rate, a queue, just-in-time checkpoints."""
    _add(sim, "--node-failures-per-1000-days", "R", "the failure rate as papers give it, failures per 1,000 node-days "
         "(Kokolis et al.: 6.50 on RSC-1); instead of --device-mtbf-h", default=None)
    _add(sim, "--gpus-per-node", "N", "GPUs of a node, with --node-failures-per-1000-days (default 8)", default=None)
    _add(sim, "--job-failures-per-day", "R", "failures a day that do not grow with the devices: the job's own "
         "(default 0)", default="0")
    _add(sim, "--queue-s", "SECONDS", "seconds waiting to be scheduled again after each failure; no failure strikes "
         "a queued job (Kokolis et al.'s q; default 0)", default="0")
    _add(sim, "--jit-share", "SHARE", "share of failures a just-in-time checkpoint covers, 0 to 1: a save after the "
         "failure is detected keeps all but the step in flight (restart only; default 0)", default="0")
    _add(sim, "--jit-save-s", "SECONDS", "seconds the just-in-time save takes (with --jit-share; default 0)", default="0")
    _add(sim, "--step-s", "SECONDS", "seconds of one training step: a just-in-time checkpoint loses the step in flight "
         "(default 0)", default="0")


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
    _add(sim, "--collective-timeout-s", "SECONDS", "seconds every group stalls in a collective until a dead peer's "
         "timeout finds it (torchft's default: 60; only with --recovery in-job; default 0)", default=None)
    _add(sim, "--step-overhead", "SHARE", "share of every step that in-job recovery spends on its quorum, commit and "
         "cross-group all-reduce, 0 to 1 (only with --recovery in-job; default 0)", default=None)

def run_simulate(args: argparse.Namespace) -> int:
    """Run the simulator from command-line units; print a table or JSON."""
    groups = _replica_groups(args)
    config = _sim_config(args, groups[0])
    if len(groups) > 1:
        return _print_group_sweep(config, groups, args.json)
    result = simulate(config, tqdm=sys.stderr.isatty())  # a progress bar only where someone watches
    model = _closed_form(config)
    if args.json:
        data = result.to_dict()
        data["closed_form"] = None if model is None else {"goodput": model[0], "ettr": model[1], "model": model[2]}
        data["definitions"] = DEFINITIONS
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{config.devices:,} devices, {_rate_words(config)}; job MTBF {_secs(config.job_mtbf_s)}, "
        f"{float(args.days):g} days, checkpoint every {_secs(config.interval_s)}, {config.trials:,} trials"
    )
    for line in _failure_lines(config):
        print(line)
    print(f"goodput        mean {result.goodput_mean:.4f}   p5 {result.goodput_p5:.4f}   p95 {result.goodput_p95:.4f}")
    print(f"ETTR           mean {result.ettr_mean:.4f}   p5 {_percentile(result.ettr, 5):.4f}   "
          f"p95 {_percentile(result.ettr, 95):.4f}")
    print(f"interruptions  mean {result.interruptions_mean:.1f}   (expected {config.expected_failures:.1f})")
    if config.recovery == "in-job" or config.domain_size > 1:
        print(f"job restarts   mean {result.job_restarts_mean:.1f}   devices lost mean {result.devices_lost_mean:.1f}")
    if config.queue_s > 0:
        print(f"queued         mean {_secs(result.queue_s_mean)} (booked as restart)")
    if model is not None:
        ettr = "" if model[1] is None else f"   ETTR {model[1]:.4f}"
        print(f"closed form    goodput {model[0]:.4f}{ettr}   ({model[2]})")
    print()
    print(f"{'category':<20}{'seconds':>14}{'hours':>10}{'share':>9}")
    buckets = result.buckets
    for category in CATEGORIES:
        seconds = buckets[category]
        print(f"{category:<20}{seconds:>14,.0f}{seconds / 3600:>10.1f}{seconds / config.duration_s:>9.2%}")
    total = sum(buckets.values())
    print(f"{'total':<20}{total:>14,.0f}{total / 3600:>10.1f}{total / config.duration_s:>9.2%}")
    print()
    for line in definition_lines():
        print(line)
    return 0


def _percentile(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q))


def _sim_config(args: argparse.Namespace, replica_groups: int = 1) -> SimConfig:
    """The :class:`SimConfig` the flags describe; errors name the flag and echo its text."""
    # Flags in hours, days and minutes are checked in those units, so the
    # error repeats what the user typed.
    in_units = {}
    for field, unit in (("days", "days"), ("interval_min", "minutes")):
        in_units[field] = _positive(args, field, unit)
    hot_spares = _value(args, "hot_spares", _AT_LEAST_ZERO)
    if hot_spares is not None and hot_spares > 0 and args.spare_restart_s is None:
        raise ConfigError(
            "hot_spares", args.hot_spares, "only with --spare-restart-s SECONDS (the seconds a hot spare takes to take over)"
        )
    values = {
        "devices": _value(args, "devices", _AT_LEAST_ONE),
        "device_mtbf_s": _device_mtbf_s(args),
        "duration_s": in_units["days"] * 86400.0,
        "interval_s": in_units["interval_min"] * 60.0,
        "hot_spares": hot_spares,
        "data_stall_fraction": _value(args, "data_stall_fraction", _Reader(float, "a share >= 0 and < 1")),
        "trials": _value(args, "trials", _AT_LEAST_ONE),
        "seed": _value(args, "seed", _AT_LEAST_ZERO),
        "job_failure_rate_per_s": _job_rate_per_s(args),
        "jit_share": _value(args, "jit_share", _Reader(float, "a share between 0 and 1")),
    }
    for field in ("save_s", "save_blocking_s", "restore_s", "restart_s", "startup_s", "spare_restart_s", "queue_s",
                  "jit_save_s", "step_s"):
        values[field] = _value(args, field, _SECONDS)
    values.update(_failure_and_recovery_values(args, replica_groups))
    return SimConfig(**values)


_RATE = _Reader(float, "a finite number of failures a day >= 0 (a rate that does not grow with the devices)")


def _job_rate_per_s(args: argparse.Namespace) -> float:
    per_day = _value(args, "job_failures_per_day", _RATE)
    if not (math.isfinite(per_day) and per_day >= 0):
        raise ConfigError("job_failures_per_day", args.job_failures_per_day, _RATE.allowed)
    return per_day / 86400.0


def _positive(args: argparse.Namespace, field: str, unit: str) -> float:
    value = _value(args, field, _Reader(float, f"a number of {unit} > 0"))
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(field, getattr(args, field), f"a number of {unit} > 0")
    return value


def _device_mtbf_s(args: argparse.Namespace) -> float:
    """The per-device MTBF of ``--device-mtbf-h``, or of ``--node-failures-per-1000-days`` and ``--gpus-per-node``."""
    by_node = args.node_failures_per_1000_days
    if (args.device_mtbf_h is None) == (by_node is None):
        raise ConfigError("device_mtbf_h", args.device_mtbf_h,
                          "a number of hours > 0, or instead --node-failures-per-1000-days R (exactly one of the two)")
    if by_node is None:
        if args.gpus_per_node is not None:
            raise ConfigError("gpus_per_node", args.gpus_per_node, "only with --node-failures-per-1000-days")
        return _positive(args, "device_mtbf_h", "hours") * 3600.0
    rate = _positive(args, "node_failures_per_1000_days", "failures per 1,000 node-days")
    gpus = 8 if args.gpus_per_node is None else _value(args, "gpus_per_node", _AT_LEAST_ONE)
    if gpus < 1:
        raise ConfigError("gpus_per_node", args.gpus_per_node, _AT_LEAST_ONE.allowed)
    return failure_rates.device_mtbf_from_node_rate(rate, gpus)


def _rate_words(config: SimConfig) -> str:
    """The failure rate in the header: per device, per 1,000 node-days, and the per-job part."""
    per_device = config.device_mtbf_s
    words = "no failures" if per_device is None or math.isinf(per_device) else (
        f"device MTBF {per_device / 3600:,.0f} h ({failure_rates.node_rate_from_device_mtbf(per_device):.3g} failures per "
        "1,000 node-days of 8 GPUs)")
    if config.job_failure_rate_per_s:
        words += f" and {config.job_failure_rate_per_s * 86400:.3g} failures a day per job"
    return words


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
    for flag in ("heal_s", "min_groups", "collective_timeout_s", "step_overhead"):
        if not in_job and getattr(args, flag) is not None:
            raise ConfigError(flag, getattr(args, flag), "only with --recovery in-job")
    jit = _value(args, "jit_share", _Reader(float, "a share between 0 and 1"))
    if in_job and jit:
        raise ConfigError("jit_share", args.jit_share, "0 with --recovery in-job (a just-in-time save restarts the whole job)")
    if not jit and _value(args, "jit_save_s", _SECONDS):
        raise ConfigError("jit_save_s", args.jit_save_s, "only with --jit-share above 0 (the failures a just-in-time save covers)")
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
        "collective_timeout_s": _value(args, "collective_timeout_s", _SECONDS) or 0.0,
        "step_overhead_share": _value(args, "step_overhead", _Reader(float, "a share >= 0 and < 1")) or 0.0,
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
    if config.queue_s > 0:
        lines.append(f"a queue of {_secs(config.queue_s)} after each failure that stops the job (no failure strikes it)")
    if config.jit_share > 0:
        lines.append(f"just-in-time checkpoints cover {config.jit_share:.0%} of failures: a save of "
                     f"{_secs(config.jit_save_s)} after detection, losing the step in flight ({_secs(config.step_s)} a step)")
    if config.recovery == "in-job":
        costs = ""
        if config.collective_timeout_s or config.step_overhead_share:
            costs = (f"; a {_secs(config.collective_timeout_s)} collective timeout stalls every group after a failure, "
                     f"{config.step_overhead_share:.1%} of each step is in-job overhead")
        lines.append(
            f"in-job recovery: {config.replica_groups:,} replica groups of {config.group_devices:,} devices, "
            f"heal {_secs(config.heal_s)}, the job restarts below {config.min_groups} group(s){costs}"
        )
    return lines


def _closed_form(config: SimConfig) -> tuple[float, float | None, str] | None:
    """``(goodput, ETTR, what it is)`` of the closed form that covers ``config`` (Poisson failures, one
    device each, no hot spares), else ``None``: :func:`goodputlab.theory.jit.restart_goodput` for a
    restart (its ETTR too), :func:`goodputlab.theory.in_job.predict` for in-job recovery (goodput only)."""
    if config.failure_shape != 1.0 or config.domain_size > 1 or config.hot_spares > 0 or math.isinf(config.job_mtbf_s):
        return None
    if config.recovers_in_job or config.recovery == "in-job":
        model = theory.in_job.predict(config)
        return model.goodput, None, theory.in_job.REGIMES[model.regime]
    model = restart_goodput(config.interval_s, config.blocking_save_s, config.restart_s + config.restore_s,
                            config.job_mtbf_s, durable_lag_s=config.save_s if config.is_async else 0.0,
                            queue_s=config.queue_s, jit_share=config.jit_share, jit_save_s=config.jit_save_s,
                            step_s=config.step_s)
    factor = (1.0 - config.data_stall_fraction) * (1.0 - config.straggler_wait_share)
    return model.goodput * factor, model.ettr, "the restart model's exact form for Poisson failures (theory.jit)"


def _print_group_sweep(config: SimConfig, groups: list[int], as_json: bool) -> int:
    """Goodput against the number of replica groups, restart beside it: a table or JSON."""
    results = theory.sweep_replica_groups(config, groups)
    rows = theory.sweep_rows(results)
    for row, result in zip(rows, results):
        model = None if _closed_form(result.config) is None else theory.in_job.predict(result.config)
        row["closed_form_goodput"] = None if model is None else model.goodput
        row["closed_form_regime"] = None if model is None else model.regime
    if as_json:
        print(json.dumps({"config": config.to_dict(), "rows": rows, "definitions": DEFINITIONS}, indent=2))
        return 0
    print(
        f"{config.devices:,} devices, job MTBF {_secs(config.job_mtbf_s)}, {config.duration_s / 86400:g} days, "
        f"checkpoint every {_secs(config.interval_s)}, heal {_secs(config.heal_s)}, {config.trials:,} trials"
    )
    for line in _failure_lines(config)[:-1]:
        print(line)
    print(f"{'recovery':<12}{'devices/group':>14}{'goodput':>9}{'+-':>8}{'p5':>8}{'ETTR':>8}{'job restarts':>13}"
          f"{'degraded':>10}{'heal':>8}{'lost':>8}{'restart':>9}{'closed form':>12}")
    for row, result in zip(rows, results):
        heal = row["share_checkpoint_restore"] if row["recovery"] == "in-job" else 0.0
        model = "" if row["closed_form_goodput"] is None else f"{row['closed_form_goodput']:.4f}"
        print(
            f"{row['label']:<12}{result.config.group_devices:>14,}{row['goodput_mean']:>9.4f}"
            f"{2 * row['goodput_stderr']:>8.4f}{row['goodput_p5']:>8.4f}{row['ettr_mean']:>8.4f}"
            f"{row['job_restarts_mean']:>13.1f}"
            f"{row['share_degraded']:>10.2%}{heal:>8.2%}{row['share_lost_work']:>8.2%}"
            f"{row['share_restart']:>9.2%}{model:>12}"
        )
    print()
    print("+- two standard errors of the mean goodput; degraded, heal, lost and restart are shares of the wall time")
    print("(heal: the in-job rows' checkpoint_restore, a relaunched group fetching the live state from a peer)")
    for line in definition_lines():
        print(line)
    return 0
