"""How long does `goodputlab report` take on a job of a million steps, and how much memory?

    python benchmarks/report_scale.py [--steps 1000000 10000000] [--rounds 3] [--keep DIR] [--ranks N]

For each size, a real recording: a loop with empty bodies records through ``gl.Recorder``
(data_wait, step with its loss, a checkpoint every 10,000 steps), SIGKILLs itself at 60%
of the steps, and a second attempt resumes from its newest checkpoint to the end. The
recorder writes each step's events as binary step records beside its JSON lines (its
default, ``measure/step_records.py``); the same events are then written again as JSON lines
only (``step_records=False``'s form) into a second folder. Then, side by side in alternating
rounds, each in a fresh process (wall time and the process's own peak RSS, from ``wait4``):

* ``read``: reading the JSON lines in 1 MB blocks and counting them (the I/O floor);
* ``json.loads loop``: ``for line in f: json.loads(line)`` over the JSON lines, the yardstick the aim names;
* ``report, step records`` and ``report, JSON lines``: ``goodputlab report DIR --json`` on each form
  (the streaming ledger, interpreter start-up included); their summaries must be the same;
* the parsers alone: goodputlab's reader on each form (``measure/logread.py``: the records merged
  with the lines; a regular expression for the common lines, ``json.loads`` for the rest), and
  orjson and msgspec over the JSON lines when installed.

``--ranks N`` (N > 1): the job's N ranks each write their own log (one process records them in
lockstep, :data:`RECORD_RANKS`); the report merges them as a stream (``measure/merge_stream.py``)
and is timed beside the same report with the ranks merged in memory (``measure/merge.py``), as
it was before the stream.

On the first size of a one-rank job only: the parsers alone, and the cost of one ``--follow`` update
(``measure/follow.py``) after 100 and 10,000 new events, against reading the whole log again, on each form
(the new events written as the form holds them: step records, or JSON lines).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from goodputlab.measure import events as E  # noqa: E402

EVERY = 10_000  # steps between checkpoints

RECORD = r"""
import json, os, signal, sys
import goodputlab as gl
run_dir, total, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ck = os.path.join(run_dir, "ck.json")
rec = gl.Recorder(run_dir, total_steps=total)
with rec.checkpoint_restore():
    step0 = json.load(open(ck))["step"] if os.path.exists(ck) else 0
for step in range(step0, total):
    with rec.data_wait():
        pass
    with rec.step(step) as s:
        s.loss = 1.0
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    if (step + 1) % EVERY == 0:
        with rec.checkpoint_save(step):
            with open(ck + ".tmp", "w") as f:
                json.dump({"step": step + 1}, f)
            os.replace(ck + ".tmp", ck)
rec.close()
""".replace("EVERY", str(EVERY))

# ``--ranks N``: N ranks of one job recorded by one process in lockstep (each rank its own gl.Recorder and
# log, as under torchrun), killed and resumed the same way. tests/test_merge_stream.py records with it too.
RECORD_RANKS = r"""
import json, os, signal, sys
import goodputlab as gl
run_dir, total, kill_at, every, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ck = os.path.join(run_dir, "ck.json")
recs = [gl.Recorder(run_dir, total_steps=total, rank=r) for r in range(ranks)]
step0 = 0
for rec in recs:
    with rec.checkpoint_restore():
        step0 = json.load(open(ck))["step"] if os.path.exists(ck) else 0
for step in range(step0, total):
    for rec in recs:
        with rec.data_wait():
            pass
    blocks = [rec.step(step) for rec in recs]
    for b in blocks:
        b.__enter__()
    for r, b in enumerate(blocks):
        b.loss = 1.0 + r
        b.__exit__(None, None, None)
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    if (step + 1) % every == 0:
        for rec in recs:
            with rec.checkpoint_save(step):
                pass
        with open(ck + ".tmp", "w") as f:
            json.dump({"step": step + 1}, f)
        os.replace(ck + ".tmp", ck)
for rec in recs:
    rec.close()
"""

# Each measured process prints its own peak RSS last, on stderr: /proc/self/status's VmHWM, this process's
# high-water mark (``wait4``'s ru_maxrss would also count the parent's memory it was forked from).
HWM = r"""
import sys as _sys
for _line in open("/proc/self/status"):
    if _line.startswith("VmHWM:"):
        print("VmHWM", _line.split()[1], file=_sys.stderr)
