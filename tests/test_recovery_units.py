"""The pieces of goodputlab.recovery on their own: watchdog, failure clock, control pipe,
stragglers, a DataLoader worker killed and noticed, a real full disk, --ckpt-omit's state
filter, --resume's checks, the booking of recovery's events, the standby's deferred log."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT
from goodputlab import categories as C
from goodputlab.errors import ConfigError
from goodputlab.recovery import booking, disk_full, omit, resume, standby
from goodputlab.recovery.control import ControlChannel, ControlClosed, WorkerControl
from goodputlab.recovery.inject import StragglerSchedule, children_of, is_loader_death, kill_one_child
from goodputlab.recovery.modes import FAILURE_MODES, MODES, FailureClock, poisson_failure_rng
from goodputlab.recovery.watchdog import HeartbeatWatchdog


# --- the heartbeat watchdog ----------------------------------------------------------------------
def test_watchdog_waits_for_the_loop_then_fires_after_the_timeout():
    w = HeartbeatWatchdog(2.0)
    w.beat(1.0, "init")
    assert not w.expired(100.0)  # start-up is not watched
    w.beat(5.0, "compute")
    assert not w.expired(6.9)
    assert w.expired(7.0) and w.silent_for(7.5) == pytest.approx(2.5)
    w.beat(7.2, "step_end")
    assert not w.expired(9.1)
    w.beat(9.15, "exit")  # leaving on its own: no verdict however long teardown takes
    assert not w.expired(50.0)
    w.reset()
    assert w.last_beat is None and not w.armed


def test_watchdog_off_and_bad_timeouts():
    w = HeartbeatWatchdog(None)
    w.beat(0.0, "compute")
    assert not w.expired(1e9)
    for bad in (0, -1.0):
        with pytest.raises(ValueError):
            HeartbeatWatchdog(bad)


def test_a_late_event_never_moves_the_last_beat_back():
    w = HeartbeatWatchdog(1.0)
    w.beat(3.0, "compute")
    w.beat(2.0, "ckpt_commit")  # a background thread's marker, read after a newer event
    assert w.last_beat == 3.0


# --- the failure clock ---------------------------------------------------------------------------
def test_failure_clock_draws_the_supervisors_sequence_one_per_exposure():
    clock = FailureClock(seed=3, mtbf=5.0, at_steps=(30, 10))
    expected = poisson_failure_rng(3).exponential(5.0, size=3)
    deadlines = [clock.expose(100.0 * i) - 100.0 * i for i in range(3)]
    assert deadlines == pytest.approx(list(expected))
    assert not clock.due_now(200.0) and clock.due_now(200.0 + expected[2])
    clock.cover()
    assert not clock.due_now(1e12)
    assert clock.due_at_step(9) is None and clock.due_at_step(12) == 10
    assert clock.due_at_step(12) is None  # fires once: a re-executed step is not failed again
    assert clock.due_at_step(31) == 30 and clock.pending_steps == []


def test_the_train_clock_starts_at_the_first_step_the_wall_clock_at_the_launch():
    draw = poisson_failure_rng(3).exponential(5.0)
    train = FailureClock(seed=3, mtbf=5.0)  # the default
    assert train.clock == "train"
    assert train.launched(10.0) is None and not train.due_now(1e12)  # a launch is not exposed
    assert train.trained(14.0) == 14.0 and train.deadline == pytest.approx(14.0 + draw)
    assert train.trained(15.0) is None  # only the first step starts it
    assert train.exposures == 1
    wall = FailureClock(seed=3, mtbf=5.0, clock="wall")
    assert wall.launched(10.0) == 10.0 and wall.deadline == pytest.approx(10.0 + draw)
    assert wall.trained(14.0) is None and wall.exposures == 1
    with pytest.raises(ValueError, match="failure clock 'launch'"):
        FailureClock(seed=3, mtbf=5.0, clock="launch")


def test_restarts_that_cost_more_than_half_the_mtbf_are_named():
    from goodputlab.recovery.modes import restart_vs_mtbf, restart_warning

    summary = {"failures": 2, "buckets": {"restart": 5.0, "checkpoint_restore": 1.0, "startup": 3.0}}
    check = restart_vs_mtbf(summary, 4.0)
    assert check["restart_s"] == 3.0 and check["ratio"] == 0.75
    assert "--hot-spare" in check["warning"] and "--mtbf" in check["warning"]
    assert restart_warning({"restart_vs_mtbf": check}) == check["warning"]
    assert "warning" not in restart_vs_mtbf(summary, 6.0)  # exactly 0.5: not past it
    no_failures = restart_vs_mtbf({"failures": 0, "buckets": {"startup": 3.0}}, 10.0)  # a restart launches too
    assert no_failures["restart_s"] == 3.0 and "warning" not in no_failures
    assert restart_vs_mtbf(summary, 0.0) is None and restart_warning({}) is None


def test_no_random_failures_without_an_mtbf():
    clock = FailureClock(seed=0, mtbf=0)
    assert clock.expose(0.0) == math.inf and not clock.due_now(1e12)


def test_every_mode_is_described():
    assert FAILURE_MODES == ("kill", "hang", "exception", "loader-death", "disk-full")
    assert {m.name for m in MODES.values() if m.fatal} == {"kill", "hang", "exception"}
    assert all(m.injected_by in ("supervisor", "worker") for m in MODES.values())


# --- the control pipe, across a real process -----------------------------------------------------
_STANDBY = """
import os, sys
from goodputlab.recovery.control import ControlChannel, ControlClosed
ch = ControlChannel(int(sys.argv[1]))
idle = []
print("waiting", flush=True)
try:
    attempt = ch.wait_for_activation(idle=lambda: idle.append(1), idle_every_s=0.05)
