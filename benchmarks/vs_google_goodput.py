"""goodputlab's ledger beside Google's ml-goodput-measurement, on one job replayed into both.

    pip install 'goodputlab[google]'         # ml-goodput-measurement, the optional extra
    python benchmarks/vs_google_goodput.py [--steps 2000] [--sizes 100000 1000000] [--rounds 1]

Installs nothing: without ml-goodput-measurement it says so and stops. One job, with
identical timestamps, is replayed into both recorders:

* attempt 0: set-up (TPU init and training preparation in Google's terms, ``init`` in
  goodputlab's), the first batch (Google's synchronous data loading, goodputlab's
  ``warmup``), steps (a wait for the batch, the compute, the loop's own code; the first
  step of an attempt compiles, 3x longer), a blocking checkpoint save every 100 steps,
  then a crash in the middle of a step at 60% of the job;
* 5 s later, attempt 1: set-up, a checkpoint restore, the first batch, the steps again
  from the newest checkpoint to the end, and the job's end.

goodputlab gets what ``gl.Recorder`` writes, in a recording folder (timed in both forms: step
records beside JSON lines, the default, and JSON lines only), and reports it as ``goodputlab report`` does. Google's recorder writes through the seam its own tests use:
``GoodputRecorder(..., cloud_logger=...)`` and ``GoodputCalculator(..., cloud_logger=...)``
with an in-memory stand-in for Cloud Logging (``MockCloudLogger`` of its tests: entries kept
in a list, read back by time); the checkpoint saves and the restore go in as the entries
orbax's checkpoint logger writes. Then:

1. both ledgers, category by category, in seconds, and each difference explained as a
   difference of definition (the two count the same second in different places) or an
   error (a second counted twice, or in the wrong place), with the amount computed from the
   job's own timeline;
2. both timed on ``--sizes`` steps, each in a fresh process: wall time, CPU time (the process's own,
   which a machine shared with other work inflates less than the wall time) and peak RSS, as ratios;
3. the features users rely on in Google's library, side by side on one job with evaluations and slow
   steps (``vs_google_features.py``): interval and rolling goodput, step-time deviation, custom badput,
   and a threshold for CI.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from goodputlab.measure import events as E, step_records as SR  # noqa: E402

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp()  # the job's start (Unix seconds)
EVERY = 100  # steps between checkpoints
INIT = (0.8, 0.7)  # TPU init, training preparation (s)
FIRST_BATCH = 0.5  # the first batch of an attempt (s)
RESTORE = 0.6  # loading the checkpoint (s)
SAVE = 0.2  # the blocking part of a save (s)
RESTART_GAP = 5.0  # from the crash to the next attempt's start: detection, rescheduling (s)
EVAL = 0.4  # an evaluation (custom badput), in the features' job only (s)


@dataclass
class Job:
    """The job's timeline: what each attempt did when (seconds since T0), and the true totals."""

    steps: int
    moments: list[tuple] = field(default_factory=list)  # (t, what, attempt, step, seconds)
    truth: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, seconds: float) -> None:
        self.truth[key] = self.truth.get(key, 0.0) + seconds


