"""Supervision of a distributed run: ``torchrun`` starts the ranks and restarts the group; the
supervisor injects the failures and keeps the books (:mod:`goodputlab.distributed`, docs/DISTRIBUTED.md)."""

from __future__ import annotations

import json
import os
import signal
import time
import warnings

import numpy as np

from ..measure import events as E
from ..checkpoints.registry import RunResource
from ..checkpoints.store import CheckpointWarning
from .config import RunConfig
from ..measure.events import EventWriter, read_events
from .interrupts import RunInterrupted
from .launch import WorkerCrashed, WorkerLog, worker_env
from ..measure.ledger import summarize
from .run_dir import RunDir
from ..safe_io import write_atomic
from ..recovery.booking import M_EXPOSED
from ..recovery.modes import WALL_CLOCK
from .supervision import (
    POLL_S, Progress, add_restart_check, budget_reason, run_line, run_threads, check_resume, invalid_message, newest_valid_step,
    poisson_failure_rng,
)


def start_job_folder(config: RunConfig, run_dir: RunDir, *, keep_checkpoints: bool, reserve: bool, announce,
                     on_each: str) -> tuple[RunConfig, float, EventWriter]:
    """Set up the folder of a job of several processes (torchrun's ranks, torchft's replica groups): the
    thread count every process gets, a fresh event log (docs/DISTRIBUTED.md), ``logs/`` and ``ranks/``,
    ``config.json``, and the supervisor's own log. Returns the configuration with its thread count, the
    job's clock origin (``time.monotonic()`` seconds) and the supervisor's event writer."""
    from ..distributed.joblog import RANKS_DIR, SUPERVISOR_LOG

    threads, why = run_threads(config, run_dir.path, keep_checkpoints)
    config = config.replace(threads=threads)  # every process (and config.json) gets the same count
    out = run_dir.path
    run_dir.prepare(keep_checkpoints=keep_checkpoints)
    if reserve:
        run_dir.reserve()
    (out / "logs").mkdir()
    (out / RANKS_DIR).mkdir()
    write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=1, sort_keys=True).encode())
    t0 = time.monotonic()
    ev = EventWriter(out / RANKS_DIR / SUPERVISOR_LOG, t0, attempt=0, create=True)
    if announce is not None:
        announce(run_line(config, why) + f" on each of {on_each}")
    return config, t0, ev


