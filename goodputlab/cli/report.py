"""CLI sub-command ``goodputlab report DIR [--json]``: where the time went in any run directory.

A lab run's directory (``goodputlab run --out DIR``) has its ``summary.json``; a
:class:`~goodputlab.Recorder`'s folder is summarised from its event logs (every
rank's merged), so a job can be reported while it runs or after it was killed.
An event log whose last line was cut short by a kill is read up to the line
before, with a warning on stderr. A missing directory, or one that holds no run,
exits with 2 and one line.

Run standalone: ``python -m goodputlab.cli.report runs/mine``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

EXIT_OK, EXIT_USAGE = 0, 2


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
    report.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..engine.api import load_run
    from ..engine.recorder import EventLogError, NotARunDirectory

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = load_run(args.dir)
        except (NotARunDirectory, EventLogError, json.JSONDecodeError) as e:
            print(f"goodputlab report: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    for w in caught:
        print(f"goodputlab report: warning: {w.message}", file=sys.stderr)
    print(json.dumps(result.summary, indent=1) if args.json else result.table())
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="goodputlab")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["report", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
