"""Checkpoint strategies, one module each, and how a strategy plugs into a run.

The registry (:mod:`goodputlab.checkpoints.registry`) lists the modules of this folder;
here they are loaded by name, when a run needs one. A strategy module defines:

- ``make(store, on_commit, tier=None, **options)``: its checkpointer, with
  ``save(state, step)`` (returns when training may continue), ``finalize()`` (returns
  when the newest save is durable), ``close()``, ``in_flight``, ``last_blocking_s``,
  calling ``on_commit(step, tier=...)`` when a save is complete;

and, when it needs them (each has a default here):

- ``options(config)``: its own settings from the run's configuration (default none);
- ``prepare_run(config, fallbacks)``: a run-level resource the supervisor holds while the run
  lasts, and the environment every worker gets (:class:`RunResource`; the memory
  strategy's RAM tier; :class:`~goodputlab.checkpoints.registry.RunResource`);
- ``open_tier(config, max_file_bytes, env)``: in the worker, a tier to restore from before
  the disk, and to save into (the RAM tier; default none); ``env`` is the environment
  :func:`prepare_run` gave (the worker's own, by default).

A new strategy is one new file here: nothing else names the strategies one by one.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Callable, Mapping

from .. import registry
from ..registry import RunResource


def load(name: str) -> ModuleType:
    """The module of strategy ``name``; ``ValueError`` for a name the registry does not list."""
    if name not in registry.names():
        raise ValueError(f"unknown checkpoint strategy {name!r}; known: {registry.describe()}")
    return importlib.import_module(registry.module_name(name))


def make_checkpointer(name: str, store, on_commit: Callable[..., None], tier=None, **options: Any):
    """The checkpointer of strategy ``name`` saving into ``store`` (and ``tier``, for a strategy that has one);
    ``options`` are the strategy's own settings (see :func:`options`)."""
    return load(name).make(store, on_commit, tier=tier, **options)


def options(config) -> dict[str, Any]:
    """The settings of ``config.ckpt``'s strategy, read from ``config``."""
    hook = getattr(load(config.ckpt), "options", None)
    return hook(config) if hook else {}


def prepare_run(config, fallbacks: tuple = ()) -> RunResource:
    """The run-level resource of ``config.ckpt``'s strategy (the supervisor calls it once per run).

    ``fallbacks``: directories the resource may use when its preferred place has no room (the run's own)."""
    hook = getattr(load(config.ckpt), "prepare_run", None)
    return hook(config, fallbacks=fallbacks) if hook else RunResource()


def open_tier(config, max_file_bytes: int | None = None, env: Mapping[str, str] | None = None):
    """The tier a worker of ``config.ckpt``'s strategy restores from before the disk, or ``None``.

    ``env``: the environment of :func:`prepare_run` (default: this process's own, as a worker has it)."""
    hook = getattr(load(config.ckpt), "open_tier", None)
    return hook(config, max_file_bytes, os.environ if env is None else env) if hook else None