def make_job(steps: int, seed: int = 0, eval_every: int = 0, slow_every: int = 0) -> Job:
    """The timeline of one job of ``steps`` steps with a crash at 60% (see the module's docstring). For the
    features' comparison (``vs_google_features.py``): an evaluation of ``EVAL`` s after every ``eval_every``-th
    step, and every ``slow_every``-th step's compute four times as long (0: none)."""
    rng = random.Random(seed)
    job = Job(steps)
    t = 0.0
    crash_at = int(steps * 0.6) + EVERY // 2 + 7
    resume = 0
    for attempt in (0, 1):
        m = job.moments
        m.append((t, "start", attempt, None, 0.0))
        t += INIT[0]
        m.append((t, "tpu_init_end", attempt, None, 0.0))
        t += INIT[1]
        m.append((t, "prep_end", attempt, None, 0.0))
        job.add("init", sum(INIT))
        if attempt:
            m.append((t, "restore", attempt, resume, RESTORE))
            t += RESTORE
            job.add("restore", RESTORE)
        m.append((t, "first_batch", attempt, None, FIRST_BATCH))
        t += FIRST_BATCH
        job.add("first_batch", FIRST_BATCH)
        first = resume if attempt else 0
        last = crash_at if attempt == 0 else steps - 1
        for s in range(first, last + 1):
            wait = 0.0 if s == first else rng.uniform(0.001, 0.004)
            compute = rng.uniform(0.028, 0.032) * (3 if s == first else 1) * (4 if slow_every and s % slow_every == 7 else 1)
            loop = rng.uniform(0.0005, 0.0015)
            m.append((t, "step", attempt, s, wait))  # the step begins: its batch (none for the first: warmup)
            t += wait
            m.append((t, "compute", attempt, s, compute))
            if attempt == 0 and s == crash_at:  # the crash, half-way through the compute
                t += compute / 2
                job.add("crashed_step", compute / 2)
                job.add("wait_crashed", wait)
                break
            t += compute
            m.append((t, "step_end", attempt, s, loop))
            t += loop
            survives = attempt == 1 or s < resume_after_crash(crash_at)
            job.add("wait_kept" if survives else "wait_lost", wait)
            job.add("compute_kept" if survives else "compute_lost", compute)
            job.add("loop_kept" if survives else "loop_lost", loop)
            if (s + 1) % EVERY == 0 and s < steps - 1:
                m.append((t, "save", attempt, s, SAVE))
                t += SAVE
                job.add("save", SAVE)
                resume = s + 1
            if eval_every and (s + 1) % eval_every == 0:
                m.append((t, "eval", attempt, s, EVAL))
                t += EVAL
                job.add("eval", EVAL)
        if attempt == 0:
            job.add("restart_gap", RESTART_GAP)
            t += RESTART_GAP
    job.moments.append((t, "end", 1, None, 0.0))
    job.truth["wall"] = t
    return job


def resume_after_crash(crash_at: int) -> int:
    """The checkpoint attempt 1 resumes from: the newest one before the crash."""
    return (crash_at + 1) // EVERY * EVERY


# --- goodputlab: the lines gl.Recorder writes ----------------------------------------------------
def write_goodputlab(job: Job, folder: Path, records: bool = False) -> None:
    """The job as ``gl.Recorder`` logs it: JSON lines only, or with step records (``measure/step_records.py``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recorder.json").write_text(json.dumps({"format": 1, "t0_unix": T0}) + "\n")
    lines, recs = [], [SR.HEADER]
    codes = {E.W_DATA_WAIT: SR.DATA_WAIT, E.W_COMPUTE: SR.COMPUTE, E.W_STEP_END: SR.STEP_END}

    def ev(t, attempt, step, kind, **f):
        if records and kind in codes:
            loss = f.get("loss")
            recs.append(SR.RECORD.pack(round(t, 7), step, loss or 0.0, len(lines), attempt, codes[kind], loss is not None))
        else:
            lines.append(E.event_line(t, attempt, step, kind, f))

    last = None
    for t, what, attempt, step, seconds in job.moments:
        if what == "start":
            if attempt:
                ev(last, 0, None, E.SUP_FAILURE, cause="the attempt did not close (killed)")
            ev(t, attempt, None, E.W_INIT, t0_unix=T0, rank=None, total_steps=job.steps, pid=1, host="replay", recorder=1)
        elif what == "restore":
            ev(t, attempt, None, E.W_RESTORE)
        elif what == "first_batch":
            ev(t, attempt, None, E.W_WARMUP)
        elif what == "step" and seconds > 0:
            ev(t, attempt, step, E.W_DATA_WAIT)
        elif what == "compute":
            ev(t, attempt, step, E.W_COMPUTE)
        elif what == "step_end":
            ev(t, attempt, step, E.W_STEP_END, loss=1.0)
        elif what == "save":
            ev(t, attempt, step, E.W_CKPT_SAVE)
            ev(t + seconds, attempt, step, E.M_CKPT_COMMIT, ckpt_step=step + 1, tier="user")
        elif what == "eval":
            ev(t, attempt, None, E.R_CUSTOM, name="eval")
        elif what == "end":
            ev(t, attempt, job.steps, E.M_FINISH, final_state_sha256=None, final_loss=1.0)
            ev(t, attempt, None, E.SUP_END, completed=True, clean=True, reason="completed")
        if what in ("compute", "step", "start", "restore", "first_batch", "step_end", "save", "end", "eval"):
            last = t
    (folder / "events.jsonl").write_bytes(b"".join(lines))
    if records:
        SR.records_path(folder / "events.jsonl").write_bytes(b"".join(recs))


# --- Google: its recorder, and orbax's checkpoint entries, into an in-memory logger -------------
class MemoryLogger:
    """An in-memory stand-in for Cloud Logging: ``MockCloudLogger`` of ml-goodput-measurement's tests."""

    def __init__(self, job_name: str):
        self.job_name = job_name
        self.entries: list[tuple[dt.datetime, dict]] = []
        self.last_entry_info = None

    def write_cloud_logging_entry(self, entry: dict) -> None:
        from ml_goodput_measurement.src.goodput_utils import get_timestamp_from_log_entry

        ts = get_timestamp_from_log_entry(entry)
        if ts is not None:
            self.entries.append((ts, entry))
            self.last_entry_info = (ts, ts.isoformat())

    def read_cloud_logging_entries(self, start_time=None, end_time=None, last_entry_info=None):
        return [e for ts, e in self.entries if (start_time is None or ts > start_time)
                and (end_time is None or ts <= end_time)], self.last_entry_info  # fmt: skip

    def flush(self) -> None:
        pass


