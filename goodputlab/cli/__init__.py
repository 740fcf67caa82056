"""The command line: ``goodputlab run``, ``optimal``, ``simulate``, ``batch-sweep``, ``serve-bench``, ``report``, ``claim``.

One module per group of commands: :mod:`~goodputlab.cli.run` (a real run; its flags are
generated from the run configuration), :mod:`~goodputlab.cli.theory` (``optimal`` and
``simulate``), :mod:`~goodputlab.cli.efficiency` (``batch-sweep``),
:mod:`~goodputlab.cli.serving` (``serve-bench``), :mod:`~goodputlab.cli.report`
(``report``), :mod:`~goodputlab.cli.claim` (``claim``); :mod:`~goodputlab.cli.common` holds what they share. A new command is a
module here with a ``register(subparsers)`` function, added to :data:`COMMANDS` with the commands it adds.
A command line that names a command imports only that command's module (``goodputlab report`` does
not load the theory or the run's configuration); ``goodputlab --help``, a bare ``goodputlab`` and a
misspelt command import them all.

Bad input exits with code 2 and one line naming the flag, the value as typed and what is
allowed (every case: ``docs/BAD_INPUT.md``); a bare ``goodputlab`` lists the commands and
exits with 2. Exit codes of ``run``: 0 completed, 1 the worker crashed (or the run could
not write its files), 2 bad input, 3 stopped by the failure budget, 128 + the signal when
stopped by one: 130 Ctrl-C (SIGINT), 143 SIGTERM, 129 SIGHUP. All three stop a run the
same way: no process left, the RAM tier removed, the summary written.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from .. import __version__
from ..engine.interrupts import RunInterrupted, StopSignals
from ..errors import ConfigError
from .common import EXIT_INTERRUPTED, EXIT_USAGE, Parser, as_typed

#: The modules here that add commands, in the order ``goodputlab`` lists them, each with the commands it adds.
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("run",),
    "theory": ("optimal", "simulate"),
    "efficiency": ("batch-sweep",),
    "serving": ("serve-bench",),
    "report": ("report",),
    "claim": ("claim",),
}
_MODULE_OF = {command: module for module, commands in COMMANDS.items() for command in commands}


def __getattr__(name: str) -> Any:
    if name == "FLAGS":  # imported when asked for: it comes with the theory
        return _default_flags()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _default_flags() -> dict[str, str]:
    """ConfigError.field -> the flag the user typed, where the two differ (the run's fields are ``--<field>``);
    a command whose fields are named otherwise sets its own map as the ``flags`` default of its parser."""
    from .theory import FLAGS

    return {**FLAGS}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``argv``, the command line it is for: when that names a
    command (as :meth:`Parser.parse_args` finds it: the first word that is one), only that
    command's module is imported and registered."""
    p = Parser(prog="goodputlab", description="Measure, model and teach training goodput.")
    p.add_argument("--version", action="version", version=f"goodputlab {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    chosen = next((_MODULE_OF[a] for a in argv if a in _MODULE_OF), None) if argv is not None else None
    for module in COMMANDS if chosen is None else (chosen,):
        importlib.import_module(f"{__name__}.{module}").register(sub)
    return p


def hint(parser: argparse.ArgumentParser) -> str:
    """What a bare ``goodputlab`` prints: the commands, one line each, and where to read more."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: (c.help or "").replace("%%", "%") for c in sub._choices_actions}  # as argparse shows it
    lines = ["usage: goodputlab COMMAND [flags]", "", "commands:"]
    width = max(map(len, sub.choices))
    lines += [f"  {name:<{width}}  {helps.get(name, '')}" for name in sub.choices]
    lines += ["", "'goodputlab COMMAND --help' lists a command's flags, with examples."]
    return "\n".join(lines)


def _flag(field: str, flags: dict[str, str] | None = None) -> str:
    """The flag of a ConfigError's field: from the command's own ``flags`` when it sets them."""
    return (flags if flags is not None else _default_flags()).get(field, "--" + field.replace("_", "-"))


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (``None``: this process's own, as the ``goodputlab`` program,
    which then also ignores stop signals after the first one until it has exited)."""
    given = sys.argv[1:] if argv is None else argv
    parser = build_parser(given)
    args = parser.parse_args(argv)
    if args.command is None:
        print(hint(parser), file=sys.stderr)
        return EXIT_USAGE
    try:
        # SIGTERM and SIGHUP end a command as Ctrl-C does; a second signal waits for the cleanup
        with StopSignals(linger=argv is None):
            return args.func(args)
    except ConfigError as e:
        flag = _flag(e.field, getattr(args, "flags", None))
        shown = as_typed(given, flag, e)
        print(f"goodputlab {args.command}: error: {flag}{shown} is invalid; allowed: {e.allowed}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        name = f" ({e.signal_name})" if isinstance(e, RunInterrupted) else ""
        print(f"goodputlab {args.command}: interrupted{name}; no process left running", file=sys.stderr)
        return e.exit_code if isinstance(e, RunInterrupted) else EXIT_INTERRUPTED


__all__ = ["COMMANDS", "EXIT_INTERRUPTED", "EXIT_USAGE", "FLAGS", "build_parser", "main"]
