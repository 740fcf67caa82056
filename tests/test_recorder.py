"""gl.Recorder: a user's own loop, recorded, killed with SIGKILL, restarted and reported.

The loops here are real processes writing real event logs; the kills are real SIGKILLs.
Time is only ever checked from below (a phase that contains a sleep lasts at least that
long), so the tests do not depend on the machine's speed.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import goodputlab as gl
from goodputlab.measure import events as E
from goodputlab.measure.ledger import build_ledger
from goodputlab.measure.merge import job_attempts, merge_ranks
from goodputlab.measure.recorder import EventLogError, EventLogWarning, RecorderError
from goodputlab.measure.recording import read_log

ROOT = Path(__file__).resolve().parent.parent
CATS = ("productive", "data_wait", "checkpoint_save", "checkpoint_restore", "lost_work", "restart", "startup", "other")

# A loop without torch: sleeps stand for the work, a JSON file for the checkpoint.
# argv: run_dir total kill_at ckpt_every. It SIGKILLs itself after step kill_at (-1: never).
LOOP = r"""
import json, os, signal, sys, time
import goodputlab as gl
run_dir, total, kill_at, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rank = os.environ.get("RANK", "0")
ck = os.path.join(run_dir, f"ck-rank{rank}.json")  # each rank its own shard, as a sharded checkpoint


# Holds the ranks in step, as DDP's gradient all-reduce does. Without it a rank descheduled on a busy
# machine could start after its neighbour had died, so the job never computed on both ranks at once
# and its lost work read 0 (CI, 6adee98).
def all_reduce(attempt, step, world):
    mine = os.path.join(run_dir, f"ar-rank{rank}")
    with open(mine + ".tmp", "w") as f:
        f.write(f"{attempt} {step}")
    os.replace(mine + ".tmp", mine)
    for r in range(world):
        while True:
            try:
                a, s = map(int, open(os.path.join(run_dir, f"ar-rank{r}")).read().split())
            except (OSError, ValueError):
                a, s = -1, -1
            if a > attempt or (a == attempt and s >= step):
                break
            time.sleep(0.001)


with gl.Recorder(run_dir, total_steps=total) as rec:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    while world > 1:  # a rendezvous, as init_process_group: every rank's attempt has begun
        logs = [os.path.join(run_dir, f"events-rank{r}.jsonl") for r in range(world)]
        mark = f'"attempt":{rec.attempt},"step":null,"kind":"init"'
        if all(os.path.exists(p) and mark in open(p).read() for p in logs):
            break
        time.sleep(0.005)
    with rec.checkpoint_restore():
        step0 = json.load(open(ck))["step"] if os.path.exists(ck) else 0
    for step in range(step0, total):
        with rec.data_wait():
            time.sleep(0.002)
        with rec.step(step) as s:
            time.sleep(0.003)
            if world > 1:
                all_reduce(rec.attempt, step, world)
            s.loss = 1.0 / (1 + step)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # dies between two checkpoints
        if (step + 1) % every == 0:
            with rec.checkpoint_save(step):
                tmp = f"{ck}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    json.dump({"step": step + 1}, f)
                os.replace(tmp, ck)
