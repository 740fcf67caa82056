"""The recorder's blocks: what ``with rec.step(s)``, ``rec.data_wait()``, ``rec.checkpoint_save()``,
``rec.checkpoint_restore()`` and ``rec.custom(name)`` write when they begin and end (pure).

Each block is a reusable context manager (one per kind, so a step allocates nothing); ``rec.begin(kind)`` and
``rec.end(kind)`` call the same ``__enter__`` and ``__exit__`` for a framework's callbacks.

Nesting: a data wait or a custom block inside a step (gradient accumulation fetches each micro-batch inside
the optimizer step, as torchtitan and Hugging Face do) is booked as that step's data wait (or custom
badput), and the step's compute resumes when it ends: the step's compute is its time less the waits.
"""

from __future__ import annotations

import math
import operator
import re
import sys
from typing import TYPE_CHECKING, Any

from . import events as E
from . import step_records as SR

if TYPE_CHECKING:  # pragma: no cover
    from .recorder import Recorder

#: A custom badput's name: lower case, digits and underscores, at most 40 characters (``eval``, ``compile``).
CUSTOM_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


class _Block:
    """A reusable context manager, one per kind of block, so a step allocates nothing."""

    __slots__ = ("rec", "step", "loss", "nested")

    def __init__(self, rec: Recorder):
        self.rec = rec
        self.step = None
        self.loss = None
        self.nested = None  # the step this block interrupts (a data wait inside a step), or None


class _RestoreBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        self.rec._phase(E.W_RESTORE)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.rec._phase(E.W_WARMUP)  # until the first step: start-up (or restart)
        return False


class _DataWaitBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        rec = self.rec
        inside = self.nested = rec._in_step
        if inside is not None:  # a micro-batch fetched inside the step: the step's data wait
            rec._line(SR.DATA_WAIT, inside)
            return self
        last = rec._last_step
        if last is None:  # the first batch of this attempt: start-up, as in the lab's worker
            rec._phase(E.W_WARMUP)
        else:
            step = last + 1 if self.step is None else step_number(self.step)
            rec._line(SR.DATA_WAIT, step)
        return self

    def __exit__(self, exc_type, exc, tb):
        _after_wait(self, pend=self.rec._last_step is not None)
        return False


class _StepBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        rec = self.rec
        step = self.step = step_number(self.step)
        last = rec._last_step
        if last is not None and step <= last:
            rec._warn_order(step, last)
        rec._last_step = rec._in_step = step
        rec._line(SR.COMPUTE, step)
        return self

    def __exit__(self, exc_type, exc, tb):
        rec = self.rec
        rec._in_step = None
        if rec._fd < 0:
            return False
        if rec._sync is not None:
            rec._sync()  # the GPU's queued work is this step's
        if exc_type is None:
            loss = self.loss
            if loss is None:
                rec._line(SR.STEP_END, self.step)
            else:
                loss = rec._last_loss = float(loss)
                self.loss = None
                if math.isfinite(loss):
                    rec._line(SR.STEP_END, self.step, loss)
                else:  # NaN and infinities as json writes them
                    rec._emit(E.W_STEP_END, self.step, t=rec._now(), loss=loss)
            rec._done = self.step
        else:
            rec._emit(E.R_LOOP, self.step, t=rec._now())  # the step raised: it did not complete
            self.loss = None
        return False


class _SaveBlock(_Block):
    __slots__ = ()

    def __enter__(self):
        rec = self.rec
        rec._phase(E.W_CKPT_SAVE, rec._done if self.step is None else step_number(self.step))
        return self

    def __exit__(self, exc_type, exc, tb):
        self.rec._saved(self.step, exc_type is None)
        return False


class _CustomBlock(_Block):
    """Custom badput (``rec.custom("eval")``): a ``custom`` phase with its ``name``, booked ``other`` and
    shown by name in the report."""

    __slots__ = ("name",)

    def __enter__(self):
        rec = self.rec
        inside = self.nested = rec._in_step
        rec._phase(E.R_CUSTOM, inside, name=self.name)
        return self

    def __exit__(self, exc_type, exc, tb):
        _after_wait(self, pend=True)
        return False


def _after_wait(block: _Block, pend: bool) -> None:
    """A data wait or custom block ends: inside a step, the step computes again; outside, the time until the next
    block is the loop's (``pend``: booked ``loop`` when the gap is long enough)."""
    rec = block.rec
    if rec._fd < 0:
        return
    if block.nested is not None:
        rec._line(SR.COMPUTE, block.nested)
        block.nested = None
    elif pend:
        rec._pending = rec._now()


def cuda_synchronize() -> None:
    """Wait for the GPU's queued work, when the job's torch has initialised CUDA (never imports torch, never
    creates a CUDA context: a job on the CPU pays one dictionary lookup)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def custom_name(name: Any) -> str:
    """``name`` checked as a custom badput's name (:data:`CUSTOM_NAME`); ``ValueError`` otherwise."""
    if not isinstance(name, str) or not CUSTOM_NAME.fullmatch(name):
        raise ValueError(f"custom badput name {name!r} is invalid: lower case letters, digits and underscores, "
                         "a letter first, at most 40 characters (eval, compile)")
    return name


def step_number(step: Any) -> int:
    """``step`` as a global step number (a whole number >= 0); ``ValueError`` otherwise."""
    step = operator.index(step)
    if step < 0:
        raise ValueError(f"step={step} is invalid: a global step number >= 0")
    return step
