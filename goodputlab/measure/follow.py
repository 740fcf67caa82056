"""Following a recording while it runs: the ledger updated from what was appended since the last look (pure).

:class:`Follower` keeps one :class:`~goodputlab.measure.fold.LedgerFold` and a reader at the
end of the log: each :meth:`~Follower.update` reads the lines appended since the last one (a
line still being written waits for the next update), feeds them to the fold, and closes a
copy of it as the reader closes a recording (an attempt still recording keeps its steps; one
that died is a failure). So an update costs the new events plus the attempts and
checkpoints, never the whole log again. ``goodputlab report DIR --follow`` and
``gl.watch(DIR)`` draw what it returns.

A log renamed over, removed or replaced by a folder is opened again from its start (a folder or a
link is then refused with one line, as ``load_run`` refuses it).

Three cases read the whole log again at an update instead (exact, but as costly as a
report): a job of several ranks (their logs are merged again, as a stream), a log whose lines are
not in time order (a lab run's, two writers), and a log that was cut back (a new attempt
dropped a line a kill left unfinished).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fold import LedgerFold, OutOfOrder
from .logread import LogReader
from .recording import Recording, close


@dataclass
class Update:
    """One look at a recording: its summary now, and what the look cost."""

    summary: dict[str, Any]
    new_events: int  # events read at this update
    events: int  # events read in all
    read_s: float  # seconds this update took
    whole: bool  # the whole log was read again (see the module's docstring)
    finished: bool  # the log ends with the end of a completed run, and nobody records to it

    def progress_line(self) -> str:
        """One line: where the job is and what this update read."""
        s = self.summary
        state = "finished" if self.finished else s.get("stop_reason", "")
        how = "whole log" if self.whole else f"+{self.new_events:,} new"
        return (
            f"attempt {s['attempts'] - 1}, steps {s['steps_completed']:,}/{s['config']['steps']:,} "
            f"(executed {s['steps_executed']:,}), {self.events:,} events ({how}, read in "
            f"{1000 * self.read_s:.0f} ms): {state}"
        )


class Follower:
    """The live ledger of the recording in ``run_dir`` (see the module's docstring)."""

    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self.recording: Recording | None = None
        self.fold: LedgerFold | None = None
        self.reader: LogReader | None = None
        self.events = 0

    def update(self) -> Update:
        """Read what was appended and return the ledger now. Raises what ``load_run`` raises for a
        folder that holds no recording (yet)."""
        start = time.perf_counter()
        rec = self.recording = Recording(self.run_dir)
        if len(rec.files) != 1:
            return self._whole(rec, start)
        ((key, path),) = rec.files.items()
        if self.reader is None or self.reader.path != path or _shrunk(self.reader) or _replaced(self.reader):
            self._restart(path)
        new = 0
        try:
            for batch in self.reader.batches(stop_at_partial=True, runs=True):
                self.fold.feed(batch)
                new += len(batch)
        except OutOfOrder:
            self._restart(path)
            return self._whole(rec, start)
        self.events += new
        if self.fold.last_event is None:
            from .recorder import NotARunDirectory

            raise NotARunDirectory(f"{self.run_dir}: its event log is empty (nothing recorded yet)")
        done = close(self.fold, rec.live[key], keep_open=True)
        if done.partial:  # a restart off a recorded checkpoint: the exact ledger needs a second pass
            return self._whole(rec, start, new)
        from .ledger import summary_of

        summary = summary_of(done, rec.config(done))
        return Update(summary, new, self.events, time.perf_counter() - start, False, self._finished(summary, rec))

    def _restart(self, path: Path) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader, self.fold, self.events = LogReader(path), LedgerFold(), 0

    def _whole(self, rec: Recording, start: float, new: int | None = None) -> Update:
        summary = rec.summary()
        return Update(summary, new or 0, self.events, time.perf_counter() - start, True, self._finished(summary, rec))

    @staticmethod
    def _finished(summary: dict[str, Any], rec: Recording) -> bool:
        return bool(summary["completed"]) and not any(rec.live.values())

    def close(self) -> None:
        """Close the log this follower reads (idempotent)."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None


def _replaced(reader: LogReader) -> bool:
    """Is the log (or its step records) another file now than the one we read: renamed over, removed, or
    replaced by a folder? Then it is read again from its start, or refused as ``load_run`` refuses it."""
    for fd, path in ((reader.fd, reader.path), (reader.rec_fd, reader.rec_path)):
        if fd < 0:
            continue
        try:
            now = os.lstat(path)
        except FileNotFoundError:
            return True
        was = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (was.st_dev, was.st_ino):
            return True
    return False


def _shrunk(reader: LogReader) -> bool:
    """Was the log or its step records cut back below where we read to (a new attempt dropped an unfinished
    line or record)?"""
    if reader.rec_fd >= 0 and os.fstat(reader.rec_fd).st_size < reader.rec_offset:
        return True
    return os.fstat(reader.fd).st_size < reader.offset
