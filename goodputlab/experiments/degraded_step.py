"""What a degraded step of in-job recovery is worth, measured (chapter 11): the lab's model trained at the full
batch and at the batch the surviving replica groups hold, at one fixed learning rate, as torchft runs it.

While ``k`` of ``G`` replica groups are away, torchft averages the gradients of the groups that took part and
keeps the learning rate: each step has ``(G - k) / G`` of the global batch at the full batch's learning rate.
:func:`measure` trains fresh copies of the lab's seeded model (chapter 8's experiment:
:func:`goodputlab.efficiency.sweep.train_to_target`, the same data stream, dropout off, one thread) at both batch
sizes with the same learning rate until the held-out loss reaches a target, and reads a degraded step's worth as
the ratio of the steps each needed (``S(B0) / S(B)``, full steps per degraded step).

Beside it, McCandlish et al.'s model predicts the same ratio from the noise scale the full batch's run measured
on its way: a degraded step taken when the noise scale is ``B_noise`` makes ``r(B_noise)`` full steps
(:func:`goodputlab.theory.in_job_costs.degraded_step_progress`), so the smaller batch needs
``sum 1 / r(B_noise(s))`` steps over the full batch's steps ``s`` and the predicted worth is ``S(B0)`` over that
sum (:func:`predicted_worth`), at a fixed learning rate (torchft) or retuned for each batch (AdaScale's form).
Over several seeds (model, data, order) the measured mean has a standard error.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from ..theory.in_job_costs import degraded_step_progress

LEARNING_RATES = ("fixed", "retuned")


def predicted_worth(steps: Sequence[int], noise_scales: Sequence[float], batch: float, full_batch: float,
                    learning_rate: str = "fixed") -> float:
    """The full steps a degraded step is worth over a run, McCandlish et al.'s model along the noise scale.

    ``steps`` and ``noise_scales``: the full batch's measurements (steps done, the noise scale then, in
    sequences; nan before the first estimate counts as no noise: every step worth one). Each full step ``s``
    would take ``1 / r(B_noise(s))`` steps of ``batch`` (``r`` from
    :func:`~goodputlab.theory.in_job_costs.degraded_step_progress`, the noise scale held from one measurement
    to the next); the worth is the steps over their sum. 0 when some ``r`` is 0 or less (the smaller batch
    would make no progress there).
    """
    total, degraded = 0.0, 0.0
    for i in range(1, len(steps)):
        span = steps[i] - steps[i - 1]
        noise = noise_scales[i]
        noise = 0.0 if noise is None or not math.isfinite(noise) or noise < 0 else noise
        r = degraded_step_progress(batch, full_batch, noise, learning_rate)
        if r <= 0:
            return 0.0
        total += span
        degraded += span / r
    return total / degraded if degraded > 0 else math.nan


@dataclass(frozen=True)
class DegradedStepRun:
    """One seed: the steps the full batch (``full_steps``) and the smaller one (``degraded_steps``) needed to reach
    the target loss (None: not within the budget), the full batch's noise scale there (sequences), and the worth
    McCandlish et al.'s model predicts along the full batch's run (``predicted``: per learning-rate rule)."""

    seed: int
    full_steps: int | None
    degraded_steps: int | None
    noise_scale: float | None
    predicted: dict

    @property
    def worth(self) -> float | None:
        """Full steps one degraded step is worth: ``full_steps / degraded_steps`` (None when either missed)."""
        if not self.full_steps or not self.degraded_steps:
            return None
        return self.full_steps / self.degraded_steps


def _mean_stderr(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) >= 2 else math.nan)


@dataclass(frozen=True)
class DegradedStepWorth:
    """:func:`measure`'s result: the batches (sequences), the learning rate, the target loss (nats per token)
    and one :class:`DegradedStepRun` per seed."""

    full_batch: int
    batch: int
    lr: float
    target_loss: float
    runs: tuple[DegradedStepRun, ...]

    @property
    def worth(self) -> float:
        """The mean over the seeds of a degraded step's measured worth in full steps (nan if no seed reached the target)."""
        return _mean_stderr([r.worth for r in self.runs if r.worth is not None])[0]

    @property
    def worth_stderr(self) -> float:
        """The standard error of :attr:`worth` over the seeds (nan with fewer than two)."""
        return _mean_stderr([r.worth for r in self.runs if r.worth is not None])[1]

    def predicted(self, learning_rate: str = "fixed") -> float:
        """The mean over the seeds of McCandlish et al.'s worth: ``"fixed"`` (torchft) or ``"retuned"`` (AdaScale's)."""
        return _mean_stderr([r.predicted[learning_rate] for r in self.runs if r.worth is not None])[0]

    @property
    def noise_scale(self) -> float:
        """The full batch's noise scale at the target, the mean over the seeds (sequences)."""
        found = [r.noise_scale for r in self.runs if r.noise_scale is not None and math.isfinite(r.noise_scale)]
        return statistics.fmean(found) if found else math.nan

    def to_dict(self) -> dict:
        """JSON-ready: the settings, each seed's figures, and the means."""
        return {"full_batch": self.full_batch, "batch": self.batch, "lr": self.lr, "target_loss": self.target_loss,
                "runs": [{"seed": r.seed, "full_steps": r.full_steps, "degraded_steps": r.degraded_steps,
                          "noise_scale": r.noise_scale, "predicted": dict(r.predicted)} for r in self.runs]}

    @classmethod
    def from_dict(cls, d: dict) -> "DegradedStepWorth":
        runs = tuple(DegradedStepRun(r["seed"], r["full_steps"], r["degraded_steps"], r["noise_scale"], dict(r["predicted"]))
                     for r in d["runs"])
        return cls(d["full_batch"], d["batch"], d["lr"], d["target_loss"], runs)