"""


def run_loop(run_dir: Path, total: int, kill_at: int = -1, every: int = 5, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", LOOP, str(run_dir), str(total), str(kill_at), str(every)],
        env={**os.environ, **(env or {})},
    )


def closes(summary: dict) -> bool:
    return sum(summary["buckets"].values()) == pytest.approx(summary["wall_s"], rel=1e-6)


def report_json(cli, env, run_dir) -> dict:
    r = subprocess.run([*cli, "report", str(run_dir), "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# --- one attempt, in this process -------------------------------------------------------
def test_phases_are_booked_and_close_to_the_wall_time(tmp_path):
    steps, saves = 12, 3
    with gl.Recorder(tmp_path / "r", total_steps=steps) as rec:
        time.sleep(0.02)  # building the model
        with rec.checkpoint_restore():
            time.sleep(0.01)
        for step in range(steps):
            with rec.data_wait():
                time.sleep(0.002)
            with rec.step(step) as s:
                time.sleep(0.003)
                s.loss = 2.0 - step / 10
            if (step + 1) % (steps // saves) == 0:
                with rec.checkpoint_save(step):
                    time.sleep(0.01)
                time.sleep(0.004)  # logging after the save: the loop's own time
    result = gl.load_run(tmp_path / "r")
    b, s = result.buckets, result.summary
    assert closes(s) and result.ledger.wall_s == pytest.approx(s["wall_s"])
    assert b["startup"] >= 0.02 + 0.002  # before the Recorder's restore block, and the first batch
    assert b["checkpoint_restore"] >= 0.01
    assert b["data_wait"] >= (steps - 1) * 0.002  # the first batch is start-up
    assert b["productive"] >= steps * 0.003
    assert b["checkpoint_save"] >= saves * 0.01
    assert b["other"] >= saves * 0.004
    assert b["lost_work"] == b["restart"] == 0
    assert s["completed"] and s["steps_completed"] == steps and s["steps_executed"] == steps
    assert s["failures"] == 0 and s["attempts"] == 1 and s["checkpoints"] == saves
    assert s["initial_loss"] == 2.0 and s["final_loss"] == pytest.approx(2.0 - (steps - 1) / 10)
    assert s["config"]["source"] == "recorder"
    # the same result object as gl.run: its charts build
    assert result.timeline_chart().to_dict() and result.breakdown_chart().to_dict() and result.loss_chart().to_dict()
    assert "goodput" in result.table()
    assert not (tmp_path / "r" / "summary.json").exists()  # the event log stays the only source


def test_the_recorder_writes_the_workers_format(tmp_path):
    with gl.Recorder(tmp_path) as rec:
        with rec.data_wait():
            pass
        with rec.step(0) as s:
            s.loss = 1.5
    events = read_log(tmp_path / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds == [E.W_INIT, E.W_WARMUP, E.W_COMPUTE, E.W_STEP_END, E.M_FINISH, E.SUP_END]
    assert all(set(e) >= {"t", "attempt", "step", "kind"} for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert events[3]["loss"] == 1.5 and events[3]["step"] == 0
    assert json.loads((tmp_path / "recorder.json").read_text())["t0_unix"] == events[0]["t0_unix"]


@pytest.mark.parametrize(
    "t,attempt,step,kind,fields",
    [
        (1.23456789, 0, 5, "compute", {}),
        (0.0, 3, None, "init", {"t0_unix": 1.5e9, "host": "vm", "pid": 4}),
        (1e-9, 0, 0, "step_end", {"loss": None, "samples": [1, 2]}),
        (2.5, 1, 7, "step_end", {"loss": float("nan")}),
        (5, 0, 1, "end", {"completed": True, "reason": 'error: "\u00e9"'}),
        (3.3, 0, True, "compute", {}),
        (1.0, 0, 2, 'k"ind', {}),
        (1.0, 0, 2, "\u00e9", {}),
        (1.0, 0, 2, "end", {"step": 9}),
    ],
)
def test_the_writers_fast_path_writes_what_json_dumps_writes(t, attempt, step, kind, fields):
    record = {"t": round(t, 7), "attempt": attempt, "step": step, "kind": kind, **fields}
    assert E.event_line(t, attempt, step, kind, fields) == (json.dumps(record, separators=(",", ":")) + "\n").encode()


def test_importing_the_recorder_does_not_import_torch():
    code = "import sys, goodputlab as gl; gl.Recorder; import goodputlab.measure.merge; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_one_live_recorder_per_log(tmp_path):
    rec = gl.Recorder(tmp_path)
    with pytest.raises(RecorderError, match="being recorded by a live Recorder"):
        gl.Recorder(tmp_path)
    fd = os.open(tmp_path / "events.jsonl", os.O_RDONLY)
    try:  # the attempt's lock is a file of its own: the log stays free for its writers' own locking
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    rec.close(completed=False)
    gl.Recorder(tmp_path).close()  # the lock went with the first attempt


def test_a_lab_run_folder_is_refused(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(RecorderError, match="lab run"):
        gl.Recorder(tmp_path)


# --- attempts -----------------------------------------------------------------------------------
def test_sigkill_mid_run_then_restart_books_lost_work_and_restart(tmp_path, cli, cli_env):
    run_dir = tmp_path / "job"
    p = run_loop(run_dir, total=20, kill_at=13, every=5)  # checkpoints after steps 4 and 9
    assert p.wait(timeout=60) == -9

    before = report_json(cli, cli_env, run_dir)  # the job is down: what the kill has cost so far
    assert not before["completed"] and before["failures"] == 1
    assert before["steps_completed"] == 10  # the newest checkpoint
    assert before["buckets"]["lost_work"] >= 4 * 0.003  # steps 10..13 ran past it
    assert closes(before)

    time.sleep(0.2)  # rescheduling
    assert run_loop(run_dir, total=20, every=5).wait(timeout=60) == 0
    s = report_json(cli, cli_env, run_dir)
    assert closes(s)
    assert s["completed"] and s["steps_completed"] == 20 and s["steps_executed"] == 14 + 10
    assert s["failures"] == 1 and s["attempts"] == 2
    assert s["buckets"]["restart"] >= 0.2
    assert s["buckets"]["lost_work"] >= 4 * 0.003
    assert s["buckets"]["productive"] >= 20 * 0.003
    rows = gl.load_run(run_dir).per_step()
    lost = sorted(r["step"] for r in rows if r["compute_s"] > 0 and not r["survived"])
    assert lost == [10, 11, 12, 13] and all(r["attempt"] == 0 for r in rows if r["step"] in lost and not r["survived"])
    kept = {r["step"]: r["attempt"] for r in rows if r["survived"]}
    assert kept == {**{i: 0 for i in range(10)}, **{i: 1 for i in range(10, 20)}}


def test_a_clean_close_is_no_failure_and_an_exception_is(tmp_path):
    run_dir = tmp_path / "j"
    with gl.Recorder(run_dir, total_steps=6) as rec:  # stops early, cleanly (a planned preemption)
        for step in range(3):
            with rec.step(step):
                pass
        with rec.checkpoint_save(step):
            pass
    time.sleep(0.05)
    with pytest.raises(ZeroDivisionError):
        with gl.Recorder(run_dir, total_steps=6) as rec:  # attempt 1 crashes in step 4
            for step in range(3, 6):
                with rec.step(step):
                    if step == 4:
                        1 / 0
    time.sleep(0.05)
    with gl.Recorder(run_dir, total_steps=6) as rec:  # attempt 2 resumes at 3 and finishes
        for step in range(3, 6):
            with rec.step(step):
                pass
    result = gl.load_run(run_dir)
    s = result.summary
    assert s["attempts"] == 3 and s["failures"] == 1  # only the crash
    assert s["buckets"]["restart"] >= 0.1 and closes(s) and s["completed"]
    events = result.events
    assert [e["attempt"] for e in events if e["kind"] == E.SUP_RESTART_DELAY] == [0]
    assert [e["attempt"] for e in events if e["kind"] == E.SUP_FAILURE] == [1]
    assert {(r["attempt"], r["step"]) for r in result.per_step() if not r["survived"]} == {(1, 3), (1, 4)}


def test_close_without_total_steps_completes_and_with_it_checks(tmp_path):
    with gl.Recorder(tmp_path / "a") as rec:
        with rec.step(0):
            pass
    assert gl.load_run(tmp_path / "a").summary["completed"]
    with gl.Recorder(tmp_path / "b", total_steps=10) as rec:
        with rec.step(0):
            pass
    s = gl.load_run(tmp_path / "b").summary
    assert not s["completed"] and "closed after 1 of 10" in s["stop_reason"]
    rec = gl.Recorder(tmp_path / "c", total_steps=10)
    rec.close(completed=True)
    assert gl.load_run(tmp_path / "c").summary["completed"]


def test_a_live_recording_keeps_its_steps(tmp_path):
    rec = gl.Recorder(tmp_path)
    for step in range(3):
        with rec.step(step):
            pass
    s = gl.load_run(tmp_path).summary  # read while it records
    assert not s["completed"] and s["stop_reason"].startswith("running") and s["failures"] == 0
    assert s["steps_completed"] == 3 and s["buckets"]["lost_work"] == 0
    rec.close()


def test_steps_that_go_backwards_warn(tmp_path):
    with gl.Recorder(tmp_path) as rec:
        with rec.step(5):
            pass
        with pytest.warns(UserWarning, match="global step"):
            with rec.step(0):
                pass


# --- damaged logs -------------------------------------------------------------------------------
def _one_step_run(run_dir: Path) -> None:
    with gl.Recorder(run_dir) as rec:
        with rec.step(0):
            pass


def test_a_line_cut_short_is_read_up_to_the_line_before(tmp_path, cli, cli_env):
    _one_step_run(tmp_path)
    log = tmp_path / "events.jsonl"
    whole = gl.load_run(tmp_path).summary
    with open(log, "ab") as f:
        f.write(b'{"t":99.0,"attempt":1,"st')  # a kill in the middle of a write
    with pytest.warns(EventLogWarning, match="cut short"):
        again = gl.load_run(tmp_path).summary
    assert again["buckets"] == whole["buckets"]
    r = subprocess.run([*cli, "report", str(tmp_path)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert r.returncode == 0 and "goodput" in r.stdout
    assert r.stderr.count("\n") == 1 and "warning" in r.stderr and "events.jsonl" in r.stderr

    with pytest.warns(EventLogWarning, match="dropped"):
        with pytest.warns(UserWarning, match="completed run"):
            rec = gl.Recorder(tmp_path)  # the next attempt cuts the partial line off before appending
    rec.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        events = read_log(log)  # every line whole again
    assert events[-1]["kind"] == E.SUP_END and events[-1]["attempt"] == 1


def test_a_damaged_line_inside_the_log_is_an_error(tmp_path, cli, cli_env):
    _one_step_run(tmp_path)
    log = tmp_path / "events.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[1] = b"garbage"
    log.write_bytes(b"\n".join(lines))
    with pytest.raises(EventLogError, match="line 2"):
        gl.load_run(tmp_path)
    r = subprocess.run([*cli, "report", str(tmp_path)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "line 2" in r.stderr


@pytest.mark.parametrize("what", ["missing", "empty"])
def test_report_of_no_run_exits_2_with_one_line(tmp_path, cli, cli_env, what):
    target = tmp_path / "nothing-here" if what == "missing" else tmp_path
    r = subprocess.run([*cli, "report", str(target)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and str(target) in r.stderr and "Traceback" not in r.stderr


# --- ranks --------------------------------------------------------------------------------------
def _ev(t, attempt, kind, step=None, **f):
    return {"t": t, "attempt": attempt, "step": step, "kind": kind, **f}


def _rank(start, steps, attempt=0, step0=0, dt=1.0, end=True, **end_fields):
    """One rank's log: init at ``start``, then data_wait/compute/step_end for each step."""
    evs, t = [_ev(start, attempt, E.W_INIT)], start + 1
    for s in range(step0, step0 + steps):
        evs += [
            _ev(t, attempt, E.W_DATA_WAIT, s),
            _ev(t + 0.2, attempt, E.W_COMPUTE, s),
            _ev(t + 0.8, attempt, E.W_STEP_END, s, loss=1.0),
        ]
        t += dt
    if end:
        evs.append(_ev(t, attempt, E.SUP_END, completed=True, clean=True, reason="completed"))
    return evs


