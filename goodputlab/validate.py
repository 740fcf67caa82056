"""Validators that every configuration uses: the run, the theory, the simulator, the pipeline model.

Each checks one value and returns it, or raises :class:`~goodputlab.errors.ConfigError`
naming the field, the value and what is allowed, in words a user reads on the
command line ("a whole number of steps >= 1", "a finite number of seconds > 0",
"one of sync, async"). A bool is never accepted where a number is expected.
A rule between fields (``prefetch`` only with workers) is :func:`goodputlab.errors.check`.

Two forms of the same checks. The functions (:func:`whole`, :func:`number`,
:func:`seconds`, :func:`share`, :func:`choice`, :func:`boolean`) check a value now;
the rules (:class:`Whole`, :class:`Number`, :class:`Choice`, :class:`Boolean`,
:class:`Optional`, :class:`Either`, :class:`WholeList`, :class:`Satisfies`) describe a field once, so a
configuration's field can carry its rule: ``rule(field, value)`` checks,
``rule.allowed`` says what is allowed and ``rule.parse(text)`` reads a command-line
value (raising ``ValueError`` when the text is not of the rule's kind).

>>> whole("steps", 400, low=1, unit="steps")
400
>>> number("save_s", -1.0, low=0, unit="seconds")
Traceback (most recent call last):
...
goodputlab.errors.ConfigError: save_s=-1.0 is invalid: a finite number of seconds >= 0
>>> Whole(1, unit="steps").allowed
'a whole number of steps >= 1'
"""

from __future__ import annotations

import math
import re
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .errors import ConfigError



_WHOLE_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)
_NUMBER_TEXT = re.compile(r"\s*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)\s*",
                          re.ASCII | re.IGNORECASE)


def ascii_number(text: str, whole: bool = False) -> str:
    """``text`` when it is a number as a person types one: ASCII digits, a sign, a point, an exponent (``inf`` and
    ``nan`` too, for the range checks to refuse with their own words); else ``ValueError``. Python's ``int`` and
    ``float`` also take ``1_000`` and other scripts' digits (``١٢٣``), which a flag should not."""
    if not (_WHOLE_TEXT if whole else _NUMBER_TEXT).fullmatch(text):
        raise ValueError(f"not a number: {text!r}")
    return text

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


class Rule:
    """What one field allows: ``rule(field, value)`` checks, ``allowed`` says it, ``parse`` reads text."""

    allowed: str

    def ok(self, value: Any) -> bool:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    def parse(self, text: str) -> Any:
        """The value a command line's ``text`` stands for; ``ValueError`` when it is not one."""
        return text

    def __call__(self, field: str, value: Any) -> Any:
        if not self.ok(value):
            raise ConfigError(field, value, self.allowed)
        return value


