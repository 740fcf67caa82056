"""CLI sub-command for statistical efficiency: ``goodputlab batch-sweep``.

The main CLI calls :func:`register` with its sub-parsers. Bad input raises
:class:`~goodputlab.errors.ConfigError`, which the main CLI prints as one line and
exits with 2; :data:`FLAGS` maps the error's ``field`` to the flag the user typed
(each field of :class:`~goodputlab.efficiency.sweep_config.SweepConfig` is named after its
flag, so the main CLI's default mapping gives the same flag; a test checks both agree).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goodputlab.efficiency.analysis import report

from goodputlab.efficiency.noise import LR_RULES

from goodputlab.efficiency.sweep_config import DEFAULT_BATCH_SIZES, DEFAULT_TARGET_LOSS, SweepConfig, parse_batch_sizes
from goodputlab.training.workload import PRESETS

#: ConfigError.field -> command-line flag.
FLAGS: dict[str, str] = {
    "batch_sizes": "--batch-sizes",
    "target_loss": "--target-loss",
    "lr_rule": "--lr-rule",
    "lr": "--lr",
    "max_steps": "--max-steps",
    "model": "--model",
    "seed": "--seed",
    "threads": "--threads",
    "timed_steps": "--timed-steps",
    "warmup_steps": "--warmup-steps",
    "rounds": "--rounds",
    "eval_sequences": "--eval-sequences",
    "eval_growth": "--eval-growth",
    "noise_window": "--noise-window",
    "pool_sequences": "--pool-sequences",
    "out": "--out",
}

_DEFAULTS = SweepConfig()


def _typed(kind, allowed: str):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: {allowed}") from None

    parse.__name__ = kind.__name__
    return parse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``batch-sweep`` sub-command to ``subparsers``."""
    INT = _typed(int, "a whole number")
    NUM = _typed(float, "a number")
    p = subparsers.add_parser(
        "batch-sweep",
        help="train at several batch sizes to a target loss: throughput, statistical efficiency, goodput (Pollux)",
        description="Train the lab's GPT at each batch size until a held-out loss reaches the target; measure "
        "throughput, steps and samples to the target, statistical efficiency against the smallest batch, the "
        "gradient noise scale, and goodput = throughput x efficiency.",
    )
    p.add_argument(
        "--batch-sizes", default=",".join(map(str, DEFAULT_BATCH_SIZES)),
        help=f"comma-separated even batch sizes, sequences per step (default {','.join(map(str, DEFAULT_BATCH_SIZES))})",
    )
    p.add_argument(
        "--target-loss", type=NUM, default=DEFAULT_TARGET_LOSS,
        help=f"held-out loss to reach, nats per token, between the source's entropy and ln(vocab) (default {DEFAULT_TARGET_LOSS})",
    )
    p.add_argument("--lr-rule", default=_DEFAULTS.lr_rule, help=f"learning rate against batch size: {', '.join(LR_RULES)} (default {_DEFAULTS.lr_rule})")
    p.add_argument("--lr", type=NUM, default=_DEFAULTS.lr, help=f"AdamW learning rate at the smallest batch size (default {_DEFAULTS.lr:g})")
    p.add_argument("--max-steps", type=INT, default=_DEFAULTS.max_steps, help=f"step budget per batch size (default {_DEFAULTS.max_steps})")
    p.add_argument("--model", default=_DEFAULTS.model, help=f"size preset: {', '.join(PRESETS)} (default {_DEFAULTS.model})")
    p.add_argument("--seed", type=INT, default=_DEFAULTS.seed, help="seeds model, data and order (default 0)")
    p.add_argument("--threads", type=INT, default=_DEFAULTS.threads, help=f"torch threads (default {_DEFAULTS.threads})")
    g = p.add_argument_group("measurement")
    g.add_argument("--timed-steps", type=INT, default=_DEFAULTS.timed_steps, help=f"steps timed per batch size and round (default {_DEFAULTS.timed_steps})")
    g.add_argument("--warmup-steps", type=INT, default=_DEFAULTS.warmup_steps, help=f"untimed steps before them (default {_DEFAULTS.warmup_steps})")
    g.add_argument("--rounds", type=INT, default=_DEFAULTS.rounds, help=f"interleaved timing rounds (default {_DEFAULTS.rounds})")
    g.add_argument("--eval-sequences", type=INT, default=_DEFAULTS.eval_sequences, help=f"held-out sequences (default {_DEFAULTS.eval_sequences})")
    g.add_argument("--eval-growth", type=NUM, default=_DEFAULTS.eval_growth, help=f"held-out loss measured at steps growing by this factor (default {_DEFAULTS.eval_growth})")
    g.add_argument("--noise-window", type=NUM, default=_DEFAULTS.noise_window, help=f"samples the noise-scale estimate averages over (default {_DEFAULTS.noise_window:g})")
    g.add_argument("--pool-sequences", type=INT, default=_DEFAULTS.pool_sequences, help=f"training sequences generated (default {_DEFAULTS.pool_sequences})")
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print the analysis as one JSON object instead of the table")
    g.add_argument("--out", type=Path, default=None, help="also write every measurement (loss curves, step times) to this JSON file")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_batch_sweep)


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    """The :class:`SweepConfig` the flags describe (raises ConfigError naming the field)."""
    return SweepConfig(
        batch_sizes=parse_batch_sizes(args.batch_sizes),
        target_loss=args.target_loss,
        lr_rule=args.lr_rule,
        lr=args.lr,
        max_steps=args.max_steps,
        model=args.model,
        seed=args.seed,
        threads=args.threads,
        timed_steps=args.timed_steps,
        warmup_steps=args.warmup_steps,
        rounds=args.rounds,
        eval_sequences=args.eval_sequences,
        eval_growth=args.eval_growth,
        noise_window=args.noise_window,
        pool_sequences=args.pool_sequences,
    )


def _check_writable(path: Path) -> None:
    """Fail before minutes of training, not after, if the results cannot be written to ``path``."""
    from goodputlab.errors import ConfigError

    if str(path).startswith("-"):
        raise ConfigError("out", str(path), "a file path (one that starts with '-' reads as a flag: write ./" + str(path) + ")")
    if path.is_dir():
        raise ConfigError("out", str(path), "a file path for the JSON results, not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as e:
        raise ConfigError("out", str(path), f"a writable file path ({e.strerror})") from None


def run_batch_sweep(args: argparse.Namespace) -> int:
    config = config_from_args(args)  # validate everything before importing torch
    if args.out is not None:
        _check_writable(args.out)
    from goodputlab.efficiency.sweep import SweepBar, run_sweep

    bar = None if args.quiet else SweepBar(config)
    try:
        result = run_sweep(config, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    analysis = result.analyse()
    if args.out is not None:
        args.out.write_text(json.dumps({"result": result.to_dict(), "analysis": analysis.to_json()}, indent=1))
    if args.json:
        print(json.dumps(analysis.to_json(), indent=1))
    else:
        print(report(result, analysis))
        if args.out is not None:
            print(f"\nevery measurement in {args.out}")
    return 0
