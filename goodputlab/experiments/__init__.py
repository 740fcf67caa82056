"""Experiments: real runs set beside the theory.

Each module launches real, supervised runs (:func:`goodputlab.engine.api.run`) or reads
what they measured, and puts a model of :mod:`goodputlab.theory` beside them:

- :mod:`~goodputlab.experiments.interval_sweep`: a run's phase costs read from its
  event log, the failure times it drew, and a sweep over checkpoint intervals held
  against the lab model (chapter 3);
- :mod:`~goodputlab.experiments.strategy_compare`: one experiment per checkpoint
  strategy, their measured costs put into Daly's model (chapter 4);
- :mod:`~goodputlab.experiments.checkpoint_stall`: what a save costs the training
  loop per strategy, each measured in a fresh process (the stall benchmark, chapter 4);
- :mod:`~goodputlab.experiments.data_stall`: the training loop's data wait measured
  from the ledger, the stall model calibrated, the DS-Analyzer anatomy (chapter 5);
- :mod:`~goodputlab.experiments.recovery`: incomplete checkpoints against complete ones,
  the failure modes, the hot spare against a cold restart (chapter 6).
- :mod:`~goodputlab.experiments.scaling`: the same work on one and on several ranks, a
  straggler's cost and a sharded save's per rank against the models, the simulator on a
  run's measured costs (chapter 7);
- :mod:`~goodputlab.experiments.scale_out`: a failing torchrun job planned at a cluster's ratios, and
  its goodput beside the simulator's, the gap split by the lab model replayed on its own failures (chapter 7);
- :mod:`~goodputlab.experiments.emulated_nodes`: a cluster of emulated nodes (network namespaces)
  that loses a node whole, a spare node in its place, and a recording of it (chapter 7);
- :mod:`~goodputlab.experiments.in_job`: restart from a checkpoint against torchft's in-job recovery on
  the same failure draws at a cluster's ratios, the survivors' failed step kept or computed again, and a
  compact recording of the runs (chapter 11);
- :mod:`~goodputlab.experiments.degraded_step`: what a degraded step is worth, measured on the lab's model
  at a fixed learning rate beside McCandlish et al.'s model (chapter 11);
- :mod:`~goodputlab.experiments.scale_model`: the lab calibrated and set at a cluster's ratios, and
  each run's ratios beside the cluster's (every chapter's runs).

Importing this package is cheap: the modules load on first use, and torch only
where a measurement trains.
"""

from __future__ import annotations

import importlib

_MODULES = ("checkpoint_stall", "data_stall", "degraded_step", "emulated_nodes", "in_job", "interval_sweep", "recovery",
            "scale_model", "scale_out", "scaling", "strategy_compare")


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_MODULES)
