"""``goodputlab run``: its flags are generated from :class:`~goodputlab.engine.config.RunConfig`'s fields.

Each field declares its default, its rule, its help text, its ``--help`` group and
its metavar once (:func:`goodputlab.engine.config.setting`); here every field becomes
``--<name-with-dashes>`` (a bool field a switch), read as text and converted by the
field's rule, so a field added to the configuration appears in the CLI, its
``--help`` and its errors with nothing written here. Only the flags that are not
settings of the run itself live here: ``--out``, ``--resume``, ``--json``, ``--quiet``.

Exit codes: 0 completed, 1 the worker crashed (or the run could not write its files),
2 bad input, 3 stopped by the failure budget, 128 + the signal when stopped by one
(130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

from ..engine.config import GROUPS, RunConfig
from ..errors import ConfigError, RunFileError
from ..validate import Boolean
from .common import EXIT_CRASH, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, read

EXAMPLES = """\
examples:
  goodputlab run --steps 400 --ckpt-every 50 --mtbf 4 --seed 1 --out runs/r1
      400 steps, a checkpoint every 50, a failure every 4 s on average
  goodputlab run --io-latency-ms 20 --workers 2 --prefetch 4 --out runs/r2
      a slow input pipeline: 20 ms per batch, 2 loader workers 4 batches ahead
  goodputlab run --ckpt memory --memory-disk-every 4 --ckpt-every auto --mtbf 6 --out runs/r4
      a RAM tier with every 4th save on disk, the interval from Daly's formula
  goodputlab run --nproc 2 --mtbf 30 --straggler-rank 1 --straggler-prob 0.5 --out runs/r5
      2 ranks under torchrun: a failure kills one rank, rank 1 straggles on half its steps
  goodputlab run --emulate-nodes 2 --nproc 1 --kill-node-at-steps 200 --out runs/r7
      2 emulated machines (network namespaces, as root), one of them killed whole after step 200
  goodputlab run --nproc 2 --group-size 2 --fault-tolerance torchft --ckpt-every 100 --kill-at-steps 100 --out runs/r9
      in-job recovery: 2 replica groups of 2 ranks (torchrun jobs); a kill takes one group, the other
      trains on, the killed one relaunches and heals from its peer; one group saves every 100 steps
  goodputlab run --resume runs/r1
      continue a stopped run from its newest valid checkpoint, in the same event log
  goodputlab run --hot-spare --mtbf 8 --failure-mode hang --hang-timeout 2 --out runs/r6
      hung workers, caught by the watchdog, replaced by a standby that is already warm
"""


def flag_of(field: str) -> str:
    """The command-line flag of a configuration field: ``ckpt_every`` -> ``--ckpt-every``."""
    return "--" + field.replace("_", "-")


def flag_fields() -> list[dataclasses.Field]:
    """The fields of :class:`RunConfig` that are flags of ``goodputlab run``, in order."""
    return [f for f in dataclasses.fields(RunConfig) if f.metadata["flag"]]


def _help(f: dataclasses.Field) -> str:
    """The field's help with its default: ``training steps to complete (default 400)``."""
    default, shown = f.default, f.metadata["default_text"]
    if callable(shown):
        shown = shown()
    if isinstance(f.metadata["rule"], Boolean) or shown == "" or default == ():
        return f.metadata["help"]
    if shown is None:
        shown = f"{default:g}" if isinstance(default, float) else str(default)
    return f"{f.metadata['help']} (default{':' if default is None else ''} {shown})"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``goodputlab run`` to ``subparsers``: one flag per configuration field, then the output flags."""
    r = subparsers.add_parser(
        "run",
        help="run a real training job with checkpoints, failures and a slow input pipeline",
        description="Train a small GPT in a worker process that is killed at random and restarted; "
        "book every second of wall time and print where it went.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = {name: r.add_argument_group(name) for name in GROUPS}
    for f in flag_fields():
        group = groups[f.metadata["group"]]
        if isinstance(f.metadata["rule"], Boolean):
            group.add_argument(flag_of(f.name), dest=f.name, action="store_true", default=None, help=_help(f))
        else:
            group.add_argument(flag_of(f.name), dest=f.name, metavar=f.metadata["metavar"], help=_help(f))
    out = groups["output"]
    out.add_argument(
        "--out", metavar="DIR", help="folder for results (default runs/<time>): new, empty, or holding an earlier goodputlab run"
    )
    out.add_argument(
        "--resume", nargs="?", const=True, default=None, metavar="DIR",
        help="continue the stopped run in DIR (or --out) from its newest valid checkpoint, in the same event log; "
        "settings given again may not change its model, batch size, learning rate or seed",
    )
    out.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    out.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")
    r.set_defaults(func=run_command)


def given_settings(args: argparse.Namespace) -> dict:
    """The settings the flags name, each read by its field's rule."""
    given = {}
    for f in flag_fields():
        text = getattr(args, f.name)
        if text is not None:
            given[f.name] = text if isinstance(text, bool) else read(f.name, text, f.metadata["rule"])
    return given


