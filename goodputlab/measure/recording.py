"""Reading a recorded run (``gl.Recorder``'s event logs) back: one log, a run folder's logs, its ranks merged.

:class:`Recording` is what ``gl.load_run(DIR)`` and ``goodputlab report DIR`` use for a folder
that a :class:`~goodputlab.measure.recorder.Recorder` wrote (or a lab run that never wrote its
summary). Its :meth:`~Recording.summary` reads the log once, in batches, with the ledger's fold
(:mod:`goodputlab.measure.fold`): memory grows with the attempts and checkpoints, not the steps,
so a ten-million-step job reports in the same few tens of megabytes as a short one. The events
themselves (:meth:`~Recording.events`), the per-step rows and the timeline are read only when
asked for.

The rules of reading: a last line cut short by a kill is left out with a warning; an attempt
that never closed ended at its last event (a failure, unless its log is still locked by a live
recorder: then it is running and keeps every completed step); a run that stopped keeps the steps
of its newest checkpoint; the logs of a ``torchrun`` job's ranks are merged
(:mod:`goodputlab.measure.merge`'s rules, applied as a stream by :mod:`goodputlab.measure.merge_stream`:
memory bounded by attempts and checkpoints, as for one log; a log out of time order is merged in memory). Every file is
opened with ``safe_io``'s rules: a link, a FIFO or a device where a log, ``recorder.json``,
``config.json`` or the lock should be is refused with one line (:class:`EventLogError`). Pure: no torch.
"""

from __future__ import annotations

import copy
import fcntl
import itertools
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from . import events as E
from .fold import Folded, LedgerFold, LogLimitError, OutOfOrder, sorted_tuples
from .logread import EventLogError, as_dict, event_batches
from .recorder import EVENTS_FILE, NotARunDirectory
from .recorder_files import META_FILE, _attempt_lock_path, _lexists

LAB_CONFIG_MAX_BYTES = 1 << 20


#: A log out of time order is sorted in memory (a recorder's never is): past this many events, it is refused
#: (:class:`~goodputlab.measure.fold.LogLimitError`) rather than held (docs/BAD_INPUT.md, "report").
MAX_SORTED_EVENTS = 100_000


def read_log(path: Path | str, limit: int | None = None) -> list[dict]:
    """The events of one log, in file order (a last line cut short by a kill is left out, with a warning).
    ``limit``: refuse a log of more events (:class:`~goodputlab.measure.fold.LogLimitError`)."""
    out: list[dict] = []
    for batch in event_batches(path):
        out.extend(as_dict(ev) for ev in batch)
        if limit is not None and len(out) > limit:
            raise LogLimitError(f"{path}: not in time order and longer than {limit:,} events, which would be sorted "
                                "in memory: not a log this ledger reads (docs/BAD_INPUT.md, report)")
    return out


def event_files(run_dir: Path | str) -> dict[int | None, Path]:
    """The event logs in ``run_dir``: ``None`` -> events.jsonl, ``R`` -> events-rankR.jsonl.

    Listed by name, links and other odd files included: opening one is what refuses it."""
    run_dir = Path(run_dir)
    out: dict[int | None, Path] = {}
    if _lexists(run_dir / EVENTS_FILE):
        out[None] = run_dir / EVENTS_FILE
    for p in sorted(run_dir.glob("events-rank*.jsonl")):
        rank = p.name[len("events-rank") : -len(".jsonl")]
        if rank.isdigit() and len(rank) <= 9:
            out[int(rank)] = p
    return out


