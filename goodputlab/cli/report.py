"""CLI sub-command ``goodputlab report DIR``: where the time went in any run directory.

A lab run's directory (``goodputlab run --out DIR``) has its ``summary.json``; a
:class:`~goodputlab.Recorder`'s folder is summarised from its event logs (every
rank's merged) in one pass, so a job of millions of steps reports in seconds and a
few tens of megabytes, while it runs or after it was killed. An event log whose last
line was cut short by a kill is read up to the line before, with a warning on stderr.

* ``--json``: the summary as JSON.
* ``--steps-csv FILE``: also write one row per step execution (attempt, step, seconds of
  data wait, compute and sync wait, loss, survived, and when it ended: ``t_end_s``, seconds on the
  log's clock) to FILE.
* ``--follow``: a running job's ledger, updated every ``--interval`` seconds from what
  was appended to its log (``goodputlab.measure.follow``): the table and a progress
  line; stops at Ctrl-C, or when the run has completed and nothing records to it.

Anything that is not a run (a missing folder, a folder without a run, a link or a FIFO
where a log should be, a damaged log or summary) exits with 2 and one line.

Run standalone: ``python -m goodputlab.cli.report runs/mine``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
import time
import warnings
from pathlib import Path

from ..errors import ConfigError
from ..validate import Number
from .common import EXIT_OK, EXIT_USAGE, read

INTERVAL = Number(low=0.1, high=3600, unit="seconds")
_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen: a terminal redraws the table in place


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` sub-command to ``subparsers``."""
    report = subparsers.add_parser(
        "report",
        help="print where the time went in a run directory (a lab run's or a gl.Recorder's)",
        description="Print the breakdown of a run directory's wall time: a lab run's, or a job recorded "
        "with gl.Recorder (killed and restarted ones included).",
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="the run directory")
    report.add_argument(
        "--json", action="store_true",
        help="print the summary as JSON (goodput, wall_s, buckets, failures, steps_completed, ...)",
    )
    report.add_argument(
        "--steps-csv", metavar="FILE",
        help="also write one row per step execution to FILE (CSV: attempt, step, data_wait_s, compute_s, "
        "sync_wait_s, loss, survived, t_end_s: when the step ended, seconds on the log's clock); it holds every step "
        "in memory",
    )
    report.add_argument(
        "--follow", action="store_true",
        help="follow a running job: redraw the table every --interval seconds from what was appended; Ctrl-C stops",
    )
    report.add_argument("--interval", metavar="SECONDS", help="seconds between updates of --follow (default 2)")
    report.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..measure.recorder import NotARunDirectory
    from ..errors import RunFileError
    from ..safe_io import UnsafeFileError

    interval = INTERVAL("interval", read("interval", args.interval, INTERVAL)) if args.interval is not None else 2.0
    if args.interval is not None and not args.follow:
        raise ConfigError("interval", args.interval, "only with --follow")
    csv_path = _csv_target(args.steps_csv) if args.steps_csv is not None else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if args.follow:
                return _follow(args.dir, interval, args.json)
            result = _load(args.dir)
            if csv_path is not None:
                _write_steps_csv(csv_path, result.per_step())
        except (NotARunDirectory, RunFileError, UnsafeFileError, OSError) as e:
            print(f"goodputlab report: error: {_one_line(e)}", file=sys.stderr)
            return EXIT_USAGE
        finally:
            for w in caught:
                print(f"goodputlab report: warning: {w.message}", file=sys.stderr)
            caught.clear()
    print(_json_text(result.summary, indent=1) if args.json else result.table())
    return EXIT_OK


def _load(run_dir: Path):
    from ..engine.api import load_run

    return load_run(run_dir)


def _finite(value):
    """``value`` with every NaN or infinite float as None: JSON has no such numbers (a loss that diverged
    is recorded as NaN; ``--json`` writes it as null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_text(value, indent: int | None = None) -> str:
    """``value`` as strict JSON (see :func:`_finite`)."""
    return json.dumps(_finite(value), indent=indent, allow_nan=False)


def _one_line(e: BaseException) -> str:
    text = str(e) if not isinstance(e, OSError) or not e.filename else f"{e.filename}: {e.strerror}"
    return " ".join(text.split())


def _csv_target(text: str) -> Path:
    """``--steps-csv``'s file: a path whose folder exists, not a folder itself."""
    if text == "":
        raise ConfigError("steps_csv", text, "a file path")
    path = Path(text)
    if path.is_dir():
        raise ConfigError("steps_csv", text, "a file path (this is a folder)")
    if not path.parent.is_dir():
        raise ConfigError("steps_csv", text, "a file in a folder that exists")
    return path


def _write_steps_csv(path: Path, rows: list[dict]) -> None:
    """The rows as CSV, written to a temporary file and renamed over ``path`` (never through a link)."""
    from ..safe_io import write_atomic

    out = io.StringIO()
    fields = ["attempt", "step", "data_wait_s", "compute_s", "sync_wait_s", "loss", "survived", "t_end_s"]
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, out.getvalue().encode(), fsync=False)


def _follow(run_dir: Path, interval: float, as_json: bool) -> int:
    """Redraw the ledger of a running job until Ctrl-C or its completion."""
    from ..measure.follow import Follower
    from ..measure.report import breakdown_table

    follower = Follower(run_dir)
    redraw = sys.stdout.isatty() and not as_json
    try:
        while True:
            update = follower.update()
            if as_json:
                print(_json_text({"summary": update.summary, "progress": update.progress_line()}), flush=True)
            else:
                text = breakdown_table(update.summary, legend=False) + "\n\n" + update.progress_line()
                print((_CLEAR if redraw else "") + text + ("" if redraw else "\n"), flush=True)
            if update.finished:
                return EXIT_OK
            time.sleep(interval)
    except KeyboardInterrupt:
        print("", flush=True)  # leave the prompt on a line of its own
        return EXIT_OK
    finally:
        follower.close()


def main(argv: list[str] | None = None) -> int:
    from . import main as cli_main

    return cli_main(["report", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
