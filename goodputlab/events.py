"""The raw event log: JSON lines of ``{"t", "attempt", "step", "kind", ...}``.

Both the supervisor and the worker append to one file. Each event is one
``os.write`` on a descriptor opened with ``O_APPEND``: lines never interleave,
and a line written before a SIGKILL is already in the kernel and survives it.

``t`` is seconds since the run started, on the machine's monotonic clock, which
all processes on one machine share.

Most kinds are *phases*: from the event's time until the next phase event the
process is doing that (waiting for data, computing step 7, saving...). The rest
are *markers* (a checkpoint committed, the run finished) that carry facts and
change no phase. The ledger (``goodputlab.ledger``) turns phases into seconds.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

# Phases written by the supervisor.
SUP_START = "start"  # the run begins: setting up directories and config
SUP_SPAWN = "spawn"  # launching a worker process (interpreter start-up)
SUP_FAILURE = "failure"  # the worker was just killed: detecting and cleaning up
SUP_RESTART_DELAY = "restart_delay"  # emulated rescheduling before the next launch
SUP_END = "end"  # the run is over (zero length: the last event)
SUP_TEARDOWN = "teardown"  # the final worker has exited; writing results

# Phases written by the worker.
W_INIT = "init"  # imports, model and optimizer construction, data files
W_RESTORE = "restore"  # finding, verifying and loading a checkpoint
W_WARMUP = "warmup"  # starting the input pipeline and waiting for its first batch
W_DATA_WAIT = "data_wait"  # blocked on the next batch
W_COMPUTE = "compute"  # forward, backward and optimizer step of ``step``
W_STEP_END = "step_end"  # bookkeeping after a step; carries {"loss", "samples"}
W_CKPT_SAVE = "ckpt_save"  # the blocking part of a checkpoint save
W_EXIT = "exit"  # finished: releasing resources before the process exits

# Phase written by goodputlab.recorder (a user's own loop): the loop's code outside the
# recorded blocks (logging, evaluation). Booked ``other``.
R_LOOP = "loop"

PHASES = frozenset(
    {
        SUP_START,
        SUP_SPAWN,
        SUP_FAILURE,
        SUP_RESTART_DELAY,
        SUP_END,
        SUP_TEARDOWN,
        W_INIT,
        W_RESTORE,
        W_WARMUP,
        W_DATA_WAIT,
        W_COMPUTE,
        W_STEP_END,
        W_CKPT_SAVE,
        W_EXIT,
        R_LOOP,
    }
)

# Markers.
M_CKPT_COMMIT = "ckpt_commit"  # a checkpoint became durable and valid: {"ckpt_step", "tier"}
M_CKPT_INVALID = "ckpt_invalid"  # restore skipped a damaged checkpoint: {"ckpt_step", "tier", "reason"}
M_RESTORED = "restored"  # the worker resumed: {"ckpt_step", "source": "disk" or "memory", "path"}
M_CKPT_INTERVAL = "ckpt_interval"  # --ckpt-every auto re-tuned: {"interval_s", "save_s", "mtbf_s", "failures_seen"}
M_FINISH = "finish"  # the worker completed every step: {"final_state_sha256", "final_loss"}
M_WORKER_INFO = "worker_info"  # device, parameter count, state size
M_PIPELINE_INFO = "pipeline_info"  # the input pipeline as built: loader settings, device prefetch


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps builds an encoder per call
_RESERVED = frozenset({"t", "attempt", "step", "kind"})


def event_line(t: float, attempt: int, step: int | None, kind: str, fields: dict[str, Any]) -> bytes:
    """One event as a JSON line: the bytes of ``json.dumps(record, separators=(",", ":"))``.

    The common case (float time, int or no step, a plain kind) is formatted directly,
    which halves the cost of an event; anything else goes through the JSON encoder.
    """
    t = round(t, 7)
    if (
        type(t) is float
        and type(attempt) is int
        and (step is None or type(step) is int)
        and (kind in PHASES or (kind.isascii() and kind.isidentifier()))
        and (not fields or _RESERVED.isdisjoint(fields))
    ):
        head = f'{{"t":{t!r},"attempt":{attempt},"step":{"null" if step is None else step},"kind":"{kind}"'
        return (head + ("," + _ENCODE(fields)[1:] if fields else "}") + "\n").encode()
    record = {"t": t, "attempt": attempt, "step": step, "kind": kind}
    record.update(fields)
    return (_ENCODE(record) + "\n").encode()


class EventWriter:
    """Appends events to a JSON-lines file; safe across processes and threads."""

    def __init__(self, path: Path | str, t0: float, attempt: int):
        self.path = Path(path)
        self.t0 = t0
        self.attempt = attempt
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.t0

    def emit(self, kind: str, step: int | None = None, t: float | None = None, **fields: Any) -> float:
        """Write one event and return its time (seconds since the run started)."""
        if t is None:
            t = time.monotonic() - self.t0
        line = event_line(t, self.attempt, step, kind, fields)
        with self._lock:
            os.write(self._fd, line)
        return t

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NullWriter:
    """An EventWriter that writes nothing (for the bare loop in the overhead benchmark)."""

    attempt = 0

    def now(self) -> float:
        return time.monotonic()

    def emit(self, kind: str, step: int | None = None, t: float | None = None, **fields: Any) -> float:
        return 0.0

    def close(self) -> None:
        pass


def read_events(path: Path | str) -> list[dict]:
    """All complete events in the file, ordered by time (stable for equal times).

    A line cut short by a kill in the middle of its write is skipped.
    """
    events = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                continue
            try:
                events.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
    events.sort(key=lambda e: e["t"])
    return events


class EventTail:
    """Reads the events appended to a file since the last call (for live progress)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            try:
                out.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
        return out
