"""The lab as a scale model of a cluster: the same ratios, so the same goodput.

A cluster's goodput is decided by ratios, not seconds: a save over the MTBF, a recovery over the MTBF,
the checkpoint interval over the MTBF, and the start-up over the job. A wind tunnel tests a model wing
at the full-size wing's Reynolds number; the lab runs a small model at the cluster's ratios. Matching
one ratio is not enough: a lab with a cluster's restart share but saves a hundred times cheaper shows
no checkpoint lever at all.

:class:`ClusterCosts` states a cluster by the costs that enter those ratios (:func:`llama3_cluster`:
Llama 3's failure rate with a checkpoint as slow as its storage makes it); :func:`plan_lab` chooses
the lab's MTBF, emulated checkpoint storage and rescheduling delay so that its ratios are the
cluster's. Pure: no torch, no launches (the runs: :mod:`goodputlab.experiments.scale_model`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import validate
from .checkpoint_tiers import strategy_optimum
from .cluster import LLAMA3_DURATION_S, LLAMA3_GPUS, LLAMA3_INTERRUPTIONS

#: The ratios the table shows, in order: each is lab cost / lab MTBF beside cluster cost / cluster MTBF.
SAVE, RECOVERY, INTERVAL, STARTUP = "save / MTBF", "recovery / MTBF", "interval / MTBF", "start-up / job"


@dataclass(frozen=True)
class ClusterCosts:
    """A cluster's training job, as the costs that decide its goodput (seconds, bytes). Validated.

    - ``mtbf_s``: the job's mean time between interruptions;
    - ``save_s``: a synchronous checkpoint's blocking time;
    - ``recovery_s``: from a failure to training again (detection, restart, restore);
    - ``startup_s``: the first launch to the first step; ``job_s``: the job's wall time;
    - ``checkpoint_bytes``: the checkpoint's size (to say what storage bandwidth a save means).
    """

    name: str
    mtbf_s: float
    save_s: float
    recovery_s: float
    startup_s: float
    job_s: float
    checkpoint_bytes: float = 0.0

    def __post_init__(self) -> None:
        validate.seconds("mtbf_s", self.mtbf_s, positive=True)
        validate.seconds("save_s", self.save_s)
        validate.seconds("recovery_s", self.recovery_s)
        validate.seconds("startup_s", self.startup_s)
        validate.seconds("job_s", self.job_s, positive=True)
        validate.number("checkpoint_bytes", self.checkpoint_bytes, 0, unit="bytes")

    def ratios(self) -> dict[str, float]:
        """save / MTBF, recovery / MTBF, Daly's interval / MTBF and start-up / job."""
        from .closed_forms import daly_interval

        return {
            SAVE: self.save_s / self.mtbf_s,
            RECOVERY: self.recovery_s / self.mtbf_s,
            INTERVAL: daly_interval(self.save_s, self.mtbf_s) / self.mtbf_s if self.save_s > 0 else 0.0,
            STARTUP: self.startup_s / self.job_s,
        }

    def storage_bps(self) -> float:
        """The storage bandwidth (bytes per second) that writes the checkpoint in ``save_s`` (0 if unknown)."""
        return self.checkpoint_bytes / self.save_s if self.checkpoint_bytes and self.save_s else 0.0


def llama3_cluster(save_s: float = 300.0, detect_s: float = 90.0, restart_s: float = 300.0) -> ClusterCosts:
    """Llama 3 405B's job (16,384 GPUs, 54 days, 466 interruptions) with a synchronous save of ``save_s``.

    The storage is whatever writes the 405B checkpoint in ``save_s``; a restore reads it back at the same
    bandwidth, after ``detect_s`` to notice the failure and ``restart_s`` to reschedule and initialise
    (the capstone's defaults, chapter 10). The first launch costs a restart's initialisation.
    """
    from .checkpoint_cost import LLAMA3_405B_PARAMETERS, checkpoint_cost

    validate.seconds("save_s", save_s, positive=True)
    nbytes = checkpoint_cost(LLAMA3_405B_PARAMETERS, LLAMA3_GPUS, 1e12).total_bytes
    restore_s = save_s  # the same bytes through the same storage
    return ClusterCosts(
        name=f"Llama 3 405B, a {save_s:g} s save", mtbf_s=LLAMA3_DURATION_S / LLAMA3_INTERRUPTIONS, save_s=save_s,
        recovery_s=validate.seconds("detect_s", detect_s) + validate.seconds("restart_s", restart_s) + restore_s,
        startup_s=restart_s, job_s=LLAMA3_DURATION_S, checkpoint_bytes=nbytes,
    )


