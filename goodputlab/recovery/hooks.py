"""What recovery adds to the worker's training loop: a few named calls, each a no-op unless asked for.

The loop (:func:`goodputlab.engine.worker.train`) calls:

* :meth:`StepHooks.before_step` at the top of each step: an injected ``hang`` stops here
  for good, an injected ``exception`` is armed for this step;
* :meth:`StepHooks.in_step` once the step's ``compute`` has begun: the armed exception is
  raised inside the step;
* :meth:`StepHooks.after_compute` once the step's result is in: a straggling step is
  slowed (a ``straggle`` phase, booked ``other``);
* :meth:`StepHooks.save` around a checkpoint save: with ``--failure-mode disk-full``, a save
  that the disk refuses (``ENOSPC``) is reported (``ckpt_failed``) and training goes on (the
  supervisor gives the space back); any other error, and a full disk nobody injected, still
  stops the worker (with the clear message of a full disk: ``docs/CHECKPOINTS.md``).

And :class:`RebuildingBatches` stands in for ``next(batches)``: with ``--failure-mode
loader-death`` it rebuilds the DataLoader in place when one of its worker processes dies.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterator

from . import booking
from .disk_full import is_disk_full
from .inject import LoaderWatch, StragglerSchedule, hang_forever, raise_in_step, straggle
from .modes import DISK_FULL, EXCEPTION, HANG, LOADER_DEATH


class StepHooks:
    """The loop's recovery calls for one worker (see the module docstring)."""

    def __init__(self, config, events, control=None):
        self.mode = config.failure_mode
        self.survive_full_disk = config.failure_mode == DISK_FULL
        self.events = events
        self.control = control
        self.stragglers = StragglerSchedule(config.seed, config.straggler_prob, config.straggler_factor)
        self._raise_in: int | None = None
        self._first_step: int | None = None

    def before_step(self, step: int) -> None:
        """At the top of a step: act on an injection the supervisor asked for (from an attempt's second step on)."""
        if self._first_step is None:
            self._first_step = step
            return  # the watchdog arms at the first compute: inject only once it can see
        if self.control is None or not self.control.injection_requested():
            return
        self.events.emit(booking.M_FAILURE_INJECTED, step=step, mode=self.mode)
        if self.mode == HANG:
            hang_forever()
        if self.mode == EXCEPTION:
            self._raise_in = step

    def in_step(self, step: int) -> None:
        """Inside the step (its compute has begun): raise the injected error, if one is armed."""
        if self._raise_in == step:
            raise_in_step(step)

    def after_compute(self, step: int, compute_s: float) -> None:
        """After the step's result: slow a straggling step by ``(factor - 1) x`` its compute time."""
        if self.stragglers.slow(step):
            # the compute it is slowed by goes with it: the ledger's compute segment also holds the
            # moments until this event, which a busy machine stretches
            self.events.emit(booking.W_STRAGGLE, step=step, compute_s=round(compute_s, 6))
            straggle(self.stragglers.extra_s(compute_s))

    def save(self, save: Callable[[], None], step: int) -> bool:
        """Run ``save()``; an injected full disk is reported and survived (returns False), anything else raised."""
        try:
            save()
            return True
        except Exception as e:
            if not (self.survive_full_disk and is_disk_full(e)):
                raise
            self.report_failed_save(step, e)
            return False

    def report_failed_save(self, step: int, error: BaseException) -> None:
        reason = _one_line(error)
        self.events.emit(booking.M_CKPT_FAILED, step=step, ckpt_step=step, reason=reason)
        print(
            f"goodputlab worker: the checkpoint of step {step} was not saved ({reason}); "
            "the previous checkpoint stays the newest valid one, training goes on",
            file=sys.stderr,
            flush=True,
        )


def wait_for_space(directory, needed_bytes: int, timeout_s: float, poll_s: float = 0.1) -> bool:
    """Wait until ``needed_bytes`` are free where ``directory`` lives; False after ``timeout_s`` seconds."""
    from .disk_full import free_bytes

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if free_bytes(directory) >= needed_bytes:
            return True
        time.sleep(poll_s)
    return free_bytes(directory) >= needed_bytes


def _one_line(e: BaseException) -> str:
    while e.__cause__ is not None:  # the root cause says it best ("No space left on device")
        e = e.__cause__
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return text.splitlines()[0] if text else type(e).__name__


class RebuildingBatches:
    """The training loop's batches; with ``--failure-mode loader-death``, a loader that is rebuilt in place.

    ``make(step)`` builds a batch iterator that starts at loop step ``step`` (it starts the
    loader's worker processes). :meth:`next_for` returns the batch of ``step``; when a
    DataLoader worker process has died it builds a new loader from ``step`` (calling
    ``on_rebuild(step)`` first, which writes the ``loader_rebuild`` phase) and takes the
    batch from it. The batches are a pure function of the step, so nothing is repeated
    or skipped. Without ``watch`` (any other mode) it is ``next(iterator)``.
    """

    def __init__(self, make: Callable[[int], Iterator[dict[str, Any]]], first_step: int, watch: bool,
                 on_rebuild: Callable[[int], None]):
        self._make = make
        self._on_rebuild = on_rebuild
        self.rebuilds = 0
        self.watch = LoaderWatch() if watch else None
        if self.watch is None:
            self._it = make(first_step)
        else:
            self._it = self.watch.track(lambda: make(first_step))
            self.watch.install()

    @staticmethod
    def wanted(config) -> bool:
        return config.failure_mode == LOADER_DEATH and config.workers > 0

    def next_for(self, step: int) -> dict[str, Any]:
        if self.watch is None:
            return next(self._it)
        while True:
            try:
                with self.watch.waiting():
                    return next(self._it)
            except Exception as e:
                if not self.watch.explains(e):
                    raise
            # (outside the except block: its traceback holds the dead loader's iterator)
            self.rebuilds += 1
            self._on_rebuild(step)
            self._it = None  # the old loader shuts its remaining workers down
            self._it = self.watch.track(lambda: self._make(step))

    def close(self) -> None:
        self._it = None
        if self.watch is not None:
            self.watch.uninstall()
