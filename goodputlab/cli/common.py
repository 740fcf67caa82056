"""What every command shares: one-line usage errors, exit codes, reading a flag's text.

Every flag that takes a value is read as text and converted by the command, not by
argparse, so a value that is not even of the right kind gets the same one line as
one out of range: ``goodputlab run: error: --steps 'many' is invalid; allowed: a
whole number of steps >= 1`` (quoted when it could not be read at all).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys

from ..errors import ConfigError
from ..validate import Rule, ascii_number

EXIT_OK, EXIT_CRASH, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


_KINDS = {"int": "a whole number", "float": "a number", "whole": "a whole number", "number": "a number"}
_BAD_TYPE = re.compile(r"^argument (?P<flag>[^:]+): invalid (?P<kind>\w+) value: (?P<text>'.*')$")
_NOT_VALID = re.compile(r"^argument (?P<flag>[^:]+): (?P<text>'.*') is not valid: (?P<allowed>.*)$")
_BAD_CHOICE = re.compile(r"^argument (?P<flag>[^:]+): invalid choice: (?P<text>'.*') \(choose from (?P<choices>.*)\)$")



def number(text: str) -> float:
    """argparse's ``type`` for a number typed as a person types one (no ``1_000``, no other scripts' digits:
    :func:`goodputlab.validate.ascii_number`)."""
    return float(ascii_number(text))


def whole(text: str) -> int:
    """argparse's ``type`` for a whole number typed in ASCII digits (see :func:`number`)."""
    return int(ascii_number(text, whole=True))


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump) and exit code 2, and a value argparse
    itself could not read (a flag with ``type=float``, ``choices``) gets the same line as every
    other bad value: ``--rate 'fast' is invalid; allowed: a number``."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_style(message)}\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """argparse's, but a flag the command does not know is reported first, by that command, with the
        nearest flags it has: ``unrecognized arguments: --stpes (did you mean --steps?)``."""
        argv = list(sys.argv[1:] if args is None else args)
        sub = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        parser = next((sub.choices[a] for a in argv if sub is not None and a in sub.choices), None)
        if parser is None:  # no command named: argparse says so (with a suggestion for a misspelt one)
            return super().parse_args(args, namespace)
        flags = [f for a in parser._actions for f in a.option_strings if f.startswith("--")]
        given = argv[: argv.index("--")] if "--" in argv else argv
        unknown = [a for a in given if a.startswith("--") and not any(f.startswith(a.split("=", 1)[0]) for f in flags)]
        if unknown:
            guesses: list[str] = []
            for flag in unknown:
                guesses += [g for g in difflib.get_close_matches(flag.split("=", 1)[0], flags, n=2) if g not in guesses]
            hint = f" (did you mean {' or '.join(guesses)}?)" if guesses else ""
            parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
        return super().parse_args(args, namespace)

    def _get_values(self, action, arg_strings):  # type: ignore[override]
        # ``--flag=--``: argparse drops the "--" as the end of options and hands the flag an empty
        # list; the value typed is the text "--", read and refused like any other
        if action.nargs in (None, argparse.OPTIONAL) and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def one_style(message: str) -> str:
    """argparse's own message for a value it could not read, in the commands' style; others unchanged."""
    m = _BAD_TYPE.match(message)
    if m and m["kind"] in _KINDS:
        return f"{m['flag']} {m['text']} is invalid; allowed: {_KINDS[m['kind']]}"
    m = _NOT_VALID.match(message)
    if m:
        return f"{m['flag']} {m['text']} is invalid; allowed: {m['allowed']}"
    m = _BAD_CHOICE.match(message)
    if m:
        choices = [c.strip().strip("'") for c in m["choices"].split(",")]
        guess = difflib.get_close_matches(m["text"].strip("'"), choices, n=1)
        hint = f" (did you mean {guess[0]}?)" if guess else ""
        return f"{m['flag']} {m['text']} is invalid; allowed: one of {', '.join(choices)}{hint}"
    return message


class UnreadableValue(ConfigError):
    """A flag's text is not even of the kind its field takes (``--steps many``): shown quoted."""


def read(field: str, text: str | None, rule: Rule):
    """The value ``text`` stands for under ``rule`` (``None`` stays ``None``); :class:`UnreadableValue` if none."""
    if text is None:
        return None
    try:
        return rule.parse(text)
    except ValueError:
        raise UnreadableValue(field, text, rule.allowed) from None


def as_typed(argv: list[str], flag: str, error: ConfigError) -> str:
    """The value of ``flag`` as the user typed it (``" 0"``, not the parsed ``0.0``), with its leading
    space; quoted when it could not be read; ``""`` for a switch; ``" (not given)"`` for a setting the
    flag never named."""
    if isinstance(error.value, bool):
        return ""
    typed = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            typed = argv[i + 1]
        elif arg.startswith(flag + "="):
            typed = arg[len(flag) + 1 :]
    if typed is not None:
        return " " + (repr(typed) if isinstance(error, UnreadableValue) or typed == "" else typed)
    return " (not given)" if error.value is None else f" {error.value!s}"
