"""Supervision of a single-process run: launch the worker, kill it at failure times, relaunch it.

Failures are real: at each failure time the supervisor sends SIGKILL to the
worker's whole process group (the worker and its DataLoader workers, as when a
node dies), waits ``restart_delay`` seconds (emulated rescheduling) and launches
a new worker, which resumes from the newest valid checkpoint.

Failure times come from a seeded Poisson process: each worker's time to failure
is exponential with mean ``mtbf`` seconds, counted from its first step (``--failure-clock
train``: a slow launch cannot use up the MTBF) or from its launch (``wall``: start-up and
restore are exposed too); see :class:`~goodputlab.recovery.modes.FailureClock`.
``kill_at_steps`` adds deterministic failures for tests and demonstrations.

What a distributed run's supervision shares with this one (the progress it reports, the end of
the run's files, the resume check) is here too; the torchrun path is
:mod:`goodputlab.engine.torchrun_supervision`, the entry point :mod:`goodputlab.engine.supervisor`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..measure import events as E
from ..checkpoints.store import CheckpointStore, CheckpointWarning, state_file_cap
from .config import RunConfig
from ..measure.events import EventTail, EventWriter, read_events
from .interrupts import RunInterrupted
from .launch import WorkerCrashed, WorkerLog, killed_from_outside, launch_worker
from ..training.threads import choose_threads
from ..measure.ledger import summarize
from ..checkpoints import strategies
from ..checkpoints.registry import RunResource
from .run_dir import RunDir
from ..errors import ConfigError
from ..recovery.control import WorkerControl
from ..recovery.injector import Injector
from ..recovery.modes import FailureClock, restart_vs_mtbf
from ..recovery.resume import check_resume_compatible, continuation
from ..recovery.forkserver import ForkServer, warm_spares
from ..recovery.spare import HotSpare, kill_group
from ..recovery.watchdog import HeartbeatWatchdog
from ..safe_io import read_regular, write_atomic
from ..training.workload import PRESETS
from ..measure.events import SUP_HANDOVER, SUP_HANG, SUP_RESUME
from ..recovery.booking import M_EXPOSED

POLL_S = 0.02  # how often the supervisor looks at the worker and the event log
FORK_SERVER_WAIT_S = 60.0  # the most a handover waits for a fork server still importing torch


@dataclass
class Progress:
    """What a progress display is told while a run goes on."""

    steps_done: int  # steps in the newest state of the live worker (falls back after a failure)
    steps: int
    attempt: int
    failures: int
    phase: str


ProgressCallback = Callable[[Progress], None]


def poisson_failure_rng(seed: int) -> np.random.Generator:
    """The generator of a run's Poisson failure times: the ``i``-th exposure (its ``exposed`` marker)
    ends in a failure after the ``i``-th exponential draw (mean ``mtbf``). Public so a model can replay them."""
    return np.random.default_rng([seed, 0xFA11])



class Supervision:
    """One run under supervision: its files and event log, the attempts, the failures, the progress.

    Recovery (:mod:`goodputlab.recovery`) enters in named places: the failure clock and the
    injector decide when and how a failure strikes (:meth:`watch`), the heartbeat watchdog
    notices a hung worker, the hot spare takes over at a failure (:meth:`start_worker`), and a
    resumed run continues its event log (:meth:`open_log`).
    """

    def __init__(self, config: RunConfig, run_dir: RunDir, progress: ProgressCallback | None, resume: bool, python: str,
                 announce: Callable[[str], None] | None = None):
        threads, why = run_threads(config, run_dir.path, resume)
        config = config.replace(threads=threads)  # every worker (and config.json) gets the same count
        self.config, self.run_dir, self.progress, self.python = config, run_dir, progress, python
        self.out = out = run_dir.path
        self.resumed = resume and (out / "events.jsonl").is_file()
        if resume:
            check_resume(out, config)  # refuse a configuration that does not match the run's checkpoints
        run_dir.prepare(keep_checkpoints=resume, resume=self.resumed)
        run_dir.reserve()  # space for the summary if the disk fills up
        (out / "logs").mkdir(exist_ok=self.resumed)
        write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=1, sort_keys=True).encode())
        self.open_log()
        if announce is not None:
            announce(run_line(config, why))

        self.clock = FailureClock(config.seed, config.mtbf, config.kill_at_steps, clock=config.failure_clock)
        if self.resumed:
            self.clock.continue_from(read_events(out / "events.jsonl"))
        self.watchdog = HeartbeatWatchdog(config.resolved_hang_timeout())
        self.injector = Injector(config, out, self.ev, PRESETS[config.model].state_bytes)
        self.spare = HotSpare(self.launch_standby, self.ev) if config.hot_spare else None
        self.forks: ForkServer | None = None  # started with the run when there is a hot spare
        self.failures = 0
        self.completed, self.reason = False, ""
        self.proc: subprocess.Popen | None = None
        self.control: WorkerControl | None = None
        self.log: WorkerLog | None = None
        self.logs: list[WorkerLog] = []
        self.state = Progress(0, config.steps, self.attempt, 0, "startup")

    def open_log(self) -> None:
        """The event log: a new one, or (``--resume``) the run's own, continued as the next attempts on
        a clock that goes on from its last event (the time the run was stopped is not its wall time)."""
        events_path = self.out / "events.jsonl"
        last_t, self.attempt = 0.0, 0
        if self.resumed:
            last_t, self.attempt = continuation(read_events(events_path))
        self.first_attempt = self.attempt
        self.t0 = time.monotonic() - last_t
        self.tail = EventTail(events_path)
        self.ev = EventWriter(
            events_path, self.t0, attempt=self.attempt, create=not self.resumed, heal_tail=True, on_truncate=self.tail.truncated
        )
        if self.resumed:
            self.tail.poll()  # the old session's events are history, not news

    def run(self) -> dict:
        """Launch, kill and relaunch workers until the run completes, crashes, is stopped or runs out of failures."""
        resource = RunResource()
        try:
            self.ev.emit(SUP_RESUME if self.resumed else E.SUP_START)
            # a strategy's run-level resource (the memory strategy's RAM tier) outlives every worker
            resource = strategies.prepare_run(self.config, fallbacks=(self.out,))
            for kind, fields in resource.events:
                self.ev.emit(kind, **fields)
            self.env = resource.env
            if self.spare is not None and warm_spares():  # standbys forked from a process that imported torch once
                self.forks = ForkServer(self.launch_fork_server)
            while True:
                cause = self.attempt_until_failure()
                if cause is None:
                    self.worker_exited()  # completed, or raises WorkerCrashed
                    break
                if not self.fail(cause):
                    break
        except BaseException as exc:  # Ctrl-C, SIGTERM, a crash, a full disk: no process left, keep a summary
            self.stop(exc)
            raise
        finally:
            self.release_workers()
            resource.cleanup()
        summary = finish_run(self.ev, self.run_dir, self.config, self.completed, self.reason, self.logs)
        self.tell(steps_done=summary["steps_completed"], phase="done" if self.completed else "stopped")
        return summary

    def tell(self, **changes) -> None:
        for k, v in changes.items():
            setattr(self.state, k, v)
        if self.progress is not None:
            self.progress(self.state)

    def follow(self, new_events: list[dict]) -> str | None:
        """Follow the live worker's events; returns a failure cause when a failure at a step is due."""
        cause = None
        for e in new_events:
            if e["attempt"] != self.attempt:
                continue
            self.watchdog.beat(e["t"], e["kind"])  # every event of the live worker is a sign of progress
            self.injector.follow(e)
            if e["kind"] == E.W_COMPUTE and self.clock.trained(self.t0 + e["t"]) is not None:
                self.ev.emit(M_EXPOSED, t=e["t"], clock=self.clock.clock)  # the train clock starts at the first step
            if e["kind"] == E.W_STEP_END:
                done = e["step"] + 1
                due = self.clock.due_at_step(done)
                if due is not None and cause is None:
                    cause = f"kill_at_step {due}"
                if self.spare is not None:
                    self.spare.ensure()  # a standby that died while it waited is replaced
                self.tell(steps_done=done, phase="training")
            elif e["kind"] == E.M_RESTORED:
                self.tell(steps_done=e["ckpt_step"], phase="restored")
            elif e["kind"] == E.M_CKPT_INVALID:
                warnings.warn(invalid_message(e), CheckpointWarning, stacklevel=6)
        return cause

    def start_worker(self) -> None:
        """Make a worker live as ``self.attempt``: the hot spare when there is one, else a new process."""
        ev = self.ev
        ev.attempt = self.attempt
        standby = self.spare.take() if self.spare is not None else None
        if standby is not None:
            ev.emit(SUP_HANDOVER, standby=standby.index)
            if standby.control.activate(self.attempt):
                self.proc, self.log, self.control = standby.proc, standby.log, standby.control
                self.log.rename(self.out / "logs" / f"attempt-{self.attempt:03d}.log")
                return
            HotSpare._discard(standby)  # it died as it was handed the job: start one the cold way
        ev.emit(E.SUP_SPAWN)
        self.log = WorkerLog(self.out / "logs" / f"attempt-{self.attempt:03d}.log")
        self.logs.append(self.log)
        self.control = WorkerControl()
        try:
            # with a fork server (a hot spare's run), the first launch is a fork of it too: its imports are
            # the ones a new process would make, and the first standby is ready a moment after
            forked = None
            if self.forks is not None and self.forks.wait_ready(FORK_SERVER_WAIT_S):
                forked = self.forks.spawn(self.control.child_fd, self.log.write_fd, attempt=self.attempt)
            if forked is not None:
                self.proc = forked
                self.log.start()
            else:
                self.proc = launch_worker(self.python, self.out, self.attempt, self.t0, self.log, self.env, self.control)
        finally:
            self.control.launched()

    def launch_standby(self, index: int, control: WorkerControl):
        """Launch standby ``index`` (for :class:`~goodputlab.recovery.spare.HotSpare`): ``(process, log)``,
        forked by the fork server; None while the fork server is still starting (asked again later)."""
        forks = self.forks
        if forks is not None and forks.alive() and not forks.ready():
            return None
        log = WorkerLog(self.out / "logs" / f"standby-{index:03d}.log")
        self.logs.append(log)
        proc = forks.spawn(control.child_fd, log.write_fd) if forks is not None else None
        if proc is not None:
            log.start()
            return proc, log
        return launch_worker(self.python, self.out, None, self.t0, log, self.env, control), log

    def launch_fork_server(self, sock_fd: int):
        log = WorkerLog(self.out / "logs" / "fork-server.log")
        self.logs.append(log)
        return launch_worker(self.python, self.out, None, self.t0, log, self.env, fork_server_fd=sock_fd)

    def attempt_until_failure(self) -> str | None:
        """Make a worker live and watch it: the cause of its failure when one is due, None when it exits by itself."""
        self.start_worker()
        if self.spare is not None:
            self.spare.ensure()  # the next standby starts now, beside the live worker (at idle priority)
        proc = self.proc
        started = self.clock.launched(time.monotonic())  # the wall clock runs from the launch, or the handover
        if started is not None:
            self.ev.emit(M_EXPOSED, t=started - self.t0, clock=self.clock.clock)
        self.watchdog.reset()
        self.injector.new_worker()
        self.tell(attempt=self.attempt, phase="startup" if self.attempt == 0 else "restart")
        while True:
            try:
                proc.wait(timeout=max(0.0, min(POLL_S, self.clock.seconds_left(time.monotonic()))))
                return self.injector.exit_cause(proc.returncode) or killed_from_outside(proc.returncode)
            except subprocess.TimeoutExpired:
                pass
            cause = self.follow(self.tail.poll())
            self.injector.poll(proc)  # a loader death waits for the worker's loader processes
            if cause is None and self.clock.due_now(time.monotonic()):
                cause = "poisson"
            if cause is not None:
                cause = self.injector.strike(cause, proc, self.control)
                if cause is not None:
                    return cause  # kill
                if self.injector.asked is not None:
                    self.clock.cover()  # the worker was asked to fail: it is not exposed again
                else:
                    now = time.monotonic()
                    self.clock.expose(now)  # a failure it survives: its exposure goes on
                    self.ev.emit(M_EXPOSED, t=now - self.t0, clock=self.clock.clock)
            if self.watchdog.expired(self.ev.now()):
                return "hang"

    def worker_exited(self) -> None:
        """The worker exited by itself (its DataLoader workers die with it: PDEATHSIG): done, or crashed."""
        self.log.drain()
        self.follow(self.tail.poll())  # what it wrote last (a skipped checkpoint, say)
        if self.proc.returncode != 0:
            raise WorkerCrashed(self.proc.returncode, self.log.path, self.log.tail_text())
        self.completed, self.reason = True, "completed"

    def fail(self, cause: str) -> bool:
        """Kill the worker's whole process group; False when the failure budget is spent, else wait and go on."""
        facts = {"trigger": self.injector.asked_cause} if self.injector.asked_cause else {}
        if cause == "hang":  # booked restart from the last sign of progress to this verdict
            self.ev.emit(SUP_HANG, t=self.watchdog.last_beat)
            facts["silent_s"] = round(self.watchdog.silent_for(self.ev.now()), 6)
        self.ev.emit(E.SUP_FAILURE, cause=cause, **facts)
        kill_group(self.proc)
        self.control.close()
        self.log.drain()
        self.follow(self.tail.poll())  # a failed save it reported last
        self.injector.new_worker()  # a full disk is given back with the worker that saw it
        self.clock.cover()
        self.failures += 1
        self.tell(failures=self.failures, phase="failed")
        if self.failures > self.config.max_failures:
            self.reason = budget_reason(self.failures, self.config.max_failures, self.resumed)
            return False
        if self.config.restart_delay > 0:  # noticing and rescheduling: a hot spare saves the start-up after it
            self.ev.emit(E.SUP_RESTART_DELAY)
            time.sleep(self.config.restart_delay)
        self.attempt += 1
        return True

    def release_workers(self) -> None:
        """No process outlives the run: the live worker, the standby and their process groups."""
        if self.proc is not None:
            kill_group(self.proc)
        if self.control is not None:
            self.control.close()
        if self.spare is not None:
            self.spare.close()
        if self.forks is not None:
            self.forks.close()
        self.injector.close()

    def stop(self, exc: BaseException) -> None:
        """The run stops early: no process left, and a summary that says why."""
        self.release_workers()
        if isinstance(exc, RunInterrupted):
            reason = "interrupted" if exc.signum == signal.SIGINT else f"interrupted by {exc.signal_name}"
        elif isinstance(exc, KeyboardInterrupt):
            reason = "interrupted"
        else:
            reason = f"error: {type(exc).__name__}"
        try:
            finish_run(self.ev, self.run_dir, self.config, completed=False, reason=reason, logs=self.logs)
        except Exception as e:  # never hide why the run stopped behind why its summary could not be written
            exc.add_note(f"goodputlab: the run's summary could not be written: {e}")
            self.ev.close()