@dataclass(frozen=True)
class Whole(Rule):
    """A whole number in ``[low, high]`` (either bound optional)."""

    low: int | None = None
    high: int | None = None
    unit: str | None = None
    note: str | None = None
    text: str | None = None  # replaces the generated ``allowed``

    @property
    def allowed(self) -> str:
        return self.text or _allowed("a whole number", self.unit, self.low, self.high, False, False, self.note)

    def ok(self, value: Any) -> bool:
        return is_whole(value) and (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def parse(self, text: str) -> int:
        return int(ascii_number(text, whole=True))


@dataclass(frozen=True)
class Number(Rule):
    """A finite number in the range (``low_open``/``high_open`` exclude a bound); ``allow_inf`` also takes ``inf``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    unit: str | None = None
    allow_inf: bool = False
    note: str | None = None
    text: str | None = None  # replaces the generated ``allowed``

    @property
    def allowed(self) -> str:
        if self.text:
            return self.text
        kind = "a number" if self.allow_inf else "a finite number"
        note = self.note if self.note or not self.allow_inf else "math.inf for none"
        return _allowed(kind, self.unit, self.low, self.high, self.low_open, self.high_open, note)

    def ok(self, value: Any) -> bool:
        return (
            is_number(value)
            and not math.isnan(value)
            and (self.allow_inf and value == math.inf or math.isfinite(value))
            and (self.low is None or (value > self.low if self.low_open else value >= self.low))
            and (self.high is None or (value < self.high if self.high_open else value <= self.high))
        )

    def parse(self, text: str) -> float:
        return float(ascii_number(text))


@dataclass(frozen=True)
class Choice(Rule):
    """One of ``choices`` (compared with ``==``; a bool never stands for a number)."""

    choices: tuple[Any, ...]
    text: str | None = None

    @property
    def allowed(self) -> str:
        return self.text or f"one of {', '.join(map(str, self.choices))}"

    def ok(self, value: Any) -> bool:
        return any(value == c and isinstance(value, bool) == isinstance(c, bool) for c in self.choices)


@dataclass(frozen=True)
class Boolean(Rule):
    """``True`` or ``False`` (not 0, 1 or a string)."""

    text: str | None = None

    @property
    def allowed(self) -> str:
        return self.text or "true or false"

    def ok(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Optional(Rule):
    """``None``, or what ``rule`` allows."""

    rule: Rule

    @property
    def allowed(self) -> str:
        return self.rule.allowed

    def ok(self, value: Any) -> bool:
        return value is None or self.rule.ok(value)

    def parse(self, text: str) -> Any:
        return self.rule.parse(text)


@dataclass(frozen=True)
class Either(Rule):
    """What ``first`` allows, or what ``second`` allows (``ckpt_every``: a whole number, or ``auto``)."""

    first: Rule
    second: Rule
    text: str | None = None

    @property
    def allowed(self) -> str:
        return self.text or f"{self.first.allowed} or {self.second.allowed}"

    def ok(self, value: Any) -> bool:
        return self.first.ok(value) or self.second.ok(value)

    def parse(self, text: str) -> Any:
        for rule in (self.second, self.first):  # a word before a number: "auto" is not a number
            try:
                value = rule.parse(text.strip())
            except ValueError:
                continue
            if rule.ok(value):
                return value
        return self.first.parse(text)


@dataclass(frozen=True)
class WholeList(Rule):
    """A tuple of whole numbers each allowed by ``item``; on the command line, comma-separated."""

    item: Whole
    text: str | None = None

    @property
    def allowed(self) -> str:
        return self.text or f"comma-separated whole numbers ({self.item.allowed} each)"

    def ok(self, value: Any) -> bool:
        return isinstance(value, tuple) and all(self.item.ok(v) for v in value)

    def parse(self, text: str) -> tuple[int, ...]:
        return tuple(int(ascii_number(s, whole=True)) for s in text.split(",") if s.strip())


@dataclass(frozen=True)
class Satisfies(Rule):
    """A value for which ``test(value)`` is true; ``text`` says what that means."""

    test: Callable[[Any], bool]
    text: str

    @property
    def allowed(self) -> str:
        return self.text

    def ok(self, value: Any) -> bool:
        return bool(self.test(value))


# --- the same checks as functions (a value checked once, where it is used) ------------------------


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
    return Whole(low, high, unit, note, allowed)(field, value)


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
    return Number(low, high, low_open, high_open, unit, allow_inf, note, allowed)(field, value)


def seconds(field: str, value: Any, *, positive: bool = False, allow_inf: bool = False, note: str | None = None) -> float:
    """A duration in seconds: finite (or ``inf`` with ``allow_inf``), ``>= 0`` (``> 0`` with ``positive``)."""
    return number(field, value, 0, low_open=positive, unit="seconds", allow_inf=allow_inf, note=note)


def share(field: str, value: Any, *, high_open: bool = True) -> float:
    """A share of a whole: ``0 <= value < 1`` (``<= 1`` with ``high_open=False``)."""
    hi = "< 1" if high_open else "<= 1"
    return number(field, value, 0, 1, high_open=high_open, allowed=f"a share >= 0 and {hi}")


def choice(field: str, value: Any, choices: Iterable[Any], *, allowed: str | None = None) -> Any:
    """``value`` if it is one of ``choices``; the error lists them."""
    return Choice(tuple(choices), allowed)(field, value)


def boolean(field: str, value: Any, *, allowed: str | None = None) -> bool:
    """``value`` if it is ``True`` or ``False`` (not 0, 1 or a string)."""
    return Boolean(allowed)(field, value)