def is_live(path: Path) -> bool:
    """Is a live Recorder recording to this log? (Its lock file beside the log is held.) The lock file
    must be a regular file: a link or a FIFO there is refused (:class:`EventLogError`), never waited on."""
    from ..safe_io import UnsafeFileError, open_regular

    lock = _attempt_lock_path(path)
    try:
        fd, _ = open_regular(lock, 1 << 20)
    except FileNotFoundError:
        return False
    except UnsafeFileError as e:  # its message begins with the file's name
        raise EventLogError(f"{lock.parent / str(e)}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def open_attempt_events(events: list[dict], live: bool) -> list[dict]:
    """What closes a log whose last attempt did not: ``[end]`` for a live one, ``[failure, end]``
    for one that died (as the next attempt would write it: the failure counts already)."""
    last = events[-1]
    attempt = max(e["attempt"] for e in events)
    end = {"t": last["t"], "attempt": attempt, "step": None, "kind": E.SUP_END, "completed": False, "clean": False}
    if live:
        done = [e["step"] for e in events if e["kind"] == E.W_STEP_END and e["step"] is not None]
        end.update(reason=f"running (attempt {attempt} is still recording)", resume_step=max(done) + 1 if done else 0)
        return [end]
    end["reason"] = f"attempt {attempt} did not close (killed?)"
    return [{"t": last["t"], "attempt": attempt, "step": None, "kind": E.SUP_FAILURE, "cause": end["reason"]}, end]


def end_open_attempt(events: list[dict], live: bool = False) -> list[dict]:
    """``events`` sorted, ending with an ``end`` event: one is added when the last attempt did not close."""
    events = sorted(events, key=lambda e: e["t"])
    if events[-1]["kind"] == E.SUP_END:
        return events
    return events + open_attempt_events(events, live)


class Recording:
    """A run folder's event logs, read for the ledger. Raises :class:`NotARunDirectory` when there
    is no log, or no event in any."""

    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise NotARunDirectory(f"{self.run_dir}: no such directory")
        self.files = event_files(self.run_dir)
        if not self.files:
            raise NotARunDirectory(
                f"{self.run_dir} is not a run directory (no summary.json, events.jsonl or events-rank*.jsonl)"
            )
        self.live = {key: is_live(p) for key, p in self.files.items()}
        self._merged: list[dict] | None = None

    # --- the ledger, in one pass -------------------------------------------------------------
    def fold(self, visit=None) -> Folded:
        """The ledger of the whole recording: see :mod:`goodputlab.measure.fold`."""
        if len(self.files) == 1:
            ((key, path),) = self.files.items()
            try:
                return self._fold_stream(lambda: event_batches(path, runs=True), self.live[key], visit)
            except OutOfOrder:  # not a recorder's log (lines in time order): sorted in memory
                if visit is not None:
                    visit.reset()
                tuples = sorted_tuples(read_log(path, MAX_SORTED_EVENTS))
                return self._fold_stream(lambda: [tuples], self.live[key], visit)
        source = self._merged_stream()
        if source is None:  # a log out of time order: its ranks merged in memory
            merged = sorted_tuples(self.merged_events(MAX_SORTED_EVENTS))
            source = lambda: [merged]  # noqa: E731
        return self._fold_stream(source, None, visit)

    def _merged_stream(self) -> Callable[[], Iterable[list[tuple]]] | None:
        """The ranks' logs merged as a stream (:mod:`goodputlab.measure.merge_stream`): a first pass over
        each log, then batches of the job's events; None when a log is not in time order."""
        from .merge_stream import merged_batches, scan

        keys = {(-1 if key is None else key): key for key in self.files}
        scans = {k: scan(event_batches(self.files[key], runs=True)) for k, key in keys.items()}
        if not any(s.events for s in scans.values()):
            raise NotARunDirectory(f"{self.run_dir}: its event log is empty (nothing recorded yet)")
        if not all(s.in_order for s in scans.values()):
            return None
        closing = {}
        for k, s in scans.items():
            if s.events and s.last["kind"] != E.SUP_END:
                head = {"t": s.last["t"], "attempt": s.max_attempt, "step": None, "kind": E.W_STEP_END}
                closing[k] = open_attempt_events([head], self.live[keys[k]])
                if self.live[keys[k]]:
                    closing[k][-1]["resume_step"] = s.max_done + 1 if s.max_done is not None else 0
        filled = [k for k, s in scans.items() if s.events]
        if len(filled) == 1:  # one log with events: it is the job's, as merged_events() takes it
            path, tail = self.files[keys[filled[0]]], [sorted_tuples(closing.get(filled[0], []))]
            return lambda: itertools.chain(event_batches(path, runs=True), tail)
        sources = {k: (lambda path=self.files[key]: (as_dict(ev) for b in event_batches(path) for ev in b))
                   for k, key in keys.items()}
        return lambda: merged_batches(sources, scans, closing)

    def _fold_stream(self, source: Callable[[], Iterable[list[tuple]]], live: bool | None, visit) -> Folded:
        """Fold one log (``live``: its attempt may still be recording; None: a merged job, already ended)."""
        marks: dict[int, list[int]] | None = None
        for _ in range(2):
            fold = LedgerFold(marks=marks, visit=visit)
            for batch in source():
                fold.feed(batch)
            if fold.last_event is None:
                raise NotARunDirectory(f"{self.run_dir}: its event log is empty (nothing recorded yet)")
            done = close(fold, live)
            if not done.partial:
                return done
            if visit is not None:
                visit.reset()
            marks = {a: done.survival.bounds(a) for a in done.survival.done}
        raise AssertionError("cut at every bound of survival, no chunk can be partial")  # pragma: no cover

    def summary(self) -> dict[str, Any]:
        """The run's summary (``ledger.summarize``'s keys), from one pass over the log."""
        from .ledger import summary_of

        done = self.fold()
        return summary_of(done, self.config(done))

    # --- what is read only when asked ----------------------------------------------------------
    def merged_events(self, limit: int | None = None) -> list[dict]:
        """Every event of the recording, in memory: the one log, or every rank's merged. ``limit``: refuse
        logs of more events than this, together (:class:`~goodputlab.measure.fold.LogLimitError`)."""
        from .merge import merge_ranks

        if self._merged is not None:
            return self._merged
        logs = {}
        for key, p in self.files.items():
            logs[key] = read_log(p, None if limit is None else limit - sum(map(len, logs.values())))
        logs = {key: evs for key, evs in logs.items() if evs}
        if not logs:
            raise NotARunDirectory(f"{self.run_dir}: its event log is empty (nothing recorded yet)")
        _common_clock(logs)
        logs = {key: end_open_attempt(evs, live=self.live[key]) for key, evs in logs.items()}
        if len(logs) == 1:
            (events,) = logs.values()
        else:
            events = merge_ranks({(-1 if key is None else key): evs for key, evs in logs.items()})
        self._merged = events
        return events

    def events(self) -> list[dict]:
        """The events as the ledger reads them (sorted; an open attempt closed; ranks merged)."""
        if len(self.files) > 1:
            return self.merged_events()
        events = sorted(self.merged_events(), key=lambda e: e["t"])
        end = events[-1]
        if not end.get("completed") and end.get("resume_step") is None:
            events[-1] = {**end, "resume_step": newest_checkpoint(events)}
        return events

    def ledger(self, min_s: float = 0.0):
        """The :class:`~goodputlab.measure.ledger.Ledger` with its segments; ``min_s``: segments shorter
        than this are merged by bins of that width (a chart's resolution, :class:`~goodputlab.measure.ledger.TimelineBins`),
        so a long run's timeline stays small."""
        from .ledger import ledger_of, segment_collector

        seg = segment_collector(min_s)
        done = self.fold(visit=seg)
        return ledger_of(done, seg.segments(done))

    def per_step(self) -> list[dict[str, Any]]:
        """One row per step execution (see :func:`goodputlab.measure.ledger.per_step`)."""
        from .ledger import step_rows

        rows = step_rows()
        return rows.table(self.fold(visit=rows))

    def config(self, done: Folded) -> dict[str, Any]:
        """The summary's ``config``: a lab run's config.json, or what the recording says of itself."""
        lab = self.run_dir / "config.json"
        if _lexists(lab) and not _lexists(self.run_dir / META_FILE):
            return read_lab_config(lab)  # a lab run that never wrote its summary
        end, finish = done.end or {}, done.finish
        totals = [f["total_steps"] for f in done.inits if f.get("total_steps") is not None]
        if end.get("completed") and finish is not None and finish.get("step") is not None:
            steps = finish["step"]
        elif totals:
            steps = totals[-1]
        else:
            steps = 1 + (done.max_step if done.max_step is not None else -1)
        ranks = sorted(k for k in self.files if k is not None)
        return {"steps": steps, "source": "recorder", "ranks": ranks}


def close(fold: LedgerFold, live: bool | None, keep_open: bool = False) -> Folded:
    """The fold's result, with the open attempt closed as :func:`end_open_attempt` does and a stopped
    run's resume point its newest checkpoint. ``keep_open``: close a copy, so that the fold itself can
    read on (a live view)."""
    last = fold.last_event
    if live is not None and last is not None and last[3] != E.SUP_END:
        if keep_open:
            fold = copy.deepcopy(fold)
        head = {"t": last[0], "attempt": fold.max_attempt, "step": None, "kind": E.W_STEP_END}
        closing = open_attempt_events([head], live)
        if live:
            closing[-1]["resume_step"] = fold.max_done + 1 if fold.max_done is not None else 0
        fold.feed([(e["t"], e["attempt"], e["step"], e["kind"], e) for e in closing])
    end, resume = fold.end, None
    if live is not None and end is not None and not end.get("completed") and end.get("resume_step") is None:
        resume = fold.max_ckpt_step if fold.max_ckpt_step is not None else 0
    return fold.result(resume_step=resume)


def newest_checkpoint(events: list[dict]) -> int:
    """The newest checkpoint's resume point in one log (0: none)."""
    from .merge import newest_common_checkpoint

    return newest_common_checkpoint({0: events})


def read_lab_config(path: Path) -> dict[str, Any]:
    """A lab run's ``config.json`` (a regular file holding an object with a whole number of ``steps``)."""
    from ..safe_io import UnsafeFileError, read_regular

    try:
        raw = read_regular(path, LAB_CONFIG_MAX_BYTES)
        config = json.loads(raw.decode("utf-8"))
    except (UnsafeFileError, OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise EventLogError(f"{path}: not a run's configuration ({e})") from None
    if not isinstance(config, dict) or not isinstance(config.get("steps"), int) or isinstance(config["steps"], bool) \
            or not 0 <= config["steps"] < 1 << 62:
        raise EventLogError(f"{path}: not a run's configuration (no whole number of 'steps')")
    return config


def _common_clock(logs: dict[Any, list[dict]]) -> None:
    """Shift logs whose attempts used another t0 (copied from another machine) onto the earliest one."""
    t0s = {}
    for key, evs in logs.items():
        t0 = next((e["t0_unix"] for e in evs if e["kind"] == E.W_INIT and "t0_unix" in e), None)
        if isinstance(t0, (int, float)) and not isinstance(t0, bool):
            t0s[key] = t0
    if len(set(t0s.values())) <= 1:
        return
    first = min(t0s.values())
    for key, t0 in t0s.items():
        if t0 != first:
            logs[key] = [{**e, "t": e["t"] + (t0 - first)} for e in logs[key]]
