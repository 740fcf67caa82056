"""Your cluster: every lever of the book in one model, from the model's size to the money lost per day.

:class:`ClusterScenario` describes a training job (model size, GPUs, per-GPU
reliability, storage bandwidth, checkpoint strategy, hot spares, detection and
restart times, data stalls, MFU, a price); :func:`evaluate` turns it into the
figures a planner wants (all times in seconds):

1. the checkpoint's size and costs from first principles
   (:func:`goodputlab.theory.checkpoint_cost.checkpoint_cost`);
2. the job's MTBF (devices fail independently: ``M = M_gpu / GPUs``);
3. the recovery time ``R = detection + restart + restore`` with hot spares
   mixed in (:func:`goodputlab.theory.recovery_at_scale.spare_hit_share`);
4. the optimal checkpoint interval and the goodput there, from the exact
   renewal model (:mod:`goodputlab.theory.renewal`: sync and async saves with
   their lag to durable) or the two-tier chain
   (:func:`goodputlab.theory.checkpoint_tiers.tiered_goodput`: a RAM tier that
   a node loss takes with it, or a copy on a peer that survives it);
5. where the time goes (:func:`expected_breakdown`), Meta's effective training
   time ratio, GPU-hours and money lost per day, and goodput x MFU.

The defaults are Llama 3 405B's pretraining as published (16,384 H100s, 466
interruptions in 54 days, storage at 2 TB/s sustained, BF16 MFU about 40%)
with the costs the paper does not give set to plausible values: synchronous
saves, 90 s to detect a failure, 5 minutes to restart. They give an effective
training time above the reported 90%.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from .. import validate
from ..categories import CATEGORIES, CHECKPOINT_RESTORE, CHECKPOINT_SAVE, DATA_WAIT, LOST_WORK, PRODUCTIVE, RESTART
from ..errors import check
from .checkpoint_cost import (
    H200_HOST_COPY_BPS,
    LLAMA3_405B_PARAMETERS,
    LLAMA3_STORAGE_SUSTAINED_BPS,
    CheckpointCost,
    checkpoint_cost,
)
from .checkpoint_tiers import node_loss_share, tiered_goodput, tiered_optimum
from .frame import H100_BF16_PEAK_FLOPS
from .cluster import LLAMA3_DURATION_S, LLAMA3_GPUS, LLAMA3_INTERRUPTIONS, device_mtbf_for_count
from .renewal import cycle_times, optimal_interval, periodic_goodput
from .recovery_at_scale import mean_restart_with_spares, spare_hit_share
from .units import SECONDS_PER_DAY, SECONDS_PER_HOUR

SECONDS_PER_YEAR = 365.0 * SECONDS_PER_DAY

#: Checkpoint strategies: where a checkpoint goes and what survives a node loss.
STRATEGIES = ("sync", "async", "memory, same node", "memory, peer copy")

#: Llama 3's per-GPU MTBF (years) if every one of its 466 interruptions is charged to the GPUs: about 5.2.
LLAMA3_GPU_MTBF_YEARS = device_mtbf_for_count(LLAMA3_GPUS, LLAMA3_DURATION_S, LLAMA3_INTERRUPTIONS) / SECONDS_PER_YEAR


@dataclass(frozen=True)
class ClusterScenario:
    """A training job on a cluster; validated on construction. Defaults: Llama 3 405B.

    - ``parameters``: model size; ``gpus``: devices (one rank each);
    - ``gpu_mtbf_years``: mean time between interruptions per GPU (the job
      fails at ``gpus`` times that rate); 5.2 years is Llama 3's 466
      interruptions in 54 days on 16,384 GPUs;
    - ``storage_bps``: the storage system's aggregate bandwidth (bytes/s);
      ``host_copy_bps``: a device-to-host copy (an async snapshot);
      ``peer_copy_bps``: one GPU's share of the network to a peer machine;
    - ``strategy``: one of :data:`STRATEGIES`; ``disk_every``: with a memory
      strategy, every how many checkpoints also go to storage;
    - ``detect_s``, ``restart_s``: seconds to notice a failure, and to
      reschedule and initialise a new job (cold); ``spares``: warm standby
      machines, each absorbing one interruption over the job (a pool used up
      as failures come), swapped in within ``spare_swap_s`` instead of a cold
      restart;
    - ``data_stall_share``: share of step time waiting for input;
    - ``mfu``: the program's model FLOPs utilisation; with ``batch_tokens``
      (tokens per optimizer step; Llama 3: 16M) and ``peak_flops`` (per GPU;
      H100 BF16: 989 TFLOP/s) it sets the step time, and a checkpoint comes
      after a whole number of steps;
    - ``days``: the job's length (spares are used up over it);
    - ``price_per_gpu_hour``: what a GPU-hour costs (any currency).
    """

    parameters: float = LLAMA3_405B_PARAMETERS
    gpus: int = LLAMA3_GPUS
    gpu_mtbf_years: float = LLAMA3_GPU_MTBF_YEARS
    storage_bps: float = LLAMA3_STORAGE_SUSTAINED_BPS
    strategy: str = "sync"
    disk_every: int = 10
    spares: int = 0
    spare_swap_s: float = 60.0
    detect_s: float = 90.0
    restart_s: float = 300.0
    data_stall_share: float = 0.0
    mfu: float = 0.40
    batch_tokens: float = 16e6
    peak_flops: float = H100_BF16_PEAK_FLOPS
    days: float = 54.0
    price_per_gpu_hour: float = 2.0
    host_copy_bps: float = H200_HOST_COPY_BPS
    peer_copy_bps: float = 25e9
    precision: str = "bf16"
    optimizer: str = "adam"

    def __post_init__(self) -> None:
        validate.number("parameters", self.parameters, 1e6, 1e14)
        validate.whole("gpus", self.gpus, 1, 10_000_000)
        validate.number("gpu_mtbf_years", self.gpu_mtbf_years, 0.01, 1000.0, unit="years")
        validate.number("storage_bps", self.storage_bps, 1e6, 1e15, unit="bytes per second")
        validate.choice("strategy", self.strategy, STRATEGIES)
        validate.whole("disk_every", self.disk_every, 1, 10_000)
        validate.whole("spares", self.spares, 0, 1_000_000)
        for name in ("spare_swap_s", "detect_s", "restart_s"):
            validate.number(name, getattr(self, name), 0, 7 * SECONDS_PER_DAY, unit="seconds")
        validate.share("data_stall_share", self.data_stall_share)
        validate.number("mfu", self.mfu, 0, 1, low_open=True)
        validate.number("batch_tokens", self.batch_tokens, 1, 1e12, unit="tokens")
        validate.number("peak_flops", self.peak_flops, 1e9, 1e18, unit="FLOP/s")
        validate.number("days", self.days, 0.01, 3650, unit="days")
        validate.number("price_per_gpu_hour", self.price_per_gpu_hour, 0)
        validate.number("host_copy_bps", self.host_copy_bps, 1e6, unit="bytes per second")
        validate.number("peer_copy_bps", self.peer_copy_bps, 1e6, unit="bytes per second")
        job_mtbf = self.gpu_mtbf_years * SECONDS_PER_YEAR / self.gpus
        check(
            job_mtbf >= 300.0,
            "gpu_mtbf_years",
            self.gpu_mtbf_years,
            f"a rate that leaves the job at least 5 minutes between failures (this gives {job_mtbf:.3g} s)",
        )

    def replace(self, **changes) -> "ClusterScenario":
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    @property
    def job_mtbf_s(self) -> float:
        """The job's mean time between failures: a GPU's over the number of GPUs."""
        return self.gpu_mtbf_years * SECONDS_PER_YEAR / self.gpus

    @property
    def failures_per_day(self) -> float:
        return SECONDS_PER_DAY / self.job_mtbf_s

    @property
    def step_s(self) -> float:
        """Seconds of one optimizer step: ``6 N x batch_tokens / (GPUs x peak x MFU)`` (compute only)."""
        return 6.0 * self.parameters * self.batch_tokens / (self.gpus * self.peak_flops * self.mfu)


@dataclass(frozen=True)
class ClusterResult:
    """What :func:`evaluate` finds; times in seconds, shares in [0, 1]."""

    scenario: ClusterScenario
    checkpoint: CheckpointCost
    blocking_s: float  # what a save blocks training for
    durable_lag_s: float  # snapshot to durable (in storage, or in the surviving tier)
    ram_restore_s: float
    storage_restore_s: float
    spare_share: float  # of failures absorbed by a hot spare
    restart_mean_s: float
    recovery_s: float  # detection + restart + restore of the typical failure
    node_loss_share: float  # of failures that need the storage copy
    interval_s: float  # the optimal checkpoint interval (compute between checkpoints)
    goodput: float
    breakdown: dict[str, float] = field(default_factory=dict)  # share of wall time per category

    @property
    def ettr(self) -> float:
        """Meta's effective training time ratio: everything but lost work, restarts and restores."""
        b = self.breakdown
        return 1.0 - b[LOST_WORK] - b[RESTART] - b[CHECKPOINT_RESTORE]

    @property
    def gpu_hours_lost_per_day(self) -> float:
        return self.scenario.gpus * 24.0 * (1.0 - self.goodput)

    @property
    def money_lost_per_day(self) -> float:
        return self.gpu_hours_lost_per_day * self.scenario.price_per_gpu_hour

    @property
    def useful_flops_share(self) -> float:
        """Goodput x MFU: the share of the GPUs' peak FLOPs that became the final model."""
        return self.goodput * self.scenario.mfu

    @property
    def storage_busy_share(self) -> float:
        """Share of the time the storage system spends writing checkpoints (1: a save is always in flight)."""
        s = self.scenario
        every = s.disk_every if s.strategy.startswith("memory") else 1
        first, cycle = cycle_times(self.interval_s, self.blocking_s, self.durable_lag_s if s.strategy == "async" else 0.0)
        return min(1.0, self.checkpoint.write_s / (every * cycle))

    def figures(self) -> dict[str, float]:
        """The headline figures as plain numbers (for a table or a test)."""
        s = self.scenario
        return {
            "checkpoint_tb": self.checkpoint.total_bytes / 1e12,
            "rank_mb": self.checkpoint.rank_bytes / 1e6,
            "write_s": self.checkpoint.write_s,
            "blocking_s": self.blocking_s,
            "storage_restore_s": self.storage_restore_s,
            "job_mtbf_h": s.job_mtbf_s / SECONDS_PER_HOUR,
            "failures_per_day": s.failures_per_day,
            "recovery_min": self.recovery_s / 60.0,
            "interval_min": self.interval_s / 60.0,
            "interval_steps": self.interval_s / s.step_s,
            "step_s": s.step_s,
            "goodput": self.goodput,
            "ettr": self.ettr,
            "gpu_hours_lost_per_day": self.gpu_hours_lost_per_day,
            "money_lost_per_day": self.money_lost_per_day,
            "useful_flops_share": self.useful_flops_share,
            "storage_busy_share": self.storage_busy_share,
        }

    def breakdown_rows(self, run: str = "model") -> list[dict]:
        """Tidy rows like :meth:`goodputlab.theory.SimResult.breakdown_rows` (hours per day of one GPU)."""
        return [
            {"run": run, "category": c, "share": v, "seconds": v * SECONDS_PER_DAY, "hours": v * 24.0}
            for c, v in self.breakdown.items()
        ]


