"""Supervision of an in-job recovery run (``--fault-tolerance torchft``, docs/IN_JOB_RECOVERY.md).

The supervisor starts torchft's lighthouse on loopback and ``nproc`` replica groups, each a job of
one rank (:mod:`goodputlab.distributed.ft_worker`), or with ``--group-size R`` of 2 or more a torchrun
job of ``R`` ranks of its own (its rendezvous a private file, its sockets on loopback). A failure (a ``--kill-at-steps`` kill, or a
Poisson failure at each replica's ``--mtbf``) SIGKILLs one replica group; the others train on
without it, and the supervisor relaunches it at once: cold (a new process), or with ``--hot-spare``
by handing it to a standby replica process that set itself up beforehand (:mod:`goodputlab.recovery.spare`'s
:class:`HotSpare`, told which group it becomes on its control pipe). Either way it heals from a
healthy peer in its first quorum. A kill waits until every replica trains, so the job never loses all of them. The
lighthouse and every replica are stopped at the end, on a crash, Ctrl-C and SIGTERM.

With ``--emulate-nodes N`` (``--nproc N``) the same run spans emulated nodes: where each process
runs and listens, and how a node dies, is :mod:`goodputlab.distributed.ft_nodes`'s (``self.place``):
group ``r`` in node ``r``'s namespace bound to its address, the lighthouse on a node of its own, a
``--kill-node-at-steps`` kill every process of the group's node, the namespaces removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..measure import events as E
from .config import RunConfig
from ..measure.events import read_events
from .interrupts import RunInterrupted
from .launch import WorkerCrashed, worker_env
from .run_dir import RunDir
from ..errors import ConfigError
from ..procs import dies_with_this_process
from ..safe_io import write_atomic
from .supervision import (POLL_S, Progress, budget_reason, check_resume, invalid_message, newest_valid_step,
                          poisson_failure_rng)
from .torchrun_supervision import TorchrunSupervision, start_job_folder

#: What a run asking for torchft without it installed is told (one line, exit 2).
INSTALL_HINT = "none, or install torchft first: pip install 'goodputlab[ft]' (make install does)"
#: The lighthouse forms a quorum once every replica that heartbeats has joined, or after this wait;
#: a killed replica stops heartbeating and counts as gone after the heartbeat timeout.
JOIN_TIMEOUT_MS, HEARTBEAT_TIMEOUT_MS = 1000, 1000
STOP_WAIT_S = 5.0


def lighthouse_command() -> list[str] | None:
    """The command that starts torchft's lighthouse (its arguments follow), None when torchft is missing:
    ``goodputlab/distributed/torchft_lighthouse.py`` run by this interpreter (torchft's Rust extension
    loaded alone: no torch imported, about 2 CPU-s less for every run) when it finds the extension, else
    the ``torchft_lighthouse`` script beside this interpreter (or on PATH)."""
    import importlib.util

    from ..distributed import torchft_lighthouse

    if torchft_lighthouse.extension() is not None:
        return [sys.executable, torchft_lighthouse.__file__]
    try:
        if importlib.util.find_spec("torchft") is None:
            return None
    except (ImportError, ValueError):  # a torchft blocked in sys.modules
        return None
    here = Path(sys.executable).parent / "torchft_lighthouse"
    script = str(here) if here.exists() else shutil.which("torchft_lighthouse")
    return [script] if script else None


class _Tail:
    """New events of a growing JSONL file (complete lines only)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