except ControlClosed:
    print("closed", flush=True); sys.exit(0)
print("go", attempt, "idle" if idle else "no-idle", flush=True)
import time
deadline = time.monotonic() + 10
while not ch.injection_requested():
    if time.monotonic() > deadline:
        print("no inject", flush=True); sys.exit(1)
    time.sleep(0.01)
print("inject", flush=True)
"""


def _spawn(control: WorkerControl) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", _STANDBY, str(control.child_fd)],
        pass_fds=(control.child_fd,), stdout=subprocess.PIPE, text=True, env=env,
    )
    control.launched()
    return proc


def test_a_standby_waits_for_its_attempt_then_takes_injections():
    control = WorkerControl()
    proc = _spawn(control)
    assert proc.stdout.readline().strip() == "waiting"
    time.sleep(0.3)  # it waits (and keeps itself busy) until the word comes
    assert proc.poll() is None
    assert control.activate(4) and control.inject()
    out, _ = proc.communicate(timeout=20)
    assert out.split() == ["go", "4", "idle", "inject"]
    control.close()
    assert not control.inject()  # closed: nothing is sent, nothing raises


def test_a_standby_exits_when_the_supervisor_closes_the_pipe():
    control = WorkerControl()
    proc = _spawn(control)
    control.close()
    out, _ = proc.communicate(timeout=20)
    assert out.split() == ["waiting", "closed"] and proc.returncode == 0


def test_messages_sent_before_the_reader_looks_are_kept():
    r, w = os.pipe()
    os.write(w, b"inject\ngo 2\n")
    ch = ControlChannel(r)
    assert ch.wait_for_activation() == 2
    assert ch.injection_requested()  # the inject that came first is still there
    assert not ch.injection_requested()
    os.close(w)
    ch.close()


# --- stragglers ----------------------------------------------------------------------------------
def test_stragglers_are_a_seeded_share_of_the_steps():
    s = StragglerSchedule(seed=1, prob=0.2, factor=3.0)
    slowed = s.slowed_steps(2000)
    assert 300 < len(slowed) < 500  # 20% of 2000, within a few standard deviations
    assert slowed == StragglerSchedule(seed=1, prob=0.2, factor=3.0).slowed_steps(2000)
    assert slowed != StragglerSchedule(seed=2, prob=0.2, factor=3.0).slowed_steps(2000)
    assert s.extra_s(0.010) == pytest.approx(0.020)  # a 10 ms step takes 30 ms
    assert not StragglerSchedule(1, 0.0, 3.0).active and not StragglerSchedule(1, 0.5, 1.0).slow(0)
    state = np.random.get_state()[1].copy()
    s.slow(5)
    assert (np.random.get_state()[1] == state).all()  # the training's RNGs are untouched
    with pytest.raises(ValueError):
        StragglerSchedule(0, 1.5, 2.0)
    with pytest.raises(ValueError):
        StragglerSchedule(0, 0.5, 0.5)


# --- a DataLoader worker killed, noticed where it is safe, the loader rebuilt ----------------------
_LOADER = """
import os, signal, sys, time
import torch
from torch.utils.data import DataLoader
from goodputlab.recovery.inject import LoaderWatch, children_of

