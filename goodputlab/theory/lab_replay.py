"""The lab-run model walked through given failure times: :func:`replay_run`.

The same model as :func:`goodputlab.theory.lab_model.predict_run` (same phases, same booking),
attempt by attempt instead of averaged over failure times, so a measured run can be set beside
the model under the very failures it saw. Times in seconds.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

from .. import validate
from ..categories import (
    CHECKPOINT_RESTORE,
    CHECKPOINT_SAVE,
    DATA_WAIT,
    LOST_WORK,
    OTHER,
    PRODUCTIVE,
    RESTART,
    STARTUP,
    empty_buckets,
)
from .lab_model import TRAIN_CLOCK, RunPrediction, RunTimings, check_lab_plan, launch_mtbf


def replay_run(
    timings: RunTimings,
    steps: int,
    ckpt_every: int,
    times_to_failure: Sequence[float],
    launch_s_by_attempt: Sequence[float] | None = None,
    clock: str = TRAIN_CLOCK,
) -> RunPrediction:
    """The lab model's timeline for given failure times: wall time, goodput, breakdown.

    ``times_to_failure[i]`` is how long attempt ``i`` would run before its
    failure, counted from its first step (``clock="train"``) or from its launch
    (``clock="wall"``; the supervisor draws one per attempt);
    when the list runs out, no more failures. ``launch_s_by_attempt[i]``, if
    given, replaces ``timings.launch_s`` for attempt ``i`` (on a busy machine
    one launch can take twice as long as another, which decides whether a
    failure strikes during the launch or during training). Deterministic: the
    same model as :func:`predict_run` (same phases, same booking), walked
    attempt by attempt instead of averaged. Used to compare a measured run
    with the model under the very failure times the run saw, which removes
    the randomness of the failures from the comparison.
    """
    check_lab_plan(steps, ckpt_every, math.inf)
    launches_exposed = math.isfinite(launch_mtbf(1.0, clock))  # (validates clock)
    timeline = _ReplayTimeline(timings, steps, ckpt_every, launches_exposed)
    draws = iter(times_to_failure)
    for attempt in itertools.count():
        ttf = validate.number("times_to_failure", next(draws, math.inf), 0, allow_inf=True, allowed="seconds >= 0")
        launch = timings.launch_s if attempt == 0 else timings.relaunch_s
        if launch_s_by_attempt is not None and attempt < len(launch_s_by_attempt):
            launch = validate.seconds("launch_s_by_attempt", launch_s_by_attempt[attempt])
        left = timeline.launch(attempt, launch, ttf)
        if left is None:  # killed while launching or restoring
            continue
        left = timeline.whole_segments(left)
        if timeline.last_segment(left):
            break
    return timeline.prediction()


class _ReplayTimeline:
    """The lab model's timeline under given failure times, booked as the ledger books a run."""

    def __init__(self, timings: RunTimings, steps: int, ckpt_every: int, launches_exposed: bool = True):
        self.tm, self.steps, self.launches_exposed = timings, steps, launches_exposed
        self.k = ckpt_every if 0 < ckpt_every < steps else steps
        self.buckets = empty_buckets()
        self.buckets[STARTUP] += timings.start_s
        self.wall = timings.start_s
        self.committed = 0  # steps in the newest checkpoint
        self.failures = 0

    def launch(self, attempt: int, launch: float, ttf: float) -> float | None:
        """Launch (and restore, once a checkpoint exists); the training seconds left before the kill,
        or None when the kill came first (only when launches are exposed: the wall clock)."""
        tm, buckets = self.tm, self.buckets
        launch_category = STARTUP if attempt == 0 else RESTART
        restore = tm.restore_s if self.committed > 0 else 0.0
        if not self.launches_exposed:  # the train clock: ttf counts from the first step
            ttf += launch + restore
        if ttf < launch + restore:
            buckets[launch_category] += min(ttf, launch)
            buckets[CHECKPOINT_RESTORE] += max(0.0, ttf - launch)
            buckets[RESTART] += tm.relaunch_delay_s
            self.wall += ttf + tm.relaunch_delay_s
            self.failures += 1
            return None
        buckets[launch_category] += launch
        buckets[CHECKPOINT_RESTORE] += restore
        self.wall += launch + restore
        return ttf - launch - restore

    def whole_segments(self, left: float) -> float:
        """Run the whole segments before the last one that fit in ``left`` seconds, in one go; what is left."""
        tm, buckets, k = self.tm, self.buckets, self.k
        last_start = ((self.steps - 1) // k) * k  # first step of the last segment
        full_window = k * tm.step_s + tm.save_s
        remaining = max(0, (last_start - self.committed) // k)
        whole = remaining if left >= remaining * full_window else min(int(left // full_window), remaining)
        if whole:
            n = whole * k
            buckets[PRODUCTIVE] += n * tm.compute_s
            buckets[DATA_WAIT] += n * tm.data_wait_s
            buckets[OTHER] += n * tm.step_other_s
            buckets[CHECKPOINT_SAVE] += whole * tm.save_s
            self.wall += whole * full_window
            left = max(0.0, left - whole * full_window)
            self.committed += n
        return left

    def last_segment(self, left: float) -> bool:
        """The next segment with ``left`` seconds before the kill: True when it completes the run,
        False when the kill lands inside it (its steps are lost, its save does not commit)."""
        tm, buckets = self.tm, self.buckets
        step_s = tm.step_s
        n = min(self.k, self.steps - self.committed)
        is_last = self.committed + n == self.steps
        window = n * step_s + tm.save_s + (tm.exit_s if is_last else 0.0)
        if is_last and left >= window:
            buckets[PRODUCTIVE] += n * tm.compute_s
            buckets[DATA_WAIT] += n * tm.data_wait_s
            buckets[OTHER] += n * tm.step_other_s + tm.exit_s
            buckets[CHECKPOINT_SAVE] += tm.save_s
            self.wall += window + tm.teardown_s
            buckets[OTHER] += tm.teardown_s
            return True
        in_steps = min(left, n * step_s)
        buckets[LOST_WORK] += in_steps * tm.compute_s / step_s
        buckets[DATA_WAIT] += in_steps * tm.data_wait_s / step_s
        buckets[OTHER] += in_steps * tm.step_other_s / step_s
        buckets[CHECKPOINT_SAVE] += min(max(0.0, left - n * step_s), tm.save_s)
        buckets[OTHER] += max(0.0, left - n * step_s - tm.save_s)
        buckets[RESTART] += tm.relaunch_delay_s
        self.wall += left + tm.relaunch_delay_s
        self.failures += 1
        return False

    def prediction(self) -> RunPrediction:
        return RunPrediction(
            wall_s=self.wall, goodput=self.buckets[PRODUCTIVE] / self.wall, failures=float(self.failures), buckets=self.buckets
        )
