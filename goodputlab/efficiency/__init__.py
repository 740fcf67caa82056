"""Goodput as statistical efficiency: batch size, the gradient noise scale and Pollux's goodput.

The second sense of *goodput* (Pollux, Qiao et al., OSDI'21): the rate at which a job
makes **progress**, not the rate at which it processes samples. A bigger batch raises
throughput (samples per second), but past the *gradient noise scale* each sample
teaches the model less, so throughput x statistical efficiency peaks and falls.

What lives here:

- :mod:`goodputlab.efficiency.noise`, :mod:`~goodputlab.efficiency.sweep_config` and
  :mod:`~goodputlab.efficiency.analysis` (pure: numpy only, no torch): the gradient noise
  scale (McCandlish et al. 2018, the "simple" estimator from squared gradient norms at
  two batch sizes, and an exponential-average tracker), Pollux's statistical efficiency
  and goodput, the learning-rate rules (linear, square root, AdaScale's gain), a model
  of throughput against batch size, the sweep's configuration and the analysis of its
  results (steps and samples to a target loss, measured against predicted efficiency,
  the best batch size, the critical batch size, how the best batch grows as training
  goes on).
- :mod:`goodputlab.efficiency.sweep` (imports torch): the real experiment. The lab's GPT
  trains on the lab's Markov data at each batch size until a held-out loss reaches the
  target, tracking the noise scale as it goes; throughput is timed separately on the
  plain training step.

Importing this package imports neither torch nor the sweep: ``run_sweep`` and ``SweepBar``
load it on first use.
"""

from __future__ import annotations

import importlib

from .analysis import SweepAnalysis, SweepResult, Throughput, Trajectory, adaptive_batch_sizes, report

from .noise import LR_RULES, NoiseScaleTracker, ThroughputFit, adascale_gain, fit_throughput, lr_factor, optimal_batch_size, simple_noise_estimates, simple_noise_scale, statistical_efficiency

from .sweep_config import SweepConfig

_SWEEP = ("SweepBar", "run_sweep", "sweep")


def __getattr__(name: str):
    # the experiment loads (with torch) on first use: gl.efficiency.run_sweep(...)
    if name not in _SWEEP:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(".sweep", __name__)
    return module if name == "sweep" else getattr(module, name)


__all__ = [
    "LR_RULES",
    "NoiseScaleTracker",
    "SweepAnalysis",
    "SweepConfig",
    "SweepResult",
    "Throughput",
    "ThroughputFit",
    "Trajectory",
    "adaptive_batch_sizes",
    "adascale_gain",
    "fit_throughput",
    "lr_factor",
    "optimal_batch_size",
    "report",
    "simple_noise_estimates",
    "simple_noise_scale",
    "run_sweep",
    "statistical_efficiency",
    "SweepBar",
]