def test_merge_books_the_job_at_its_slowest_rank():
    # rank 0 is ready at 1 s, rank 1 starts recording at 2 s; both step in lockstep from 3 s
    r1 = _rank(2.0, 3)
    r0 = [_ev(0.0, 0, E.W_INIT), _ev(1.0, 0, E.W_DATA_WAIT, 0)] + _rank(2.0, 3)[1:]
    merged = merge_ranks({0: r0, 1: r1})
    ledger = build_ledger(merged)
    assert ledger.wall_s == pytest.approx(r1[-1]["t"])
    assert ledger.buckets["startup"] == pytest.approx(3.0)  # until rank 1's first step, its first batch included
    assert ledger.buckets["productive"] == pytest.approx(3 * 0.6)  # only while both compute
    assert sum(ledger.buckets.values()) == pytest.approx(ledger.wall_s, rel=1e-9)
    assert merged[-1]["kind"] == E.SUP_END and merged[-1]["completed"]


def test_merge_matches_attempts_by_time_and_counts_a_failure_once():
    # rank 1 died before recording in attempt 1, so its numbering lags rank 0's by one
    r0 = _rank(0.0, 4, end=False) + [_ev(4.8, 0, E.SUP_FAILURE)]
    r0 += _rank(6.0, 4, attempt=1, step0=2, end=False) + [_ev(10.8, 1, E.SUP_FAILURE)]
    r0 += _rank(12.0, 2, attempt=2, step0=4)
    r1 = _rank(0.0, 4, end=False) + [_ev(4.8, 0, E.SUP_FAILURE)]
    r1 += _rank(12.0, 2, attempt=1, step0=4)
    assert job_attempts({0: r0, 1: r1})[(1, 1)] == 2
    merged = merge_ranks({0: r0, 1: r1})
    ledger = build_ledger(merged)
    assert sum(1 for e in merged if e["kind"] == E.SUP_FAILURE) == 2
    assert sum(ledger.buckets.values()) == pytest.approx(ledger.wall_s, rel=1e-9)
    assert ledger.buckets["lost_work"] > 0 and ledger.buckets["restart"] > 0
    assert max(e["attempt"] for e in merged) == 2