"""
REPORT = r"""
import sys
from goodputlab.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
""" + HWM + "sys.exit(rc)\n"
READ = r"""
import sys
n = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        while b := f.read(1 << 20):
            n += b.count(b"\n")
print(n)
""" + HWM
JSON_LOOP = r"""
import json, sys
n = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)
            n += 1
print(n)
""" + HWM
LINE_READER = r"""
import sys
from goodputlab.measure.logread import event_batches
print(sum(len(b) for b in event_batches(sys.argv[1], runs=True)))  # a step run counts its lines
""" + HWM
# the report with the ranks merged in memory (measure/merge.py over every rank's events), as before the stream
REPORT_IN_MEMORY = REPORT.replace(
    "from goodputlab.cli import main",
    "from goodputlab.cli import main\nfrom goodputlab.measure.recording import Recording\nRecording._merged_stream = lambda self: None",
)
ORJSON_LOOP = JSON_LOOP.replace("import json, sys", "import orjson as json, sys")
MSGSPEC_LOOP = JSON_LOOP.replace("import json, sys", "import sys, msgspec\njson = msgspec.json.Decoder()").replace(
    "json.loads(line)", "json.decode(line)"
)
MSGSPEC_LINES = r"""
import sys, msgspec
class Event(msgspec.Struct):
    t: float
    attempt: int
    step: int | None
    kind: str
dec = msgspec.json.Decoder(Event).decode_lines
n, rest = 0, b""
with open(sys.argv[1], "rb") as f:
    while b := f.read(1 << 20):
        b = rest + b
        i = b.rfind(b"\n") + 1
        rest = b[i:]
        n += len(dec(b[:i]))
print(n)
""" + HWM


def run(args: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of one fresh process (its own VmHWM, printed last on stderr)."""
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args[:4]))} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
    hwm = [line for line in p.stderr.decode().splitlines() if line.startswith("VmHWM ")]
    return wall, int(hwm[-1].split()[1]) / 1024 if hwm else float("nan"), p.stdout.decode()


def make_recording(folder: Path, steps: int, ranks: int = 1, every: int = EVERY) -> float:
    """A real two-attempt recording with a SIGKILL at 60% of ``steps`` (``ranks`` > 1: that many ranks'
    logs, :data:`RECORD_RANKS`; a checkpoint every ``every`` steps); returns the seconds it took."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kill_at = int(steps * 0.6) + every // 2
    script, extra = (RECORD, []) if ranks == 1 else (RECORD_RANKS, [str(every), str(ranks)])
    t = time.perf_counter()
    first = subprocess.run([sys.executable, "-c", script, str(folder), str(steps), str(kill_at), *extra], env=env)
    assert first.returncode == -9, first.returncode
    second = subprocess.run([sys.executable, "-c", script, str(folder), str(steps), "-1", *extra], env=env)
    assert second.returncode == 0
    return time.perf_counter() - t


def have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def as_json_lines(src: Path, dst: Path) -> None:
    """``src``'s logs written again with every event a JSON line (the form ``step_records=False`` writes)."""
    from goodputlab.measure.logread import event_batches

    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "recorder.json", dst / "recorder.json")
    for log in sorted(src.glob("events*.jsonl")):
        with open(dst / log.name, "wb") as out:
            for batch in event_batches(log):
                out.write(b"".join(E.event_line(t, a, s, k, {n: v for n, v in f.items() if n not in DROP})
                                   for t, a, s, k, f in batch))  # fmt: skip


DROP = frozenset(("t", "attempt", "step", "kind"))


def same_report(a, b, rel: float = 1e-12) -> tuple[bool, float]:
    """Whether two reports agree: every key, string, count and flag equal, every float within ``rel`` of
    the other; and the largest relative difference of the floats. Not ``==``: the two forms can cut the
    steps into runs at other places (a block of records ends where a batch of JSON lines does not), and
    the fold adds each run's sums to the totals, so a total can differ in its last bit (2e-16 of it,
    seen beside two busy loops)."""
    if isinstance(a, dict) and isinstance(b, dict):
        parts = [same_report(a[k], b[k], rel) for k in a] if a.keys() == b.keys() else [(False, 0.0)]
    elif isinstance(a, list) and isinstance(b, list):
        parts = [same_report(x, y, rel) for x, y in zip(a, b)] if len(a) == len(b) else [(False, 0.0)]
    elif isinstance(a, float) and isinstance(b, (int, float)) or isinstance(b, float) and isinstance(a, (int, float)):
        d = abs(a - b) / max(abs(a), abs(b)) if a != b else 0.0
        return d <= rel, d
    else:
        return a == b, 0.0
    return all(ok for ok, _ in parts), max((d for _, d in parts), default=0.0)