class TorchrunSupervision:
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

    def __init__(self, config: RunConfig, run_dir: RunDir, progress, resume: bool, python: str, announce=None):
        if resume:
            check_resume(run_dir.path, config)  # refuse a configuration that does not match the run's checkpoints
        config, self.t0, self.ev = start_job_folder(config, run_dir, keep_checkpoints=resume, reserve=True,
                                                    announce=announce, on_each=f"{config.nproc} ranks")
        self.config, self.run_dir, self.progress, self.python = config, run_dir, progress, python
        self.out = run_dir.path
        self.world = config.nproc * config.nnodes  # ranks in the job
        self.failure_rng = poisson_failure_rng(config.seed)
        self.rank_rng = np.random.default_rng([config.seed, 0x4A4E])  # which rank a failure strikes
        self.pending_kills = sorted(config.kill_at_steps)
        self.attempt, self.failures, self.killed = 0, 0, set()
        self.clocked = -1  # the newest attempt whose ranks are up
        self.waiting_for_step = -1  # the attempt whose train clock waits for its first step
        self.completed, self.reason = False, ""
        self.job = None
        self.ram, self.ram_root = RunResource(), None  # the RAM tier of --ckpt memory (open_ram)
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
            env = worker_env(self.config)
            if self.open_ram(copies=1):  # one machine: one node's RAM, no neighbour to hold a copy
                from ..distributed.node_ram import node_env

                env.update(node_env(self.ram_root, 0, None))
            self.ev.emit(E.SUP_SPAWN)
            self.log = WorkerLog(self.out / "logs" / "torchrun.log")
            launch = launch_of(self.config, max_restarts=self.config.max_failures,
                               log_dir=str(self.out / "logs" / "torchrun"), rdzv_id=f"goodputlab-{os.getpid()}")
            try:
                self.job = TorchrunJob(launch, self.out, self.t0, self.python, self.log.write_fd, env)
            finally:
                self.log.start()
            self.watch()
        except BaseException as exc:  # Ctrl-C, SIGTERM, a crash: no process left, keep a summary
            self.stop(exc)
            raise
        finally:
            self.ram.cleanup()
        summary = self.finish()
        self.tell(steps_done=summary["steps_completed"], phase="done" if self.completed else "stopped")
        return summary

    def open_ram(self, copies: int) -> bool:
        """With ``--ckpt memory``: the run's RAM tier (``self.ram_root``, one folder per node; removed with
        ``self.ram.cleanup()``), its marker in the log; False without."""
        if self.config.ckpt != "memory":
            return False
        from ..distributed.node_ram import prepare_job_tier

        self.ram_root, self.ram = prepare_job_tier(self.config, self.world, copies, fallbacks=(self.out,))
        for kind, fields in self.ram.events:
            self.ev.emit(kind, **fields)
        return True

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
            if e["kind"] == E.W_COMPUTE and self.waiting_for_step == self.attempt:
                self.start_clock(self.t0 + e["t"])  # the train clock: from the attempt's first step
            if e["kind"] == E.W_STEP_END and e["rank"] == 0:
                done = e["step"] + 1
                if self.pending_kills and done >= self.pending_kills[0] and cause is None:
                    cause = f"kill_at_step {self.pending_kills.pop(0)}"
                self.tell(steps_done=done, phase="training")
            elif e["kind"] == E.M_RESTORED and e["rank"] == 0:
                self.tell(steps_done=e["ckpt_step"], phase="restored")
            elif e["kind"] == E.M_CKPT_INVALID:
                warnings.warn(invalid_message(e), CheckpointWarning, stacklevel=6)
        return cause

    def new_attempt(self, e: dict) -> None:
        """The first rank of attempt ``e["attempt"]`` is up: its failure clock starts now."""
        if e["attempt"] > self.attempt:
            if self.attempt not in self.killed:  # torchrun restarted a group no injected failure struck
                tail = self.log.tail_text(40)  # before the stop: the rank's own error, not the agent's SIGTERM
                self.job.stop()
                self.log.drain()
                why = (f"a rank of attempt {self.attempt} failed with no failure injected (torchrun restarted "
                       f"the group as attempt {e['attempt']})")
                raise WorkerCrashed(1, self.log.path, tail, why=why)
            self.attempt = e["attempt"]
            self.ev.attempt = self.attempt
            self.ev.emit(E.SUP_SPAWN, t=e["t"])  # torchrun relaunched the group (for --ckpt-every auto's exposure)
        self.clocked = e["attempt"]
        if self.config.failure_clock == WALL_CLOCK:
            self.start_clock(time.monotonic())
        else:
            self.deadline, self.waiting_for_step = float("inf"), self.attempt
        self.tell(attempt=self.attempt, phase="startup" if self.attempt == 0 else "restart")

    def start_clock(self, now: float) -> None:
        """The live attempt's failure clock starts at ``now`` (monotonic seconds): the next draw."""
        self.waiting_for_step = -1
        mtbf = self.config.mtbf / self.config.nproc  # this machine's ranks fail independently
        self.deadline = now + (self.failure_rng.exponential(mtbf) if self.config.mtbf > 0 else float("inf"))
        self.ev.emit(M_EXPOSED, t=now - self.t0, clock=self.config.failure_clock)

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
            self.reason = budget_reason(self.failures, self.config.max_failures, resumed=False)
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

    def summary_extras(self) -> dict:
        """Fields a kind of job adds to its summary (none here)."""
        return {}

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
        resume_step = config.steps if self.completed else newest_valid_step(out, config)
        self.ev.emit(E.SUP_END, completed=self.completed, reason=self.reason, resume_step=resume_step)
        self.ev.close()
        ranks = {}
        for r in range(self.world):
            try:
                ranks[r] = read_events(rank_log(out, r))
            except FileNotFoundError:
                pass
        events = job_events(read_events(self.ev.path), ranks)
        write_atomic(out / "events.jsonl", b"".join(E.event_line(e["t"], e["attempt"], e["step"], e["kind"],
                     {k: v for k, v in e.items() if k not in ("t", "attempt", "step", "kind")}) for e in events))
        summary = summarize(events, config.to_dict())
        summary["launcher"] = "torchrun"
        summary["threads"] = config.threads  # torch threads per rank
        add_restart_check(summary, config)
        summary["world_size"] = self.world
        summary["parallelism"] = next((e.get("parallelism") for e in events if e["kind"] == E.M_WORKER_INFO), None)
        summary["ranks"] = {str(r): {k: round(v, 6) for k, v in rank_totals(evs).items()} for r, evs in ranks.items()}
        summary.update(self.summary_extras())
        write_atomic(out / "summary.json", json.dumps(summary, indent=1).encode())
        return summary

