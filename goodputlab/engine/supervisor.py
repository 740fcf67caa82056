"""The supervisor: launches the training worker, kills it at failure times, restarts it.

Failures are real: at each failure time the supervisor sends SIGKILL to the
worker's whole process group (the worker and its DataLoader workers, as when a
node dies), waits ``restart_delay`` seconds (emulated rescheduling) and launches
a new worker, which resumes from the newest valid checkpoint.

Failure times come from a seeded Poisson process: each worker's time to failure
is exponential with mean ``mtbf`` seconds of wall time, counted from its launch,
so failures can strike during start-up and restore too, as on a real cluster.
``kill_at_steps`` adds deterministic failures for tests and demonstrations.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import events as E
from ..checkpoints.store import CheckpointStore, CheckpointWarning
from .config import RunConfig
from .events import EventTail, EventWriter, read_events
from .interrupts import RunInterrupted, StopSignals
from .ledger import summarize
from ..checkpoints import strategies
from ..checkpoints.registry import RunResource
from .run_dir import RunDir, claim_run_dir
from ..errors import ConfigError
from ..recovery.control import WorkerControl
from ..recovery.disk_full import check_fillable
from ..recovery.injector import Injector
from ..recovery.modes import DISK_FULL
from ..recovery.modes import FailureClock
from ..recovery.resume import check_resume_compatible, continuation
from ..recovery.spare import HotSpare, kill_group
from ..recovery.watchdog import HeartbeatWatchdog
from ..safe_io import create_new, read_regular, write_atomic
from ..training.workload import PRESETS
from .events import SUP_HANDOVER, SUP_HANG, SUP_RESUME

POLL_S = 0.02  # how often the supervisor looks at the worker and the event log


class WorkerCrashed(RuntimeError):
    """The worker exited with an error that no injected failure caused (a bug or bad setup)."""

    def __init__(self, returncode: int, log: Path, tail: str):
        self.returncode = returncode
        self.log = log
        self.tail = tail
        super().__init__(f"the training worker exited with code {returncode}; see {log}\n{tail}")

    @property
    def disk_full(self) -> bool:
        """The worker died because the disk it writes to is full (``ENOSPC``)."""
        return "No space left on device" in self.tail or "[Errno 28]" in self.tail


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
    """The generator of a run's Poisson failure times: attempt ``i`` fails after its ``i``-th
    exponential draw (mean ``mtbf``), counted from its launch. Public so a model can replay them."""
    return np.random.default_rng([seed, 0xFA11])


class WorkerLog:
    """A worker's stdout and stderr, through a pipe: appended to its log file, the tail kept in memory.

    When the disk is full the log file cannot grow, and a crash would leave the user
    an empty log and no reason: the bytes the disk refuses are kept (the newest
    :data:`KEEP_BYTES`) and written by :meth:`close`, after the run has freed its
    reserved space; :meth:`tail_text` always has the end of the output.
    """

    KEEP_BYTES = 64 << 10

    def __init__(self, path: Path):
        self.path = path
        self._fd = create_new(path)  # never through a planted link
        self._read, self.write_fd = os.pipe()
        self._tail = bytearray()
        self._unwritten = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, name="goodputlab-worker-log", daemon=True)

    def start(self) -> None:
        """Call once the worker holds the pipe's write end: closes ours and starts pumping."""
        os.close(self.write_fd)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while chunk := os.read(self._read, 1 << 16):
                self._keep(chunk)
        finally:
            os.close(self._read)

    def _keep(self, chunk: bytes) -> None:
        with self._lock:
            self._tail += chunk
            del self._tail[: -self.KEEP_BYTES]
            if not self._unwritten:
                view = memoryview(chunk)
                try:
                    while view:
                        n = os.write(self._fd, view)
                        if n <= 0:
                            break
                        view = view[n:]
                except OSError:
                    pass
                chunk = bytes(view)
            self._unwritten += chunk
            if len(self._unwritten) > self.KEEP_BYTES:
                self._dropped += len(self._unwritten) - self.KEEP_BYTES
                del self._unwritten[: -self.KEEP_BYTES]

    def drain(self, timeout: float = 5.0) -> None:
        """Wait for the worker's output to end (its process is gone); close the file unless the
        disk refused some of it, which :meth:`close` writes later."""
        self._thread.join(timeout)
        with self._lock:
            pending = bool(self._unwritten)
        if not pending:
            self.close(timeout=0)

    def close(self, timeout: float = 5.0) -> None:
        """Wait for the worker's output to end, write what the disk refused before, close the file."""
        self._thread.join(timeout)
        with self._lock:
            if self._fd < 0:
                return
            if self._unwritten:
                note = f"\n[goodputlab: {self._dropped} bytes of output lost: the disk was full]\n".encode() if self._dropped else b""
                try:
                    os.write(self._fd, note + bytes(self._unwritten))
                    self._unwritten.clear()
                except OSError:
                    pass
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        """Give the log file another name (a hot spare's log becomes its attempt's); writing goes on."""
        os.rename(self.path, path)
        self.path = path

    def tail_text(self, lines: int = 15) -> str:
        with self._lock:
            text = self._tail.decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])