def run_threads(config: RunConfig, out: Path, resume: bool) -> tuple[int, str]:
    """The torch threads of every worker of the run in ``out``, and why (:func:`choose_threads`).

    A resumed run without ``--threads`` keeps the count its first launch chose (its config.json):
    the default for the larger models follows the cores free at launch, and a different count adds
    the gradients' sums in a different order, so the resumed run would not end bit-identical to an
    uninterrupted one (README, "bit-exact")."""
    if resume and not config.threads:
        try:
            stored = json.loads(read_regular(out / "config.json", 1 << 20)).get("threads")
        except (OSError, ValueError):
            stored = None
        if isinstance(stored, int) and not isinstance(stored, bool) and stored >= 1:
            return stored, "the count the resumed run started with"
    return choose_threads(config)


def check_resume(out: Path, config: RunConfig) -> None:
    """With ``--resume``: refuse ``config`` unless it keeps what decides the model of the run in ``out``."""
    try:
        stored = RunConfig.from_dict(json.loads(read_regular(out / "config.json", 1 << 20)))
    except FileNotFoundError:
        return  # a run that never wrote its configuration: nothing to hold it to
    except (OSError, ValueError) as e:
        raise ConfigError("resume", str(out), f"a run folder whose config.json can be read ({e})") from None
    check_resume_compatible(stored, config)