def config_from(args: argparse.Namespace) -> RunConfig:
    """The :class:`RunConfig` the flags describe: every flag given, read by its field's rule; the rest default."""
    return RunConfig(**given_settings(args))


def _ranks_fit_the_gpus(config: RunConfig) -> None:
    """Ranks on GPUs take one GPU each (NCCL cannot put two ranks on one): refuse more ranks than GPUs."""
    if config.nproc > 1 and config.device in ("cuda", "auto"):
        from ..training.objects import cuda_device_count

        gpus = cuda_device_count()
        if gpus and config.nproc > gpus:
            raise ConfigError("nproc", config.nproc, f"at most one rank per GPU: 1 to {gpus} (torch sees {gpus} here; "
                              "--device cpu runs more ranks on the CPU)")


def run_command(args: argparse.Namespace) -> int:
    """Run the experiment the flags describe; print the breakdown (or the summary as JSON)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # the light install: the recorder and the report, no training
        print("goodputlab run: error: a training run needs torch, which `pip install goodputlab` leaves out: "
              "pip install 'goodputlab[lab]'", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    resume_dir = args.resume if isinstance(args.resume, str) else None
    if args.resume and resume_dir is None and args.out is None:
        raise ConfigError(
            "resume", "without a folder", "--resume DIR (or --resume --out DIR) naming the folder of the run to continue"
        )
    if resume_dir is not None and args.out is not None and Path(resume_dir).resolve() != Path(args.out).resolve():
        raise ConfigError("resume", resume_dir, f"the folder of --out ({args.out}), or --resume DIR without --out")
    out = resume_dir if resume_dir is not None else args.out
    if out is None:
        out = str(Path("runs") / time.strftime("run-%Y%m%d-%H%M%S"))
    if args.resume:  # its own configuration, with what the flags give again (checked against it)
        from ..recovery.resume import resume_settings

        config = resume_settings(out, given_settings(args))
    else:
        config = config_from(args)
    if config.device == "cuda":
        from ..training.objects import cuda_available

        if not cuda_available():
            raise ConfigError("device", "cuda", "auto or cpu: torch sees no CUDA device here")
    _ranks_fit_the_gpus(config)
    result = _run_reporting_trouble(config, out, args)
    if not isinstance(result, int):
        summary = result.summary
        print(json.dumps(summary, indent=1) if args.json else _table(summary))
        if not args.json:
            print(f"\nresults in {out}/ (summary.json, events.jsonl)")
        return EXIT_OK if summary["completed"] else EXIT_INCOMPLETE
    return result


def _table(summary: dict) -> str:
    from ..measure.report import breakdown_table

    return breakdown_table(summary)


def _run_reporting_trouble(config: RunConfig, out: str, args: argparse.Namespace):
    """The run's result, or the exit code after telling the user, in a line or two, what stopped it."""
    from ..checkpoints.store import CheckpointWarning
    from ..engine.api import run
    from ..measure.events import EventLogWarning
    from ..engine.interrupts import RunInterrupted
    from ..engine.supervisor import WorkerCrashed

    try:
        with warnings.catch_warnings():
            # a skipped checkpoint is news the user must see, each time, as one line
            warnings.simplefilter("always", CheckpointWarning)
            warnings.simplefilter("always", EventLogWarning)
            warnings.showwarning = _show_warning
            progress = not args.quiet and sys.stderr.isatty()  # a bar only where someone watches
            # the first line, once the run is accepted: what trains, with the torch threads chosen for it
            # (with --json the output is the summary alone, whose "threads" says it)
            announce = None if args.json else lambda line: print(f"goodputlab run: {line}, results in {out}/", flush=True)
            return run(config, out=out, progress=progress, resume=bool(args.resume), announce=announce)
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
