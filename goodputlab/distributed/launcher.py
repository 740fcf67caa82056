"""``torchrun`` and its ranks, as the supervisor sees them: start, follow, kill one rank, stop all.

:class:`TorchrunJob` starts ``python -m torch.distributed.run`` in a session of its own
(its elastic agent starts every rank in a session of its own too, so killing a rank's
process group takes its DataLoader workers with it), follows every local rank's event log,
learns each rank's process from its ``init`` event, and can

* :meth:`~TorchrunJob.kill_rank`: SIGKILL one rank's process group, as a failed machine would.
  The agent notices within ``--monitor-interval``, stops the other ranks (SIGTERM, then
  SIGKILL) and, while ``--max-restarts`` allows, starts the whole group again; the new ranks
  see ``TORCHELASTIC_RESTART_COUNT`` one higher and resume from the newest checkpoint;
* :meth:`~TorchrunJob.stop`: end everything: SIGTERM to the agent (it stops its ranks), then
  SIGKILL to the agent's session and to every rank still alive. The agent dies with the
  supervisor and a rank with its agent, however they die (``PR_SET_PDEATHSIG``,
  :mod:`goodputlab.procs`), so no process outlives a run, also when the supervisor itself is
  SIGKILLed: no orphan goes on committing checkpoints into the run's folder.

A rank's process is identified by its pid *and* its start time (``/proc/PID/stat``), so a pid
the system has reused for another process is never signalled.

Where the job listens (:mod:`~goodputlab.distributed.binding`): on one machine its rendezvous is
a private file (``0o600``, removed when torchrun has exited, with the port file beside it where
rank 0 tells the others its store's port) and its ranks listen on loopback only; a job on
several machines is warned about (:class:`NetworkExposureWarning`). If no rank has started
``launch.rdzv_timeout_s`` seconds after the launch (a rendezvous endpoint nobody answers at,
machines that never join), :meth:`~TorchrunJob.wait` stops everything and raises
:class:`RendezvousTimeout`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from ..measure.events import EventTail
from ..errors import ConfigError
from ..procs import dies_with_this_process
from .binding import BIND_ENV, PORT_FILE_ENV, bind_address, exposure_warning, listen_env
from .joblog import RANK_LOG, RANKS_DIR
from .launch import TorchrunLaunch

WORKER_MODULE = "goodputlab.distributed.worker"
STOP_GRACE_S = 5.0  # how long the agent gets to stop its ranks before everything is SIGKILLed


def _start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), or ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22 of stat, after "pid (comm) "


class NetworkExposureWarning(UserWarning):
    """A job on several machines listens where others may reach it (``docs/SECURITY.md``)."""


class RendezvousTimeout(ConfigError):
    """No rank started within ``--rdzv-timeout`` seconds of the launch; everything was stopped (a bad input: exit 2)."""


def rendezvous_file() -> str:
    """A new private file (mode ``0o600``, in the temporary directory) for a one-machine job's rendezvous
    store, and beside it its ranks' port file (:func:`port_file`, created private too)."""
    fd, path = tempfile.mkstemp(prefix="goodputlab-rdzv-")
    os.close(fd)
    try:
        os.close(os.open(port_file(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except BaseException:
        os.unlink(path)
        raise
    return path


def port_file(rdzv_file: str) -> str:
    """Where rank 0 of the job whose rendezvous is ``rdzv_file`` publishes its store's port
    (:func:`~goodputlab.distributed.binding.publish_port`)."""
    return rdzv_file + ".port"


def rendezvous_env(rdzv_file: str) -> dict[str, str]:
    """The ranks' environment that names their port file (:data:`~goodputlab.distributed.binding.PORT_FILE_ENV`)."""
    return {PORT_FILE_ENV: port_file(rdzv_file)}


def remove_rendezvous_file(rdzv_file: str) -> None:
    """Remove a rendezvous file and its port file (either may be gone already)."""
    for path in (rdzv_file, port_file(rdzv_file)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


class TorchrunJob:
    """A running ``torchrun`` job of ``launch.nproc`` local ranks training the run in ``out``."""

    def __init__(self, launch: TorchrunLaunch, out: Path, t0: float, python: str, stdout_fd: int, env: dict[str, str],
                 wrap=None, listen: dict[str, str] | None = None, agent: subprocess.Popen | None = None):
        """``wrap``: a function that turns torchrun's command into the one to run (a node's ``ip netns exec``);
        ``listen``: the environment that binds the ranks' sockets, given by a caller that starts torchrun in a
        network namespace of its own (where every interface is the node's: no exposure warning); ``agent``: a
        warm agent (:mod:`~goodputlab.distributed.warm_agent`, already where it runs, its own session) that is
        handed torchrun's arguments and environment instead of a new process being started."""
        self.launch = launch
        self.out = out
        (out / RANKS_DIR).mkdir(exist_ok=True)
        warning = exposure_warning(launch) if listen is None else None
        if warning is not None:
            warnings.warn(warning, NetworkExposureWarning, stacklevel=2)
        address = bind_address(launch)
        if listen is not None:
            env = {**env, **listen}
        elif address is not None:
            env = {**env, **listen_env(address)}
        self.rdzv_file = rendezvous_file() if launch.nnodes == 1 else None
        if self.rdzv_file is not None and BIND_ENV in env:  # rank 0 hosts the ranks' store: its port in a file
            env = {**env, **rendezvous_env(self.rdzv_file)}
        cmd = launch.command(python, WORKER_MODULE, ["--run-dir", str(out), "--t0", repr(t0)], rdzv_file=self.rdzv_file)
        self.deadline = time.monotonic() + launch.rdzv_timeout_s  # for the first rank to start
        self.started = False  # has any rank started (the rendezvous is done)?
        self.host = socket.gethostname()
        self._tails: dict[int, EventTail] = {}
        self.processes: dict[tuple[int, int], tuple[int, int]] = {}  # (attempt, rank) -> (pid, start ticks)
        if agent is not None:  # torchrun's arguments follow "python -m torch.distributed.run"
            agent.stdin.write((json.dumps({"args": cmd[3:], "env": env}) + "\n").encode())
            agent.stdin.close()
            self.proc = agent
            return
        if wrap is not None:
            cmd = wrap(cmd)
        # its own session: one killpg reaches the agent (the ranks have sessions of their own); it dies with the
        # supervisor, however the supervisor dies, and its ranks with it (each asks to die with its agent)
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=stdout_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                preexec_fn=dies_with_this_process(),
            )
        except BaseException:
            self._remove_rdzv_file()
            raise

    def _remove_rdzv_file(self) -> None:
        if self.rdzv_file is not None:
            remove_rendezvous_file(self.rdzv_file)
            self.rdzv_file = None

    def _logs(self) -> dict[int, Path]:
        """The rank logs present (on a folder shared by several machines, other machines' ranks too)."""
        found = {}
        for p in (self.out / RANKS_DIR).glob("events-rank*.jsonl"):
            r = p.name[len("events-rank") : -len(".jsonl")]
            if r.isdigit():
                found[int(r)] = p
        return found

    def poll(self) -> list[dict]:
        """Events the ranks wrote since the last call (each with its ``rank``), in no particular order.

        A rank of this machine (its ``init`` names this host) becomes known by its process."""
        new = []
        for rank, path in self._logs().items():
            tail = self._tails.get(rank)
            if tail is None:
                tail = self._tails[rank] = EventTail(path)
            for e in tail.poll():
                e["rank"] = rank
                self.started = True
                if e["kind"] == "init" and isinstance(e.get("pid"), int) and e.get("host") == self.host:
                    ticks = _start_ticks(e["pid"])
                    if ticks is not None:
                        self.processes[(e["attempt"], rank)] = (e["pid"], ticks)
                new.append(e)
        return new

    def returncode(self) -> int | None:
        """torchrun's exit code, or ``None`` while it runs."""
        code = self.proc.poll()
        if code is not None:
            self._remove_rdzv_file()
        return code

    def wait(self, timeout: float) -> int | None:
        """torchrun's exit code after at most ``timeout`` seconds, or ``None`` while it runs.

        Raises :class:`RendezvousTimeout`, after stopping everything, when no rank has started
        (no rank's event read by :meth:`poll`) ``launch.rdzv_timeout_s`` seconds after the launch."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            self._remove_rdzv_file()
        elif not self.started and time.monotonic() >= self.deadline:
            self.stop()
            raise self._timed_out()
        return code

    def _timed_out(self) -> RendezvousTimeout:
        launch = self.launch
        seconds = f"{launch.rdzv_timeout_s:g}"
        if launch.nnodes == 1:
            return RendezvousTimeout("rdzv_timeout", seconds,
                                     f"more seconds than this machine takes to start {launch.nproc} ranks "
                                     f"(none had started after {seconds} s)")
        return RendezvousTimeout("rdzv_endpoint", launch.rdzv_endpoint,
                                 f"a rendezvous that all {launch.nnodes} machines reach and join within --rdzv-timeout "
                                 f"{seconds} s (none of the ranks had started; torchrun's log is in {self.out}/logs)")

    def live_ranks(self, attempt: int) -> list[int]:
        """The ranks of attempt ``attempt`` running on this machine now, in rank order."""
        return sorted(r for (a, r), (pid, ticks) in self.processes.items() if a == attempt and _start_ticks(pid) == ticks)

    def kill_rank(self, attempt: int, rank: int) -> bool:
        """SIGKILL rank ``rank`` of attempt ``attempt`` with its DataLoader workers; False when it is not alive."""
        known = self.processes.get((attempt, rank))
        if known is None or _start_ticks(known[0]) != known[1]:
            return False
        try:
            os.killpg(known[0], signal.SIGKILL)  # the rank leads its own session
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def stop(self) -> None:
        """End torchrun and every rank: SIGTERM to the agent, then SIGKILL to what is left."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=STOP_GRACE_S)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        self._remove_rdzv_file()
        for pid, ticks in list(self.processes.values()):
            if _start_ticks(pid) == ticks:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def rank_log(out: Path, rank: int) -> Path:
    """Where rank ``rank`` of the run in ``out`` records its events."""
    return out / RANKS_DIR / RANK_LOG.format(rank=rank)