def run_supervised(
    config: RunConfig,
    out: Path | str,
    progress: ProgressCallback | None = None,
    resume: bool = False,
    python: str = sys.executable,
) -> dict:
    """Run ``config`` to completion (or to its failure budget) and return the summary.

    Writes ``out/config.json``, ``out/events.jsonl``, ``out/summary.json``,
    ``out/ckpt/`` and one log per attempt in ``out/logs/``. With ``resume`` the
    checkpoints already in ``out/ckpt`` are kept and the first worker resumes
    from the newest valid one; otherwise ``out`` starts clean. Which folders may
    be used, and the lock that keeps two runs out of one folder: :mod:`goodputlab.engine.run_dir`
    (a refused folder raises :class:`~goodputlab.errors.ConfigError` before anything starts).

    Ctrl-C, SIGTERM and SIGHUP stop the run the same way: the worker is killed, the
    RAM tier removed, the summary written, then :class:`~goodputlab.engine.interrupts.RunInterrupted`
    is raised; further signals during that cleanup are ignored. A damaged checkpoint
    that a restore skips is reported as a :class:`~goodputlab.checkpoints.store.CheckpointWarning`.
    """
    if config.failure_mode == DISK_FULL:
        check_fillable(out)  # before the folder is claimed: a refused run touches nothing
    with StopSignals():
        run_dir = claim_run_dir(out, overwrite=config.overwrite, resume=resume)
        try:
            from ..distributed.launch import uses_torchrun

            if uses_torchrun(config):
                return _TorchrunSupervision(config, run_dir, progress, resume, python).run()
            return _supervise(config, run_dir, progress, resume, python)
        finally:
            run_dir.release()


def _supervise(
    config: RunConfig, run_dir: RunDir, progress: ProgressCallback | None, resume: bool, python: str
) -> dict:
    return _Supervision(config, run_dir, progress, resume, python).run()