@dataclass(frozen=True)
class LabPlan:
    """The lab's settings that put its runs at a cluster's ratios (seconds, bytes per second, steps).

    ``storage_bps``: the emulated checkpoint storage (a save of ``state_bytes`` takes the cluster's share of
    the MTBF); ``restart_delay_s``: the rescheduling delay added to the lab's own recovery (``recovery_floor_s``)
    so that a recovery takes the cluster's share; ``intervals_s``: each strategy's best interval at these
    costs (the strategies' ``blocking_s`` and ``durable_s``); ``steps``: enough for ``failures`` failures.
    """

    cluster: ClusterCosts
    mtbf_s: float
    state_bytes: int
    step_s: float
    storage_bps: float
    save_s: float
    recovery_s: float
    recovery_floor_s: float
    restart_delay_s: float
    failures: int
    steps: int
    intervals_s: dict[str, float] = field(default_factory=dict)
    goodputs: dict[str, float] = field(default_factory=dict)

    def ckpt_every(self, strategy: str) -> int:
        """The strategy's best interval in whole steps (at least 1)."""
        return max(1, round(self.intervals_s[strategy] / self.step_s))

    def ratios(self) -> dict[str, float]:
        """The lab's planned ratios (start-up is measured, not planned: see the measured table)."""
        return {SAVE: self.save_s / self.mtbf_s, RECOVERY: self.recovery_s / self.mtbf_s}


def plan_lab(
    cluster: ClusterCosts,
    *,
    state_bytes: int,
    step_s: float,
    snapshot_s: dict[str, float],
    mtbf_s: float = 10.0,
    recovery_floor_s: float = 0.1,
    failures: int = 20,
    memory_disk_every: int = 4,
) -> LabPlan:
    """Settings that give the lab ``cluster``'s save and recovery ratios at an MTBF of ``mtbf_s``.

    ``state_bytes``: the lab's checkpoint size; ``step_s``: its step time; ``snapshot_s``: each strategy's
    blocking part before its storage write (a sync save blocks for that plus the write, an async one for
    that only; e.g. ``{"sync": 0.02, "async": 0.02}``); ``recovery_floor_s``: the lab's own kill-to-training
    time with a hot spare. ``failures``: how many failures the planned run should see (its length).
    """
    m = validate.seconds("mtbf_s", mtbf_s, positive=True)
    validate.whole("state_bytes", state_bytes, 1, unit="bytes")
    validate.seconds("step_s", step_s, positive=True)
    validate.seconds("recovery_floor_s", recovery_floor_s)
    validate.whole("failures", failures, 1)
    if cluster.save_s <= 0:
        raise ValueError("a cluster whose saves cost nothing has no save ratio to match")
    write_s = cluster.save_s / cluster.mtbf_s * m  # the lab's storage write takes the cluster's share
    recovery_s = max(recovery_floor_s, cluster.recovery_s / cluster.mtbf_s * m)
    intervals, goodputs = {}, {}
    for strategy, snap in snapshot_s.items():
        blocking = snap + write_s if strategy == "sync" else snap
        durable = snap + write_s if strategy != "memory" else snap
        memory = {"disk_every": memory_disk_every, "disk_lag_s": write_s} if strategy == "memory" else {}
        best = strategy_optimum(strategy, blocking, durable, recovery_s, m, **memory)
        intervals[strategy], goodputs[strategy] = best["interval_s"], best["goodput"]
    slowest = min(goodputs.values())
    steps = math.ceil(failures * m * slowest / step_s)
    return LabPlan(
        cluster=cluster, mtbf_s=m, state_bytes=state_bytes, step_s=step_s, storage_bps=state_bytes / write_s,
        save_s=write_s + snapshot_s.get("sync", 0.0), recovery_s=recovery_s, recovery_floor_s=recovery_floor_s,
        restart_delay_s=max(0.0, recovery_s - recovery_floor_s), failures=failures, steps=steps,
        intervals_s=intervals, goodputs=goodputs,
    )
