"""Which log format could make `goodputlab report` 10x faster than Google's calculator? Measured.

    python benchmarks/log_formats.py [--steps 1000000] [--rounds 3] [--keep DIR]

The report of a 1M-step recording spends most of its time parsing the log's lines (issue 29:
3.5x faster than Google's ml-goodput-measurement, 10x aimed at). This script takes one real
recording (``report_scale.py``'s: gl.Recorder, a SIGKILL at 60%, a resumed second attempt),
writes the same steps in each candidate format, and times, side by side in alternating rounds,
each in a fresh process (wall time, peak RSS from /proc/self/status's VmHWM):

* today's JSON lines: a ``json.loads`` loop (the yardstick), goodputlab's line reader
  (``measure/logread.py``), an orjson loop and msgspec's typed ``decode_lines`` (when installed);
* a compact per-step JSON line (one line a step instead of three:
  ``{"t":..,"attempt":..,"step":..,"kind":"step","compute":..,"end":..,"loss":..}``), read by one
  regular expression into numpy columns, as the line reader reads today's three lines;
* the same per-step fields as text columns (``tw tc te step loss``), read by ``numpy.loadtxt``;
* a fixed 40-byte binary step record (``<dddqd``: the three times, the step, the loss), read by
  ``numpy.frombuffer``: the floor of any format.

Then the report's time with each parser, projected as the measured report minus the line reader
plus that parser (the fold's own cost stays), and what it would take for 10x.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("report_scale", ROOT / "benchmarks" / "report_scale.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

COMPACT_LINE = r"""
import re, sys
import numpy as np
NUM = rb"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
STEP = re.compile(rb'\{"t":' + NUM + rb',"attempt":([0-9]+),"step":([0-9]+),"kind":"step","compute":' + NUM
                  + rb',"end":' + NUM + rb',"loss":(' + NUM[1:-1] + rb'|null)\}\n')
n = 0
with open(sys.argv[1], "rb") as f:
    rest = b""
    for block in iter(lambda: f.read(1 << 20), b""):  # 1 MB at a time, whole lines
        data = rest + block
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        m = STEP.findall(data, 0, cut)
        if m:
            cols = list(zip(*m))
            k = len(m)
            tw = np.fromiter(map(float, cols[0]), np.float64, k)
            steps = np.fromiter(map(int, cols[2]), np.int64, k)
            tc = np.fromiter(map(float, cols[3]), np.float64, k)
            te = np.fromiter(map(float, cols[4]), np.float64, k)
            n += 3 * k
print(n)
""" + bench.HWM
TEXT_COLUMNS = r"""
import sys
import numpy as np
a = np.loadtxt(sys.argv[1], dtype=np.float64)
print(3 * len(a))
""" + bench.HWM
BINARY = r"""
import sys
import numpy as np
rec = np.dtype([("tw", "<f8"), ("tc", "<f8"), ("te", "<f8"), ("step", "<i8"), ("loss", "<f8")])
with open(sys.argv[1], "rb") as f:
    data = f.read()
