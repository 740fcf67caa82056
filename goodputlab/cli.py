"""The command line: ``goodputlab run``, ``goodputlab optimal``, ``goodputlab simulate``.

Bad input exits with code 2 and one line naming the flag, the value and what is
allowed. Exit codes of ``run``: 0 completed, 1 the worker crashed, 2 bad input,
3 stopped by the failure budget, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import __version__, cli_report, cli_theory
from .errors import ConfigError
from .workload import PRESETS

EXIT_OK, EXIT_CRASH, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump) and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _typed(kind, allowed: str):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: {allowed}") from None

    parse.__name__ = kind.__name__
    return parse


def _ckpt_every(text: str) -> int | str:
    """``--ckpt-every``: a whole number of steps, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: a whole number of steps or auto") from None


def _steps_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: comma-separated step numbers, e.g. 30,80") from None


def _add_run(sub) -> None:
    r = sub.add_parser(
        "run",
        help="run a real training job with checkpoints, failures and a slow input pipeline",
        description="Train a small GPT in a worker process that is killed at random and restarted; "
        "book every second of wall time and print where it went.",
    )
    INT = _typed(int, "a whole number")
    NUM = _typed(float, "a number")
    g = r.add_argument_group("training")
    g.add_argument("--steps", type=INT, default=400, help="training steps to complete (default 400)")
    g.add_argument("--model", default="tiny", help=f"size preset: {', '.join(PRESETS)} (default tiny)")
    g.add_argument("--batch-size", type=INT, default=None, help="sequences per step (default: the preset's)")
    g.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto: CUDA when present)")
    g.add_argument("--seed", type=INT, default=0, help="seeds model, data, order and failure times (default 0)")
    g.add_argument("--threads", type=INT, default=None, help="torch threads in the worker (default: torch's)")
    g = r.add_argument_group("checkpoints")
    g.add_argument(
        "--ckpt-every", type=_ckpt_every, default=50,
        help="save every N steps; 0: final save only; auto: Daly's interval from measured save cost and failures (default 50)",
    )
    g.add_argument("--ckpt-every-s", type=NUM, default=None, help="also save every S seconds")
    g.add_argument("--ckpt", default="sync", help="checkpoint strategy: sync, async, dcp or memory (default sync)")
    g.add_argument(
        "--memory-disk-every", type=INT, default=4, help="with --ckpt memory: also write every K-th save to disk (default 4)"
    )
    g.add_argument("--keep", type=INT, default=3, help="checkpoints kept on disk (default 3)")
    g = r.add_argument_group("failures")
    g.add_argument("--mtbf", type=NUM, default=0.0, help="mean seconds between failures; 0: none (default 0)")
    g.add_argument("--kill-at-steps", type=_steps_list, default=(), help="also kill after these steps, e.g. 30,80")
    g.add_argument("--restart-delay", type=NUM, default=0.5, help="seconds before relaunch (default 0.5)")
    g.add_argument("--max-failures", type=INT, default=50, help="failures absorbed before giving up (default 50)")
    g = r.add_argument_group("input pipeline")
    g.add_argument("--workers", type=INT, default=0, help="DataLoader worker processes (default 0)")
    g.add_argument("--prefetch", type=INT, default=None, help="batches per worker loaded ahead (needs --workers)")
    g.add_argument("--io-latency-ms", type=NUM, default=0.0, help="emulated storage latency per batch, ms")
    g.add_argument("--io-jitter", type=NUM, default=0.0, help="coefficient of variation of that latency")
    g.add_argument("--transform-ms", type=NUM, default=0.0, help="CPU transform cost per batch, ms")
    g.add_argument("--pin-memory", action="store_true", help="pin host batches (CUDA only)")
    g.add_argument("--persistent-workers", action="store_true", help="keep DataLoader workers between epochs")
    g.add_argument(
        "--device-prefetch", action="store_true", help="copy the next batch to the GPU while a step runs (CUDA only)"
    )
    g = r.add_argument_group("output")
    g.add_argument("--out", type=Path, default=None, help="directory for results (default runs/<time>)")
    g.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .config import RunConfig

    config = RunConfig(
        steps=args.steps,
        model=args.model,
        batch_size=args.batch_size,
        device=args.device,
        seed=args.seed,
        threads=args.threads,
        ckpt_every=args.ckpt_every,
        ckpt_every_s=args.ckpt_every_s,
        ckpt=args.ckpt,
        keep=args.keep,
        memory_disk_every=args.memory_disk_every,
        mtbf=args.mtbf,
        kill_at_steps=args.kill_at_steps,
        restart_delay=args.restart_delay,
        max_failures=args.max_failures,
        workers=args.workers,
        prefetch=args.prefetch,
        io_latency_ms=args.io_latency_ms,
        io_jitter=args.io_jitter,
        transform_ms=args.transform_ms,
        pin_memory=args.pin_memory,
        persistent_workers=args.persistent_workers,
        device_prefetch=args.device_prefetch,
    )
    if config.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device", "cuda", "auto or cpu: torch sees no CUDA device here")
    from .api import run
    from .report import breakdown_table
    from .supervisor import WorkerCrashed

    out = args.out if args.out is not None else Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    try:
        result = run(config, out=out, progress=not args.quiet)
    except WorkerCrashed as e:
        print(f"goodputlab run: the training worker crashed (exit code {e.returncode}); log: {e.log}", file=sys.stderr)
        print(e.tail, file=sys.stderr)
        return EXIT_CRASH
    summary = result.summary
    print(json.dumps(summary, indent=1) if args.json else breakdown_table(summary))
    if not args.json:
        print(f"\nresults in {out}/ (summary.json, events.jsonl)")
    return EXIT_OK if summary["completed"] else EXIT_INCOMPLETE


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="goodputlab", description="Measure, model and teach training goodput.")
    p.add_argument("--version", action="version", version=f"goodputlab {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub)
    cli_theory.register(sub)
    cli_report.register(sub)
    return p


def _flag(field: str) -> str:
    return cli_theory.FLAGS.get(field, "--" + field.replace("_", "-"))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"goodputlab {args.command}: error: {_flag(e.field)} {e.value!s} is invalid; allowed: {e.allowed}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"goodputlab {args.command}: interrupted; no process left running", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