def invalid_message(e: dict) -> str:
    where = "RAM snapshot" if e.get("tier") == "memory" else "checkpoint"
    return (
        f"skipped damaged {where} of step {e['ckpt_step']} (attempt {e['attempt']}): {e.get('reason', '?')}; "
        "restore falls back to an older one"
    )



def finish_run(ev: EventWriter, run_dir: RunDir, config: RunConfig, completed: bool, reason: str, logs: list[WorkerLog]) -> dict:
    """End the run's files (the worker is gone): free the reserved space, record the end, write the summary."""
    out = run_dir.path
    run_dir.release_reserve()  # on a full disk, this is the space the rest needs
    ev.emit(E.SUP_TEARDOWN)
    for log in logs:
        log.close()  # writes what a full disk refused earlier
    run_dir.remove_temporaries()  # a save cut short by the end of the run
    resume_step = config.steps if completed else newest_valid_step(out, config)
    ev.emit(E.SUP_END, completed=completed, reason=reason, resume_step=resume_step)
    ev.close()
    summary = summarize(read_events(out / "events.jsonl"), config.to_dict())
    summary["threads"] = config.threads  # torch threads per worker (chosen before the first launch)
    add_restart_check(summary, config)
    write_atomic(out / "summary.json", json.dumps(summary, indent=1).encode())
    return summary