class Steps:
    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.tensor([i])
    def __len__(self):
        return 400

def loader(start):
    return iter(DataLoader(Steps(), sampler=range(start, 400), num_workers=2, batch_size=None))

watch = LoaderWatch()
it = watch.track(lambda: loader(0))
watch.install()
print("children", len(watch.pids), flush=True)
got, rebuilt, step = [], 0, 0
while step < 40:
    died = False
    try:
        with watch.waiting():
            item = next(it)
    except Exception as e:
        if not watch.explains(e):
            raise
        died = True  # rebuild outside the except block: its traceback holds the old iterator
    if died:
        rebuilt += 1
        it = None  # the old loader shuts its workers down
        it = watch.track(lambda: loader(step))
        continue
    got.append(int(item))
    step += 1
    if step == 10:
        print("kill", flush=True)
        sys.stdin.readline()  # the test kills one of our DataLoader workers now
print("rebuilt", rebuilt, "in_order", got == list(range(40)), flush=True)
"""


def test_a_killed_loader_worker_is_noticed_while_waiting_and_the_loader_rebuilt():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().split() == ["children", "2"]
        assert proc.stdout.readline().strip() == "kill"
        victim = kill_one_child(proc.pid)
        assert victim is not None and victim in children_of(proc.pid) + [victim]
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.split() == ["rebuilt", "1", "in_order", "True"]


def test_loader_death_errors_are_recognised():
    from goodputlab.recovery.inject import LoaderDied

    assert is_loader_death(LoaderDied("x"))
    assert is_loader_death(RuntimeError("DataLoader worker (pid(s) 12) exited unexpectedly"))
    assert not is_loader_death(RuntimeError("CUDA error"))


def test_a_lost_batch_counts_as_a_loader_death_only_once_a_watched_worker_is_dead():
    # A worker SIGKILLed just after it queued a batch: the batch's file descriptor cannot be fetched and
    # the queue raises EOFError while the worker is still dying (make test beside two busy loops, 6d92288).
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        worker, *alive = parent.stdout.readline().split()
        assert alive == ["alive", "False", "False"]  # an EOFError while every worker lives is not the loader's
        assert children_of(parent.pid) == [int(worker)]
        assert kill_one_child(parent.pid) == int(worker)
        parent.wait(timeout=60)
        out = parent.stdout.read()  # (not communicate(timeout=...): it reads past readline's buffer)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert out.split() == ["dead", "True", "True", "False"]
    childless = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert children_of(childless.pid) == [] and kill_one_child(childless.pid) is None
    finally:
        childless.kill()
        childless.wait()


_PARENT = r"""
import subprocess, sys, time
from goodputlab.recovery.inject import LoaderWatch, _died
watch = LoaderWatch()
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
watch.watch([worker.pid])
alive = watch.explains(EOFError(), grace_s=0.0), watch.explains(ConnectionResetError(), grace_s=0.0)
print(worker.pid, "alive", *alive, flush=True)  # the test kills the worker now
while not _died(worker.pid):
    time.sleep(0.01)