class _Supervision:
    """One run under supervision: its files and event log, the attempts, the failures, the progress.

    Recovery (:mod:`goodputlab.recovery`) enters in named places: the failure clock and the
    injector decide when and how a failure strikes (:meth:`watch`), the heartbeat watchdog
    notices a hung worker, the hot spare takes over at a failure (:meth:`start_worker`), and a
    resumed run continues its event log (:meth:`open_log`).
    """

    def __init__(self, config: RunConfig, run_dir: RunDir, progress: ProgressCallback | None, resume: bool, python: str):
        self.config, self.run_dir, self.progress, self.python = config, run_dir, progress, python
        self.out = out = run_dir.path
        self.resumed = resume and (out / "events.jsonl").is_file()
        if resume:
            _check_resume(out, config)  # refuse a configuration that does not match the run's checkpoints
        run_dir.prepare(keep_checkpoints=resume, resume=self.resumed)
        run_dir.reserve()  # space for the summary if the disk fills up
        (out / "logs").mkdir(exist_ok=self.resumed)
        write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=1, sort_keys=True).encode())
        self.open_log()

        self.clock = FailureClock(config.seed, config.mtbf, config.kill_at_steps)
        if self.resumed:
            self.clock.continue_from(read_events(out / "events.jsonl"))
        self.watchdog = HeartbeatWatchdog(config.resolved_hang_timeout())
        self.injector = Injector(config, out, self.ev, PRESETS[config.model].state_bytes)
        self.spare = HotSpare(self.launch_standby, self.ev) if config.hot_spare else None
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
        summary = _finish(self.ev, self.run_dir, self.config, self.completed, self.reason, self.logs)
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
                warnings.warn(_invalid_message(e), CheckpointWarning, stacklevel=6)
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
            self.proc = _launch(self.python, self.out, self.attempt, self.t0, self.log, self.env, self.control)
        finally:
            self.control.launched()

    def launch_standby(self, index: int, control: WorkerControl):
        """Launch standby ``index`` (for :class:`~goodputlab.recovery.spare.HotSpare`): ``(process, log)``."""
        log = WorkerLog(self.out / "logs" / f"standby-{index:03d}.log")
        self.logs.append(log)
        return _launch(self.python, self.out, None, self.t0, log, self.env, control), log

    def attempt_until_failure(self) -> str | None:
        """Make a worker live and watch it: the cause of its failure when one is due, None when it exits by itself."""
        self.start_worker()
        if self.spare is not None:
            self.spare.ensure()  # the next standby starts now, beside the live worker (at idle priority)
        proc = self.proc
        self.clock.expose(time.monotonic())  # the failure clock runs from the launch, or the handover
        self.watchdog.reset()
        self.injector.new_worker()
        self.tell(attempt=self.attempt, phase="startup" if self.attempt == 0 else "restart")
        while True:
            try:
                proc.wait(timeout=max(0.0, min(POLL_S, self.clock.seconds_left(time.monotonic()))))
                return self.injector.exit_cause(proc.returncode) or _killed_from_outside(proc.returncode)
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
                    self.clock.expose(time.monotonic())  # a failure it survives: its exposure goes on
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
            self.reason = (
                f"failure budget exhausted: failure {self.failures} exceeds --max-failures {self.config.max_failures}"
            )
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
            _finish(self.ev, self.run_dir, self.config, completed=False, reason=reason, logs=self.logs)
        except Exception as e:  # never hide why the run stopped behind why its summary could not be written
            exc.add_note(f"goodputlab: the run's summary could not be written: {e}")
            self.ev.close()


def _killed_from_outside(returncode: int) -> str | None:
    """A worker SIGKILLed by someone else (the kernel's OOM killer, an operator, a torture test) failed
    like a node that died: ``killed``, and the run recovers. Any other exit status is its own doing."""
    return "killed" if returncode == -signal.SIGKILL else None


def _check_resume(out: Path, config: RunConfig) -> None:
    """With ``--resume``: refuse ``config`` unless it keeps what decides the model of the run in ``out``."""
    try:
        stored = RunConfig.from_dict(json.loads(read_regular(out / "config.json", 1 << 20)))
    except FileNotFoundError:
        return  # a run that never wrote its configuration: nothing to hold it to
    except (OSError, ValueError) as e:
        raise ConfigError("resume", str(out), f"a run folder whose config.json can be read ({e})") from None
    check_resume_compatible(stored, config)


def _invalid_message(e: dict) -> str:
    where = "RAM snapshot" if e.get("tier") == "memory" else "checkpoint"
    return (
        f"skipped damaged {where} of step {e['ckpt_step']} (attempt {e['attempt']}): {e.get('reason', '?')}; "
        "restore falls back to an older one"
    )


