"""Checks of Lab 1, "Where did the time go?" (``labs/01_where_did_the_time_go.ipynb``).

Each check compares a participant's answer with what the package computes from
the same real (or recorded) run, and returns a :class:`~goodputlab.labs.checks.CheckResult`
that shows itself as a green or red line in the notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import categories as C
from ..measure.ledger import surviving_executions
from ..theory.closed_forms import young_interval
from ..theory.lab_model import RunTimings, optimal_ckpt_every, predict_run_goodput
from .checks import AnswerError, CheckResult, as_number, as_whole, check, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult


@check("data wait from the raw events", "sum the durations of the data_wait phases")
def check_data_wait(answer_s: Any, result: RunResult) -> CheckResult:
    """Exercise: total seconds the training loop waited for data, summed from the raw events."""
    name = check_data_wait.check_name
    answer_s = as_number(answer_s, "seconds")
    expected = result.buckets[C.DATA_WAIT]
    if near(answer_s, expected, 1e-6, 1e-6):
        return CheckResult(name, True, f"{answer_s:.4f} s, the ledger's data_wait exactly")
    if abs(answer_s - expected) < 0.02 * max(expected, 1e-9):
        return CheckResult(name, False, "close: does each data_wait end at the next *phase* event? (markers end nothing)")
    total_t = sum(e["t"] for e in result.events if e["kind"] == "data_wait")
    if near(answer_s, total_t, 1e-6):
        return CheckResult(name, False, "that is the sum of the start times; a phase lasts from its event to the next phase event")
    return CheckResult(name, False, f"{answer_s:.4f} s is {direction(answer_s, expected)} - which events end a data_wait?")


def _as_executions(answer: Any) -> set[tuple[int, int]]:
    try:
        out = {(int(a), int(s)) for a, s in answer}
    except (TypeError, ValueError):
        raise AnswerError("expected a set of (attempt, step) pairs, e.g. {(0, 41), (0, 42)}") from None
    return out


@check("rolled-back step executions", "which compute phases were executed again later?")
def check_lost_executions(answer: Any, result: RunResult) -> CheckResult:
    """Exercise: the (attempt, step) executions a failure rolled back."""
    name = check_lost_executions.check_name
    answer = _as_executions(answer)
    executed = {(e["attempt"], e["step"]) for e in result.events if e["kind"] == "compute"}
    expected = executed - surviving_executions(result.events)
    if answer == expected:
        return CheckResult(name, True, f"{len(expected)} executions were lost, as the ledger says")
    missing, extra = expected - answer, answer - expected
    lost_steps = {s for _, s in expected}
    finished = {(e["attempt"], e["step"]) for e in result.events if e["kind"] == "step_end"}
    if extra and all(s in lost_steps and any(a > la for la, ls in expected if ls == s) for a, s in extra):
        hint = "those are the re-executions, and they survive; the lost ones are the executions a later attempt repeated"
    elif missing and any(x not in finished for x in missing):
        hint = "the step cut short by the kill counts too"
    elif missing:
        hint = "every execution a later attempt repeated is lost, not only the last one"
    else:
        hint = "an execution survives when no later attempt ran its step again"
    return CheckResult(name, False, f"{len(missing)} lost executions missing, {len(extra)} listed that survived ({hint})")


@check("Young's interval in steps", "sqrt(2 x save x MTBF), then divide by the time of a step")
def check_young_steps(answer_steps: Any, timings: RunTimings, mtbf_s: float) -> CheckResult:
    """Exercise: Young's interval for the measured save cost, converted to steps."""
    name = check_young_steps.check_name
    answer_steps = as_number(answer_steps, "steps")
    seconds = young_interval(timings.save_s, mtbf_s)
    expected = seconds / timings.step_s
    if near(answer_steps, expected, 0.02):
        return CheckResult(name, True, f"{answer_steps:.1f} steps (Young: {expected:.1f})")
    if near(answer_steps, seconds, 0.02):
        return CheckResult(name, False, f"{answer_steps:.2f} is Young's interval in seconds: how many steps fit in it?")
    if near(answer_steps, seconds / timings.compute_s, 0.02):
        return CheckResult(name, False, "close, but a step is more than its compute: divide by the whole step (timings.step_s)")
    return CheckResult(name, False, f"{answer_steps:.1f} steps is {direction(answer_steps, expected)} - seconds or steps?")


@check("your checkpoint interval", "pick ckpt_every for this run")
def check_interval_choice(answer_steps: Any, timings: RunTimings, steps: int, mtbf_s: float) -> CheckResult:
    """Exercise: a checkpoint interval whose predicted goodput is within 2% of the best possible."""
    name = check_interval_choice.check_name
    try:
        answer_steps = as_whole(answer_steps, "steps", 1, steps)
    except AnswerError:
        return CheckResult(name, False, f"{answer_steps!r} is not a whole number of steps between 1 and {steps}")
    best = optimal_ckpt_every(timings, steps, mtbf_s)
    mine, top = predict_run_goodput(timings, steps, answer_steps, mtbf_s), predict_run_goodput(timings, steps, best, mtbf_s)
    if mine >= 0.98 * top:
        return CheckResult(name, True, f"every {answer_steps} steps: predicted goodput {mine:.1%} (best {top:.1%} at {best})")
    more_or_less = "less" if answer_steps < best else "more"
    return CheckResult(name, False, f"every {answer_steps} steps predicts {mine:.1%}; {top:.1%} is possible - try saving {more_or_less} often")
