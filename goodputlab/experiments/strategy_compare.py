"""Compare checkpoint strategies on the same experiment, and put their measured costs into Daly's model.

What chapter 4 does, as functions the tests reach:

* :func:`run_strategies` runs one configuration once per strategy (same seed,
  same failures), returning the results by strategy;
* :func:`save_cost_s`, :func:`restart_cost_s` and :func:`step_s` read what a
  run measured: the blocking time of a save, the time a failure costs besides
  lost work (restart + restore), and the compute time of a step;
* :func:`goodput_curves` turns save costs into goodput-versus-interval curves
  with :func:`goodputlab.theory.daly_goodput`, and :func:`optimum` gives
  Daly's interval and the goodput there. A cheaper save moves the optimum to a
  shorter interval and a higher goodput: less work is lost per failure, and
  checkpointing more often costs less.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Iterable

from ..measure import events as E
from ..checkpoints import registry
from ..engine.config import RunConfig
from ..theory.closed_forms import daly_goodput, daly_interval


def run_strategies(
    config: RunConfig,
    out_root: Path | str,
    strategies: Iterable[str] | None = None,
    progress: Any = False,
) -> dict[str, Any]:
    """Run ``config`` once per strategy (only ``ckpt`` changes); returns ``{strategy: RunResult}``.

    Each run writes to ``out_root/<strategy>``. With deterministic failures
    (``kill_at_steps``) every run is killed at the same steps, so the
    timelines differ only by what the strategy costs. ``strategies``: every one the registry lists by default.
    """
    from ..engine.api import run

    out_root = Path(out_root)
    names = registry.names() if strategies is None else strategies
    return {s: run(config.replace(ckpt=s), out=out_root / s, progress=progress) for s in names}


def save_cost_s(result) -> float:
    """Median blocking time of a save in a run, seconds (``ckpt_save`` phases).

    The run's final save is left out: it also waits until the state is durable
    (the run ends there), which no save in the middle of training does.
    """
    durations = [seg.duration for seg in result.ledger.segments if seg.kind == E.W_CKPT_SAVE]
    if len(durations) > 1:
        durations = durations[:-1]
    return statistics.median(durations) if durations else 0.0


def restart_cost_s(result) -> float | None:
    """Seconds a failure cost besides the lost work: (restart + checkpoint_restore) / failures; None without failures."""
    failures = result.summary["failures"]
    if not failures:
        return None
    b = result.summary["buckets"]
    return (b["restart"] + b["checkpoint_restore"]) / failures


def step_s(result) -> float:
    """Median compute time of a step in a run, seconds."""
    rows = result.per_step()
    return statistics.median(r["compute_s"] for r in rows) if rows else 0.0


def interval_s(result) -> float | None:
    """The run's checkpoint interval in seconds of training: ``ckpt_every`` x (data wait + compute) per step."""
    every = result.config.ckpt_every
    if not isinstance(every, int) or every <= 0:
        return None
    rows = result.per_step()
    per_step = statistics.median(r["compute_s"] + r["data_wait_s"] for r in rows) if rows else 0.0
    return every * per_step


def log_intervals(lo_s: float, hi_s: float, n: int = 60) -> list[float]:
    """``n`` intervals (seconds) spaced evenly on a log scale from ``lo_s`` to ``hi_s``."""
    a, b = math.log(lo_s), math.log(hi_s)
    return [math.exp(a + (b - a) * i / (n - 1)) for i in range(n)]


def goodput_curves(
    save_costs: dict[str, float], restart_s: float, mtbf_s: float, intervals: Iterable[float]
) -> list[dict[str, Any]]:
    """Rows ``{strategy, interval_s, goodput, save_s}``: Daly's goodput of each strategy at each interval (seconds)."""
    intervals = list(intervals)
    return [
        {"strategy": s, "interval_s": tau, "goodput": daly_goodput(tau, save, restart_s, mtbf_s), "save_s": save}
        for s, save in save_costs.items()
        for tau in intervals
    ]


def optimum(save_s: float, restart_s: float, mtbf_s: float) -> dict[str, float]:
    """Daly's optimal interval (seconds) for a save cost and the goodput it gives."""
    tau = daly_interval(save_s, mtbf_s)
    if tau <= 0:  # a free save: checkpoint as often as possible (the formula's limit)
        tau = 1e-6
    return {"interval_s": tau, "goodput": daly_goodput(tau, save_s, restart_s, mtbf_s), "save_s": save_s}