def write_google(job: Job, logger: MemoryLogger) -> None:
    from ml_goodput_measurement import goodput

    rec = goodput.GoodputRecorder(logger.job_name, "replay", logging_enabled=True, cloud_logger=logger)
    at = lambda t: dt.datetime.fromtimestamp(T0 + t, dt.timezone.utc)  # noqa: E731
    for t, what, attempt, step, seconds in job.moments:
        if what == "start":
            rec.record_job_start_time(at(t))
            rec.record_tpu_init_start_time(at(t))
        elif what == "tpu_init_end":
            rec.record_tpu_init_end_time(at(t))
            rec.record_training_preparation_start_time(at(t))
        elif what == "prep_end":
            rec.record_training_preparation_end_time(at(t))
        elif what == "restore":
            logger.write_cloud_logging_entry({
                "job_name": logger.job_name, "step": step, "event_type": "restore", "directory": "/ckpt",
                "checkpointer_start_time": T0 + t, "checkpointer_duration_secs": seconds,
                "checkpoint_manager_start_time": T0 + t, "checkpoint_manager_duration_secs": seconds,
            })  # fmt: skip
        elif what == "first_batch":
            rec.record_data_loading_start_time(at(t))
            rec.record_data_loading_end_time(at(t + seconds))
        elif what == "step":
            rec.record_step_start_time(step, at(t))
        elif what == "save":
            logger.write_cloud_logging_entry({
                "job_name": logger.job_name, "step": step + 1, "event_type": "save", "directory": "/ckpt",
                "reached_preemption": False, "preemption_received_at": None, "synchronous": True,
                "wait_for_prev_start_time": T0 + t, "wait_for_prev_duration_secs": 0.0,
                "checkpointer_blocking_start_time": T0 + t, "checkpointer_blocking_duration_secs": seconds,
                "get_old_steps_start_time": T0 + t + seconds, "get_old_steps_duration_secs": 0.0,
                "checkpoint_manager_blocking_start_time": T0 + t, "checkpoint_manager_blocking_duration_secs": seconds,
            })  # fmt: skip
        elif what == "eval":
            rec.record_custom_badput_event_start_time(at(t), custom_badput_event_type="eval")
            rec.record_custom_badput_event_end_time(at(t + seconds), custom_badput_event_type="eval")
        elif what == "end":
            rec.record_job_end_time(at(t))


def google_ledger(logger: MemoryLogger, cache_dir: str) -> dict:
    """Google's calculator over the logger: seconds per category (its own names), and its goodput."""
    from ml_goodput_measurement import goodput

    calc = goodput.GoodputCalculator(logger.job_name, "replay", cloud_logger=logger, cache_dir=cache_dir)
    goodput_pct, _, _ = calc.get_job_goodput(include_badput_breakdown=True)
    details = calc.get_job_goodput_details()
    seconds = {"PRODUCTIVE": sum(details["goodput_time"].values())}
    for kind, v in details["badput_time"].items():
        seconds[kind.name] = sum(v.values()) if isinstance(v, dict) else v
    return {"goodput_pct": goodput_pct, "seconds": seconds, "elapsed": details["total_elapsed_time"]}


