"""Reading the theory commands' flags: each flag's text to a value, and one line when it is not one.

Every flag is read as text and converted here, not by argparse, so a value that is not a number
gets the same one-line message as one out of range (``goodputlab optimal``, ``goodputlab simulate``).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, Callable

from .. import theory
from ..errors import ConfigError
from ..validate import ascii_number
from .common import UnreadableValue


@dataclass(frozen=True)
class Reader:
    """How one flag's text becomes a value: the type, and what is allowed if it cannot."""

    kind: Callable[[str], Any]
    allowed: str


SECONDS = Reader(float, "a finite number of seconds >= 0")
POSITIVE_SECONDS = Reader(float, "a finite number of seconds > 0")
AT_LEAST_ONE = Reader(int, "a whole number >= 1")
AT_LEAST_ZERO = Reader(int, "a whole number >= 0")


def add(parser: argparse.ArgumentParser, flag: str, metavar: str, help: str, **kwargs: Any) -> None:
    """A flag read as text (converted by :func:`read_value`), shown in ``--help`` with its unit as metavar."""
    parser.add_argument(flag, metavar=metavar, help=help, **kwargs)


def read_value(args: argparse.Namespace, field: str, reader: Reader) -> Any:
    """The value of ``field`` read from its text (``None`` stays ``None``); an error quoting the text if it is not one."""
    text = getattr(args, field)
    if text is None:
        return None
    try:
        value = reader.kind(ascii_number(text, whole=reader.kind is int))  # no 1_000, no other scripts' digits
    except ValueError:
        raise UnreadableValue(field, text, reader.allowed) from None
    if isinstance(value, float) and math.isnan(value):
        raise ConfigError(field, text, reader.allowed)
    return value


def secs(seconds: float) -> str:
    """``"4320 s (1h 12m)"``: seconds, and the human form when it helps."""
    if math.isinf(seconds):
        return "inf"
    if seconds < 60:
        return f"{seconds:.3g} s"
    return f"{seconds:,.0f} s ({theory.human_duration(seconds)})"


#: What goodput and ETTR mean (:data:`goodputlab.theory.frame.DEFINITIONS`), under every table and in ``--json``.
DEFINITIONS = theory.frame.DEFINITIONS


def definition_lines() -> list[str]:
    """The definitions as lines to print under a table."""
    return [f"{name}: {text}" for name, text in (("goodput", DEFINITIONS["goodput"]), ("ETTR", DEFINITIONS["ettr"]))]
