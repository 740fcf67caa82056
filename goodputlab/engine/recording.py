"""Reading a recorded run (``gl.Recorder``'s event logs) back: one log, a run folder's logs, its ranks merged.

:func:`read_recording` is what ``gl.load_run(DIR)`` and ``goodputlab report DIR`` use for a folder
that a :class:`~goodputlab.engine.recorder.Recorder` wrote: every log read (:func:`read_log`, which
drops a last line a kill cut short, with a warning), an attempt that never closed ended at its last
event (:func:`end_open_attempt`), the ranks of a ``torchrun`` job merged
(:mod:`goodputlab.engine.merge`). Pure: no torch.
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from pathlib import Path
from typing import Any

from . import events as E
from .recorder import (
    EVENTS_FILE,
    META_FILE,
    EventLogError,
    EventLogWarning,
    NotARunDirectory,
    _attempt_lock_path,
    _parse,
)


def read_log(path: Path | str) -> list[dict]:
    """The events of one log, in file order.

    A last line cut short (or damaged) by a kill mid-write is left out with an
    :class:`EventLogWarning`; a damaged line before it raises :class:`EventLogError`
    naming the file and line."""
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # after the last newline: empty, or a line cut short
    while lines and not lines[-1].strip():
        lines.pop()
    events = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        e = _parse(raw)
        if e is None:
            if n == len(lines) and not tail.strip(b"\0 \t\r"):
                warnings.warn(
                    f"{path}: line {n} is damaged (a write cut short); read up to line {n - 1}",
                    EventLogWarning,
                    stacklevel=2,
                )
                continue
            raise EventLogError(f"{path}: line {n} is not an event: {raw[:60]!r}")
        events.append(e)
    if tail.strip(b"\0 \t\r\n"):
        warnings.warn(
            f"{path}: the last line is cut short ({len(tail)} bytes, a write interrupted by a kill); "
            f"read up to line {len(lines)}",
            EventLogWarning,
            stacklevel=2,
        )
    return events


def event_files(run_dir: Path | str) -> dict[int | None, Path]:
    """The event logs in ``run_dir``: ``None`` -> events.jsonl, ``R`` -> events-rankR.jsonl."""
    run_dir = Path(run_dir)
    out: dict[int | None, Path] = {}
    if (run_dir / EVENTS_FILE).is_file():
        out[None] = run_dir / EVENTS_FILE
    for p in sorted(run_dir.glob("events-rank*.jsonl")):
        rank = p.name[len("events-rank") : -len(".jsonl")]
        if rank.isdigit():
            out[int(rank)] = p
    return out


def _is_live(path: Path) -> bool:
    """Is a live Recorder recording to this log?"""
    try:
        fd = os.open(_attempt_lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def end_open_attempt(events: list[dict], live: bool = False) -> list[dict]:
    """``events`` ending with an ``end`` event: one is added when the last attempt did not close.

    A live attempt (still recording) keeps every completed step; one that died is a
    failure and keeps only what its newest checkpoint holds, as the ledger does for a
    stopped lab run."""
    events = sorted(events, key=lambda e: e["t"])
    last = events[-1]
    if last["kind"] == E.SUP_END:
        return events
    attempt = max(e["attempt"] for e in events)
    end = {"t": last["t"], "attempt": attempt, "step": None, "kind": E.SUP_END, "completed": False, "clean": False}
    if live:
        done = [e["step"] for e in events if e["kind"] == E.W_STEP_END and e["step"] is not None]
        end.update(reason=f"running (attempt {attempt} is still recording)", resume_step=max(done) + 1 if done else 0)
        return events + [end]
    end["reason"] = f"attempt {attempt} did not close (killed?)"
    failure = {"t": last["t"], "attempt": attempt, "step": None, "kind": E.SUP_FAILURE, "cause": end["reason"]}
    return events + [failure, end]  # as the next attempt would write it: the failure counts already


def read_recording(run_dir: Path | str) -> tuple[list[dict], dict[str, Any]]:
    """A run directory's events (one log, or every rank's merged) and a config for ``ledger.summarize``.

    Works for a recorder's folder and for a lab run without ``summary.json``.
    Raises :class:`NotARunDirectory` when there is no event log."""
    from .merge import merge_ranks, newest_common_checkpoint

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NotARunDirectory(f"{run_dir}: no such directory")
    files = event_files(run_dir)
    if not files:
        raise NotARunDirectory(
            f"{run_dir} is not a run directory (no summary.json, events.jsonl or events-rank*.jsonl)"
        )
    logs = {key: read_log(p) for key, p in files.items()}
    logs = {key: evs for key, evs in logs.items() if evs}
    if not logs:
        raise NotARunDirectory(f"{run_dir}: its event log is empty (nothing recorded yet)")
    _common_clock(logs)
    logs = {key: end_open_attempt(evs, live=_is_live(files[key])) for key, evs in logs.items()}
    if len(logs) == 1:
        (events,) = logs.values()
        end = events[-1]
        if not end.get("completed") and end.get("resume_step") is None:
            events[-1] = {**end, "resume_step": newest_common_checkpoint({0: events})}
    else:
        events = merge_ranks({(-1 if key is None else key): evs for key, evs in logs.items()})
    return events, _config(run_dir, events, sorted(k for k in logs if k is not None))


def _common_clock(logs: dict[Any, list[dict]]) -> None:
    """Shift logs whose attempts used another t0 (copied from another machine) onto the earliest one."""
    t0s = {}
    for key, evs in logs.items():
        t0 = next((e["t0_unix"] for e in evs if e["kind"] == E.W_INIT and "t0_unix" in e), None)
        if t0 is not None:
            t0s[key] = t0
    if len(set(t0s.values())) <= 1:
        return
    first = min(t0s.values())
    for key, t0 in t0s.items():
        if t0 != first:
            logs[key] = [{**e, "t": e["t"] + (t0 - first)} for e in logs[key]]


def _config(run_dir: Path, events: list[dict], ranks: list[int]) -> dict[str, Any]:
    lab = run_dir / "config.json"
    if lab.is_file() and not (run_dir / META_FILE).exists():
        return json.loads(lab.read_text())  # a lab run that never wrote its summary
    end = events[-1]
    finish = next((e for e in reversed(events) if e["kind"] == E.M_FINISH), None)
    totals = [e["total_steps"] for e in events if e["kind"] == E.W_INIT and e.get("total_steps") is not None]
    if end.get("completed") and finish is not None and finish.get("step") is not None:
        steps = finish["step"]
    elif totals:
        steps = totals[-1]
    else:
        steps = 1 + max((e["step"] for e in events if e["kind"] == E.W_COMPUTE), default=-1)
    return {"steps": steps, "source": "recorder", "ranks": ranks}
