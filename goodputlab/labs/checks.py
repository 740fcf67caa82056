"""What every lab's checks share: a check's result, the scoreboard, reading an answer, and the lab's runs.

A check never raises on a wrong or missing answer: the lab notebook runs top to
bottom either way, and the :class:`Scoreboard` at the end says what is done.
Every check is written as a function of a non-empty answer and wrapped in
:func:`check`, which answers ``None`` (the starter's answer) with a line that asks
for a try (the exercise's hint comes with a wrong answer, not before) and turns an answer it cannot read (a string for a number, a list for a
set...) into a friendly line instead of a traceback.

Feedback says what was expected (the unit, the kind of answer), what looks wrong
and a hint; it never prints the right answer of a check that has not passed.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable


@dataclass
class CheckResult:
    """The outcome of one check: its name, whether it passed, and a message for the participant."""

    name: str
    passed: bool
    message: str

    def _repr_html_(self) -> str:
        colour, mark = ("#2ca02c", "passed") if self.passed else ("#d62728", "not yet")
        return f"<div style='color:{colour}'><b>{self.name}: {mark}</b> &mdash; {self.message}</div>"

    def __str__(self) -> str:
        return f"{self.name}: {'passed' if self.passed else 'not yet'} - {self.message}"


#: what a check says before any answer: the hint (often the formula) waits for a first try
UNANSWERED = "no answer yet: put yours in the cell above and run both cells (a hint comes with your first try)"


def unanswered(name: str) -> CheckResult:
    return CheckResult(name, False, UNANSWERED)


def with_hint(result: CheckResult, hint: str) -> CheckResult:
    """A failed check's result with the exercise's hint after its own message (a passed one unchanged)."""
    if result.passed or hint in result.message:
        return result
    return CheckResult(result.name, False, f"{result.message.rstrip('.')}. Hint: {hint}.")


class AnswerError(ValueError):
    """An answer of the wrong kind (text for a number, a fraction for a whole number...): its message is the feedback."""


def check(name: str, hint: str) -> Callable:
    """Make ``fn(answer, ...) -> CheckResult`` a check that never raises.

    ``None`` gets "no answer yet" without the hint: the hint often holds the formula, and a
    participant should try before reading it. A wrong answer gets its own feedback and then the
    hint; an :class:`AnswerError` (raised by the readers below: an answer of the wrong kind) becomes
    a "not yet" with its message and the hint; any other exception a "not yet" that says the answer
    could not be checked, with the hint.
    """

    def wrap(fn: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
        @functools.wraps(fn)
        def checked(answer: Any, *args: Any, **kwargs: Any) -> CheckResult:
            if answer is None:
                return unanswered(name)
            try:
                return with_hint(fn(answer, *args, **kwargs), hint)
            except AnswerError as e:
                return with_hint(CheckResult(name, False, str(e)), hint)
            except Exception as e:  # a check must not stop the notebook
                return CheckResult(name, False, f"could not check {answer!r} ({type(e).__name__}: {e}); {hint}")

        checked.check_name = name  # type: ignore[attr-defined]
        checked.hint = hint  # type: ignore[attr-defined]
        return checked

    return wrap


# --- reading answers ------------------------------------------------------------------------------------


def _kind(answer: Any) -> str:
    return type(answer).__name__


def as_number(answer: Any, what: str) -> float:
    """``answer`` as a float (int, float, numpy number); :class:`AnswerError` for anything else."""
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        raise AnswerError(f"expected a number ({what}), got {answer!r} (a {_kind(answer)})")
    value = float(answer)
    if not math.isfinite(value):
        raise AnswerError(f"expected a finite number ({what}), got {value}")
    return value


def as_whole(answer: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """``answer`` as an int (a float must be whole); :class:`AnswerError` outside ``lo..hi``."""
    value = as_number(answer, what)
    if value != int(value):
        raise AnswerError(f"expected a whole number ({what}), got {value:g}: round it the way the question asks")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise AnswerError(f"{value} is outside {lo}..{hi} ({what})")
    return value


def as_share(answer: Any, what: str) -> float:
    """A share between 0 and 1; a percentage (between 1 and 100) gets its own hint."""
    value = as_number(answer, what)
    if 1 < value <= 100:
        raise AnswerError(f"{value:g} looks like a percentage: give {what} as a share between 0 and 1")
    if not 0 <= value <= 1:
        raise AnswerError(f"{value:g} is not a share between 0 and 1 ({what})")
    return value


def as_choice(answer: Any, choices: Iterable[str], what: str) -> str:
    """One of ``choices`` (case and surrounding spaces ignored)."""
    choices = list(choices)
    if not isinstance(answer, str):
        raise AnswerError(f"expected one of {', '.join(map(repr, choices))} ({what}), got {answer!r} (a {_kind(answer)})")
    value = answer.strip().lower()
    if value not in choices:
        raise AnswerError(f"{answer!r} is not one of {', '.join(map(repr, choices))} ({what})")
    return value


def near(answer: float, expected: float, rel: float, abs_tol: float = 1e-12) -> bool:
    """Whether ``answer`` is within ``rel`` of ``expected`` (relative), or ``abs_tol``."""
    return math.isclose(answer, expected, rel_tol=rel, abs_tol=abs_tol)


def as_written(answer: float, expected: float, rel: float, min_digits: int = 2) -> bool:
    """Whether ``answer`` is ``expected`` within ``rel``, or ``expected`` rounded to the precision the answer
    is written in (0.68 for 0.684: the book's "68%"; 17 for 16.6), given at least ``min_digits``
    significant digits (0.7 is too coarse to tell a right answer from a near miss)."""
    if near(answer, expected, rel):
        return True
    text = repr(float(answer)).rstrip("0").rstrip(".") if answer != int(answer) else str(int(answer))
    if "e" in text:
        return False
    decimals = len(text.split(".")[1]) if "." in text else 0
    significant = len(text.replace("-", "").replace(".", "").lstrip("0"))
    return significant >= min_digits and round(expected, decimals) == round(answer, decimals)


def diagnose(answer: float, mistakes: Iterable[tuple[float, str]], rel: float) -> str | None:
    """The feedback of the first known mistake whose value ``answer`` is near; None if none."""
    for value, message in mistakes:
        if value is not None and math.isfinite(value) and near(answer, value, rel):
            return message
    return None


def direction(answer: float, expected: float) -> str:
    """"too high" or "too low": a hint that does not give the answer away."""
    return "too high" if answer > expected else "too low"


# --- the scoreboard -------------------------------------------------------------------------------------


@dataclass
class Scoreboard:
    """Collects a lab's check results; ``metrics()`` feeds ``record_metrics``."""

    results: dict[str, CheckResult] = field(default_factory=dict)

    def add(self, result: CheckResult) -> CheckResult:
        self.results[result.name] = result
        return result

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results.values())

    def metrics(self) -> dict[str, Any]:
        return {"checks": len(self.results), "passed": self.passed, "passed_names": sorted(n for n, r in self.results.items() if r.passed)}

    def _repr_html_(self) -> str:
        rows = "".join(r._repr_html_() for r in self.results.values())
        return f"<div><b>{self.passed} of {len(self.results)} checks passed</b>{rows}</div>"


# --- the lab's runs: real, or recorded --------------------------------------------------------------------


def lab_run(name: str, recorded: bool = False, **changes: Any):
    """The lab's run ``name``: the recording that ships with the package when ``recorded`` is true,
    otherwise a real run with the recording's settings (``changes`` applied, e.g. fewer steps).

    Returns a :class:`~goodputlab.engine.api.RunResult` either way, so every check works on both.
    """
    from ..engine.api import run
    from ..engine.recorded import recorded_run, recorded_runs

    recording = recorded_runs()[name] if name in recorded_runs() else None
    if recording is None:
        recorded_run(name)  # raises ConfigError naming the runs there are
    if recorded:
        result = recorded_run(name)
        machine = recording.machine
        print(f"recorded run {name!r}: {recording.title} (recorded on {machine.get('cores', '?')} cores, "
              f"torch {machine.get('torch', '?')}, {machine.get('date', '?')})")
        return result
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in {**recording.settings, **changes}.items()}
    print(f"running {name!r}: {recording.title}" + (f" (changed: {changes})" if changes else ""))
    return run(**settings)
