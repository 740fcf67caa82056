"""A training worker's process, as the supervisor starts it: its command line and environment, its
output, and what its exit status says.

:func:`launch_worker` starts ``python -m goodputlab.engine.worker`` (an attempt, or a hot spare's
standby) in its own session, so one ``killpg`` takes the worker and its DataLoader workers;
:func:`worker_env` is the environment of ``torchrun`` and its ranks. :class:`WorkerLog` pumps the
worker's output into its log file and keeps the tail for an error message.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

from .config import RunConfig
from ..recovery.control import WorkerControl
from ..safe_io import create_new
from ..training.threads import choose_threads


class WorkerCrashed(RuntimeError):
    """The worker exited with an error that no injected failure caused (a bug or bad setup)."""

    def __init__(self, returncode: int, log: Path, tail: str, why: str = ""):
        self.returncode = returncode
        self.log = log
        self.tail = tail
        what = why or f"the training worker exited with code {returncode}"
        super().__init__(f"{what}; see {log}\n{tail}")

    @property
    def disk_full(self) -> bool:
        """The worker died because the disk it writes to is full (``ENOSPC``)."""
        return "No space left on device" in self.tail or "[Errno 28]" in self.tail



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



def killed_from_outside(returncode: int) -> str | None:
    """A worker SIGKILLed by someone else (the kernel's OOM killer, an operator, a torture test) failed
    like a node that died: ``killed``, and the run recovers. Any other exit status is its own doing."""
    return "killed" if returncode == -signal.SIGKILL else None



def launch_worker(
    python: str,
    out: Path,
    attempt: int | None,
    t0: float,
    log: WorkerLog,
    extra_env: dict | None = None,
    control: WorkerControl | None = None,
    fork_server_fd: int | None = None,
) -> subprocess.Popen:
    """Start a worker as ``attempt``, or a standby (``attempt`` None) that waits on ``control`` for one,
    or (``fork_server_fd``) the run's fork server of standbys (:mod:`goodputlab.recovery.zygote`)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (bit-exact resume)
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [python, "-m", "goodputlab.engine.worker", "--run-dir", str(out), "--t0", repr(t0), "--parent", str(os.getpid())]
    pass_fds: tuple[int, ...] = ()
    if fork_server_fd is not None:
        cmd += ["--fork-server", str(fork_server_fd)]
        pass_fds = (fork_server_fd,)
    else:
        cmd += ["--standby"] if attempt is None else ["--attempt", str(attempt)]
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



def worker_env(config: RunConfig) -> dict[str, str]:
    """The environment of torchrun and its ranks."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # the repository, above goodputlab/
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env["PYTHONUNBUFFERED"] = "1"
    # torch threads per rank (the supervisor chose them: choose_threads; torchrun would warn and use 1)
    env.setdefault("OMP_NUM_THREADS", str(config.threads or choose_threads(config)[0]))
    env.setdefault("LOGLEVEL", "WARNING")
    # A fresh rendezvous store for every restart: with the agent's store shared across restarts, a
    # restarted group can read the previous group's addresses and fail to connect (pytorch#135712).
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    return env