class TorchftSupervision:
    """A run of ``config.nproc`` torchft replica groups against a lighthouse (see the module's doc)."""

    def __init__(self, config: RunConfig, run_dir: RunDir, progress, resume: bool, python: str, announce=None):
        self.lighthouse_bin = lighthouse_command()
        if self.lighthouse_bin is None:
            raise ConfigError("fault_tolerance", config.fault_tolerance, INSTALL_HINT)
        if resume:
            check_resume(run_dir.path, config)  # refuse a configuration that does not match the run's checkpoints
        config, self.t0, self.ev = start_job_folder(config, run_dir, keep_checkpoints=resume, reserve=False,
                                                    announce=announce, on_each=f"{config.nproc} torchft replica groups")
        #: the step every group's first launch restores (distributed.ft_checkpoint), 0: from the start
        self.resume_step = newest_valid_step(run_dir.path, config) if resume else 0
        from ..distributed.ft_checkpoint import ResumeNews

        self.news = ResumeNews(run_dir.path / "ckpt", self.resume_step, invalid_message) if resume else None
        self.config, self.run_dir, self.progress, self.python = config, run_dir, progress, python
        from ..distributed.ft_nodes import placement

        self.place = placement(config)  # this machine's loopback, or one emulated node per group
        self.out = run_dir.path
        self.groups = config.nproc
        self.failure_rng = poisson_failure_rng(config.seed)
        self.replica_rng = np.random.default_rng([config.seed, 0x4654])  # which replica a failure strikes
        self.pending_kills = sorted((*config.kill_at_steps, *config.kill_node_at_steps))  # a node's: its group's
        self.lighthouse: subprocess.Popen | None = None
        self.procs: dict[int, subprocess.Popen] = {}
        self.attempts = {r: 0 for r in range(self.groups)}
        self.training: dict[int, bool] = {}
        self.done: set[int] = set()
        self.tails: dict[int, _Tail] = {}
        self.failures, self.completed, self.reason = 0, False, ""
        self.logs: dict[int, Path] = {}  # each replica's current process's output
        self.controls: list = []  # the control pipes of standbys that took over a replica
        self.rdzv_files: dict[int, str] = {}  # each group of several ranks' torchrun rendezvous file
        self.spare = None
        if config.hot_spare:
            from ..recovery.spare import HotSpare

            self.spare = HotSpare(self.launch_standby, self.ev)
        self.deadline = float("inf")
        self.state = Progress(0, config.steps, 0, 0, "startup")

    tell = TorchrunSupervision.tell  # the progress callback, as a torchrun run reports it

    def run(self) -> dict:
        try:
            self.ev.emit(E.SUP_START)
            self.place.setup()
            self.start_lighthouse()
            self.ev.emit(E.SUP_SPAWN)
            for r in range(self.groups):
                self.launch(r)
            if self.spare is not None:
                self.spare.ensure()  # set up beside the replicas, at idle priority
            self.watch()
        except BaseException as exc:  # Ctrl-C, SIGTERM, a crash: no process left, keep a summary
            self.stop_all()
            self.reason = _reason(exc)
            try:
                self.finish()
            except Exception as e:
                exc.add_note(f"goodputlab: the run's summary could not be written: {e}")
            raise
        self.stop_all()
        summary = self.finish()
        self.tell(steps_done=summary["steps_completed"], phase="done" if self.completed else "stopped")
        return summary

    def start_lighthouse(self) -> None:
        log = open(self.out / "logs" / "lighthouse.log", "wb")
        with log:
            self.lighthouse = subprocess.Popen(
                self.place.lighthouse([*self.lighthouse_bin, "--min_replicas", "1", "--bind", self.place.lighthouse_bind,
                                       "--join_timeout_ms", str(JOIN_TIMEOUT_MS), "--heartbeat_timeout_ms", str(HEARTBEAT_TIMEOUT_MS)]),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=dies_with_this_process(),
            )

    def _env(self, replica: int = 0) -> dict:
        env = {**worker_env(self.config), **self.place.env(replica)}  # the lighthouse, the group's address
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", RUST_LOG="warn")
        env.pop("MASTER_PORT", None)  # each replica binds its own store on a free port
        return env

    def _command(self, *args: str) -> list[str]:
        return [self.python, "-m", "goodputlab.distributed.ft_worker", "--run-dir", str(self.out), "--t0", repr(self.t0),
                "--replicas", str(self.groups), *args]

    def launch(self, replica: int) -> None:
        """Start replica ``replica``'s next launch (its own session, killed with us): one process, or
        with ``--group-size`` of 2 or more a torchrun job of that many ranks (:meth:`_group_launch`)."""
        attempt = self.attempts[replica]
        self.logs[replica] = self.out / "logs" / f"replica{replica}-attempt{attempt}.log"
        resume = ["--resume"] if attempt == 0 and self.resume_step > 0 else []
        command, env = self._command("--replica", str(replica), "--attempt", str(attempt), *resume), self._env(replica)
        if self.config.group_size > 1:
            command, env = self._group_launch(replica, command, env)
        command = self.place.wrap(replica, command)  # in its emulated node's namespace, if any
        with open(self.logs[replica], "wb") as log:
            self.procs[replica] = subprocess.Popen(  # it dies with us: a group's torchrun agent too
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                preexec_fn=dies_with_this_process(),
            )
        self._follow_replica(replica)

    def _group_launch(self, replica: int, command: list[str], env: dict) -> tuple[list[str], dict]:
        """The torchrun job of replica group ``replica``'s ranks: ``command`` (the one-process command)
        under ``torch.distributed.run``, its rendezvous in a private file of this launch, its ranks'
        store and gloo sockets on loopback (:func:`~goodputlab.distributed.binding.listen_env`)."""
        from ..distributed.binding import LOOPBACK, listen_env
        from ..distributed.launch import TorchrunLaunch
        from ..distributed.launcher import rendezvous_env, rendezvous_file

        self._remove_rdzv_file(replica)
        self.rdzv_files[replica] = rendezvous_file()
        launch = TorchrunLaunch(nproc=self.config.group_size, rdzv_id=f"goodputlab-replica{replica}",
                                rdzv_timeout_s=self.config.rdzv_timeout)
        module_at = command.index("-m") + 1
        torchrun = launch.command(self.python, command[module_at], command[module_at + 1:], rdzv_file=self.rdzv_files[replica])
        for name in ("MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(name, None)  # torchrun's, for each rank
        return torchrun, {**env, **listen_env(LOOPBACK), **rendezvous_env(self.rdzv_files[replica])}

    def _remove_rdzv_file(self, replica: int) -> None:
        from ..distributed.launcher import remove_rendezvous_file

        path = self.rdzv_files.pop(replica, None)
        if path is not None:
            remove_rendezvous_file(path)

    def _follow_replica(self, replica: int) -> None:
        from ..distributed.ft_worker import REPLICA_LOG
        from ..distributed.joblog import RANKS_DIR

        self.training[replica] = False
        self.tails.setdefault(replica, _Tail(self.out / RANKS_DIR / REPLICA_LOG.format(replica=replica)))

    def launch_standby(self, index: int, control) -> tuple[subprocess.Popen, "_SpareLog"]:
        """Launch standby ``index`` (for :class:`~goodputlab.recovery.spare.HotSpare`): a replica process that
        sets itself up and waits on ``control`` for the group it takes over."""
        log = _SpareLog(self.out / "logs" / f"standby-{index:03d}.log")
        with open(log.path, "wb") as out:
            proc = subprocess.Popen(self._command("--standby", "--control-fd", str(control.child_fd)),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self._env(),
                                    start_new_session=True, pass_fds=(control.child_fd,))
        return proc, log

    def relaunch(self, replica: int) -> None:
        """Bring ``replica`` back as its next launch: the hot spare when one is ready, else a new process."""
        from ..recovery.booking import SUP_HANDOVER

        standby = self.spare.take() if self.spare is not None else None
        if standby is not None:
            self.ev.emit(SUP_HANDOVER, replica=replica, replica_attempt=self.attempts[replica], standby=standby.index)
            if standby.control.assign(replica) and standby.control.activate(self.attempts[replica]):
                self.procs[replica], self.logs[replica] = standby.proc, standby.log.path
                self.controls.append(standby.control)
                self._follow_replica(replica)
                self.spare.ensure()  # the next standby starts now, beside the job
                return
            self.spare._discard(standby)  # it died as it was handed the group: a cold launch
        self.ev.emit(E.SUP_SPAWN, replica=replica, replica_attempt=self.attempts[replica])
        self.launch(replica)
        if self.spare is not None:
            self.spare.ensure()

    def watch(self) -> None:
        """Follow the replicas until every one has finished, injecting failures and relaunching."""
        while True:
            cause = self.follow()
            for r, proc in list(self.procs.items()):
                code = proc.poll() if r in self.procs else None  # end_unhealed may have stopped it
                if code is None:
                    continue
                del self.procs[r]
                if code != 0:
                    log = self.logs[r]
                    raise WorkerCrashed(code, log, log.read_text(errors="replace")[-4000:])
                self.done.add(r)
                self.end_unhealed()
            if len(self.done) == self.groups:
                self.completed, self.reason = True, "completed"
                return
            if self.spare is not None:
                self.spare.ensure()  # a standby that died while it waited is replaced
            if self.lighthouse.poll() is not None:
                raise WorkerCrashed(self.lighthouse.returncode, self.out / "logs" / "lighthouse.log", "the lighthouse exited")
            if cause is None and time.monotonic() >= self.deadline:
                cause = "poisson"
            if cause is not None and not self.fail(cause):
                return
            time.sleep(POLL_S)

    def follow(self) -> str | None:
        """The replicas' new events: who trains, progress, a kill that is due."""
        cause = None
        for r, tail in self.tails.items():
            for e in tail.read():
                if e["attempt"] != self.attempts[r]:
                    continue
                if self.news is not None and e["attempt"] == 0:
                    self.news.seen(e)  # a resume's restore, told as it happens
                if e["kind"] == E.W_STEP_END and e.get("committed"):
                    if not self.training[r]:
                        self.training[r] = True
                        if all(self.training.get(q) for q in range(self.groups)):
                            self.start_clock()
                    done = e["step"] + 1
                    if self.pending_kills and done >= self.pending_kills[0] and cause is None:
                        cause = f"{'node_' * (self.place.nodes > 0)}kill_at_step {self.pending_kills[0]}"
                    if done > self.state.steps_done:
                        self.tell(steps_done=done, phase="training")
        return cause

    def end_unhealed(self) -> None:
        """A replica finished the job's last step: a relaunched one that has not healed yet has nothing
        left to train (and, alone, would start from step 0): stopped, its time to the end ``degraded``."""
        for r, proc in list(self.procs.items()):
            if not self.training.get(r):
                del self.procs[r]
                _kill_session(proc)
                self.done.add(r)

    def start_clock(self) -> None:
        """Every replica trains: the next Poisson failure (each replica's MTBF is ``mtbf``)."""
        mtbf = self.config.mtbf / self.groups
        self.deadline = time.monotonic() + (self.failure_rng.exponential(mtbf) if self.config.mtbf > 0 else float("inf"))

    def fail(self, cause: str) -> bool:
        """SIGKILL one replica group and relaunch it; a kill waits until every replica trains.
        False when the failure budget is spent."""
        live = [r for r in range(self.groups) if self.training.get(r) and r in self.procs]
        if len(live) < self.groups:
            return True  # the kill stays due; struck once the relaunched replica trains again
        if cause != "poisson":
            self.pending_kills.pop(0)
        replica = live[int(self.replica_rng.integers(len(live)))]
        proc = self.procs.pop(replica)
        self.ev.emit(E.SUP_FAILURE, cause=cause, rank=replica, replica=replica, replica_attempt=self.attempts[replica])
        self.place.kill_node(replica)  # an emulated node: every process in its namespace at once
        _kill_session(proc)
        self.deadline = float("inf")
        self.failures += 1
        self.tell(failures=self.failures, phase="failed")
        if self.failures > self.config.max_failures:
            self.reason = budget_reason(self.failures, self.config.max_failures, resumed=False)
            return False
        self.attempts[replica] += 1
        self.relaunch(replica)
        return True

    def stop_all(self) -> None:
        """Every replica, the standby and the lighthouse: SIGKILL to the replicas' and the standby's sessions,
        SIGTERM then SIGKILL to the lighthouse."""
        for proc in self.procs.values():
            _kill_session(proc)
        self.procs.clear()
        for replica in list(self.rdzv_files):
            self._remove_rdzv_file(replica)
        if self.spare is not None:
            self.spare.close()
        for control in self.controls:
            control.close()
        self.controls.clear()
        if self.lighthouse is not None and self.lighthouse.poll() is None:
            self.lighthouse.terminate()
            try:
                self.lighthouse.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                _kill_session(self.lighthouse)
        self.place.teardown()  # emulated nodes: every namespace, link and process left in them

    def finish(self) -> dict:
        """The supervisor's end, the job's books from every replica's log, ``summary.json``."""
        from ..distributed.ft_worker import REPLICA_LOG
        from ..distributed.joblog import RANKS_DIR
        from ..distributed.ft_checkpoint import resumed_step
        from ..distributed.replica_ledger import job_books, recoveries, survivor_quorum_waits

        self.run_dir.remove_temporaries()
        self.ev.emit(E.SUP_TEARDOWN)
        self.ev.emit(E.SUP_END, completed=self.completed, reason=self.reason,
                     resume_step=self.config.steps if self.completed else newest_valid_step(self.out, self.config))
        self.ev.close()
        replicas = {}
        for r in range(self.groups):
            try:
                replicas[r] = read_events(self.out / RANKS_DIR / REPLICA_LOG.format(replica=r))
            except FileNotFoundError:
                replicas[r] = []
        supervisor = read_events(self.ev.path)
        books = job_books(supervisor, replicas, self.groups)
        merged = sorted(supervisor + [{**e, "replica": r} for r, evs in replicas.items() for e in evs], key=lambda e: e["t"])
        write_atomic(self.out / "events.jsonl", b"".join(E.event_line(e["t"], e["attempt"], e["step"], e["kind"], {
            k: v for k, v in e.items() if k not in ("t", "attempt", "step", "kind")}) for e in merged))
        finishes = {r: next((e for e in reversed(evs) if e["kind"] == E.M_FINISH), None) for r, evs in replicas.items()}
        hashes = {f["final_state_sha256"] for f in finishes.values() if f} | _group_rank_hashes(self.out, self.groups, self.config.group_size)
        heals = [e for evs in replicas.values() for e in evs if e["kind"] == E.M_RESTORED and e["attempt"] > 0]
        summary = {
            **books,
            "fault_tolerance": "torchft",
            "launcher": "torchft",
            "world_size": self.groups * self.config.group_size,
            "replica_groups": self.groups,
            "group_size": self.config.group_size,
            "failures": self.failures,
            "heals": len(heals),
            "heal_steps": [e["ckpt_step"] for e in heals],
            "recoveries": recoveries(supervisor, replicas),
            "survivor_quorum_waits_s": survivor_quorum_waits(supervisor, replicas),
            "checkpoints": sum(1 for evs in replicas.values() for e in evs if e["kind"] == E.M_CKPT_COMMIT),  # one group saves
            "resumed_from_step": resumed_step(replicas),  # what the replicas' first launches restored
            "steps_completed": self.config.steps if self.completed else self.state.steps_done,
            "steps_executed": sum(1 for evs in replicas.values() for e in evs if e["kind"] == E.W_COMPUTE),
            "completed": self.completed,
            "stop_reason": self.reason,
            "final_loss": finishes[0]["final_loss"] if finishes.get(0) else None,
            "final_state_sha256": hashes.pop() if len(hashes) == 1 else None,  # every rank of every group ends with one model
            "threads": self.config.threads,
            **self.place.summary(),
            "config": self.config.to_dict(),
        }
        write_atomic(self.out / "summary.json", json.dumps(summary, indent=1).encode())
        return summary


class _SpareLog:
    """A standby's output file (what :class:`~goodputlab.recovery.spare.HotSpare` asks of a log)."""

    def __init__(self, path: Path):
        self.path = path

    def drain(self) -> None:
        pass  # the process writes the file itself


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s session (it leads it: ``start_new_session``) and the sessions its children lead
    (a group's torchrun starts each rank in a session of its own), and reap it."""
    if proc.poll() is not None:  # reaped: its pid may belong to another process now
        return
    children = _children(proc.pid)  # read while it lives: its children cannot be reparented yet
    for pid in (proc.pid, *children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # a child that leads no session of its own dies with proc's (or of PR_SET_PDEATHSIG)
    try:
        proc.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        pass


def _group_rank_hashes(out: Path, groups: int, size: int) -> set[str]:
    """The final weights' hashes of the ranks after the first of each replica group (their own logs)."""
    from ..distributed.ft_worker import GROUP_RANK_LOG
    from ..distributed.joblog import RANKS_DIR

    found = set()
    for r in range(groups):
        for k in range(1, size):
            try:
                evs = read_events(out / RANKS_DIR / GROUP_RANK_LOG.format(replica=r, rank=k))
            except FileNotFoundError:
                continue
            last = next((e for e in reversed(evs) if e["kind"] == E.M_FINISH), None)
            found |= {last["final_state_sha256"]} if last else set()
    return found


def _children(pid: int) -> list[int]:
    """The live children of process ``pid`` (``/proc/PID/task/*/children``)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RunInterrupted):
        return "interrupted" if exc.signum == signal.SIGINT else f"interrupted by {exc.signal_name}"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"error: {type(exc).__name__}"
