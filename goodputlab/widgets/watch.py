"""``gl.watch(DIR)``: a running job's ledger in a notebook, redrawn while the job runs.

The notebook's side of ``goodputlab report DIR --follow``: a :class:`Watch` keeps a
:class:`~goodputlab.measure.follow.Follower` on the folder and, on a background thread,
redraws the breakdown (one bar per category) and a progress line every ``interval``
seconds from what the job appended to its log. It stops by itself when the run has
completed and nothing records to it any more, or at :meth:`Watch.stop`.

    w = gl.watch("runs/mine")      # shows the breakdown under the cell, updating
    w.stop()                       # or let it stop when the job completes
"""

from __future__ import annotations

import html
import threading
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..categories import CATEGORIES, COLORS, MEANINGS
from ..measure.follow import Follower, Update
from .common import show_panel

_BAR_PX = 260  # a 100% bar


def breakdown_html(summary: dict[str, Any]) -> str:
    """The breakdown as an HTML table: seconds, share and a bar per category, the headline above."""
    wall = summary["wall_s"]
    rows = []
    for cat in CATEGORIES:
        sec = summary["buckets"].get(cat, 0.0)
        share = sec / wall if wall > 0 else 0.0
        rows.append(
            f"<tr title='{html.escape(MEANINGS[cat])}'><td style='padding-right:12px'>{cat}</td>"
            f"<td style='text-align:right;padding-right:12px'>{sec:.3f} s</td>"
            f"<td style='text-align:right;padding-right:12px'>{share:.1%}</td>"
            f"<td><div style='width:{round(share * _BAR_PX)}px;height:12px;background:{COLORS[cat]}'></div></td></tr>"
        )
    head = (
        f"<b>goodput {summary['goodput']:.1%}</b> &nbsp; wall {wall:.2f} s &nbsp; failures {summary['failures']}"
        f" &nbsp; checkpoints {summary['checkpoints']}"
    )
    return f"<div>{head}</div><table style='font-family:monospace;font-size:12px'>{''.join(rows)}</table>"


class Watch:
    """A live breakdown of the recording in ``run_dir`` (see the module's docstring).

    ``interval``: seconds between updates (at least 0.1). ``start``: begin updating on a
    background thread now (``False``: call :meth:`update` yourself)."""

    def __init__(self, run_dir: str | Path, interval: float = 2.0, start: bool = True):
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not 0.1 <= interval <= 3600:
            from ..errors import ConfigError

            raise ConfigError("interval", interval, "seconds between 0.1 and 3600")
        self.run_dir = Path(run_dir)
        self.interval = float(interval)
        self.follower = Follower(self.run_dir)
        self.table = W.HTML(value=f"<i>waiting for {html.escape(str(self.run_dir))} to record its first events</i>")
        self.progress = W.Label(value="")
        self.widget = W.VBox([self.table, self.progress])
        self.last: Update | None = None
        self.updates = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    def update(self) -> Update | None:
        """Read what was appended and redraw; ``None`` while the folder holds no events yet."""
        from ..measure.recorder import NotARunDirectory

        with self._lock:
            try:
                update = self.follower.update()
            except NotARunDirectory:
                return None
            except ValueError as e:  # a damaged log, a link or a FIFO in the folder: said once, then stopped
                self.progress.value = f"stopped: {e}"
                self._stop.set()
                return None
            self.table.value = breakdown_html(update.summary)
            self.progress.value = update.progress_line()
            self.last = update
            self.updates += 1
            if update.finished:
                self._stop.set()
            return update

    def start(self) -> None:
        """Update every ``interval`` seconds on a background thread until :meth:`stop` or the run completes."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="goodputlab-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.update()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        """Stop updating (the last breakdown stays shown)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            self.follower.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _ipython_display_(self) -> None:
        show_panel(self.widget)  # the live view, and a static figure of it for a reader without a kernel


def watch(run_dir: str | Path, interval: float = 2.0) -> Watch:
    """A live breakdown of the job recording to ``run_dir`` (``gl.Recorder`` or a lab run), redrawn
    every ``interval`` seconds from what it appended; shown when it is a cell's last value."""
    return Watch(run_dir, interval)