# --- part 1: the two ledgers ---------------------------------------------------------------------
def compare(job: Job, work: Path) -> None:
    from goodputlab.measure.recording import Recording

    folder = work / "job"
    write_goodputlab(job, folder)
    ours = Recording(folder).summary()
    logger = MemoryLogger("replay-job")
    write_google(job, logger)
    theirs = google_ledger(logger, str(work / "google-cache"))
    b, g = ours["buckets"], theirs["seconds"]
    wall = ours["wall_s"]
    print(f"one job, {job.steps} steps, a crash at step {_crash_step(job)}, "
          f"resumed from the checkpoint of step {resume_after_crash(_crash_step(job))}")
    print(f"wall time: goodputlab {wall:.3f} s, Google {theirs['elapsed']:.3f} s; goodput: goodputlab "
          f"{ours['goodput']:.2%}, Google {theirs['goodput_pct'] / 100:.2%}")
    total_g = sum(v for k, v in g.items() if k != "DATA_LOADING_ASYNC")
    print(f"sum of the categories: goodputlab {sum(b.values()) / wall:.4%} of the wall, Google "
          f"{total_g / theirs['elapsed']:.4%} (without DATA_LOADING_ASYNC, which it reports beside the rest), "
          f"{sum(g.values()) / theirs['elapsed']:.4%} with it")
    print()
    print(f"{'goodputlab':<20}{'s':>9}   {'Google':<42}{'s':>9}")
    pairs = [
        ("productive", ["PRODUCTIVE"]),
        ("data_wait", []),
        ("checkpoint_save", ["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"]),
        ("checkpoint_restore", ["UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME"]),
        ("lost_work", ["WASTED_PROGRESS_FROM_DISRUPTION"]),
        ("restart", ["INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"]),
        ("startup", ["TPU_INITIALIZATION", "TRAINING_PREP", "DATA_LOADING_SYNC", "PROGRAM_STARTUP"]),
        ("other", ["OTHER", "CUSTOM_BADPUT_EVENTS"]),
        ("", ["DATA_LOADING_ASYNC"]),
    ]
    for ours_cat, google_cats in pairs:
        names = google_cats or [""]
        for i, name in enumerate(names):
            left = f"{ours_cat:<20}{b[ours_cat]:>9.3f}" if i == 0 and ours_cat else " " * 29
            right = f"{name:<42}{g.get(name, 0.0):>9.3f}" if name else ""
            print(f"{left}   {right}")
    print()
    explain(job, b, g)
    once_only(job, work)


def once_only(job: Job, work: Path) -> None:
    """The same job when only the first attempt records its data load (a loop that records it once, at job
    start): Google books the load it holds from the start a second time at the restart."""
    moments = job.moments
    job.moments = [m for m in moments if not (m[1] == "first_batch" and m[2] == 1)]
    try:
        logger = MemoryLogger("replay-once")
        write_google(job, logger)
        g = google_ledger(logger, str(work / "google-cache-once"))["seconds"]
    finally:
        job.moments = moments
    print(f"\nthe same job when only attempt 0 records its data load ({FIRST_BATCH:.3f} s recorded in all): Google's "
          f"DATA_LOADING_SYNC is {g['DATA_LOADING_SYNC']:.3f} s and its OTHER {g['OTHER']:.3f} s; error: "
          f"{g['DATA_LOADING_SYNC'] - FIRST_BATCH:+.3f} s booked to data loading that no record says happened "
          "(the duration held from the start is added again when the restart is detected), taken from OTHER "
          "(attempt 1's unrecorded first batch); goodputlab books that second first batch as restart either way")


def _crash_step(job: Job) -> int:
    return max(step for t, what, attempt, step, s in job.moments if attempt == 0 and what == "compute")