print("dead", watch.explains(EOFError()), watch.explains(ConnectionResetError()), watch.explains(ValueError()))
"""


# --- a real full disk ----------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    if not disk_full.can_mount():
        pytest.skip("mounting a tmpfs needs root (the end-to-end disk-full test also runs in a user namespace)")
    with disk_full.small_filesystem(tmp_path / "disk", 4 << 20) as where:
        yield where


def test_fill_leaves_room_for_logs_not_for_a_checkpoint(small_disk):
    ballast, written = disk_full.fill(small_disk, leave_bytes=128 << 10)
    assert written > 3 << 20 and disk_full.free_bytes(small_disk) <= 128 << 10
    (small_disk / "events.jsonl").write_bytes(b"x" * 20_000)  # a log line still fits
    with pytest.raises(OSError) as e:
        (small_disk / "state.pt").write_bytes(b"\0" * (256 << 10))  # a checkpoint does not
    assert disk_full.is_disk_full(e.value)
    wrapped = RuntimeError("a background checkpoint write failed")
    wrapped.__cause__ = e.value
    assert disk_full.is_disk_full(wrapped) and not disk_full.is_disk_full(RuntimeError("other"))
    assert disk_full.release(ballast) == written and not ballast.exists()
    (small_disk / "state.pt").write_bytes(b"\0" * (256 << 10))  # space is back
    assert disk_full.release(ballast) == 0


def test_a_fill_waits_for_the_save_in_progress_and_leaves_the_logs_their_room(small_disk):
    """A save that runs during a fill could take the room left for the logs and still succeed (the worker's
    next event then found no space: make test beside two busy loops). The fill waits for the save."""
    import threading

    from goodputlab.checkpoints.store import CheckpointStore

    store = CheckpointStore(small_disk / "ckpt")
    half_written, go, filled = threading.Event(), threading.Event(), []

    def write_state(f):
        f.write(b"\0" * (512 << 10))
        half_written.set()
        go.wait(30)
        f.write(b"\0" * (256 << 10))

    saver = threading.Thread(target=store.commit, args=(7, write_state))
    saver.start()
    assert half_written.wait(30)
    filler = threading.Thread(target=lambda: filled.append(
        disk_full.fill(small_disk, leave_bytes=128 << 10, between_saves_of=store.root)))
    filler.start()
    filler.join(0.3)
    assert filler.is_alive() and not filled  # held while the save writes
    go.set()
    saver.join(30)
    filler.join(30)
    assert [c.step for c in store.list()] == [7] and store.verify(store.path_for(7))  # the save went through
    assert filled and 64 << 10 <= disk_full.free_bytes(small_disk) <= 128 << 10  # then the fill left the logs' room
    disk_full.release(filled[0][0])


def test_fill_refuses_a_large_file_system(tmp_path):
    with pytest.raises(disk_full.FillRefused, match="small one"):
        disk_full.fill(tmp_path, leave_bytes=1 << 20, max_fs_bytes=1 << 20)
    assert not (tmp_path / disk_full.BALLAST).exists()
    assert 64 << 10 <= disk_full.leave_for(10 << 10) <= disk_full.leave_for(1 << 40) == 4 << 20


# --- --ckpt-omit's state filter ------------------------------------------------------------------
def _state():
    return {"format": 1, "step": 40, "model": {"w": 1}, "optimizer": {"state": {}}, "scheduler": {"s": 1},
            "data": {"step": 40, "batch_size": 16}, "rng": {"torch": 0}}


def test_omit_leaves_parts_out_and_says_so():
    assert omit.parse_omit("rng, optimizer") == ("optimizer", "rng")
    assert omit.parse_omit("") == () and omit.parse_omit(["DATA"]) == ("data",)
    with pytest.raises(ValueError, match="'weights' is not a part"):
        omit.parse_omit("weights")
    full = _state()
    assert omit.omit_from_state(full, ()) is full and omit.omitted_parts(full) == ()
    cut = omit.omit_from_state(full, ("optimizer", "data"))
    assert set(cut) == {"format", "step", "model", "scheduler", "rng", "omitted"}
    assert cut["omitted"] == ["optimizer", "data"] and cut["model"] is full["model"]
    assert omit.omitted_parts(cut) == ("optimizer", "data")
    keys = ("step", "model", "optimizer", "scheduler", "data", "rng")
    assert omit.required_keys(cut, keys) == ["step", "model", "scheduler", "rng"]
    assert omit.data_start(full, 40) == 40 and omit.data_start(cut, 40) == 0


def test_sample_accounting_counts_repeats_and_skips():
    expected = [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert omit.sample_accounting(expected, expected) == {"repeated": 0, "skipped": 0, "seen": 8, "expected": 8}
    replayed = [[0, 1], [2, 3], [0, 1], [2, 3]]  # a restart after step 2 started the data over
    assert omit.sample_accounting(replayed, expected) == {"repeated": 4, "skipped": 4, "seen": 8, "expected": 8}


# --- --resume's checks ---------------------------------------------------------------------------
def test_a_resumed_run_keeps_what_decides_its_model():
    from goodputlab.engine.config import RunConfig

    stored = RunConfig(steps=100, model="tiny", seed=3, mtbf=4.0)
    assert resume.resumed_config(stored, {"mtbf": 0.0, "ckpt": "async"}).mtbf == 0.0
    assert resume.resumed_config(stored, {"batch_size": stored.resolved_batch_size()}).steps == 100
    assert resume.resumed_config(stored, {"steps": 200}).steps == 200  # a run may be extended
    for field, value in (("model", "small"), ("seed", 4), ("batch_size", 3), ("lr", 0.5)):
        with pytest.raises(ConfigError) as e:
            resume.resumed_config(stored, {field: value})
        assert e.value.field == field and "the run being resumed" in e.value.allowed


def test_continuation_picks_up_the_clock_and_the_attempts():
    events = [{"t": 0.0, "attempt": 0}, {"t": 7.5, "attempt": 2}, {"t": 7.25, "attempt": 1}]
    assert resume.continuation(events) == (7.5, 3)
    assert resume.continuation([]) == (0.0, 0)


# --- booking ---------------------------------------------------------------------------------------
def test_recovery_phases_book_to_known_categories_and_do_not_clash():
    from goodputlab.measure import events as E

    assert set(booking.PHASE_CATEGORIES.values()) <= set(C.CATEGORIES)
    assert set(booking.PHASE_CATEGORIES) <= set(E.PHASES)  # the event log knows them as phases
    assert booking.SUPERVISOR_PHASES <= set(booking.PHASE_CATEGORIES)
    assert booking.category_of("straggle") == C.OTHER and booking.category_of("compute") is None


def test_recovery_facts_from_an_event_log():
    phases = frozenset({"compute", "step_end", "failure", "spawn", "end"}) | frozenset(booking.PHASE_CATEGORIES)
    log = [
        {"t": 0.0, "attempt": 0, "kind": "compute", "step": 0},
        {"t": 0.1, "attempt": 0, "kind": "straggle", "step": 0},
        {"t": 0.3, "attempt": 0, "kind": "step_end", "step": 0},
        {"t": 0.31, "attempt": 0, "kind": "failure_injected", "mode": "hang"},
        {"t": 0.31, "attempt": 0, "kind": "hang"},
        {"t": 2.31, "attempt": 0, "kind": "failure", "cause": "hang"},
        {"t": 2.4, "attempt": 1, "kind": "handover"},
        {"t": 2.5, "attempt": 1, "kind": "activate", "standby_startup_s": 3.2},
        {"t": 2.6, "attempt": 1, "kind": "ckpt_failed", "ckpt_step": 5, "reason": "No space left on device"},
        {"t": 2.7, "attempt": 1, "kind": "loader_rebuild", "step": 6},
        {"t": 2.8, "attempt": 1, "kind": "end"},
    ]
    facts = booking.recovery_facts(log, phases)
    assert facts["injected"] == {"hang": 1}
    assert facts["hang_detection_s"] == pytest.approx([2.0])
    assert facts["straggler_s"] == pytest.approx(0.2) and facts["straggler_steps"] == 1
    assert (facts["ckpt_failed"], facts["loader_rebuilds"], facts["handovers"]) == (1, 1, 1)
    assert facts["standby_startup_s"] == [3.2]


# --- the standby's deferred log and priority --------------------------------------------------------
def test_a_standby_keeps_its_markers_and_drops_its_phases_until_activated():
    deferred = standby.DeferredEvents(time.monotonic(), frozenset({"init", "warmup"}))
    deferred.emit("init")
    deferred.emit("worker_info", params=10)
    written = []

    class Log:
        def emit(self, kind, step=None, **fields):
            written.append((kind, step, fields))

    deferred.replay(Log())
    assert written == [("worker_info", None, {"params": 10})]
    assert [k for _, k in deferred.phases] == ["init"]
    assert standby.startup_seconds(deferred, None, deferred.phases[0][0] + 2.0) == pytest.approx(2.0)


def test_idle_priority_only_when_it_can_come_back():
    code = (
        "import os; from goodputlab.recovery import standby as s\n"
        "went = s.enter_idle_priority(); idle = os.sched_getscheduler(0) == os.SCHED_IDLE\n"
        "s.leave_idle_priority(); back = os.sched_getscheduler(0) == os.SCHED_OTHER\n"
        "print(s.can_leave_idle_priority(), went, idle, back)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=30).stdout.split()
    can = out[0] == "True"
    assert out == ([str(can), str(can), str(can), "True"])