def _survival_integral(r_s: float, mtbf_s: float) -> float:
    """``integral_0^R e^(-t/M) dt = M (1 - e^(-R/M))``: expected recovery time actually spent per up period."""
    return -mtbf_s * math.expm1(-r_s / mtbf_s)


def expected_breakdown(
    goodput_raw: float,
    interval_s: float,
    blocking_s: float,
    durable_lag_s: float,
    restart_s: float,
    restores_s: tuple[float, float],
    restore_weights: tuple[float, float],
    mtbf_s: float,
    data_stall_share: float = 0.0,
) -> dict[str, float]:
    """Expected share of wall time per ledger category, for Poisson failures (renewal-reward).

    Per up period (mean ``M``): the recovery actually spent is
    ``integral_0^R S(t) dt`` (a failure during it cuts it short), split into
    ``restart`` (detection and restart, the first ``restart_s``) and
    ``checkpoint_restore``; the rest trains, a share ``(c - tau)/c`` of it in
    blocking saves (and waits for the previous persist) and ``tau/c`` in
    compute; of the compute, ``goodput_raw * M`` is kept (productive, and
    the data-stall share of it waiting for input), the rest is
    ``lost_work``. ``restores_s`` and ``restore_weights`` give the restore
    time from each tier and how often it is used. The shares sum to 1.
    """
    first, cycle = cycle_times(interval_s, blocking_s, durable_lag_s)
    restart_spent = _survival_integral(restart_s, mtbf_s)
    recovery_spent = sum(
        w * _survival_integral(restart_s + r, mtbf_s) for r, w in zip(restores_s, restore_weights)
    )
    training = mtbf_s - recovery_spent
    compute = training * interval_s / cycle
    kept = goodput_raw * mtbf_s
    out = dict.fromkeys(CATEGORIES, 0.0)
    out[RESTART] = restart_spent / mtbf_s
    out[CHECKPOINT_RESTORE] = (recovery_spent - restart_spent) / mtbf_s
    out[CHECKPOINT_SAVE] = (training - compute) / mtbf_s
    out[LOST_WORK] = max(compute - kept, 0.0) / mtbf_s
    out[PRODUCTIVE] = (1.0 - data_stall_share) * kept / mtbf_s
    out[DATA_WAIT] = data_stall_share * kept / mtbf_s
    return out