def explain(job: Job, b: dict, g: dict) -> None:
    """Every difference, as the sum of the parts of the timeline that make it (definition) and what is left (error)."""
    tr = job.truth
    startup_g = g["TPU_INITIALIZATION"] + g["TRAINING_PREP"] + g["DATA_LOADING_SYNC"] + g["PROGRAM_STARTUP"]
    rows = [
        ("productive", g["PRODUCTIVE"] - b["productive"], [
            ("definition: Google's step runs from one step's start to the next, so the wait for the batch "
             "of every surviving step is in it (goodputlab: data_wait)", tr["wait_kept"]),
            ("definition: ... and so is the loop's own code after each surviving step (goodputlab: other)", tr["loop_kept"]),
            ("definition: the first step of each attempt is slower (compilation); Google moves the excess over "
             "the average step to PROGRAM_STARTUP (goodputlab: productive)", -g["PROGRAM_STARTUP"]),
        ]),
        ("data_wait", -b["data_wait"], [
            ("definition: Google has no category for a step's wait for its batch: in its productive time "
             "(surviving steps), wasted progress (lost ones) or recovery (the crashed one)",
             -(tr["wait_kept"] + tr["wait_lost"] + tr["wait_crashed"])),
        ]),
        ("checkpoint_save", g["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] - b["checkpoint_save"], []),
        ("checkpoint_restore", g["UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME"] - b["checkpoint_restore"], []),
        ("lost_work", g["WASTED_PROGRESS_FROM_DISRUPTION"] - b["lost_work"], [
            ("definition: Google's lost steps run from start to start, so their waits for the batch and their "
             "loop code are in its wasted progress (goodputlab: data_wait and other)", tr["wait_lost"] + tr["loop_lost"]),
            ("definition: a blocking save between two lost steps is in their step time (goodputlab: "
             "checkpoint_save; none here: the crash comes after the newest checkpoint)", 0.0),
        ]),
        ("restart", g["INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"] - b["restart"], [
            ("definition: Google's recovery is the gap from the last step's start to the new start; set-up and "
             "the first batch of the new attempt go to its start-up categories (goodputlab: restart)",
             -(sum(INIT) + FIRST_BATCH)),
            ("definition: ... and the crashed step's wait for its batch is in that gap (goodputlab: data_wait)",
             tr["wait_crashed"]),
        ]),
        ("startup", startup_g - b["startup"], [
            ("definition: attempt 1's set-up and first batch (goodputlab: restart)", sum(INIT) + FIRST_BATCH),
            ("definition: the first steps' compilation (goodputlab: productive)", g["PROGRAM_STARTUP"]),
            ("error: first batches booked more than once (DATA_LOADING_SYNC over the two first batches)",
             g["DATA_LOADING_SYNC"] - 2 * FIRST_BATCH),
        ]),
        ("other", g["OTHER"] + g.get("CUSTOM_BADPUT_EVENTS", 0.0) - b["other"], [
            ("definition: the loop's code after each step is in Google's step time (productive or wasted)",
             -(tr["loop_kept"] + tr["loop_lost"])),
        ]),
    ]
    print("the differences (Google minus goodputlab), each explained:")
    for cat, diff, parts in rows:
        explained = sum(x for _, x in parts)
        left = diff - explained
        print(f"  {cat}: {diff:+.3f} s")
        for text, amount in parts:
            if abs(amount) > 5e-4:
                print(f"    {amount:+9.3f} s  {text}")
        if abs(left) > 5e-4:
            kind = "error" if abs(left) > 1e-3 else "rounding"
            print(f"    {left:+9.3f} s  {kind}: not explained by the definitions above")
        elif not parts:
            print("    same definition, same seconds")
    async_s = g.get("DATA_LOADING_ASYNC", 0.0)
    print(f"  DATA_LOADING_ASYNC: {async_s:+.3f} s: the recorded data loads ({2 * FIRST_BATCH:.3f} s) less those "
          "booked synchronous; Google reports it beside the other categories (loading that overlaps training), "
          "so it is not part of the sum")


# --- part 2: the time and memory each takes ------------------------------------------------------
HWM = r"""
def hwm_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""
# Each timed in a fresh process: the ledger call alone (wall), the process's peak RSS (VmHWM: this
# process's own, not the parent's it was forked from) and its peak before the call.
GOOGLE_TIMED = HWM + r"""
import json, sys, time, logging
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from vs_google_goodput import MemoryLogger, make_job, write_google, google_ledger
job = make_job(int(sys.argv[2]))
logger = MemoryLogger("timed")
write_google(job, logger)
del job
before = hwm_mb()
t, c = time.perf_counter(), time.process_time()
result = google_ledger(logger, sys.argv[3])
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": hwm_mb(), "before_mb": before, "goodput": result["goodput_pct"] / 100}))
"""
OURS_TIMED = HWM + r"""
import json, sys, time
from goodputlab.measure.recording import Recording
before = hwm_mb()
t, c = time.perf_counter(), time.process_time()
summary = Recording(sys.argv[2]).summary()
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": hwm_mb(), "before_mb": before, "goodput": summary["goodput"]}))
"""
CLI_TIMED = HWM + r"""
import sys, time, io, contextlib
from goodputlab.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["report", sys.argv[2], "--json"])
print(f'{{"rc": {rc}, "peak_mb": {hwm_mb()}}}')
"""


def fresh(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter: its JSON line, with ``process_s`` (its wall time, start-up
    included) and ``process_cpu_s`` (its CPU seconds, user and system, from the kernel's accounts)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, str(ROOT), *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    out["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def timed(steps: int, work: Path, rounds: int) -> None:
    """Google's calculator and goodputlab's ledger on the same job of ``steps`` steps, each in a fresh process."""
    job, forms = make_job(steps), {"step records": work / f"timed-{steps}-records", "JSON lines": work / f"timed-{steps}-json"}
    for form, folder in forms.items():
        write_goodputlab(job, folder, records=form == "step records")
    del job
    theirs, ours, cli = [], {form: [] for form in forms}, {form: [] for form in forms}
    for i in range(rounds):  # side by side, alternating
        cache = work / f"cache-{steps}-{i}"
        theirs.append(fresh(GOOGLE_TIMED, str(steps), str(cache)))
        shutil.rmtree(cache, ignore_errors=True)
        for form, folder in forms.items():
            ours[form].append(fresh(OURS_TIMED, str(folder)))
            cli[form].append(fresh(CLI_TIMED, str(folder)))
    best = lambda runs, k: min(x[k] for x in runs)  # noqa: E731
    peak, own = (lambda runs: max(x["peak_mb"] for x in runs)), (lambda runs: max(x["peak_mb"] - x["before_mb"] for x in runs))
    t_wall, t_cpu, t_mb, t_own = best(theirs, "wall"), best(theirs, "cpu"), peak(theirs), own(theirs)
    print(f"{steps:>9,} steps: Google {t_wall:7.2f} s ({t_cpu:.2f} s of CPU), peak {t_mb:5.0f} MB (+{t_own:.0f} MB for "
          f"the calculator, over its entries), goodput {theirs[0]['goodput']:.2%}")
    for form in forms:
        o_wall, o_cpu, c_wall, c_cpu = (best(ours[form], "wall"), best(ours[form], "cpu"), best(cli[form], "process_s"),
                                        best(cli[form], "process_cpu_s"))
        o_mb, c_mb, o_own = peak(ours[form]), peak(cli[form]), own(ours[form])
        print(f"{'':>16}goodputlab, {form + ':':<14}{o_wall:7.2f} s ({o_cpu:.2f} s of CPU), peak {o_mb:5.0f} MB "
              f"(+{o_own:.0f} MB for the ledger; the whole `report` command {c_wall:.2f} s, {c_cpu:.2f} s of CPU, "
              f"{c_mb:.0f} MB), goodput {ours[form][0]['goodput']:.2%}")
        print(f"{'':>18}{t_wall / o_wall:.1f}x faster than Google's ({t_cpu / o_cpu:.1f}x in CPU time; "
              f"{t_wall / c_wall:.1f}x counting the whole command, {t_cpu / c_cpu:.1f}x in CPU time), "
              f"{t_mb / o_mb:.1f}x less peak memory ({t_mb / c_mb:.1f}x the whole command; "
              f"{t_own / max(o_own, 1):.1f}x counting each ledger's own growth)")
    print(f"{'':>16}the two forms give the same goodput: {ours['step records'][0]['goodput'] == ours['JSON lines'][0]['goodput']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000, help="steps of the job compared category by category")
    p.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000], help="steps of the timed jobs")
    p.add_argument("--rounds", type=int, default=1, help="timed rounds per size (the best is shown)")
    p.add_argument("--no-features", dest="features", action="store_false",
                   help="leave out part 3: interval and rolling goodput, step-time deviation, custom badput and a "
                        "threshold, side by side (vs_google_features.py)")
    args = p.parse_args(argv)
    try:
        import ml_goodput_measurement  # noqa: F401 (only whether it is there)
    except ImportError:
        print("ml-goodput-measurement is not installed: pip install 'goodputlab[google]' (or "
              "ml-goodput-measurement) to run this comparison. Nothing was installed.")
        return 0
    import logging

    logging.disable(logging.WARNING)  # its warnings about GCM uploads: no cloud here
    work = Path(tempfile.mkdtemp(prefix="vs-google-"))
    try:
        print(f"Python {sys.version.split()[0]}, ml-goodput-measurement "
              f"{version('ml-goodput-measurement')}, load average {os.getloadavg()[0]:.2f}\n")
        compare(make_job(args.steps), work)
        if args.sizes:
            print("\ntime and memory, each in a fresh process (Google: its calculator's get_job_goodput over the "
                  "entries already in its in-memory logger; goodputlab: `goodputlab report DIR --json`):")
        for steps in args.sizes:
            timed(steps, work, args.rounds)
        if args.features:
            from vs_google_features import features

            print()
            features(args.steps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
