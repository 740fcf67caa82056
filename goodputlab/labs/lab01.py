"""Checks of Lab 1, "Where did the time go?" (``labs/01_where_did_the_time_go.ipynb``).

Each check compares a participant's answer with what the package computes from
the same real run, and returns a :class:`~goodputlab.labs.checks.CheckResult`
that shows itself as a green or red line in the notebook.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable

from .. import categories as C
from ..engine.ledger import surviving_executions
from ..theory.closed_forms import young_interval
from ..theory.lab_model import RunTimings, optimal_ckpt_every, predict_run_goodput
from .checks import CheckResult, unanswered

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult


def check_data_wait(answer_s: float | None, result: RunResult) -> CheckResult:
    """Exercise: total seconds the training loop waited for data, summed from the raw events."""
    name = "data wait from the raw events"
    if answer_s is None:
        return unanswered(name, "sum the durations of the data_wait phases")
    expected = result.buckets[C.DATA_WAIT]
    if math.isclose(answer_s, expected, rel_tol=1e-6, abs_tol=1e-6):
        return CheckResult(name, True, f"{answer_s:.4f} s, the ledger's data_wait exactly")
    if abs(answer_s - expected) < 0.02 * max(expected, 1e-9):
        return CheckResult(name, False, "close: does each data_wait end at the next *phase* event? (markers end nothing)")
    return CheckResult(name, False, f"{answer_s:.4f} s; the ledger books {expected:.4f} s - which events end a data_wait?")


def check_lost_executions(answer: Iterable[tuple[int, int]] | None, result: RunResult) -> CheckResult:
    """Exercise: the (attempt, step) executions a failure rolled back."""
    name = "rolled-back step executions"
    if answer is None:
        return unanswered(name, "which compute phases were executed again later?")
    answer = {tuple(x) for x in answer}
    executed = {(e["attempt"], e["step"]) for e in result.events if e["kind"] == "compute"}
    expected = executed - surviving_executions(result.events)
    if answer == expected:
        return CheckResult(name, True, f"{len(expected)} executions were lost, as the ledger says")
    missing, extra = expected - answer, answer - expected
    return CheckResult(
        name, False, f"{len(missing)} lost executions missing, {len(extra)} listed that survived (the step cut short by the kill counts too)"
    )


def check_young_steps(answer_steps: float | None, timings: RunTimings, mtbf_s: float) -> CheckResult:
    """Exercise: Young's interval for the measured save cost, converted to steps."""
    name = "Young's interval in steps"
    if answer_steps is None:
        return unanswered(name, "sqrt(2 x save x MTBF), then divide by the time of a step")
    expected = young_interval(timings.save_s, mtbf_s) / timings.step_s
    if math.isclose(answer_steps, expected, rel_tol=0.02):
        return CheckResult(name, True, f"{answer_steps:.1f} steps (Young: {expected:.1f})")
    return CheckResult(name, False, f"{answer_steps:.1f} steps; expected about {expected:.1f} - seconds or steps?")


def check_interval_choice(answer_steps: int | None, timings: RunTimings, steps: int, mtbf_s: float) -> CheckResult:
    """Exercise: a checkpoint interval whose predicted goodput is within 2% of the best possible."""
    name = "your checkpoint interval"
    if answer_steps is None:
        return unanswered(name, "pick ckpt_every for this run")
    if not isinstance(answer_steps, int) or not 1 <= answer_steps <= steps:
        return CheckResult(name, False, f"{answer_steps!r} is not a whole number of steps between 1 and {steps}")
    best = optimal_ckpt_every(timings, steps, mtbf_s)
    mine, top = predict_run_goodput(timings, steps, answer_steps, mtbf_s), predict_run_goodput(timings, steps, best, mtbf_s)
    if mine >= 0.98 * top:
        return CheckResult(name, True, f"every {answer_steps} steps: predicted goodput {mine:.1%} (best {top:.1%} at {best})")
    return CheckResult(name, False, f"every {answer_steps} steps predicts {mine:.1%}; {top:.1%} is possible - save more or less often?")
