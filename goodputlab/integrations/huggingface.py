"""A Hugging Face ``TrainerCallback`` that records the job's goodput with :class:`goodputlab.Recorder`.

::

    from goodputlab.integrations.huggingface import GoodputCallback
    callback = GoodputCallback("runs/mine")          # first: the model's build is then start-up
    model = AutoModelForCausalLM.from_config(config)
    trainer = Trainer(model, args, train_dataset=data, callbacks=[callback])
    trainer.train(resume_from_checkpoint=resume)      # killed, then run again with resume=True
    # goodputlab report runs/mine

What each hook books (the Trainer calls them around its loop; docs/RECORDER.md, "Frameworks"):

* ``on_step_begin``: the time since the last hook was spent fetching the step's micro-batches (the Trainer
  fetches them all before the step): ``data_wait``; then the step (``state.global_step``) computes.
* ``on_step_end``: the step's end (its forward, backward and optimizer step are its compute).
* ``on_log``: nothing (the logging before it is ``other``).
* ``on_evaluate``: the evaluation since the last hook, as custom badput ``eval``.
* ``on_save``: the save since the last hook (it fires after the save): ``checkpoint_save``, whose resume
  point is ``state.global_step``, as the Trainer's ``checkpoint-N`` holds it.
* ``on_train_begin`` of a resumed attempt: from the Trainer's construction to here (the checkpoint's
  load, which no hook brackets) is ``checkpoint_restore``.
* ``on_train_end``: the attempt closes; the job completed when ``max_steps`` were trained. A killed
  attempt is a failure, and the steps it ran past its checkpoint are ``lost_work``.

Only the main process records (``state.is_world_process_zero``); run one per rank with ``rank=`` for more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from .hooks import HookRecorder


class GoodputCallback(TrainerCallback):
    """Records the Trainer's job into ``run_dir`` (``recorder_options``: :class:`goodputlab.Recorder`'s)."""

    def __init__(self, run_dir: str | Path, **recorder_options: Any):
        self.hooks = HookRecorder(run_dir, **recorder_options)

    def on_init_end(self, args, state, control, **kwargs):
        self.hooks.passed()  # the Trainer is built: a resume's load begins after this

    def on_train_begin(self, args, state, control, **kwargs):
        if self.hooks.rec.total_steps is None and state.max_steps and state.max_steps > 0:
            self.hooks.rec.total_steps = int(state.max_steps)
        if state.global_step > 0:  # resumed: the checkpoint was loaded since the Trainer was built
            self.hooks.after("checkpoint_restore")
        else:
            self.hooks.passed()

    def on_step_begin(self, args, state, control, **kwargs):
        self.hooks.step_begins(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        self.hooks.step_ends()

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.hooks.passed()

    def on_evaluate(self, args, state, control, **kwargs):
        if self.hooks.open_step is None:
            self.hooks.after("custom", name="eval")

    def on_save(self, args, state, control, **kwargs):
        self.hooks.after("checkpoint_save", step=max(state.global_step - 1, 0))

    def on_train_end(self, args, state, control, **kwargs):
        self.hooks.close(completed=bool(state.max_steps) and state.global_step >= state.max_steps)