def _whole_steps(tau_s: float, step_s: float, goodput) -> float:
    """The better of the whole numbers of steps around ``tau_s`` (at least one step)."""
    below = max(1, math.floor(tau_s / step_s))
    candidates = [below * step_s, (below + 1) * step_s]
    return max(candidates, key=goodput)


def evaluate(scenario: ClusterScenario | None = None, interval_s: float | None = None) -> ClusterResult:
    """The figures of a scenario at its optimal checkpoint interval (or at ``interval_s`` seconds)."""
    s = scenario or ClusterScenario()
    ckpt = checkpoint_cost(
        s.parameters, s.gpus, s.storage_bps, host_copy_bps=s.host_copy_bps,
        precision=s.precision, optimizer=s.optimizer,
    )
    m = s.job_mtbf_s
    expected_failures = s.days * s.failures_per_day
    spare_share = spare_hit_share(s.spares, expected_failures) if s.spares else 0.0
    restart = s.detect_s + mean_restart_with_spares(spare_share, s.spare_swap_s, s.restart_s)
    storage_restore = ckpt.restore_s
    if s.strategy == "memory, peer copy":
        ram_restore, ram_lag = ckpt.rank_bytes / s.peer_copy_bps, ckpt.rank_bytes / s.peer_copy_bps
    else:
        ram_restore, ram_lag = ckpt.rank_bytes / s.host_copy_bps, 0.0
    stall = s.data_stall_share

    step = s.step_s
    if s.strategy in ("sync", "async"):
        blocking = ckpt.write_s if s.strategy == "sync" else ckpt.snapshot_s
        lag = 0.0 if s.strategy == "sync" else ckpt.write_s
        r = restart + storage_restore

        def one_tier(t: float) -> float:
            return periodic_goodput(t, blocking, r, m, durable_lag_s=lag)

        tau = interval_s if interval_s is not None else _whole_steps(optimal_interval(blocking, r, m, durable_lag_s=lag), step, one_tier)
        raw = one_tier(tau)
        p, restores, weights = 1.0, (storage_restore, 0.0), (1.0, 0.0)
    else:
        blocking = ckpt.snapshot_s
        lag = ram_lag
        p = node_loss_share(include_planned=True) if s.strategy == "memory, same node" else 0.0
        disk_lag = max(ram_lag, ckpt.write_s)
        kwargs = dict(disk_every=s.disk_every, node_loss_share=p, ram_lag_s=ram_lag, disk_lag_s=disk_lag)
        def two_tier(t: float) -> float:
            first, cycle = cycle_times(t, blocking, ram_lag)
            if disk_lag > first + (s.disk_every - 1) * cycle:
                return 0.0  # the storage copies cannot keep up at this interval
            return tiered_goodput(t, blocking, restart + ram_restore, restart + storage_restore, m, **kwargs)

        if interval_s is None:
            lo = max(disk_lag / s.disk_every, step, m * 1e-5)
            grid = np.logspace(math.log10(lo), math.log10(max(m, 2 * lo)), 50)
            best = tiered_optimum(blocking, restart + ram_restore, restart + storage_restore, m, intervals_s=grid, **kwargs)
            tau = _whole_steps(best["interval_s"], step, two_tier)
        else:
            tau = interval_s
        raw = tiered_goodput(tau, blocking, restart + ram_restore, restart + storage_restore, m, **kwargs)
        restores, weights = (ram_restore, storage_restore), (1.0 - p, p)
        r = restart + (1.0 - p) * ram_restore + p * storage_restore
    breakdown = expected_breakdown(raw, tau, blocking, lag if s.strategy == "async" else 0.0, restart, restores, weights, m, stall)
    return ClusterResult(
        scenario=s,
        checkpoint=ckpt,
        blocking_s=blocking,
        durable_lag_s=lag,
        ram_restore_s=ram_restore,
        storage_restore_s=storage_restore,
        spare_share=spare_share,
        restart_mean_s=restart,
        recovery_s=r,
        node_loss_share=p,
        interval_s=tau,
        goodput=(1.0 - stall) * raw,
        breakdown=breakdown,
    )


