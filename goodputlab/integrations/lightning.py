"""A Lightning ``Callback`` that records the job's goodput with :class:`goodputlab.Recorder`.

::

    from goodputlab.integrations.lightning import GoodputCallback
    callback = GoodputCallback("runs/mine")          # first: the model's build is then start-up
    trainer = L.Trainer(max_steps=1000, callbacks=[callback, ModelCheckpoint(..., save_last=True)])
    trainer.fit(model, loader, ckpt_path="last")       # killed, then run again: it resumes from "last"
    # goodputlab report runs/mine

What it books (docs/RECORDER.md, "Frameworks"):

* Saves and restores exactly: at ``setup`` it wraps the strategy's ``CheckpointIO`` (:class:`TimedCheckpointIO`),
  so each ``save_checkpoint`` is ``checkpoint_save`` (its resume point: the steps completed) and each
  ``load_checkpoint`` ``checkpoint_restore``, timed around the real I/O.
* ``on_train_batch_start``: the time since the last hook was spent fetching the batch (Lightning calls it
  after the fetch): ``data_wait``; then the step (``trainer.global_step``) computes. With gradient accumulation
  the later micro-batches' fetches are that step's data waits.
* ``on_train_batch_end``: the step ends when the optimizer stepped (``global_step`` moved on), with its loss.
* Validation inside training: custom badput ``eval``, between ``on_validation_start`` and ``on_validation_end``.
* ``on_train_end``: the attempt closes, completed when ``max_steps`` were trained; a killed attempt is a
  failure, and the steps it ran past its checkpoint are ``lost_work``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins.io import CheckpointIO

from .hooks import HookRecorder


class TimedCheckpointIO(CheckpointIO):
    """The strategy's ``CheckpointIO`` (``inner``), with each save and load recorded as a block."""

    def __init__(self, inner: CheckpointIO, hooks: HookRecorder):
        self.inner, self.hooks = inner, hooks

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any = None) -> None:
        done = self.hooks.rec._done  # the steps completed are what the checkpoint holds
        self.hooks.begin("checkpoint_save", step=done)
        failed = True
        try:
            self.inner.save_checkpoint(checkpoint, path, storage_options=storage_options)
            failed = False
        finally:
            self.hooks.end("checkpoint_save", failed=failed)

    def load_checkpoint(self, path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.hooks.begin("checkpoint_restore")
        try:
            return self.inner.load_checkpoint(path, *args, **kwargs)
        finally:
            self.hooks.end("checkpoint_restore")

    def remove_checkpoint(self, path) -> None:
        self.inner.remove_checkpoint(path)

    def teardown(self) -> None:
        self.inner.teardown()


class GoodputCallback(Callback):
    """Records the Trainer's job into ``run_dir`` (``recorder_options``: :class:`goodputlab.Recorder`'s)."""

    def __init__(self, run_dir: str | Path, **recorder_options: Any):
        self.hooks = HookRecorder(run_dir, **recorder_options)

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit" and not isinstance(trainer.strategy.checkpoint_io, TimedCheckpointIO):
            trainer.strategy.checkpoint_io = TimedCheckpointIO(trainer.strategy.checkpoint_io, self.hooks)

    def on_train_start(self, trainer, pl_module) -> None:
        if self.hooks.rec.total_steps is None and trainer.max_steps and trainer.max_steps > 0:
            self.hooks.rec.total_steps = int(trainer.max_steps)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.hooks.open_step is None:
            self.hooks.step_begins(trainer.global_step)
        else:
            self.hooks.micro_batch()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.hooks.open_step is not None and trainer.global_step > self.hooks.open_step:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            self.hooks.step_ends(None if loss is None else float(loss))

    def on_validation_start(self, trainer, pl_module) -> None:
        self._validating = self.hooks.open_step is None  # between steps (within one, it is the step's)
        if self._validating:
            self.hooks.begin("custom", name="eval")

    def on_validation_end(self, trainer, pl_module) -> None:
        if getattr(self, "_validating", False):
            self.hooks.end("custom")
            self._validating = False

    def on_train_end(self, trainer, pl_module) -> None:
        self.hooks.close(completed=trainer.max_steps > 0 and trainer.global_step >= trainer.max_steps)