a = np.frombuffer(data, rec, len(data) // rec.itemsize)
print(3 * len(a), float(a["te"].sum() - a["tc"].sum()) > 0)
""" + bench.HWM


def convert(log: Path, out: Path) -> dict[str, Path]:
    """The steps of ``log`` in the three candidate formats (other events are few and left out)."""
    paths = {"compact line": out / "steps.jsonl", "text columns": out / "steps.txt", "binary 40 B": out / "steps.bin"}
    rec = struct.Struct("<dddqd")
    with open(log, "rb") as f, open(paths["compact line"], "wb") as cl, open(paths["text columns"], "wb") as tx, \
            open(paths["binary 40 B"], "wb") as bn:  # fmt: skip
        pending: dict[str, float] = {}
        for line in f:
            e = json.loads(line)
            kind = e["kind"]
            if kind == "data_wait":
                pending = {"tw": e["t"]}
            elif kind == "compute" and "tw" in pending:
                pending["tc"] = e["t"]
            elif kind == "step_end" and "tc" in pending:
                tw, tc, te, s, loss = pending["tw"], pending["tc"], e["t"], e["step"], e.get("loss")
                cl.write(b'{"t":%.7f,"attempt":%d,"step":%d,"kind":"step","compute":%.7f,"end":%.7f,"loss":%s}\n'
                         % (tw, e["attempt"], s, tc, te, b"null" if loss is None else repr(loss).encode()))
                tx.write(b"%.7f %.7f %.7f %d %r\n" % (tw, tc, te, s, float("nan") if loss is None else loss))
                bn.write(rec.pack(tw, tc, te, s, float("nan") if loss is None else loss))
                pending = {}
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--keep", type=Path, help="keep (and reuse) the recording in this folder")
    args = p.parse_args(argv)
    if not 20_000 <= args.steps <= 20_000_000:  # the kill comes 5,000 steps past 60%
        p.error(f"--steps {args.steps}: must be 20000 to 20000000")
    if not 1 <= args.rounds <= 20:
        p.error(f"--rounds {args.rounds}: must be 1 to 20")
    root = args.keep or Path(tempfile.mkdtemp(prefix="log-formats-"))
    folder = root / f"steps-{args.steps}"
    log = folder / "events.jsonl"
    if not log.exists():
        bench.make_recording(folder, args.steps)
    formats = convert(log, root)
    py, env = sys.executable, {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    lines = int(bench.run([py, "-c", bench.READ, str(log)])[2])
    executed = formats["binary 40 B"].stat().st_size // 40  # step executions, both attempts
    print(f"{args.steps:,} steps ({executed:,} executed): {lines:,} events; bytes a step executed: "
          f"JSON lines {log.stat().st_size / executed:.0f}"
          + "".join(f", {k} {v.stat().st_size / executed:.0f}" for k, v in formats.items()))
    tasks = {
        "json.loads loop": [py, "-c", bench.JSON_LOOP, str(log)],
        "report --json": [py, "-c", bench.REPORT, "report", str(folder), "--json"],
        "line reader (today)": [py, "-c", bench.LINE_READER, str(log)],
    }
    if bench.have("orjson"):
        tasks["orjson loop"] = [py, "-c", bench.ORJSON_LOOP, str(log)]
    if bench.have("msgspec"):
        tasks["msgspec decode_lines"] = [py, "-c", bench.MSGSPEC_LINES, str(log)]
    tasks["compact line"] = [py, "-c", COMPACT_LINE, str(formats["compact line"])]
    tasks["text columns"] = [py, "-c", TEXT_COLUMNS, str(formats["text columns"])]
    tasks["binary 40 B"] = [py, "-c", BINARY, str(formats["binary 40 B"])]
    tasks["python -c pass"] = [py, "-c", "import numpy" + bench.HWM]  # start-up: in every row
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in tasks}
    for _ in range(args.rounds):
        for name, cmd in tasks.items():
            wall, rss, _out = bench.run(cmd, env)
            results[name].append((wall, rss))
    med = {k: statistics.median(w for w, _ in rs) for k, rs in results.items()}
    base, report, reader = med["json.loads loop"], med["report --json"], med["line reader (today)"]
    print(f"  {'':<24}{'wall s':>8}{'vs json.loads':>15}{'peak RSS MB':>13}{'report, projected s':>21}"
          f"   ({args.rounds} rounds, medians)")
    for name, rs in results.items():
        rss = max(r for _, r in rs)
        projected = report - reader + med[name] if name not in ("json.loads loop", "report --json", "python -c pass") else None
        col = f"{projected:>21.2f}" if projected is not None else f"{'':>21}"
        print(f"  {name:<24}{med[name]:>8.2f}{med[name] / base:>14.2f}x{rss:>13.0f}{col}")
    fold = report - reader
    print(f"  the fold and the rest of the report (report minus the line reader): {fold:.2f} s; "
          f"start-up alone {med['python -c pass']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
