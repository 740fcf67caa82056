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
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import events as E
from .checkpoint import CheckpointStore
from .config import RunConfig
from .errors import ConfigError
from .events import EventTail, EventWriter, read_events
from .ledger import summarize
from .memory_checkpoint import MEMORY_TIER_ENV, create_memory_tier_dir, remove_memory_tier_dir

POLL_S = 0.02  # how often the supervisor looks at the worker and the event log
_RUN_ARTIFACTS = ("ckpt", "logs", "events.jsonl", "summary.json", "config.json")


class WorkerCrashed(RuntimeError):
    """The worker exited with an error that no injected failure caused (a bug or bad setup)."""

    def __init__(self, returncode: int, log: Path, tail: str):
        self.returncode = returncode
        self.log = log
        self.tail = tail
        super().__init__(f"the training worker exited with code {returncode}; see {log}\n{tail}")


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


def check_writable(out: Path) -> None:
    """Create ``out`` if needed; raise :class:`ConfigError` unless files can be written in it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise ConfigError("out", str(out), f"a directory that can be created and written ({e.strerror})") from None


def prepare_out_dir(out: Path, keep_checkpoints: bool = False) -> None:
    """Create ``out`` (or clear the results of an earlier run in it) and check it is writable.

    The generated data in ``out/data`` is kept: it is a pure function of the seed.
    With ``keep_checkpoints`` the checkpoints stay too, so the run resumes from them.
    """
    check_writable(out)
    for name in _RUN_ARTIFACTS:
        if keep_checkpoints and name == "ckpt":
            continue
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


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
    from the newest valid one; otherwise ``out`` starts clean.
    """
    out = Path(out).resolve()
    prepare_out_dir(out, keep_checkpoints=resume)
    (out / "logs").mkdir()
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=1, sort_keys=True))

    t0 = time.monotonic()
    events_path = out / "events.jsonl"
    ev = EventWriter(events_path, t0, attempt=0)
    ev.emit(E.SUP_START)
    tail = EventTail(events_path)
    failure_rng = poisson_failure_rng(config.seed)
    pending_kills = sorted(config.kill_at_steps)
    attempt, failures = 0, 0
    completed, reason = False, ""
    proc: subprocess.Popen | None = None
    state = Progress(0, config.steps, 0, 0, "startup")
    # --ckpt memory: the RAM tier outlives each worker, so the supervisor owns it and removes it at the end
    memory_tier = create_memory_tier_dir() if config.ckpt == "memory" else None
    worker_env = {MEMORY_TIER_ENV: str(memory_tier)} if memory_tier is not None else {}

    def tell(**changes) -> None:
        for k, v in changes.items():
            setattr(state, k, v)
        if progress is not None:
            progress(state)

    try:
        while True:
            ev.attempt = attempt
            ev.emit(E.SUP_SPAWN)
            log = out / "logs" / f"attempt-{attempt:03d}.log"
            proc = _launch(python, out, attempt, t0, log, worker_env)
            ttf = failure_rng.exponential(config.mtbf) if config.mtbf > 0 else float("inf")
            deadline = time.monotonic() + ttf
            tell(attempt=attempt, phase="startup" if attempt == 0 else "restart")

            cause = None
            while cause is None:
                try:
                    proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    pass
                for e in tail.poll():
                    if e["attempt"] != attempt:
                        continue
                    if e["kind"] == E.W_STEP_END:
                        done = e["step"] + 1
                        if pending_kills and done >= pending_kills[0]:
                            cause = f"kill_at_step {pending_kills.pop(0)}"
                        tell(steps_done=done, phase="training")
                    elif e["kind"] == E.M_RESTORED:
                        tell(steps_done=e["ckpt_step"], phase="restored")
                if cause is None and time.monotonic() >= deadline:
                    cause = "poisson"

            if cause is None:  # the worker exited by itself
                if proc.returncode == 0:
                    completed, reason = True, "completed"
                    break
                raise WorkerCrashed(proc.returncode, log, _tail_text(log))

            ev.emit(E.SUP_FAILURE, cause=cause)
            _kill_group(proc)
            failures += 1
            tell(failures=failures, phase="failed")
            if failures > config.max_failures:
                reason = (
                    f"failure budget exhausted: failure {failures} exceeds --max-failures {config.max_failures}"
                )
                break
            if config.restart_delay > 0:
                ev.emit(E.SUP_RESTART_DELAY)
                time.sleep(config.restart_delay)
            attempt += 1
    except BaseException as exc:  # Ctrl-C, a crash: leave no process behind, keep a summary
        if proc is not None and proc.poll() is None:
            _kill_group(proc)
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"error: {type(exc).__name__}"
        _finish(ev, out, config, completed=False, reason=reason)
        raise
    finally:
        if memory_tier is not None:
            remove_memory_tier_dir(memory_tier)
    summary = _finish(ev, out, config, completed=completed, reason=reason)
    tell(steps_done=summary["steps_completed"], phase="done" if completed else "stopped")
    return summary


def _launch(python: str, out: Path, attempt: int, t0: float, log: Path, extra_env: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(extra_env or {})
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (bit-exact resume)
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [
        python,
        "-m",
        "goodputlab.worker",
        "--run-dir",
        str(out),
        "--attempt",
        str(attempt),
        "--t0",
        repr(t0),
        "--parent",
        str(os.getpid()),
    ]
    with open(log, "wb") as f:
        # its own session, so one killpg takes the worker and its DataLoader workers
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _tail_text(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _finish(ev: EventWriter, out: Path, config: RunConfig, completed: bool, reason: str) -> dict:
    ev.emit(E.SUP_TEARDOWN)
    resume_step = config.steps if completed else CheckpointStore(out / "ckpt", config.keep).newest_valid_step()
    ev.emit(E.SUP_END, completed=completed, reason=reason, resume_step=resume_step)
    ev.close()
    summary = summarize(read_events(out / "events.jsonl"), config.to_dict())
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, out / "summary.json")
    return summary