def run_line(config: RunConfig, threads_why: str) -> str:
    """The run's first line: what trains, and with how many torch threads (and why)."""
    n = config.threads
    return f"{config.model} model, {config.steps} steps, {n} torch thread{'s' if n != 1 else ''} ({threads_why})"


def budget_reason(failures: int, max_failures: int, resumed: bool) -> str:
    """Why a run stopped on its failure budget; a resumed run is told the budget came with the run."""
    reason = f"failure budget exhausted: failure {failures} exceeds --max-failures {max_failures}"
    if resumed:
        reason += (f" (kept from the run being resumed: this session may have {max_failures} failure"
                   f"{'s' if max_failures != 1 else ''}; resume with a larger --max-failures to allow more)")
    return reason


def add_restart_check(summary: dict, config: RunConfig) -> None:
    """``summary["restart_vs_mtbf"]``: a restart's cost against the MTBF, with a warning above
    :data:`~goodputlab.recovery.modes.RESTART_MTBF_WARN` (:func:`~goodputlab.recovery.modes.restart_vs_mtbf`)."""
    # the job fails at each rank's rate times its ranks (--mtbf is each rank's): its own MTBF is what a restart races
    check = restart_vs_mtbf(summary, config.mtbf / max(1, config.nproc))
    if check is not None:
        summary["restart_vs_mtbf"] = check


def newest_valid_step(out: Path, config: RunConfig) -> int:
    """The step of the newest checkpoint in ``out`` that this job may restore and that verifies (0: none)."""
    try:
        return CheckpointStore.of_run(out, config.keep, state_file_cap(PRESETS[config.model].state_bytes)).newest_valid_step()
    except (ValueError, OSError):  # no usable checkpoint folder at all
        return 0