def _launch(
    python: str,
    out: Path,
    attempt: int | None,
    t0: float,
    log: WorkerLog,
    extra_env: dict | None = None,
    control: WorkerControl | None = None,
) -> subprocess.Popen:
    """Start a worker as ``attempt``, or a standby (``attempt`` None) that waits on ``control`` for one."""
    env = dict(os.environ)
    env.update(extra_env or {})
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (bit-exact resume)
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [python, "-m", "goodputlab.engine.worker", "--run-dir", str(out), "--t0", repr(t0), "--parent", str(os.getpid())]
    cmd += ["--standby"] if attempt is None else ["--attempt", str(attempt)]
    pass_fds: tuple[int, ...] = ()
    if control is not None:
        cmd += ["--control-fd", str(control.child_fd)]
        pass_fds = (control.child_fd,)
    try:
        # its own session, so one killpg takes the worker and its DataLoader workers
        proc = subprocess.Popen(
            cmd, stdout=log.write_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True, pass_fds=pass_fds,
        )
    finally:
        log.start()
    return proc


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _finish(ev: EventWriter, run_dir: RunDir, config: RunConfig, completed: bool, reason: str, logs: list[WorkerLog]) -> dict:
    """End the run's files (the worker is gone): free the reserved space, record the end, write the summary."""
    out = run_dir.path
    run_dir.release_reserve()  # on a full disk, this is the space the rest needs
    ev.emit(E.SUP_TEARDOWN)
    for log in logs:
        log.close()  # writes what a full disk refused earlier
    run_dir.remove_temporaries()  # a save cut short by the end of the run
    resume_step = config.steps if completed else _newest_valid_step(out, config)
    ev.emit(E.SUP_END, completed=completed, reason=reason, resume_step=resume_step)
    ev.close()
    summary = summarize(read_events(out / "events.jsonl"), config.to_dict())
    write_atomic(out / "summary.json", json.dumps(summary, indent=1).encode())
    return summary


def _newest_valid_step(out: Path, config: RunConfig) -> int:
    try:
        return CheckpointStore(out / "ckpt", config.keep).newest_valid_step()
    except (ValueError, OSError):  # no usable checkpoint folder at all
        return 0


