"""Serving goodput (DistServe, OSDI'24): the highest request rate served within latency SLOs.

What lives here, from pure to launching:

* :mod:`~goodputlab.serving.workload` (numpy only): seeded Poisson arrivals and a mix of
  prompt and output lengths; the model sizes the server runs.
* :mod:`~goodputlab.serving.slo` (pure): per-request time to first token (TTFT) and time per
  output token (TPOT), SLO attainment, percentiles, one rate's measurement.
* :mod:`~goodputlab.serving.search` (pure): goodput = the highest rate whose measured
  attainment meets a target, found by bracketing and bisecting over real measurements.
* :mod:`~goodputlab.serving.kv` (torch): the lab's GPT with a KV cache: prefill, batched
  decode, and the full-recompute reference it must agree with.
* :mod:`~goodputlab.serving.engine` (torch): the schedulers: a colocated worker (prefill
  interrupts decode, continuous batching) and the prefill and decode workers of a
  disaggregated server.
* :mod:`~goodputlab.serving.analysis` (pure): how long decoding waited for prefill, and the gaps
  between tokens, read from a measurement.
* :mod:`~goodputlab.serving.cluster` (launches processes): the worker processes of either
  mode (:mod:`~goodputlab.serving.worker`, ``python -m goodputlab.serving.worker``), the KV
  hand-over between them, one rate measured, the goodput search.

Importing this package costs no torch; the torch modules load when a server starts, and the
launcher (:class:`ServingCluster`) on first use.
"""

from __future__ import annotations

import importlib

from .analysis import interference
from .config import ServerConfig
from .search import GoodputSearch, search_goodput
from .slo import SLO, RateMeasurement, RequestRecord, attainment, measure_records, percentile
from .workload import MIXES, SERVING_PRESETS, LengthClass, LengthMix, Request, Workload, parse_mix, poisson_workload

_LAZY = {"ServingCluster": "cluster", "ServerError": "cluster", "cluster": None}


def __getattr__(name: str):
    # the launcher loads on first use (it starts worker processes; the package itself stays light)
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(".cluster", __name__)
    return module if _LAZY[name] is None else getattr(module, name)


__all__ = [
    "MIXES",
    "SERVING_PRESETS",
    "SLO",
    "GoodputSearch",
    "LengthClass",
    "LengthMix",
    "RateMeasurement",
    "Request",
    "RequestRecord",
    "ServerConfig",
    "ServerError",
    "ServingCluster",
    "Workload",
    "attainment",
    "measure_records",
    "parse_mix",
    "interference",
    "percentile",
    "poisson_workload",
    "search_goodput",
]
