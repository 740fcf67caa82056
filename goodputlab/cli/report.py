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
  ``--prometheus PORT`` also serves the latest summary on ``http://127.0.0.1:PORT/metrics``
  (Prometheus's text format; ``--prometheus-bind ADDRESS`` for another address), until Ctrl-C.
* ``--since S``, ``--until S``: the ledger of that part of the run (seconds from its start).
* ``--window S``: rolling goodput, one row per window of S seconds, with the median and p90 step
  time and the slow steps of each (``goodputlab.measure.windows``).
* ``--tensorboard DIR``: also write the rolling goodput, the shares and the step times as
  TensorBoard scalars in DIR (its windows: ``--window``, default a 50th of the run).
* ``--fail-under SHARE``: exit 1, with one line, when the goodput shown is below SHARE (for CI).

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
from ..validate import Number, Whole
from .common import EXIT_OK, EXIT_USAGE, read

INTERVAL = Number(low=0.1, high=3600, unit="seconds")
SECONDS = Number(low=0, unit="seconds")
WINDOW = Number(low=0, low_open=True, unit="seconds")
SHARE = Number(low=0, high=1, text="a goodput between 0 and 1 (0.9 for 90%)")
PORT = Whole(low=0, high=65535)
EXIT_BELOW = 1  # --fail-under: the goodput is below the threshold
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
    report.add_argument("--since", metavar="SECONDS", help="report the part of the run from this time on (seconds from its start)")
    report.add_argument("--until", metavar="SECONDS", help="report the part of the run up to this time (seconds from its start)")
    report.add_argument("--window", metavar="SECONDS", help="rolling goodput: one row per window of this many seconds, "
                        "with its median and p90 step time and its slow steps")
    report.add_argument("--tensorboard", metavar="DIR", help="also write rolling goodput, shares and step times as "
                        "TensorBoard scalars in DIR")
    report.add_argument("--fail-under", metavar="SHARE", help="exit 1 when the goodput shown is below SHARE "
                        "(0.9 for 90%%): for CI")
    report.add_argument("--prometheus", metavar="PORT", help="with --follow: serve the summary on "
                        "http://127.0.0.1:PORT/metrics (Prometheus's text format; 0: any free port)")
    report.add_argument("--prometheus-bind", metavar="ADDRESS", help="with --prometheus: the address to listen on "
                        "(default 127.0.0.1, this machine only)")
    report.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..errors import RunFileError
    from ..measure.recorder import NotARunDirectory
    from ..measure.windows import WindowError
    from ..safe_io import UnsafeFileError

    opts = _options(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if args.follow:
                return _follow(args.dir, opts)
            result = _load(args.dir)
            summary, windows = _views(result, opts)
            if opts.csv is not None:
                _write_steps_csv(opts.csv, result.per_step())
        except (NotARunDirectory, RunFileError, UnsafeFileError, WindowError, OSError) as e:
            print(f"goodputlab report: error: {_one_line(e)}", file=sys.stderr)
            return EXIT_USAGE
        finally:
            for w in caught:
                print(f"goodputlab report: warning: {w.message}", file=sys.stderr)
            caught.clear()
    if args.json:
        print(_json_text({**summary, **({"windows": windows} if opts.window is not None else {})}, indent=1))
    else:
        print(result.table() if summary is result.summary else breakdown_table(summary))
        if opts.window is not None:
            print("\n" + windows_table(windows))
    return _verdict(summary, opts.fail_under)


class _Options(argparse.Namespace):
    """The report's flags, read and checked (each bad one a ConfigError: one line, exit 2)."""


def _options(args: argparse.Namespace) -> _Options:
    o = _Options()
    o.interval = INTERVAL("interval", read("interval", args.interval, INTERVAL)) if args.interval is not None else 2.0
    if args.interval is not None and not args.follow:
        raise ConfigError("interval", args.interval, "only with --follow")
    o.csv = _csv_target(args.steps_csv) if args.steps_csv is not None else None
    o.since = SECONDS("since", read("since", args.since, SECONDS)) if args.since is not None else None
    o.until = SECONDS("until", read("until", args.until, SECONDS)) if args.until is not None else None
    if o.since is not None and o.until is not None and o.until <= o.since:
        raise ConfigError("until", args.until, f"a time after --since ({args.since} s)")
    o.window = WINDOW("window", read("window", args.window, WINDOW)) if args.window is not None else None
    o.fail_under = SHARE("fail_under", read("fail_under", args.fail_under, SHARE)) if args.fail_under is not None else None
    o.tensorboard = Path(args.tensorboard) if args.tensorboard is not None else None
    if o.tensorboard is not None and o.tensorboard.exists() and not o.tensorboard.is_dir():
        raise ConfigError("tensorboard", args.tensorboard, "a folder (this is a file)")
    o.prometheus = PORT("prometheus", read("prometheus", args.prometheus, PORT)) if args.prometheus is not None else None
    o.bind = args.prometheus_bind
    if o.bind is not None and o.prometheus is None:
        raise ConfigError("prometheus_bind", o.bind, "only with --prometheus")
    if o.prometheus is not None and not args.follow:
        raise ConfigError("prometheus", args.prometheus, "only with --follow")
    for name in ("since", "until", "window", "fail_under", "tensorboard", "csv"):
        if args.follow and getattr(o, name) is not None:
            flag = "steps_csv" if name == "csv" else name
            raise ConfigError(flag, getattr(args, flag), "not with --follow (a finished run's report)")
    o.json = args.json
    return o


def _views(result, o: _Options) -> tuple[dict, list[dict]]:
    """The summary shown (the whole run's, or the part ``--since``/``--until`` asks for) and the windows of
    ``--window`` (or ``--tensorboard``'s), written to ``--tensorboard`` when asked."""
    summary, windows = result.summary, []
    since, until = o.since or 0.0, o.until if o.until is not None else math.inf
    if o.since is not None or o.until is not None:
        summary = interval_summary(summary, result.interval(since, until))
    if o.window is not None or o.tensorboard is not None:
        width = o.window if o.window is not None else max(result.summary["wall_s"], 1e-3) / 50
        windows = result.rolling(width, since, until)
    if o.tensorboard is not None:
        from ..measure.exports import write_tensorboard

        write_tensorboard(o.tensorboard, summary, windows)
    return summary, windows


def interval_summary(summary: dict, row: dict) -> dict:
    """The summary with its ledger replaced by an interval's (``row``: :meth:`RunResult.interval`)."""
    span = row["end_s"] - row["start_s"]
    buckets = {c: row["buckets"].get(c, 0.0) for c in summary["buckets"]}
    return {**summary, "goodput": row["goodput"], "wall_s": span, "buckets": buckets,
            "shares": {c: (s / span if span > 0 else 0.0) for c, s in buckets.items()},
            "interval": {"since_s": row["start_s"], "until_s": row["end_s"]}}  # fmt: skip


def windows_table(windows: list[dict]) -> str:
    """Rolling goodput as text: a row per window."""
    head = f"{'window (s)':<22}{'goodput':>8}{'data':>7}{'lost':>7}{'restart':>8}{'steps':>7}{'median':>10}{'p90':>10}{'slow':>6}"
    lines = [head]
    for w in windows:
        span = w["end_s"] - w["start_s"]
        share = {c: (w["buckets"].get(c, 0.0) / span if span > 0 else 0.0) for c in ("data_wait", "lost_work", "restart")}
        med = "-" if w["median_step_s"] is None else f"{1000 * w['median_step_s']:.1f} ms"
        p90 = "-" if w["p90_step_s"] is None else f"{1000 * w['p90_step_s']:.1f} ms"
        lines.append(f"{w['start_s']:>9.1f}-{w['end_s']:<12.1f}{w['goodput']:>8.1%}{share['data_wait']:>7.1%}"
                     f"{share['lost_work']:>7.1%}{share['restart']:>8.1%}{w['steps']:>7}{med:>10}{p90:>10}{w['slow_steps']:>6}")  # fmt: skip
    return "\n".join(lines)


def _verdict(summary: dict, fail_under: float | None) -> int:
    """``--fail-under``: exit 1 with one line when the goodput shown is below the threshold."""
    if fail_under is not None and summary["goodput"] < fail_under:
        print(f"goodputlab report: goodput {summary['goodput']:.1%} is under --fail-under {fail_under:.1%}", file=sys.stderr)
        return EXIT_BELOW
    return EXIT_OK


def breakdown_table(summary: dict) -> str:
    from ..measure.report import breakdown_table as table

    return table(summary)


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


def _follow(run_dir: Path, o: _Options) -> int:
    """Redraw the ledger of a running job until Ctrl-C or its completion (with ``--prometheus``: serve it until
    Ctrl-C)."""
    from ..measure.exports import MetricsServer, prometheus_text
    from ..measure.follow import Follower
    from ..measure.report import breakdown_table

    follower = Follower(run_dir)
    redraw = sys.stdout.isatty() and not o.json
    server = None if o.prometheus is None else MetricsServer(o.prometheus, o.bind or "127.0.0.1")
    if server is not None:
        print(f"goodputlab report: serving metrics on http://{o.bind or '127.0.0.1'}:{server.port}/metrics",
              file=sys.stderr, flush=True)  # fmt: skip
    try:
        while True:
            update = follower.update()
            if server is not None:
                server.publish(prometheus_text(update.summary, run_dir.name))
            if o.json:
                print(_json_text({"summary": update.summary, "progress": update.progress_line()}), flush=True)
            else:
                text = breakdown_table(update.summary, legend=False) + "\n\n" + update.progress_line()
                print((_CLEAR if redraw else "") + text + ("" if redraw else "\n"), flush=True)
            if update.finished and server is None:
                return EXIT_OK
            time.sleep(o.interval)
    except KeyboardInterrupt:
        print("", flush=True)  # leave the prompt on a line of its own
        return EXIT_OK
    finally:
        follower.close()
        if server is not None:
            server.close()


def main(argv: list[str] | None = None) -> int:
    from . import main as cli_main

    return cli_main(["report", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
