"""The one registry of checkpoint strategies: every module of ``goodputlab/checkpoints/strategies/`` is one.

A strategy is one file, ``strategies/<name>.py`` (a name that is a Python keyword
takes a trailing underscore: ``async_.py`` is ``async``), whose docstring opens with
``<name>: what it does``. The registry reads both from the folder without importing
anything: the strategies import torch when they run, and the run configuration,
which takes its allowed values for ``ckpt`` from here, stays light. So a new
strategy's file is all it takes for ``--ckpt``, its ``--help``, the run
configuration and the stall benchmark to know it. How a strategy plugs into a run
(making its checkpointer, a run-level resource, a tier to restore from) is
:mod:`goodputlab.checkpoints.strategies`.
"""

from __future__ import annotations

import ast
import functools
import keyword
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

#: Listed first, everywhere: the strategy the others are measured against.
BASELINE = "sync"
PACKAGE = "goodputlab.checkpoints.strategies"
_FOLDER = Path(__file__).with_name("strategies")


@functools.lru_cache(maxsize=None)
def _modules() -> dict[str, str]:
    """Strategy name -> its module's file stem, for every module in the strategies folder."""
    found = {}
    for info in pkgutil.iter_modules([str(_FOLDER)]):
        if info.name.startswith("_") and not info.name.endswith("_"):
            continue
        stem = info.name
        name = stem[:-1] if stem.endswith("_") and keyword.iskeyword(stem[:-1]) else stem
        found[name] = stem
    return found


def names() -> tuple[str, ...]:
    """Every strategy: the baseline first, the others in alphabetical order."""
    found = _modules()
    return tuple([BASELINE] if BASELINE in found else []) + tuple(sorted(n for n in found if n != BASELINE))


def module_name(name: str) -> str:
    """The module that implements ``name`` (``KeyError`` for an unknown strategy)."""
    return f"{PACKAGE}.{_modules()[name]}"


@functools.lru_cache(maxsize=None)
def summary(name: str) -> str:
    """What ``name`` does, in a line: its module docstring's first line, without the ``name:`` prefix."""
    path = _FOLDER / f"{_modules()[name]}.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    return first.removeprefix(f"{name}:").strip().rstrip(".")


def describe() -> str:
    """``sync, async, dcp or memory``: the names for a sentence."""
    listed = names()
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} or {listed[-1]}"


@dataclass
class RunResource:
    """What a strategy holds for a whole run (its ``prepare_run``): the environment its workers get, and how
    to let it go when the run ends."""

    env: dict[str, str] = field(default_factory=dict)
    cleanup: Callable[[], None] = lambda: None
    #: markers for the run's event log, ``(kind, fields)``: what the resource is and where it went
    events: list[tuple[str, dict]] = field(default_factory=list)
