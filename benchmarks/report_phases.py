"""Where the report of a recording's step records spends its time: the floor under the ledger.

    python benchmarks/report_phases.py DIR [DIR ...] [--rounds 3]
    python benchmarks/report_phases.py --google-job 1000000      # vs_google_goodput.py's job, written first

For each recording folder (``gl.Recorder``'s, with ``events.steps.bin``), best of ``--rounds``, in
this process, wall and CPU seconds (CPU: this process's own, which a shared machine inflates less):

* ``read``: the records' bytes, in the reader's blocks (``os.pread`` of ``CHUNK_RECORDS``), nothing else;
* ``read, check, split``: the same blocks as numpy arrays, checked (``step_records.check``) and split
  into runs with their sums (``step_records.by_lines``): the numpy part of the reader;
* ``whole ledger``: ``Recording(DIR).summary()``, the report's fold with the JSON lines merged in.

``--google-job N``: first write ``benchmarks/vs_google_goodput.py``'s job of N steps (a checkpoint every
100 steps, a crash at 60%, a restart) as the recorder's step records into a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from goodputlab.measure import step_records as SR  # noqa: E402
from goodputlab.measure.logread import _NO_FIELDS, StepRun  # noqa: E402
from goodputlab.measure.recording import Recording  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def blocks(path: Path, parse: bool) -> tuple[int, int]:
    """Read ``path``'s records block by block (``parse``: checked and split too); (records, items)."""
    import numpy as np

    fd = os.open(path, os.O_RDONLY)
    try:
        pos, records, items, last = SR.RECORD_BYTES, 0, 0, 0
        while True:
            data = os.pread(fd, SR.CHUNK_RECORDS * SR.RECORD_BYTES, pos)
            if not data:
                return records, items
            pos += len(data)
            records += len(data) // SR.RECORD_BYTES
            if parse:
                arr = np.frombuffer(data, SR.dtype())
                SR.check(arr, 0, last)
                last = int(arr["lines"][-1])
                items += len(SR.by_lines(arr, StepRun, _NO_FIELDS))
    finally:
        os.close(fd)


def phases(folder: Path, rounds: int) -> None:
    path = SR.records_path(folder / "events.jsonl")
    best: dict[str, tuple[float, float]] = {}
    records = items = 0
    for _ in range(rounds):
        for name, work in (("read", lambda: blocks(path, False)), ("read, check, split", lambda: blocks(path, True)),
                           ("whole ledger", lambda: Recording(folder).summary())):  # fmt: skip
            t, c = time.perf_counter(), cpu()
            out = work()
            took = (time.perf_counter() - t, cpu() - c)
            best[name] = min(best.get(name, took), took)
            if name == "read, check, split":
                records, items = out
    size = path.stat().st_size
    lines = (folder / "events.jsonl").read_bytes().count(b"\n")
    print(f"{folder}: {records:,} records ({size / 1e6:.0f} MB), {lines:,} JSON lines, {items:,} runs and "
          f"groups of other records; load average {os.getloadavg()[0]:.2f}")
    for name, (wall, c) in best.items():
        print(f"  {name:<20} wall {wall:6.3f} s  CPU {c:6.3f} s  ({size / 1e6 / wall:5.0f} MB/s of wall time, "
              f"{records / 1e6 / max(c, 1e-9):5.1f} M records per CPU second)")
    whole = best["whole ledger"][1]
    print(f"  of the ledger's CPU time: reading {best['read'][1] / whole:.0%}, the numpy part "
          f"{(best['read, check, split'][1] - best['read'][1]) / whole:.0%}, the fold and the JSON lines "
          f"{1 - best['read, check, split'][1] / whole:.0%}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", type=Path, nargs="*", help="recording folders with step records")
    p.add_argument("--rounds", type=int, default=3, help="rounds (the best of each is shown)")
    p.add_argument("--google-job", type=int, metavar="N", help="also vs_google_goodput.py's job of N steps")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: must be 1 or more")
    work = None
    folders = list(args.folders)
    try:
        if args.google_job:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            from vs_google_goodput import make_job, write_goodputlab

            work = Path(tempfile.mkdtemp(prefix="report-phases-"))
            write_goodputlab(make_job(args.google_job), work / "job", records=True)
            folders.insert(0, work / "job")
        for folder in folders:
            phases(folder, args.rounds)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
