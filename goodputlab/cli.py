"""The command line: ``goodputlab run``, ``goodputlab optimal``, ``goodputlab simulate``.

Bad input exits with code 2 and one line naming the flag, the value and what is
allowed (every case: ``docs/BAD_INPUT.md``). Exit codes of ``run``: 0 completed,
1 the worker crashed (or the run could not write its files), 2 bad input,
3 stopped by the failure budget, 128 + the signal when stopped by one: 130 Ctrl-C
(SIGINT), 143 SIGTERM, 129 SIGHUP. All three stop a run the same way: no process
left, the RAM tier removed, the summary written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

from . import __version__, cli_efficiency, cli_report, cli_serving, cli_theory
from .errors import ConfigError, RunFileError
from .interrupts import RunInterrupted, StopSignals
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
    g.add_argument(
        "--out",
        default=None,
        help="folder for results (default runs/<time>): new, empty, or holding an earlier goodputlab run",
    )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="use an --out folder that holds other files, replacing goodputlab's own files there",
    )
    g.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its newest valid checkpoint"
    )
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
        overwrite=args.overwrite,
    )
    if config.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device", "cuda", "auto or cpu: torch sees no CUDA device here")
    from .api import run
    from .checkpoint import CheckpointWarning
    from .events import EventLogWarning
    from .report import breakdown_table
    from .supervisor import WorkerCrashed

    if args.resume and args.out is None:
        raise ConfigError("resume", "without --out", "--resume with --out naming the folder of the run to continue")
    out = args.out if args.out is not None else str(Path("runs") / time.strftime("run-%Y%m%d-%H%M%S"))
    try:
        with warnings.catch_warnings():
            # a skipped checkpoint is news the user must see, each time, as one line
            warnings.simplefilter("always", CheckpointWarning)
            warnings.simplefilter("always", EventLogWarning)
            warnings.showwarning = _show_warning
            result = run(config, out=out, progress=not args.quiet, resume=args.resume)
    except WorkerCrashed as e:
        print(f"goodputlab run: the training worker crashed (exit code {e.returncode}); log: {e.log}", file=sys.stderr)
        if e.disk_full:  # not a bug: say so plainly; the worker's traceback is in its log
            last = e.tail.strip().splitlines()[-1] if e.tail.strip() else ""
            print(f"goodputlab run: {last}", file=sys.stderr)
            print(
                f"goodputlab run: the disk that holds {out} is full; the checkpoints committed before are intact "
                "(free some space, then continue with --resume)",
                file=sys.stderr,
            )
        else:
            print(e.tail, file=sys.stderr)
        _print_notes(e)
        return EXIT_CRASH
    except RunInterrupted as e:
        print(f"goodputlab run: interrupted ({e.signal_name}); no process left running; results in {out}/", file=sys.stderr)
        _print_notes(e)
        return e.exit_code
    except (OSError, RunFileError) as e:  # the run's own files: a full disk, a damaged log
        print(f"goodputlab run: error: {_one_line(e)}", file=sys.stderr)
        _print_notes(e)
        return EXIT_CRASH
    summary = result.summary
    print(json.dumps(summary, indent=1) if args.json else breakdown_table(summary))
    if not args.json:
        print(f"\nresults in {out}/ (summary.json, events.jsonl)")
    return EXIT_OK if summary["completed"] else EXIT_INCOMPLETE


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line each, above the progress bar (tqdm.write keeps the bar intact)."""
    from tqdm import tqdm

    tqdm.write(f"goodputlab run: warning: {message}", file=sys.stderr)


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}{f': {e.filename}' if e.filename else ''}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _print_notes(e: BaseException) -> None:
    for note in getattr(e, "__notes__", ()):
        print(note, file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="goodputlab", description="Measure, model and teach training goodput.")
    p.add_argument("--version", action="version", version=f"goodputlab {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub)
    cli_theory.register(sub)
    cli_efficiency.register(sub)
    cli_serving.register(sub)
    cli_report.register(sub)
    return p


def _as_typed(argv: list[str], flag: str, value: object) -> str:
    """The value of ``flag`` as the user typed it (``" 0"``, not the parsed ``0.0``), with its leading
    space; ``""`` for a switch; ``" (not given)"`` for a setting the flag never named."""
    if isinstance(value, bool):
        return ""
    typed = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            typed = argv[i + 1]
        elif arg.startswith(flag + "="):
            typed = arg[len(flag) + 1 :]
    if typed is not None:
        return " " + (typed if typed != "" else "''")
    return " (not given)" if value is None else f" {value!s}"


def _flag(field: str, flags: dict[str, str] | None = None) -> str:
    """The flag of a ConfigError's field: from the sub-command's own ``flags`` default when it sets one."""
    return (flags if flags is not None else cli_theory.FLAGS).get(field, "--" + field.replace("_", "-"))


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (``None``: this process's own, as the ``goodputlab`` program,
    which then also ignores stop signals after the first one until it has exited)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # SIGTERM and SIGHUP end a command as Ctrl-C does; a second signal waits for the cleanup
        with StopSignals(linger=argv is None):
            return args.func(args)
    except ConfigError as e:
        flag = _flag(e.field, getattr(args, "flags", None))
        shown = _as_typed(sys.argv[1:] if argv is None else argv, flag, e.value)
        print(f"goodputlab {args.command}: error: {flag}{shown} is invalid; allowed: {e.allowed}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        name = f" ({e.signal_name})" if isinstance(e, RunInterrupted) else ""
        print(f"goodputlab {args.command}: interrupted{name}; no process left running", file=sys.stderr)
        return e.exit_code if isinstance(e, RunInterrupted) else EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