# --- a distributed run: torchrun starts the ranks and restarts the group --------------------------
class _TorchrunSupervision:
    """A run of ``nproc`` ranks under ``torchrun`` (:mod:`goodputlab.distributed`).

    torchrun starts the ranks and, after a failure, restarts the whole group itself
    (``--max-restarts`` = ``max_failures``). The supervisor only injects the failures and
    keeps the books: a Poisson failure (each rank's MTBF is ``mtbf``, so the job's is
    ``mtbf / nproc``, counted from the moment a new attempt's first rank is up) or a
    ``kill_at_steps`` kill SIGKILLs one rank of the live attempt, chosen at random (seeded).
    A restart that no injected failure caused is a crash: the run stops with
    :class:`WorkerCrashed`. Its own events go to ``ranks/supervisor.jsonl``, each rank's to
    ``ranks/events-rank{R}.jsonl``; at the end they are merged into the job's ``events.jsonl``
    (:func:`goodputlab.distributed.joblog.job_events`), from which the summary is made.
    """

    def __init__(self, config: RunConfig, run_dir: RunDir, progress, resume: bool, python: str):
        from ..distributed.joblog import RANKS_DIR, SUPERVISOR_LOG

        self.config, self.run_dir, self.progress, self.python = config, run_dir, progress, python
        self.out = out = run_dir.path
        if resume:
            _check_resume(out, config)  # refuse a configuration that does not match the run's checkpoints
        run_dir.prepare(keep_checkpoints=resume)  # the event log starts anew (docs/DISTRIBUTED.md)
        run_dir.reserve()
        (out / "logs").mkdir()
        (out / RANKS_DIR).mkdir()
        write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=1, sort_keys=True).encode())
        self.t0 = time.monotonic()
        self.ev = EventWriter(out / RANKS_DIR / SUPERVISOR_LOG, self.t0, attempt=0, create=True)
        self.failure_rng = poisson_failure_rng(config.seed)
        self.rank_rng = np.random.default_rng([config.seed, 0x4A4E])  # which rank a failure strikes
        self.pending_kills = sorted(config.kill_at_steps)
        self.attempt, self.failures, self.killed = 0, 0, set()
        self.clocked = -1  # the newest attempt whose failure clock has started
        self.completed, self.reason = False, ""
        self.job = None
        self.log: WorkerLog | None = None
        self.deadline = float("inf")
        self.state = Progress(0, config.steps, 0, 0, "startup")

    def tell(self, **changes) -> None:
        for k, v in changes.items():
            setattr(self.state, k, v)
        if self.progress is not None:
            self.progress(self.state)

    def run(self) -> dict:
        from ..distributed.launch import launch_of
        from ..distributed.launcher import TorchrunJob

        try:
            self.ev.emit(E.SUP_START)
            self.ev.emit(E.SUP_SPAWN)
            self.log = WorkerLog(self.out / "logs" / "torchrun.log")
            launch = launch_of(self.config, max_restarts=self.config.max_failures,
                               log_dir=str(self.out / "logs" / "torchrun"), rdzv_id=f"goodputlab-{os.getpid()}")
            try:
                self.job = TorchrunJob(launch, self.out, self.t0, self.python, self.log.write_fd, _worker_env(self.config))
            finally:
                self.log.start()
            self.watch()
        except BaseException as exc:  # Ctrl-C, SIGTERM, a crash: no process left, keep a summary
            self.stop(exc)
            raise
        summary = self.finish()
        self.tell(steps_done=summary["steps_completed"], phase="done" if self.completed else "stopped")
        return summary

    def watch(self) -> None:
        """Follow the ranks until torchrun exits, injecting failures; sets ``completed`` and ``reason``."""
        job = self.job
        while True:
            code = job.wait(timeout=POLL_S)
            cause = self.follow(job.poll())
            if code is not None:
                self.follow(job.poll())
                self.log.drain()
                if code == 0:
                    self.completed, self.reason = True, "completed"
                    return
                raise WorkerCrashed(code, self.log.path, self.log.tail_text())
            if cause is None and time.monotonic() >= self.deadline:
                cause = "poisson"
            if cause is not None and not self.fail(cause):
                job.stop()
                self.log.drain()
                return

    def follow(self, new_events: list[dict]) -> str | None:
        """The ranks' new events: a new attempt, progress, a kill that is due."""
        cause = None
        for e in sorted(new_events, key=lambda e: e["t"]):
            if e["kind"] == E.W_INIT and e["attempt"] > self.clocked:
                self.new_attempt(e)
            if e["attempt"] != self.attempt:
                continue
            if e["kind"] == E.W_STEP_END and e["rank"] == 0:
                done = e["step"] + 1
                if self.pending_kills and done >= self.pending_kills[0] and cause is None:
                    cause = f"kill_at_step {self.pending_kills.pop(0)}"
                self.tell(steps_done=done, phase="training")
            elif e["kind"] == E.M_RESTORED and e["rank"] == 0:
                self.tell(steps_done=e["ckpt_step"], phase="restored")
            elif e["kind"] == E.M_CKPT_INVALID:
                warnings.warn(_invalid_message(e), CheckpointWarning, stacklevel=6)
        return cause

    def new_attempt(self, e: dict) -> None:
        """The first rank of attempt ``e["attempt"]`` is up: its failure clock starts now."""
        if e["attempt"] > self.attempt:
            if self.attempt not in self.killed:  # torchrun restarted a group no injected failure struck
                self.job.stop()
                self.log.drain()
                raise WorkerCrashed(1, self.log.path, self.log.tail_text())
            self.attempt = e["attempt"]
            self.ev.attempt = self.attempt
            self.ev.emit(E.SUP_SPAWN, t=e["t"])  # torchrun relaunched the group (for --ckpt-every auto's exposure)
        self.clocked = e["attempt"]
        mtbf = self.config.mtbf / self.config.nproc  # this machine's ranks fail independently
        self.deadline = time.monotonic() + (self.failure_rng.exponential(mtbf) if self.config.mtbf > 0 else float("inf"))
        self.tell(attempt=self.attempt, phase="startup" if self.attempt == 0 else "restart")

    def fail(self, cause: str) -> bool:
        """SIGKILL one live rank (chosen at random); False when the failure budget is spent."""
        live = self.job.live_ranks(self.attempt)
        if not live:  # the attempt's ranks are not up yet (or already gone): strike when one is
            self.deadline = time.monotonic() + POLL_S
            if cause != "poisson":
                self.pending_kills.insert(0, int(cause.rsplit(" ", 1)[-1]))
            return True
        rank = live[int(self.rank_rng.integers(len(live)))]
        self.ev.emit(E.SUP_FAILURE, cause=cause, rank=rank)
        self.job.kill_rank(self.attempt, rank)
        self.killed.add(self.attempt)
        self.deadline = float("inf")  # until the next attempt is up
        self.failures += 1
        self.tell(failures=self.failures, phase="failed")
        if self.failures > self.config.max_failures:
            self.reason = (
                f"failure budget exhausted: failure {self.failures} exceeds --max-failures {self.config.max_failures}"
            )
            return False
        return True

    def stop(self, exc: BaseException) -> None:
        if self.job is not None:
            self.job.stop()
        if isinstance(exc, RunInterrupted):
            self.reason = "interrupted" if exc.signum == signal.SIGINT else f"interrupted by {exc.signal_name}"
        elif isinstance(exc, KeyboardInterrupt):
            self.reason = "interrupted"
        else:
            self.reason = f"error: {type(exc).__name__}"
        try:
            self.finish()
        except Exception as e:
            exc.add_note(f"goodputlab: the run's summary could not be written: {e}")
            self.ev.close()

    def finish(self) -> dict:
        """End the run's files: the supervisor's end, the job's merged event log, the summary."""
        from ..distributed.joblog import job_events, rank_totals
        from ..distributed.launcher import rank_log

        out, config = self.out, self.config
        self.run_dir.release_reserve()
        self.ev.emit(E.SUP_TEARDOWN)
        if self.log is not None:
            self.log.close()
        self.run_dir.remove_temporaries()
        resume_step = config.steps if self.completed else _newest_valid_step(out, config)
        self.ev.emit(E.SUP_END, completed=self.completed, reason=self.reason, resume_step=resume_step)
        self.ev.close()
        ranks = {}
        for r in range(config.nproc * config.nnodes):
            try:
                ranks[r] = read_events(rank_log(out, r))
            except FileNotFoundError:
                pass
        events = job_events(read_events(self.ev.path), ranks)
        write_atomic(out / "events.jsonl", b"".join(E.event_line(e["t"], e["attempt"], e["step"], e["kind"],
                     {k: v for k, v in e.items() if k not in ("t", "attempt", "step", "kind")}) for e in events))
        summary = summarize(events, config.to_dict())
        summary["launcher"] = "torchrun"
        summary["world_size"] = config.nproc * config.nnodes
        summary["parallelism"] = next((e.get("parallelism") for e in events if e["kind"] == E.M_WORKER_INFO), None)
        summary["ranks"] = {str(r): {k: round(v, 6) for k, v in rank_totals(evs).items()} for r, evs in ranks.items()}
        write_atomic(out / "summary.json", json.dumps(summary, indent=1).encode())
        return summary


def _worker_env(config: RunConfig) -> dict[str, str]:
    """The environment of torchrun and its ranks."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # the repository, above goodputlab/
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env["PYTHONUNBUFFERED"] = "1"
    # torch threads per rank: --threads, else this machine's cores shared among its ranks (torchrun would warn and use 1)
    env.setdefault("OMP_NUM_THREADS", str(config.threads or max(1, (os.cpu_count() or 1) // config.nproc)))
    env.setdefault("LOGLEVEL", "WARNING")
    # A fresh rendezvous store for every restart: with the agent's store shared across restarts, a
    # restarted group can read the previous group's addresses and fail to connect (pytorch#135712).
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    return env