def follow_cost(folder: Path, new_events: list[int]) -> None:
    """One --follow update after ``k`` new events, against reading the whole log again. The new events are
    written in the folder's own form: step records when it has them (as the recorder writes them), else
    JSON lines."""
    from goodputlab.measure import step_records as SR
    from goodputlab.measure.follow import Follower
    from goodputlab.measure.recording import Recording

    work = folder.parent / (folder.name + "-follow")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder, work)
    log = work / "events.jsonl"
    size = log.stat().st_size
    # the log as it was while the last attempt ran: without its close (the finish and end lines)
    with open(log, "r+b") as f:
        f.seek(max(0, size - 4096))
        tail = f.read()
        f.truncate(size - len(tail) + tail.rfind(b"\n", 0, tail.rfind(b'"kind":"finish"')) + 1)
    follower = Follower(work)
    t = time.perf_counter()
    first = follower.update()
    first_s = time.perf_counter() - t
    t_last = float(first.summary["wall_s"]) + 1.0
    step = first.summary["steps_executed"] + 10**7
    records = SR.records_path(log)
    form = "step records" if records.exists() else "JSON lines"
    print(f"  --follow on the {form}:")
    print(f"    first update (the whole log, {first.events:,} events): {first_s:.2f} s")
    held = log.read_bytes().count(b"\n")  # the JSON lines: where each new record is placed among them
    for k in new_events:
        with open(records if form == "step records" else log, "ab") as f:
            lines = []
            for i in range(k):
                code = (SR.DATA_WAIT, SR.COMPUTE, SR.STEP_END)[i % 3]
                if form == "step records":
                    lines.append(SR.RECORD.pack(round(t_last, 7), step + i // 3, 1.0, held, 1, code,
                                                SR.HAS_LOSS if code == SR.STEP_END else 0))  # fmt: skip
                else:
                    lines.append(E.event_line(t_last, 1, step + i // 3, SR.KIND_NAMES[code],
                                              {"loss": 1.0} if code == SR.STEP_END else {}))  # fmt: skip
                t_last += 1e-6
            f.write(b"".join(lines))
        times = []
        for _ in range(5):
            t = time.perf_counter()
            u = follower.update()
            times.append(time.perf_counter() - t)
            if _ == 0:
                assert u.new_events == k and not u.whole, (u.new_events, k)
        t = time.perf_counter()
        Recording(work).summary()
        whole = time.perf_counter() - t
        print(f"    update after {k:>6,} new events: {1000 * times[0]:8.1f} ms "
              f"(then {1000 * statistics.median(times[1:]):.1f} ms with nothing new); "
              f"reading the whole log again: {whole:.2f} s ({whole / times[0]:.0f}x)")
    follower.close()
    shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--rounds", type=int, default=3, help="rounds per size (sizes over 2M steps: 1)")
    p.add_argument("--keep", type=Path, help="keep (and reuse) the recordings in this folder")
    p.add_argument("--ranks", type=int, default=1,
                   help="ranks of the job (> 1: each rank's log, merged as a stream beside the in-memory merge)")
    args = p.parse_args(argv)
    if not 1 <= args.ranks <= 64:
        p.error(f"--ranks {args.ranks}: must be 1 to 64")
    root = args.keep or Path(tempfile.mkdtemp(prefix="report-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    try:
        for steps in args.steps:
            folder = root / (f"steps-{steps}" if args.ranks == 1 else f"steps-{steps}-ranks-{args.ranks}")
            plain = folder.with_name(folder.name + "-json")
            names = ["events.jsonl"] if args.ranks == 1 else [f"events-rank{r}.jsonl" for r in range(args.ranks)]
            logs = [plain / name for name in names]
            if not all((folder / name).exists() for name in names):
                shutil.rmtree(plain, ignore_errors=True)
                made = make_recording(folder, steps, args.ranks)
                print(f"\n{steps:,} steps: recorded in {made:.1f} s ({1e6 * made / (steps * 1.1):.2f} us a step, "
                      f"both attempts, the loop included, {args.ranks} rank(s))")
            if not all(log.exists() for log in logs):
                as_json_lines(folder, plain)
            log = logs[0]
            size = sum(log.stat().st_size for log in logs)
            lines = int(run([py, "-c", READ, *map(str, logs)])[2])
            rec_size = sum(p.stat().st_size for p in folder.glob("events*"))
            print(f"{steps:,} steps, {args.ranks} rank(s): {lines:,} events; JSON lines {size / 1e6:.0f} MB, "
                  f"step records and JSON lines {rec_size / 1e6:.0f} MB")
            tasks = {
                "read (floor)": [py, "-c", READ, *map(str, logs)],
                "json.loads loop": [py, "-c", JSON_LOOP, *map(str, logs)],
                "report --json": [py, "-c", REPORT, "report", str(folder), "--json"],
                "report, JSON lines": [py, "-c", REPORT, "report", str(plain), "--json"],
            }
            if args.ranks > 1:
                tasks["report, in memory"] = [py, "-c", REPORT_IN_MEMORY, "report", str(folder), "--json"]
            first = steps == args.steps[0] and args.ranks == 1
            if first:  # the parsers compared on the first size only
                tasks["reader, records"] = [py, "-c", LINE_READER, str(folder / names[0])]
                tasks["reader, JSON lines"] = [py, "-c", LINE_READER, str(log)]
                if have("orjson"):
                    tasks["orjson loop"] = [py, "-c", ORJSON_LOOP, str(log)]
                if have("msgspec"):
                    tasks["msgspec loop"] = [py, "-c", MSGSPEC_LOOP, str(log)]
                    tasks["msgspec decode_lines"] = [py, "-c", MSGSPEC_LINES, str(log)]
            rounds = args.rounds if steps <= 2_000_000 else 1
            results: dict[str, list[tuple[float, float]]] = {k: [] for k in tasks}
            summary = None
            for _ in range(rounds):
                for name, cmd in tasks.items():
                    wall, rss, out = run(cmd, env)
                    results[name].append((wall, rss))
                    if name == "report --json":
                        import json

                        summary = json.loads(out)
                    elif name == "report, JSON lines":
                        from_lines = json.loads(out)
                    elif name == "report, in memory":
                        held = json.loads(out)
            base = statistics.median(w for w, _ in results["json.loads loop"])
            print("  (report --json: the step records, the recorder's default)")
            print(f"  {'':<22}{'wall s':>9}{'vs json.loads':>15}{'peak RSS MB':>13}{'M events/s':>12}   ({rounds} rounds, medians)")
            for name, rs in results.items():
                wall = statistics.median(w for w, _ in rs)
                rss = max(r for _, r in rs)
                print(f"  {name:<22}{wall:>9.2f}{wall / base:>14.2f}x{rss:>13.0f}{lines / wall / 1e6:>12.2f}")
            b = summary["buckets"]
            closes = abs(sum(b.values()) - summary["wall_s"]) <= 1e-6 * summary["wall_s"]
            print(f"  the report: goodput {summary['goodput']:.1%}, failures {summary['failures']}, "
                  f"steps executed {summary['steps_executed']:,}, lost_work {b['lost_work']:.3f} s, "
                  f"restart {b['restart']:.3f} s; buckets sum to the wall time: {closes}")
            report_wall = statistics.median(w for w, _ in results["report --json"])
            report_rss = max(r for _, r in results["report --json"])
            same, worst = same_report(summary, from_lines)
            print(f"  the report of the step records is the report of the JSON lines: {same} "
                  f"(largest relative difference {worst:.1e}) "
                  f"(JSON lines: {statistics.median(w for w, _ in results['report, JSON lines']) / report_wall:.2f}x "
                  f"the time of the step records)")
            if args.ranks > 1:
                print(f"  the stream's report is the in-memory merge's: {summary == held}")
            print(f"  aim: report <= the json.loads loop -> {'met' if report_wall <= base else 'NOT met'} "
                  f"({report_wall / base:.2f}x); peak RSS <= 300 MB -> {'met' if report_rss <= 300 else 'NOT met'}")
            if first:
                follow_cost(folder, [100, 10_000])
                follow_cost(plain, [100, 10_000])
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
