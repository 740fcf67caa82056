"""The theory: pure models of goodput, no torch and no launches.

What lives here, each a module:

- :mod:`~goodputlab.theory.closed_forms`: Young's and Daly's optimal checkpoint
  intervals, the first-order and Daly's exact expected goodput of an endless job;
- :mod:`~goodputlab.theory.lab_model`: the model of *this lab's* runs (fixed work,
  process launches, failures during recovery): :func:`predict_run`,
  :func:`replay_run`, the optimal interval in steps;
- :mod:`~goodputlab.theory.cluster`: clusters of independent devices, Llama 3's
  public figures and the worked example;
- :mod:`~goodputlab.theory.simulator`: the cluster-scale Monte Carlo simulator
  (:mod:`~goodputlab.theory.in_job_sim` its in-job recovery, :mod:`~goodputlab.theory.sim_cycle`
  the checkpoint cycle both recovery models book);
- :mod:`~goodputlab.theory.scaling`: what more ranks do to failures, stragglers and
  sharded saves, reached as ``theory.scaling``;
- :mod:`~goodputlab.theory.data_stall`: the input pipeline's stall model (steady
  state, an exact replay of the DataLoader's queue, the depth a target needs),
  reached as ``theory.data_stall`` (its names are not repeated here);
- :mod:`~goodputlab.theory.units`: seconds per hour and day, durations in words.

Reached as namespaces (``gl.theory.renewal.periodic_goodput``), their names not repeated here:

- :mod:`~goodputlab.theory.frame`: Google's ML Productivity Goodput, Meta's
  effective training time ratio and MFU, read off a ledger;
- :mod:`~goodputlab.theory.renewal`: exact goodput of periodic checkpointing
  for Poisson and Weibull failures, with an async save's lag to durable;
- :mod:`~goodputlab.theory.checkpoint_tiers`: a RAM tier that a node loss
  takes with it, a storage copy every k-th save (exact chain, Monte Carlo);
- :mod:`~goodputlab.theory.recovery_at_scale`: detection, hot spares, failure
  domains, the wall-clock timer against the progress policy;
- :mod:`~goodputlab.theory.in_job`: in-job recovery (replica groups that heal from a
  peer while the rest train on): its expected goodput, exact where it can be;
- :mod:`~goodputlab.theory.checkpoint_cost`: bytes per parameter, sharding and
  bandwidth: the save and restore cost of a real model;
- :mod:`~goodputlab.theory.capstone`: every lever in one model of a cluster;
- :mod:`~goodputlab.theory.claim`: a claim about goodput inverted ("lever X took us from B to A
  on N GPUs"): the failure rate and the setting it implies, against published ranges;
- :mod:`~goodputlab.theory.failure_rates`: failure rates as papers give them (per 1,000
  node-days; a per-job and a per-device part) and fits to measured job MTTFs;
- :mod:`~goodputlab.theory.jit`: just-in-time checkpoints and a queue after each failure, the
  restart model's exact goodput and ETTR;
- :mod:`~goodputlab.theory.in_job_costs`: a degraded step's worth at torchft's fixed learning
  rate, the collective timeout's stall, the cost of more replica groups;
- :mod:`~goodputlab.theory.reproductions`: published figures reproduced, row by row.

Everything is importable from here (``from goodputlab import theory;
theory.young_interval(60, 10_000)``). Only numpy is imported, never torch, and
nothing here starts a process: the experiments (:mod:`goodputlab.experiments`)
set real runs beside these models.
"""

from __future__ import annotations

from . import (
    capstone, checkpoint_cost, checkpoint_tiers, claim, data_stall, failure_rates, frame, in_job, in_job_costs, jit,
    recovery_at_scale, renewal, reproductions, scaling,
)
from .closed_forms import (
    daly_ettr,
    daly_expected_wall_time,
    daly_goodput,
    daly_interval,
    exact_goodput_free,
    expected_goodput,
    first_order_ettr,
    optimal_interval_numeric,
    young_interval,
)
from .cluster import (
    LLAMA3_DAYS,
    LLAMA3_DURATION_S,
    LLAMA3_EFFECTIVE_TRAINING_TIME,
    LLAMA3_GPUS,
    LLAMA3_INTERRUPTION_CAUSES,
    LLAMA3_INTERRUPTIONS,
    LLAMA3_PLANNED_INTERRUPTIONS,
    LLAMA3_UNEXPECTED_INTERRUPTIONS,
    WORKED_EXAMPLE_INTERRUPTIONS_PER_DAY,
    WORKED_EXAMPLE_MTBF_S,
    cluster_mtbf,
    device_mtbf_for_count,
    expected_failures,
    llama3_cause_table,
    grid_reach,
    llama3_cost_grid,
    llama3_mtbf_s,
    p_any_failure,
)
from .lab_model import (
    RunPrediction,
    RunTimings,
    optimal_ckpt_every,
    predict_run,
    predict_run_goodput,
    textbook_goodput,
)
from .lab_replay import replay_run
from .sim_config import SimConfig, SimResult
from .simulator import simulate, sweep_replica_groups, sweep_rows
from .units import SECONDS_PER_DAY, SECONDS_PER_HOUR, compact_duration, human_duration

__all__ = [
    "LLAMA3_DAYS",
    "LLAMA3_DURATION_S",
    "LLAMA3_EFFECTIVE_TRAINING_TIME",
    "LLAMA3_GPUS",
    "LLAMA3_INTERRUPTIONS",
    "LLAMA3_INTERRUPTION_CAUSES",
    "LLAMA3_PLANNED_INTERRUPTIONS",
    "LLAMA3_UNEXPECTED_INTERRUPTIONS",
    "SECONDS_PER_DAY",
    "SECONDS_PER_HOUR",
    "WORKED_EXAMPLE_INTERRUPTIONS_PER_DAY",
    "WORKED_EXAMPLE_MTBF_S",
    "RunPrediction",
    "RunTimings",
    "SimConfig",
    "SimResult",
    "cluster_mtbf",
    "capstone",
    "claim",
    "checkpoint_cost",
    "checkpoint_tiers",
    "compact_duration",
    "data_stall",
    "scaling",
    "daly_ettr",
    "daly_expected_wall_time",
    "daly_goodput",
    "daly_interval",
    "device_mtbf_for_count",
    "exact_goodput_free",
    "expected_failures",
    "expected_goodput",
    "failure_rates",
    "first_order_ettr",
    "frame",
    "human_duration",
    "in_job",
    "in_job_costs",
    "jit",
    "llama3_cause_table",
    "grid_reach",
    "llama3_cost_grid",
    "llama3_mtbf_s",
    "optimal_ckpt_every",
    "optimal_interval_numeric",
    "p_any_failure",
    "predict_run",
    "predict_run_goodput",
    "recovery_at_scale",
    "renewal",
    "reproductions",
    "replay_run",
    "simulate",
    "sweep_replica_groups",
    "sweep_rows",
    "textbook_goodput",
    "young_interval",
]
