"""A batch-size sweep's results and their analysis: steps and samples to the target loss,
measured against predicted efficiency, the best and the critical batch size, how the best
batch grows as training goes on, and the sweep's report.

Pure arithmetic on numbers a run recorded (numpy only, no torch), so it is unit-tested
without training anything; :mod:`goodputlab.efficiency.sweep` makes the numbers, and
:mod:`goodputlab.efficiency.noise` holds the formulas (noise scale, efficiency, LR rules,
throughput model) they are held against.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import check
from ..training.workload import PRESETS, uniform_loss
from .noise import (
    ThroughputFit,
    _ratio,
    critical_batch_fit,
    fit_throughput,
    optimal_batch_size,
    statistical_efficiency,
)
from .sweep_config import SweepConfig, _number

# ---------------------------------------------------------------------------------------
# the sweep: what a run records


def crossing(xs: Sequence[float], losses: Sequence[float], target: float) -> float | None:
    """Where a loss curve first reaches ``target``: linear interpolation between the two
    measurements around it; ``None`` if it never does. ``xs`` ascend (steps, samples)."""
    for i, loss in enumerate(losses):
        if loss <= target:
            if i == 0:
                return float(xs[0])
            x0, l0, x1 = xs[i - 1], losses[i - 1], xs[i]
            if not math.isfinite(l0) or l0 <= loss:
                return float(x1)
            return float(x0 + (x1 - x0) * (l0 - target) / (l0 - loss))
    return None


@dataclass
class Trajectory:
    """One batch size's training run: the held-out loss and the noise scale at each measurement.

    ``steps[i]`` is the number of steps done when ``losses[i]`` was measured (step 0:
    the initial model). ``noise_scales[i]`` is the tracker's estimate then (nan before the
    first step), ``lrs[i]`` the learning rate of the step just taken. ``stopped`` says
    why the run ended: ``target``, ``max_steps`` or ``diverged`` (a non-finite loss).
    """

    batch_size: int
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    noise_scales: list[float] = field(default_factory=list)
    grad_sq: list[float] = field(default_factory=list)
    trace_sigma: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    stopped: str = "max_steps"
    steps_run: int = 0
    wall_s: float = 0.0

    def add(self, step: int, loss: float, noise_scale: float, grad_sq: float, trace_sigma: float, lr: float) -> None:
        self.steps.append(int(step))
        self.losses.append(float(loss))
        self.noise_scales.append(float(noise_scale))
        self.grad_sq.append(float(grad_sq))
        self.trace_sigma.append(float(trace_sigma))
        self.lrs.append(float(lr))

    @property
    def samples(self) -> list[int]:
        return [s * self.batch_size for s in self.steps]

    def crossing_step(self, target: float) -> float | None:
        """Fractional step at which the held-out loss reached ``target`` (interpolated), or None."""
        return crossing(self.steps, self.losses, target)

    def steps_to_target(self, target: float) -> int | None:
        """Whole steps needed to reach ``target`` (the interpolated crossing, rounded up), or None."""
        x = self.crossing_step(target)
        return None if x is None else max(1, math.ceil(x - 1e-9))

    def value_at_step(self, values: Sequence[float], step: float) -> float:
        """``values`` (one per measurement) interpolated at ``step``, skipping measurements without one."""
        xs = np.asarray(self.steps, dtype=float)
        ys = np.asarray(values, dtype=float)
        ok = np.isfinite(ys)
        if not ok.any():
            return float("nan")
        return float(np.interp(step, xs[ok], ys[ok]))

    def noise_scale_at(self, target: float) -> float | None:
        """The noise-scale estimate when the loss reached ``target`` (None if it never did).

        The ratio of the interpolated averages of ``tr(Sigma)`` and ``|G|^2``."""
        x = self.crossing_step(target)
        if x is None:
            return None
        return _ratio(self.value_at_step(self.trace_sigma, x), self.value_at_step(self.grad_sq, x))

    def to_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trajectory:
        d = dict(d)
        for k in ("losses", "noise_scales", "grad_sq", "trace_sigma", "lrs"):
            d[k] = [float("nan") if v is None else float(v) for v in d.get(k, [])]
        return cls(**d)


@dataclass
class Throughput:
    """Measured seconds per plain training step, per batch size (every timed step kept)."""

    times_s: dict[int, list[float]]

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(self.times_s)

    def step_s(self, batch_size: int) -> float:
        """Median seconds per step at ``batch_size``."""
        return float(np.median(self.times_s[batch_size]))

    def samples_per_s(self, batch_size: int) -> float:
        return batch_size / self.step_s(batch_size)

    def fit(self) -> ThroughputFit:
        sizes = self.batch_sizes
        return fit_throughput(sizes, [self.step_s(m) for m in sizes])

    def to_dict(self) -> dict[str, Any]:
        return {"times_s": {str(m): list(map(float, t)) for m, t in self.times_s.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Throughput:
        return cls({int(m): list(t) for m, t in d["times_s"].items()})


@dataclass
class SweepResult:
    """Everything a sweep measured; :meth:`analyse` turns it into the figures for any target loss at or above the sweep's."""

    config: SweepConfig
    throughput: Throughput
    trajectories: dict[int, Trajectory]
    machine: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def analyse(self, target_loss: float | None = None) -> SweepAnalysis:
        """Rows, noise scale and best batch sizes at ``target_loss`` (default: the sweep's target).

        The runs stopped at the sweep's target, so a lower target cannot be analysed.
        """
        target = self.config.target_loss if target_loss is None else float(target_loss)
        check(
            _number(target) and self.config.target_loss - 1e-12 <= target < uniform_loss(PRESETS[self.config.model].vocab),
            "target_loss", target_loss,
            f"at least the sweep's target {self.config.target_loss:g} (the runs stopped there) and below ln(vocab)",
        )
        return analyse(self.config, self.throughput, self.trajectories, target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "throughput": self.throughput.to_dict(),
            "trajectories": {str(m): t.to_dict() for m, t in self.trajectories.items()},
            "machine": dict(self.machine),
            "wall_s": self.wall_s,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepResult:
        return cls(
            config=SweepConfig.from_dict(d["config"]),
            throughput=Throughput.from_dict(d["throughput"]),
            trajectories={int(m): Trajectory.from_dict(t) for m, t in d["trajectories"].items()},
            machine=dict(d.get("machine", {})),
            wall_s=float(d.get("wall_s", 0.0)),
        )


# ---------------------------------------------------------------------------------------
# the sweep: analysis


@dataclass
class SweepAnalysis:
    """The figures of a sweep at one target loss.

    ``rows``: one per batch size (see :func:`analyse`). ``reference_batch_size``: the
    smallest batch size that reached the target, against which efficiency is measured
    (the smallest swept, unless it missed). ``noise_scale``: the median over the runs
    that reached the target of their estimate at that moment. ``best_batch_size``: the
    measured maximum of goodput (the shortest time to the target);
    ``predicted_best_batch_size``: the maximum of measured throughput x efficiency from the
    noise scale over the swept sizes; ``optimal_batch_size``: the closed form
    ``sqrt(B_noise * knee)`` of the fitted throughput model (any size, not only swept
    ones). ``critical_batch``: McCandlish's fit ``E_min, S_min, B_crit`` to the measured
    samples.
    """

    target_loss: float
    lr_rule: str
    rows: list[dict[str, Any]]
    reference_batch_size: int | None
    noise_scale: float | None
    best_batch_size: int | None
    predicted_best_batch_size: int | None
    optimal_batch_size: float | None
    critical_batch: dict[str, float] | None
    throughput_fit: ThroughputFit

    @property
    def missed(self) -> list[int]:
        """Batch sizes that did not reach the target."""
        return [r["batch_size"] for r in self.rows if not r["reached"]]

    def row(self, batch_size: int) -> dict[str, Any]:
        return next(r for r in self.rows if r["batch_size"] == batch_size)

    def column(self, key: str) -> list[Any]:
        return [r[key] for r in self.rows]

    def to_json(self) -> dict[str, Any]:
        """The object ``goodputlab batch-sweep --json`` prints (nulls for batch sizes that missed)."""
        fit = self.throughput_fit
        return _jsonable(
            {
                "target_loss": self.target_loss,
                "lr_rule": self.lr_rule,
                "reference_batch_size": self.reference_batch_size,
                "rows": self.rows,
                "noise_scale": self.noise_scale,
                "best_batch_size": self.best_batch_size,
                "predicted_best_batch_size": self.predicted_best_batch_size,
                "optimal_batch_size": self.optimal_batch_size,
                "critical_batch_size": None if self.critical_batch is None else self.critical_batch["b_crit"],
                "critical_batch": self.critical_batch,
                "throughput_fit": {"overhead_s": fit.overhead_s, "per_sample_s": fit.per_sample_s, "knee": fit.knee},
                "missed": self.missed,
            }
        )


def _lr_at(t: Trajectory, config: SweepConfig, m: int, steps: int | None) -> float:
    """The learning rate of the run at the target (at its end if it missed); it changes only under ``adascale``."""
    if len(t.lrs) < 2:
        return config.lr_at(m)
    return t.value_at_step(t.lrs, steps if steps is not None else t.steps[-1])


def analyse(config: SweepConfig, throughput: Throughput, trajectories: Mapping[int, Trajectory], target: float) -> SweepAnalysis:
    """The figures of a sweep at ``target``.

    Each row: ``batch_size``, ``lr`` (at the target: only ``adascale`` changes it during a run), ``samples_per_s`` (measured),
    ``reached``, ``stopped``, ``steps_to_target``, ``samples_to_target``,
    ``time_to_target_s`` (samples over throughput), ``statistical_efficiency`` (samples
    the reference batch needed over samples this one needed), ``goodput``
    (``samples_per_s x statistical_efficiency``), ``noise_scale_at_target`` (this run's
    estimate), and the noise scale's predictions ``predicted_efficiency`` and
    ``predicted_goodput``. Rows of batch sizes that missed the target carry ``None`` for
    every measured-to-target figure and are left out of the best batch size.
    """
    sizes = list(config.batch_sizes)
    fit = throughput.fit()
    steps = {m: trajectories[m].steps_to_target(target) for m in sizes}
    reached = [m for m in sizes if steps[m] is not None]
    reference = reached[0] if reached else None
    at_target = [trajectories[m].noise_scale_at(target) for m in reached]
    finite = [b for b in at_target if b is not None and math.isfinite(b)]
    noise = float(np.median(finite)) if finite else (float("inf") if at_target else None)
    rows = []
    for m in sizes:
        t = trajectories[m]
        sps = throughput.samples_per_s(m)
        s = steps[m]
        samples = None if s is None else s * m
        eff = None if s is None else (steps[reference] * reference) / samples
        pred_eff = None if noise is None or reference is None else float(statistical_efficiency(m, noise, reference))
        rows.append(
            {
                "batch_size": m,
                "lr": _lr_at(t, config, m, s),
                "samples_per_s": sps,
                "reached": s is not None,
                "stopped": t.stopped,
                "steps_to_target": s,
                "samples_to_target": samples,
                "time_to_target_s": None if samples is None else samples / sps,
                "statistical_efficiency": eff,
                "goodput": None if eff is None else sps * eff,
                "noise_scale_at_target": t.noise_scale_at(target),
                "predicted_efficiency": pred_eff,
                "predicted_goodput": None if pred_eff is None else sps * pred_eff,
            }
        )
    best = max((r for r in rows if r["reached"]), key=lambda r: r["goodput"], default=None)
    predicted = max((r for r in rows if r["predicted_goodput"] is not None), key=lambda r: r["predicted_goodput"], default=None)
    crit = critical_batch_fit(reached, [steps[m] * m for m in reached]) if len(reached) >= 2 else None
    return SweepAnalysis(
        target_loss=target,
        lr_rule=config.lr_rule,
        rows=rows,
        reference_batch_size=reference,
        noise_scale=noise,
        best_batch_size=None if best is None else best["batch_size"],
        predicted_best_batch_size=None if predicted is None else predicted["batch_size"],
        optimal_batch_size=None if noise is None else optimal_batch_size(noise, fit),
        critical_batch=crit,
        throughput_fit=fit,
    )


# ---------------------------------------------------------------------------------------
# adaptivity: the best batch size as training goes on


def adaptive_batch_sizes(result: SweepResult, losses: Iterable[float]) -> list[dict[str, Any]]:
    """How the best batch size changes as the loss falls (Pollux re-decides it as a job trains).

    For each loss level, in falling order: the noise scale when the runs passed it (median
    over the runs that did), the batch size the noise scale predicts (``predicted``: best
    of the swept sizes under measured throughput; ``optimal``: the closed form), and the
    one measured for the stretch of training from the previous level to this one
    (``measured``: the swept size that covered that stretch in the least time, from the
    runs' own loss curves and throughputs; the first stretch starts at step 0).
    """
    cfg = result.config
    fit = result.throughput.fit()
    sps = {m: result.throughput.samples_per_s(m) for m in cfg.batch_sizes}
    out = []
    previous: dict[int, float] = {m: 0.0 for m in cfg.batch_sizes}
    for level in sorted(set(float(x) for x in losses), reverse=True):
        check(level >= cfg.target_loss - 1e-12, "target_loss", level, f"levels at or above the sweep's target {cfg.target_loss:g}")
        noises, now = [], {}
        for m, t in result.trajectories.items():
            x = t.crossing_step(level)
            if x is None:
                continue
            now[m] = x * m  # samples
            b = t.noise_scale_at(level)
            if b is not None and math.isfinite(b):
                noises.append(b)
        noise = float(np.median(noises)) if noises else None
        predicted = None
        if noise is not None:
            predicted = max(cfg.batch_sizes, key=lambda m: sps[m] * float(statistical_efficiency(m, noise, cfg.base_batch)))
        stretch = {m: (now[m] - previous[m]) / sps[m] for m in now if m in previous}
        measured = min(stretch, key=stretch.get) if stretch else None
        out.append(
            {
                "loss": level,
                "noise_scale": noise,
                "predicted": predicted,
                "optimal": None if noise is None else optimal_batch_size(noise, fit),
                "measured": measured,
                "stretch_s": stretch,
            }
        )
        previous = now
    return out


def _fmt(x, spec: str, none: str = "-") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def report(result: SweepResult, analysis: SweepAnalysis) -> str:
    """The sweep as a table and the headline figures, in notation.md's symbols (``B``, ``B_0``, ``B_noise``)."""
    cfg, m = result.config, result.machine
    lines = [
        f"batch-size sweep: {cfg.model} model, lr rule {cfg.lr_rule} (lr {cfg.lr:g} at batch {cfg.base_batch}), "
        f"target held-out loss {analysis.target_loss:g} nats (source entropy {cfg.source_entropy:.3f}), "
        f"{m.get('threads', cfg.threads)} torch thread(s), torch {m.get('torch', '?')}, {result.wall_s:.0f} s",
        "",
        f"{'batch':>6}{'lr':>9}{'samples/s':>11}{'steps':>8}{'samples':>9}{'efficiency':>12}{'predicted':>11}"
        f"{'goodput':>9}{'predicted':>11}{'B_noise':>9}",
    ]
    for r in analysis.rows:
        missed = "" if r["reached"] else f"  missed ({r['stopped'].replace('_', ' ')})"
        lines.append(
            f"{r['batch_size']:>6}{r['lr']:>9.2g}{r['samples_per_s']:>11.0f}{_fmt(r['steps_to_target'], 'd'):>8}"
            f"{_fmt(r['samples_to_target'], 'd'):>9}{_fmt(r['statistical_efficiency'], '.3f'):>12}"
            f"{_fmt(r['predicted_efficiency'], '.3f'):>11}{_fmt(r['goodput'], '.0f'):>9}"
            f"{_fmt(r['predicted_goodput'], '.0f'):>11}{_fmt(r['noise_scale_at_target'], '.0f'):>9}{missed}"
        )
    crit = analysis.critical_batch
    fit = analysis.throughput_fit
    lines += [
        "",
        "efficiency: samples the smallest batch needed / samples this batch needed; predicted (B_noise + B_0) / (B_noise + B)",
        "goodput: samples/s x efficiency (samples/s worth of progress at the smallest batch)",
        f"gradient noise scale at the target: {_fmt(analysis.noise_scale, '.1f')} sequences "
        f"(median of the runs' estimates)",
        f"critical batch size (samples = E_min (1 + B / B_crit) fitted): {_fmt(None if crit is None else crit['b_crit'], '.1f')}",
        f"throughput model: {1000 * fit.overhead_s:.2f} ms + {1000 * fit.per_sample_s:.3f} ms per sequence; knee "
        f"{_fmt(fit.knee, '.1f')} sequences",
        f"best batch size: measured {_fmt(analysis.best_batch_size, 'd')}, predicted {_fmt(analysis.predicted_best_batch_size, 'd')} "
        f"(closed form sqrt(B_noise x knee) = {_fmt(analysis.optimal_batch_size, '.1f')})",
    ]
    if analysis.missed:
        lines.append(f"missed the target within {cfg.max_steps} steps: {', '.join(map(str, analysis.missed))}")
    return "\n".join(lines)


def _jsonable(x):
    """Plain JSON types: numpy scalars to Python, nan and inf to None, tuples to lists."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    return x
