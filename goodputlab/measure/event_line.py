"""One line of an event log: the fields and types the ledger relies on, checked (pure).

:func:`parse_event` reads a line with ``json.loads`` and checks it: ``t`` a finite number of
seconds within :data:`MAX_T`, ``attempt`` a count, ``kind`` a string, ``step`` a step number or
null, and each kind's own fields (a ``step_end``'s loss, a ``ckpt_commit``'s ``ckpt_step``, ...).
A float too large to hold (``1e999``) is refused rather than read as infinity; a loss may be NaN
or infinite (a diverged loss is recorded as it was). :mod:`goodputlab.measure.logread` reads whole
logs with it.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

#: An event's time is seconds since its run began, within this bound (about 317 million years): the fast
#: grammar's 16 digits, so that every sum of times a report prints is finite (docs/BAD_INPUT.md, "report").
MAX_T = 1e16


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite_float(text: str) -> float:
    """``json.loads``'s reading of a number with a point or an exponent: one too large for a float
    (``1e999``) is refused rather than read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value


def _is_loss(v: Any) -> bool:
    """A loss: a number a float holds; NaN and the infinities too (a diverged loss is recorded as it was)."""
    if isinstance(v, float):
        return True
    return _is_finite(v)


def _is_finite(v: Any) -> bool:
    """A number that a float holds (an integer of 400 digits does not)."""
    if not _is_number(v):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _is_count(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


_NUMBER = ("a number", _is_finite)
_COUNT = ("a whole number >= 0", _is_count)
_STRING = ("a string", lambda v: isinstance(v, str))
_STEP = ("a step number", _is_count)
# Fields the ledger, the summary and the measurements read, by kind (the names of measure/events.py):
# (field, required, (what, check)).
_KIND_FIELDS: dict[str, tuple[tuple[str, bool, tuple[str, Callable[[Any], bool]]], ...]] = {
    "compute": (("step", True, _STEP),),
    "data_wait": (("step", True, _STEP),),
    "sync_wait": (("step", True, _STEP),),
    "step_end": (
        ("step", True, _STEP),
        ("loss", False, ("a number", _optional(_is_loss))),
        ("samples", False, ("a list of sample numbers", lambda v: isinstance(v, list) and all(_is_count(i) for i in v))),
    ),
    "end": (
        ("completed", False, ("true or false", lambda v: isinstance(v, bool))),
        ("reason", False, _STRING),
        ("resume_step", False, _COUNT),
    ),
    "failure": (("cause", False, _STRING),),
    "custom": (("name", True, ("a name of at most 40 characters", lambda v: isinstance(v, str) and 0 < len(v) <= 40)),),
    "finish": (
        ("final_state_sha256", False, ("a string", _optional(lambda v: isinstance(v, str)))),
        ("final_loss", False, ("a number", _optional(_is_loss))),
    ),
    "restored": (("ckpt_step", True, _COUNT),),
    "ckpt_commit": (("ckpt_step", True, _COUNT),),
    "ckpt_invalid": (("ckpt_step", True, ("a step number", _is_int)), ("reason", False, _STRING)),
    "init": (("total_steps", False, ("a whole number >= 0", _optional(_is_count))),),
}
_NEEDS_STEP = frozenset(k for k, fields in _KIND_FIELDS.items() if any(n == "step" and req for n, req, _ in fields))
_NEEDS_FIELD = frozenset(k for k, fields in _KIND_FIELDS.items() if any(n != "step" and req for n, req, _ in fields))


def parse_event(raw: bytes) -> dict:
    """One line of the log (without its newline) as an event; raises ``ValueError`` saying what is wrong."""
    if b"\0" in raw:
        raise ValueError("NUL bytes (a block of zeros, as a crash of the file system can leave)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid UTF-8 (byte {e.start})") from None
    if not text.strip():
        raise ValueError("an empty line")
    try:
        e = json.loads(text, parse_float=_finite_float)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise ValueError("not an event (JSON nested too deeply)") from None
    except ValueError as err:  # an integer of more than 4300 digits, or a float too large for one
        why = str(err) if "too large" in str(err) else "a number too long to read"
        raise ValueError(f"not an event ({why})") from None
    if not isinstance(e, dict):
        raise ValueError(f"a JSON {type(e).__name__}, not an object")
    for name, (what, check) in (
        ("t", ("a finite number of seconds within ±1e16", lambda v: _is_finite(v) and -MAX_T < v < MAX_T)),
        ("attempt", _COUNT),
        ("kind", ("a string", lambda v: isinstance(v, str) and v != "")),
        ("step", ("a step number or null", _optional(_is_count))),
    ):
        if name not in e:
            raise ValueError(f"no {name!r} field")
        if not check(e[name]):
            raise ValueError(f"{name!r} is {_short(e[name])}, not {what}")
    for name, required, (what, check) in _KIND_FIELDS.get(e["kind"], ()):
        if name not in e:
            if required:
                raise ValueError(f"a {e['kind']!r} event without {name!r}")
            continue
        if not check(e[name]):
            raise ValueError(f"{name!r} of a {e['kind']!r} event is {_short(e[name])}, not {what}")
    return e


def _short(value: Any) -> str:
    """A value as the error shows it: its repr, at most 60 characters."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        return "a number of more than 4300 digits"
    return text if len(text) <= 60 else text[:57] + "..."