def test_merge_resumes_from_the_checkpoint_every_saving_rank_has():
    commit = lambda t, s: _ev(t, 0, E.M_CKPT_COMMIT, ckpt_step=s)  # noqa: E731
    r0 = _rank(0.0, 4, end=False) + [commit(1.9, 2), commit(3.9, 4)]
    r1 = _rank(0.0, 4, end=False) + [commit(1.9, 2)]  # its shard of step 4 never committed
    r2 = _rank(0.0, 4, end=False)  # saves nothing (only some ranks save)
    killed = [_ev(4.8, 0, E.SUP_FAILURE), _ev(4.8, 0, E.SUP_END, completed=False, clean=False)]
    merged = merge_ranks({r: evs + killed for r, evs in enumerate((r0, r1, r2))})
    assert merged[-1]["resume_step"] == 2
    assert sorted(e["ckpt_step"] for e in merged if e["kind"] == E.M_CKPT_COMMIT) == [2, 4]


def test_ranks_under_torchrun_write_their_own_logs_and_report_merges_them(tmp_path, cli, cli_env):
    run_dir = tmp_path / "ddp"
    env = lambda r: {"RANK": str(r), "WORLD_SIZE": "2"}  # noqa: E731
    procs = [run_loop(run_dir, total=12, kill_at=7, every=5, env=env(r)) for r in (0, 1)]
    assert [p.wait(timeout=60) for p in procs] == [-9, -9]
    procs = [run_loop(run_dir, total=12, every=5, env=env(r)) for r in (0, 1)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert sorted(p.name for p in run_dir.glob("events*")) == [
        "events-rank0.jsonl", "events-rank0.steps.bin", "events-rank1.jsonl", "events-rank1.steps.bin"]
    s = report_json(cli, cli_env, run_dir)
    assert closes(s) and s["completed"] and s["steps_completed"] == 12
    assert s["failures"] == 1 and s["attempts"] == 2 and s["config"]["ranks"] == [0, 1]
    assert s["buckets"]["lost_work"] > 0 and s["buckets"]["restart"] > 0


# --- the examples: real PyTorch loops, killed from outside and restarted ------------------------
@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """Both examples through examples/kill_and_restart.sh, side by side (each: train, SIGKILL, train again, report)."""
    root = tmp_path_factory.mktemp("examples")
    exe = Path(sys.executable).parent / "goodputlab"
    env = {**os.environ, "PYTHON": sys.executable, "GOODPUTLAB": str(exe) if exe.exists() else "goodputlab",
           "KILL_AFTER": "40", "RESTART_DELAY": "0.3"}
    procs = {
        name: subprocess.Popen(
            ["bash", str(ROOT / "examples" / "kill_and_restart.sh"), name, str(root / name), "--steps", "200"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for name in ("plain", "dcp")
    }
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=240)
        assert p.returncode == 0, stderr
        out[name] = (root / name, stdout)
    return out


@pytest.mark.parametrize("name", ["plain", "dcp"])
def test_example_killed_and_restarted_is_reported(examples, name, cli, cli_env):
    run_dir, stdout = examples[name]
    assert "SIGKILL after" in stdout and "trained 200 steps" in stdout and "restart" in stdout
    s = report_json(cli, cli_env, run_dir)
    assert closes(s)
    assert s["completed"] and s["steps_completed"] == 200 and s["failures"] == 1 and s["attempts"] == 2
    # the script stops the loop before it counts, so it names the steps completed at the kill
    killed_after = int(stdout.split("SIGKILL after ")[1].split()[0])
    events = read_log(run_dir / "events.jsonl")
    first = [e for e in events if e["kind"] == "step_end" and e["attempt"] == 0]
    assert len(first) == killed_after >= 40
    resume = next(e["step"] for e in events if e["kind"] == "compute" and e["attempt"] == 1)
    assert resume % 25 == 0 and killed_after - 25 <= resume <= killed_after  # the newest checkpoint
    # the first attempt's executions from the resume point on ran again, and no others
    rerun = {e["step"] for e in events if e["kind"] == "compute" and e["attempt"] == 0 and e["step"] >= resume}
    assert s["steps_executed"] == 200 + len(rerun)
    assert s["buckets"]["lost_work"] > 0 or killed_after == resume  # a step completed past it was lost
    assert s["buckets"]["restart"] >= 0.3
    assert s["buckets"]["checkpoint_restore"] > 0 and s["checkpoints"] >= 200 // 25
    assert 0 < s["goodput"] < 1 and s["final_loss"] < s["initial_loss"]


# --- help, the fast lines, SIGKILL durability -----------------------------------------------------
def test_help_shows_the_recorders_arguments_and_blocks():
    import pydoc

    text = pydoc.render_doc(gl.Recorder, renderer=pydoc.plaintext)
    assert ("Recorder(run_dir: 'str | Path', *, total_steps: 'int | None' = None, rank: 'int | None' = None, "
            "step_records: 'bool' = True, cuda_sync: 'bool' = False)") in text
    for word in ("``run_dir``", "``total_steps``", "``rank``", "``step_records``", "checkpoint_restore", "data_wait", "checkpoint_save", "close"):
        assert word in text, word
    assert "Initialize self" not in text  # __init__ says what its arguments are


@pytest.mark.parametrize("t", [0.0, 1e-07, 0.5, 3.14159265358979, 12.34567895, 1234567.1234567, 98765.00000005])
def test_a_time_written_with_seven_decimals_reads_as_the_writer_rounded_it(t):
    line = b'{"t":%.7f,"attempt":0,"step":1,"kind":"compute"}' % t
    assert json.loads(line)["t"] == round(t, 7)


def test_a_negative_step_is_refused(tmp_path):
    with gl.Recorder(tmp_path) as rec:
        with pytest.raises(ValueError, match="step=-1 is invalid"):
            with rec.step(-1):
                pass


KILLED_MID_WRITE = r"""
import sys, goodputlab as gl
rec = gl.Recorder(sys.argv[1])
print("recording", flush=True)
step = 0
while True:  # as fast as it can: a kill lands in the middle of writing, if anywhere
    with rec.data_wait():
        pass
    with rec.step(step) as s:
        s.loss = 0.5
    step += 1
"""


def test_sigkill_at_random_moments_cuts_at_most_the_write_in_progress_which_the_next_attempt_drops(tmp_path):
    import random

    rng = random.Random(7)
    records = tmp_path / "events.steps.bin"
    for attempt in range(6):
        p = subprocess.Popen([sys.executable, "-c", KILLED_MID_WRITE, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "recording"
        # this attempt's Recorder has opened the files: whatever the last kill cut short is gone
        assert records.stat().st_size % 40 == 0 and (tmp_path / "events.jsonl").read_bytes().endswith(b"\n")
        time.sleep(rng.uniform(0.02, 0.3))
        p.kill()
        p.wait()
        # Linux checks for a kill between the pages of one write, so a record that crosses a page can be cut
        # (benchmarks/sigkill_tear.py): only that record, the last, which the reader leaves out with a warning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            events = read_log(tmp_path / "events.jsonl")
        assert all(w.category is EventLogWarning and "cut short at the end" in str(w.message) for w in caught)
        assert len(caught) <= 1 and (len(caught) == 1) == (records.stat().st_size % 40 != 0)
        assert events[-1]["attempt"] == attempt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EventLogWarning)
        s = gl.load_run(tmp_path).summary
    assert s["attempts"] == 6 and s["failures"] == 6 and closes(s)


def test_steps_csv_writes_one_row_per_execution_and_never_through_a_link(tmp_path, cli, cli_env):
    import csv

    run_dir = tmp_path / "job"
    assert run_loop(run_dir, total=12, kill_at=7, every=5).wait(timeout=60) == -9
    assert run_loop(run_dir, total=12, every=5).wait(timeout=60) == 0
    victim = tmp_path / "victim.csv"
    victim.write_text("the user's file\n")
    out = tmp_path / "steps.csv"
    out.symlink_to(victim)  # a link where the CSV goes: replaced, its target untouched
    r = subprocess.run([*cli, "report", str(run_dir), "--steps-csv", str(out)], capture_output=True, text=True,
                       env=cli_env, timeout=60)  # fmt: skip
    assert r.returncode == 0 and "goodput" in r.stdout, r.stderr
    assert victim.read_text() == "the user's file\n" and not out.is_symlink()
    rows = list(csv.DictReader(out.open()))
    want = gl.load_run(run_dir).per_step()
    assert [(int(r["attempt"]), int(r["step"]), r["survived"]) for r in rows] == [
        (w["attempt"], w["step"], str(w["survived"])) for w in want
    ]
    assert sum(float(r["compute_s"]) for r in rows) == pytest.approx(sum(w["compute_s"] for w in want))
    assert [r["step"] for r in rows if r["survived"] == "False"] == ["5", "6", "7"]