def measure(full_batch: int = 16, survivors: int = 1, groups: int = 2, *, model: str = "tiny", lr: float | None = None,
            target_loss: float | None = None, max_steps: int = 3000, seeds: Sequence[int] = (0, 1, 2),
            threads: int = 1) -> DegradedStepWorth:
    """Train the lab's ``model`` at ``full_batch`` and at ``survivors / groups`` of it (sequences, each even), both at
    the learning rate ``lr`` (None: the model preset's peak rate, which the lab's runs use), until the held-out loss
    reaches ``target_loss`` (None: chapter 8's) or ``max_steps`` steps; once per seed, on ``threads`` torch threads.
    """
    from ..efficiency.sweep import Lab, torch_threads, train_to_target
    from ..efficiency.sweep_config import DEFAULT_TARGET_LOSS, SweepConfig
    from ..training.workload import PRESETS

    batch = full_batch * survivors // groups
    if not (0 < survivors < groups) or batch * groups != full_batch * survivors:
        raise ValueError(f"survivors: {survivors} of {groups} groups must be fewer than the groups and split the batch "
                         f"of {full_batch} sequences evenly")
    rate = PRESETS[model].lr if lr is None else lr
    target = DEFAULT_TARGET_LOSS if target_loss is None else target_loss
    runs = []
    with torch_threads(threads):
        for seed in seeds:
            config = SweepConfig(batch_sizes=(batch, full_batch), target_loss=target, lr=rate, max_steps=max_steps,
                                 model=model, seed=seed, threads=threads)
            lab = Lab(config)
            full = train_to_target(lab, full_batch, lr=rate)
            degraded = train_to_target(lab, batch, lr=rate)
            reached = full.crossing_step(target)
            upto = [i for i, s in enumerate(full.steps) if reached is None or s <= math.ceil(reached)]
            steps, noise = [full.steps[i] for i in upto], [full.noise_scales[i] for i in upto]
            predicted = {rule: predicted_worth(steps, noise, batch, full_batch, rule) for rule in LEARNING_RATES}
            runs.append(DegradedStepRun(seed, full.steps_to_target(target), degraded.steps_to_target(target),
                                        full.noise_scale_at(target), predicted))
    return DegradedStepWorth(full_batch, batch, rate, target, tuple(runs))
