"""What the simulator gives: :class:`SimResult`, per-trial arrays and their summaries.

The simulated job is :class:`goodputlab.theory.sim_config.SimConfig`; the simulation
:func:`goodputlab.theory.simulator.simulate`. Times in seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..categories import CATEGORIES, CHECKPOINT_RESTORE, DEGRADED, LOST_WORK, RESTART, STARTUP

if TYPE_CHECKING:
    from .sim_config import SimConfig


@dataclass
class SimResult:
    """Outcome of :func:`simulate`: per-trial arrays and their summaries.

    ``goodput``: productive seconds / ``duration_s`` per trial. ``interruptions``:
    failures per trial (failure events: one that took a whole domain counts
    once). ``buckets_per_trial``: seconds per ledger category
    per trial (each trial's buckets sum to ``duration_s``). ``cause_counts``:
    failures per cause per trial (empty without a cause table).
    ``job_restarts``: per trial, the failures that stopped the whole job (every
    failure with ``recovery="restart"``; with in-job recovery the ones that
    left fewer than ``min_groups`` groups, or struck while the job restarted).
    ``devices_lost``: per trial, devices the failures took (more than the
    failures with failure domains). ``queue_s``: per trial, the seconds spent
    waiting to be scheduled again (part of ``restart``). ``ettr``: per trial,
    Meta's effective training time ratio: the wall time less the lost work, the
    restarts (the queue with them), the restores, the start-up and the missing
    groups' relaunches (``degraded``), over the wall time; saves count as training.
    """

    config: SimConfig
    goodput: np.ndarray
    interruptions: np.ndarray
    buckets_per_trial: dict[str, np.ndarray]
    cause_counts: dict[str, np.ndarray] = field(default_factory=dict)
    job_restarts: np.ndarray | None = None
    devices_lost: np.ndarray | None = None
    queue_s: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.job_restarts is None:  # the restart model: every failure restarts the job
            self.job_restarts = self.interruptions
        if self.devices_lost is None:  # one device per failure
            self.devices_lost = self.interruptions
        if self.queue_s is None:
            self.queue_s = np.zeros_like(self.goodput)

    @property
    def ettr(self) -> np.ndarray:
        """Per trial, the effective training time ratio (a share; at least the goodput)."""
        b = self.buckets_per_trial
        unproductive = b[LOST_WORK] + b[RESTART] + b[CHECKPOINT_RESTORE] + b[STARTUP] + b[DEGRADED]
        return 1.0 - unproductive / self.config.duration_s

    @property
    def ettr_mean(self) -> float:
        """Mean effective training time ratio over trials (a share)."""
        return float(np.mean(self.ettr))

    @property
    def queue_s_mean(self) -> float:
        """Mean seconds per trial spent waiting to be scheduled again after failures."""
        return float(np.mean(self.queue_s))

    @property
    def goodput_mean(self) -> float:
        """Mean goodput over trials (a share)."""
        return float(np.mean(self.goodput))

    @property
    def goodput_stderr(self) -> float:
        """Standard error of :attr:`goodput_mean` (sample std / sqrt(trials))."""
        if len(self.goodput) < 2:
            return math.nan
        return float(np.std(self.goodput, ddof=1) / math.sqrt(len(self.goodput)))

    @property
    def goodput_p5(self) -> float:
        """5th percentile of goodput over trials (a bad run)."""
        return float(np.percentile(self.goodput, 5))

    @property
    def goodput_p95(self) -> float:
        """95th percentile of goodput over trials (a lucky run)."""
        return float(np.percentile(self.goodput, 95))

    @property
    def interruptions_mean(self) -> float:
        """Mean number of failures per trial."""
        return float(np.mean(self.interruptions))

    @property
    def job_restarts_mean(self) -> float:
        """Mean number of whole-job restarts per trial."""
        return float(np.mean(self.job_restarts))

    @property
    def devices_lost_mean(self) -> float:
        """Mean number of devices lost per trial."""
        return float(np.mean(self.devices_lost))

    @property
    def buckets(self) -> dict[str, float]:
        """Mean seconds per ledger category, in ``CATEGORIES`` order; sums to ``duration_s``."""
        return {c: float(np.mean(self.buckets_per_trial[c])) for c in CATEGORIES}

    @property
    def causes_mean(self) -> dict[str, float]:
        """Mean failures per trial for each cause in the table (empty without one)."""
        return {cause: float(np.mean(counts)) for cause, counts in self.cause_counts.items()}

    def breakdown_rows(self, run: str = "simulated") -> list[dict]:
        """Tidy rows for a chart: one per category with ``run``, ``category``,
        ``seconds``, ``hours`` and ``share`` (of the wall time)."""
        duration = self.config.duration_s
        return [
            {"run": run, "category": c, "seconds": s, "hours": s / 3600.0, "share": s / duration}
            for c, s in self.buckets.items()
        ]

    def cause_rows(self) -> list[dict]:
        """Tidy rows for a chart: one per cause with ``cause``, ``failures_mean`` and ``share``."""
        means = self.causes_mean
        total = sum(means.values())
        return [
            {"cause": cause, "failures_mean": m, "share": (m / total if total else 0.0)}
            for cause, m in means.items()
        ]

    def to_dict(self) -> dict:
        """Summary as plain Python: ``config`` (the simulated job, :meth:`SimConfig.to_dict`),
        ``goodput_mean, goodput_stderr, goodput_p5, goodput_p95, ettr_mean, interruptions_mean,
        job_restarts_mean, devices_lost_mean, queue_s_mean, buckets`` (mean seconds per category)."""
        return {
            "config": self.config.to_dict(),
            "goodput_mean": self.goodput_mean,
            "goodput_stderr": None if math.isnan(self.goodput_stderr) else self.goodput_stderr,
            "goodput_p5": self.goodput_p5,
            "goodput_p95": self.goodput_p95,
            "ettr_mean": self.ettr_mean,
            "interruptions_mean": self.interruptions_mean,
            "job_restarts_mean": self.job_restarts_mean,
            "devices_lost_mean": self.devices_lost_mean,
            "queue_s_mean": self.queue_s_mean,
            "buckets": self.buckets,
        }

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)