def lab_ratio_rows(lab: dict, cluster: ClusterResult) -> list[dict]:
    """The lab's measured costs beside the cluster's, as the ratios that decide goodput.

    ``lab`` holds measured seconds: ``save_s`` (a blocking save), ``restart_s``
    (kill to training again: relaunch, start-up and restore), ``mtbf_s`` (the
    lab's failure rate). Rows ``{ratio, lab, cluster, lab_at_cluster_scale}``:
    save / MTBF, recovery / MTBF and the optimal interval / MTBF (Daly's
    model for both), and what the lab's ratio means in the cluster's units.
    """
    from .closed_forms import daly_goodput, daly_interval

    m_lab = validate.seconds("mtbf_s", lab["mtbf_s"], positive=True)
    save_lab = validate.seconds("save_s", lab["save_s"])
    r_lab = validate.seconds("restart_s", lab["restart_s"])
    m = cluster.scenario.job_mtbf_s
    tau_lab = daly_interval(save_lab, m_lab)
    rows = [
        {"ratio": "save / MTBF", "lab": save_lab / m_lab, "cluster": cluster.blocking_s / m,
         "lab_at_cluster_scale": f"a {save_lab / m_lab * m:.0f} s save"},
        {"ratio": "recovery / MTBF", "lab": r_lab / m_lab, "cluster": cluster.recovery_s / m,
         "lab_at_cluster_scale": f"a {r_lab / m_lab * m / 60:.0f}-minute recovery"},
        {"ratio": "best interval / MTBF", "lab": tau_lab / m_lab, "cluster": cluster.interval_s / m,
         "lab_at_cluster_scale": f"a checkpoint every {tau_lab / m_lab * m / 60:.1f} min"},
        {"ratio": "goodput at that interval", "lab": daly_goodput(tau_lab, save_lab, r_lab, m_lab),
         "cluster": cluster.goodput, "lab_at_cluster_scale": "the same share: only the ratios enter"},
    ]
    return rows
