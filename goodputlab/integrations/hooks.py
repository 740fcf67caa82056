"""A framework's hooks turned into the recorder's blocks (pure: no torch, no framework).

A framework calls its callbacks at moments, not around work: Hugging Face's ``on_save`` fires after the
save, Lightning's ``on_train_batch_start`` after the batch was fetched. :class:`HookRecorder` keeps the
time of the last hook it recorded, and books the time since then with :meth:`Recorder.mark
<goodputlab.measure.recorder.Recorder.mark>`: a step's begin books the gap before it as the batch's data
wait; a save's hook books the gap before it as the save; a hook that books nothing (a log) leaves the
gap to the loop (``other``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..measure.recorder import Recorder


class HookRecorder:
    """A :class:`~goodputlab.measure.recorder.Recorder` driven by hooks. ``run_dir`` and ``recorder_options``
    are the Recorder's; it starts when this is made (make it before the model, so start-up is booked)."""

    def __init__(self, run_dir: str | Path, **recorder_options: Any):
        self.rec = Recorder(run_dir, **recorder_options)
        self.t = time.monotonic()  # the last hook's time: what follows is booked from here
        self.open_step: int | None = None  # the step whose block is open

    def passed(self) -> None:
        """A hook that books nothing: the time before it stays with the phase it was in (``other`` after a
        step, start-up before the first), and what follows is booked from now."""
        self.t = time.monotonic()

    def after(self, kind: str, step: int | None = None, name: str | None = None) -> None:
        """The work since the last hook was a ``kind`` block (``checkpoint_save``, ``checkpoint_restore``,
        ``custom`` with ``name``): a hook that fires after it."""
        self.rec.mark(kind, self.t, time.monotonic(), step, name=name)
        self.t = time.monotonic()

    def step_begins(self, step: int) -> None:
        """Step ``step`` begins now; the time since the last hook was spent fetching its batch."""
        self.rec.mark("data_wait", self.t, time.monotonic())
        self.rec.begin("step", step)
        self.open_step = step
        self.t = time.monotonic()

    def micro_batch(self) -> None:
        """Another micro-batch of the open step was fetched since the last hook: the step's data wait."""
        self.rec.mark("data_wait", self.t, time.monotonic())
        self.t = time.monotonic()

    def step_ends(self, loss: float | None = None, failed: bool = False) -> None:
        """The open step ends now (``loss``: its loss, if known)."""
        self.rec.end("step", loss=loss, failed=failed)
        self.open_step = None
        self.t = time.monotonic()

    def begin(self, kind: str, step: int | None = None, name: str | None = None) -> None:
        """A block a hook sees begin (Lightning's checkpoint I/O, its validation)."""
        self.rec.begin(kind, step, name=name)

    def end(self, kind: str, failed: bool = False) -> None:
        """The block :meth:`begin` began ends now (``failed``: it did not complete)."""
        self.rec.end(kind, failed=failed)
        self.t = time.monotonic()

    def close(self, completed: bool | None = None) -> None:
        """End the attempt (``completed``: the job finished)."""
        if self.open_step is not None:
            self.step_ends(failed=True)
        self.rec.close(completed)
