"""Validators that every configuration uses: the run, the theory, the simulator, the pipeline model.

Each checks one value and returns it, or raises :class:`~goodputlab.errors.ConfigError`
naming the field, the value and what is allowed, in words a user reads on the
command line ("a whole number of steps >= 1", "a finite number of seconds > 0",
"one of sync, async"). A bool is never accepted where a number is expected.
A rule between fields (``prefetch`` only with workers) is :func:`goodputlab.errors.check`.

>>> whole("steps", 400, low=1, unit="steps")
400
>>> number("save_s", -1.0, low=0, unit="seconds")
Traceback (most recent call last):
...
goodputlab.errors.ConfigError: save_s=-1.0 is invalid: a finite number of seconds >= 0
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable

from .errors import ConfigError


def is_whole(value: Any) -> bool:
    """True for an integer (Python or numpy), never for a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """True for a real number (int, float, numpy), never for a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _range_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    lo = None if low is None else f"{'>' if low_open else '>='} {low:g}"
    hi = None if high is None else f"{'<' if high_open else '<='} {high:g}"
    if lo and hi:
        if not low_open and not high_open:
            return f"between {low:g} and {high:g}"
        return f"{lo} and {hi}"
    return lo or hi or ""


def _allowed(kind: str, unit: str | None, low, high, low_open: bool, high_open: bool, note: str | None) -> str:
    words = kind + (f" of {unit}" if unit else "")
    rng = _range_text(low, high, low_open, high_open)
    text = f"{words} {rng}".strip()
    return f"{text} ({note})" if note else text


def whole(
    field: str,
    value: Any,
    low: int | None = None,
    high: int | None = None,
    *,
    unit: str | None = None,
    note: str | None = None,
    allowed: str | None = None,
) -> int:
    """``value`` if it is a whole number in ``[low, high]`` (either bound optional).

    The error says e.g. "a whole number of steps >= 1 (0: final save only)";
    ``allowed`` replaces that text entirely.
    """
    ok = is_whole(value) and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        raise ConfigError(field, value, allowed or _allowed("a whole number", unit, low, high, False, False, note))
    return value


def number(
    field: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    unit: str | None = None,
    allow_inf: bool = False,
    note: str | None = None,
    allowed: str | None = None,
) -> float:
    """``value`` if it is a finite number in the range (``low_open``/``high_open`` exclude a bound).

    ``allow_inf`` also accepts ``math.inf`` (never NaN). The error says e.g.
    "a finite number of seconds > 0"; ``allowed`` replaces that text entirely.
    """
    ok = (
        is_number(value)
        and not math.isnan(value)
        and (allow_inf and value == math.inf or math.isfinite(value))
        and (low is None or (value > low if low_open else value >= low))
        and (high is None or (value < high if high_open else value <= high))
    )
    if not ok:
        kind = "a number" if allow_inf else "a finite number"
        note = note if note or not allow_inf else "math.inf for none"
        raise ConfigError(field, value, allowed or _allowed(kind, unit, low, high, low_open, high_open, note))
    return value


def seconds(field: str, value: Any, *, positive: bool = False, allow_inf: bool = False, note: str | None = None) -> float:
    """A duration in seconds: finite (or ``inf`` with ``allow_inf``), ``>= 0`` (``> 0`` with ``positive``)."""
    return number(field, value, 0, low_open=positive, unit="seconds", allow_inf=allow_inf, note=note)


def share(field: str, value: Any, *, high_open: bool = True) -> float:
    """A share of a whole: ``0 <= value < 1`` (``<= 1`` with ``high_open=False``)."""
    hi = "< 1" if high_open else "<= 1"
    return number(field, value, 0, 1, high_open=high_open, allowed=f"a share >= 0 and {hi}")


def choice(field: str, value: Any, choices: Iterable[Any], *, allowed: str | None = None) -> Any:
    """``value`` if it is one of ``choices``; the error lists them."""
    choices = tuple(choices)
    if not any(value == c and isinstance(value, bool) == isinstance(c, bool) for c in choices):
        raise ConfigError(field, value, allowed or f"one of {', '.join(map(str, choices))}")
    return value


def boolean(field: str, value: Any, *, allowed: str | None = None) -> bool:
    """``value`` if it is ``True`` or ``False`` (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ConfigError(field, value, allowed or "true or false")
    return value
