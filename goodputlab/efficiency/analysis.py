"""Statistical efficiency, measured and predicted: the arithmetic (numpy only, no torch).

Symbols, as in Pollux (Qiao et al., OSDI'21) and McCandlish et al. (2018):

- ``M``: the batch size (sequences per step); ``M0``: the base batch size, the smallest
  in a sweep, against which efficiency is measured.
- ``G``: the true gradient (its expectation over the data); ``Sigma``: the covariance of
  one sample's gradient. A batch of ``B`` samples estimates ``G`` with
  ``E|G_B|^2 = |G|^2 + tr(Sigma) / B``.
- ``B_noise = tr(Sigma) / |G|^2``: the **gradient noise scale** (McCandlish's
  ``B_simple``), in samples. Below it, a bigger batch mostly removes noise and buys
  almost proportionally fewer steps; above it, the gradient is already nearly exact and
  extra samples are wasted.
- **statistical efficiency** ``E(M) = (B_noise + M0) / (B_noise + M)``: the progress one
  sample makes at batch ``M``, relative to one sample at ``M0`` (Pollux's
  ``EFFICIENCY_t``, with its ``phi_t`` the noise scale). ``E(M0) = 1``.
- **goodput** ``= throughput(M) x E(M)``: samples per second, each counted at what it
  is worth at ``M0``. Maximising it minimises the time to reach a given loss.

The module also holds the three learning-rate rules the sweep compares, a two-parameter
model of throughput (``t(M) = alpha + beta M`` seconds per step) that gives the best
batch size in closed form, and the sweep's configuration, results and their analysis.
Everything here is pure arithmetic on numbers a run recorded, so it is unit-tested
without training anything; :mod:`goodputlab.efficiency.sweep` makes the numbers.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, check
from ..training.workload import PRESETS, MarkovSource, uniform_loss

#: Learning-rate rules: how the base learning rate (tuned at the smallest batch size) grows with the batch.
LR_RULES = ("linear", "sqrt", "adascale")

DEFAULT_BATCH_SIZES = (8, 16, 32, 64, 128, 256)
#: Held-out loss (nats per token) the sweep trains to: between the loss of a model that has
#: learnt which tokens may follow which (about 1.38 on this source) and the source's entropy
#: (about 0.99), where the noise scale of the lab's small GPT sits inside the default sweep.
DEFAULT_TARGET_LOSS = 1.33


# ---------------------------------------------------------------------------------------
# the gradient noise scale


def simple_noise_estimates(small_sq, big_sq, b_small, b_big):
    """Unbiased estimates of ``(|G|^2, tr(Sigma))`` from squared gradient norms at two batch sizes.

    ``small_sq`` is ``|G_small|^2``, the squared norm of a gradient averaged over
    ``b_small`` samples (or the mean of several such); ``big_sq`` is ``|G_big|^2`` over
    ``b_big > b_small`` samples. Since ``E|G_B|^2 = |G|^2 + tr(Sigma)/B``::

        |G|^2     = (b_big |G_big|^2 - b_small |G_small|^2) / (b_big - b_small)
        tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1/b_small - 1/b_big)

    (McCandlish et al. 2018, appendix A.1). Either can come out negative on one draw;
    average many before taking a ratio. Works element-wise on arrays.
    """
    small_sq, big_sq = np.asarray(small_sq, dtype=float), np.asarray(big_sq, dtype=float)
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small} and {b_big}")
    grad_sq = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    trace_sigma = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big)
    if grad_sq.ndim == 0:
        return float(grad_sq), float(trace_sigma)
    return grad_sq, trace_sigma


def simple_noise_scale(small_sq, big_sq, b_small, b_big) -> float:
    """``B_simple = tr(Sigma) / |G|^2`` from the *means* of many ``|G_small|^2`` and ``|G_big|^2`` draws.

    The ratio of averages, not the average of ratios: a single draw's ``|G|^2``
    estimate can be near zero or negative. Returns ``inf`` when the averaged ``|G|^2``
    is not positive (all noise, no signal).
    """
    grad_sq, trace_sigma = simple_noise_estimates(np.mean(small_sq), np.mean(big_sq), b_small, b_big)
    return _ratio(trace_sigma, grad_sq)


def _ratio(trace_sigma: float, grad_sq: float) -> float:
    if not (math.isfinite(trace_sigma) and math.isfinite(grad_sq)):
        return float("nan")
    if grad_sq <= 0:
        return float("inf")
    return max(trace_sigma, 0.0) / grad_sq


class NoiseScaleTracker:
    """The noise scale as training goes on: exponential averages of both estimates, then their ratio.

    Each :meth:`update` takes one step's squared gradient norms at two batch sizes.
    The average forgets with a time constant of ``window_samples`` samples (a step of
    ``b_big`` samples has weight ``1 - exp(-b_big / window_samples)``), so runs at
    different batch sizes average over the same amount of data. Bias-corrected like
    Adam's moments: the first estimate is not pulled towards zero.
    """

    def __init__(self, window_samples: float = 2000.0):
        if not window_samples > 0:
            raise ValueError(f"window_samples must be > 0, got {window_samples}")
        self.window_samples = float(window_samples)
        self._grad_sq = 0.0
        self._trace = 0.0
        self._weight = 0.0
        self.updates = 0

    def update(self, small_sq: float, big_sq: float, b_small: int, b_big: int) -> float:
        """Add one step's norms; returns the current noise scale."""
        grad_sq, trace = simple_noise_estimates(small_sq, big_sq, b_small, b_big)
        if not (math.isfinite(grad_sq) and math.isfinite(trace)):
            return self.noise_scale  # a non-finite gradient (divergence) says nothing about the noise
        decay = math.exp(-b_big / self.window_samples)
        self._grad_sq = decay * self._grad_sq + (1 - decay) * grad_sq
        self._trace = decay * self._trace + (1 - decay) * trace
        self._weight = decay * self._weight + (1 - decay)
        self.updates += 1
        return self.noise_scale

    @property
    def grad_sq(self) -> float:
        """Averaged estimate of ``|G|^2`` (nan before the first update)."""
        return self._grad_sq / self._weight if self._weight else float("nan")

    @property
    def trace_sigma(self) -> float:
        """Averaged estimate of ``tr(Sigma)``, per sample (nan before the first update)."""
        return self._trace / self._weight if self._weight else float("nan")

    @property
    def noise_scale(self) -> float:
        """``tr(Sigma) / |G|^2`` of the averages, in samples (inf when ``|G|^2 <= 0``, nan before any update)."""
        return _ratio(self.trace_sigma, self.grad_sq)


# ---------------------------------------------------------------------------------------
# Pollux: efficiency, gain, goodput; the learning-rate rules


def statistical_efficiency(batch_size, noise_scale: float, base_batch: float):
    """Pollux's ``E(M) = (B_noise + M0) / (B_noise + M)``: progress per sample at ``M`` relative to ``M0``.

    Equivalently, samples needed at ``M0`` divided by samples needed at ``M`` to make
    the same progress (McCandlish's ``E = E_min (1 + M / B_noise)``). An infinite
    noise scale makes every batch size equally efficient. Works on arrays.
    """
    m = np.asarray(batch_size, dtype=float)
    if math.isinf(noise_scale):
        out = np.ones_like(m)
    else:
        out = (noise_scale + base_batch) / (noise_scale + m)
    return float(out) if out.ndim == 0 else out


def adascale_gain(batch_size, noise_scale: float, base_batch: float):
    """AdaScale's gain ``r = (M/M0) E(M)``: how many ``M0``-steps of progress one ``M``-step makes.

    Between 1 (no noise: a bigger batch buys nothing) and ``M/M0`` (all noise: perfect
    linear scaling). Pollux uses it to scale the learning rate.
    """
    return np.asarray(batch_size, dtype=float) / base_batch * statistical_efficiency(batch_size, noise_scale, base_batch)


def lr_factor(rule: str, batch_size: float, base_batch: float, noise_scale: float = float("inf")) -> float:
    """How much the learning rate tuned at ``base_batch`` is multiplied by at ``batch_size``.

    - ``linear``: ``M/M0`` (Goyal et al. 2017; for SGD, right while ``M`` is below the noise scale);
    - ``sqrt``: ``sqrt(M/M0)`` (keeps the update's noise variance constant; the usual rule for Adam);
    - ``adascale``: ``sqrt(r)`` with ``r`` AdaScale's gain at the current noise scale. This is
      the Adam variant Pollux's AdaptDL uses (SGD takes ``r`` itself): ``sqrt(M/M0)`` while the
      batch is far below the noise scale, flattening towards ``sqrt(1 + B_noise/M0)`` above it.
      ``noise_scale`` is the running estimate; ``inf`` (none yet) gives the ``sqrt`` rule.
    """
    s = batch_size / base_batch
    if rule == "linear":
        return float(s)
    if rule == "sqrt":
        return math.sqrt(s)
    if rule == "adascale":
        if not math.isfinite(noise_scale) and not math.isinf(noise_scale):
            noise_scale = float("inf")
        return math.sqrt(float(adascale_gain(batch_size, noise_scale, base_batch)))
    raise ConfigError("lr_rule", rule, ", ".join(LR_RULES))


# ---------------------------------------------------------------------------------------
# throughput against batch size, and the best batch size


@dataclass(frozen=True)
class ThroughputFit:
    """Seconds per step ``t(M) = overhead_s + per_sample_s * M`` (least squares on measured steps).

    ``overhead_s`` is what a step costs whatever its size (Python, kernel launches, the
    optimizer); ``per_sample_s`` what each sample adds. Throughput ``M / t(M)`` rises
    and flattens towards ``1 / per_sample_s``, reaching half of it at
    ``knee = overhead_s / per_sample_s`` samples.
    """

    overhead_s: float
    per_sample_s: float

    def step_s(self, batch_size):
        return self.overhead_s + self.per_sample_s * np.asarray(batch_size, dtype=float)

    def samples_per_s(self, batch_size):
        return np.asarray(batch_size, dtype=float) / self.step_s(batch_size)

    @property
    def knee(self) -> float:
        """Batch size at which throughput is half its ceiling (samples)."""
        return self.overhead_s / self.per_sample_s if self.per_sample_s > 0 else float("inf")

    @property
    def ceiling_samples_per_s(self) -> float:
        return 1.0 / self.per_sample_s if self.per_sample_s > 0 else float("inf")


def fit_throughput(batch_sizes: Sequence[float], step_s: Sequence[float]) -> ThroughputFit:
    """Fit ``t(M) = alpha + beta M`` to measured seconds per step, minimising *relative* errors.

    Relative, so the small batches (milliseconds) count as much as the big ones. The
    overhead is kept non-negative (refitting through the origin if it comes out below).
    """
    m = np.asarray(batch_sizes, dtype=float)
    t = np.asarray(step_s, dtype=float)
    if m.size < 2 or m.size != t.size:
        raise ValueError("need step times of at least two batch sizes")
    w = 1.0 / t
    a = np.stack([np.ones_like(m), m], axis=1) * w[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(a, t * w, rcond=None)
    if alpha < 0:
        alpha, beta = 0.0, float(np.sum(m * t * w * w) / np.sum(m * m * w * w))
    return ThroughputFit(float(alpha), float(beta))


def optimal_batch_size(noise_scale: float, fit: ThroughputFit) -> float:
    """The batch size that maximises ``throughput x efficiency`` under the fitted throughput model.

    With ``t(M) = alpha + beta M`` and ``E(M) = (B + M0)/(B + M)``, setting the derivative
    of ``log(M / t(M)) + log E(M)`` to zero gives ``alpha B = beta M^2``::

        M* = sqrt(B_noise * alpha / beta) = sqrt(B_noise * knee)

    the geometric mean of the noise scale and the throughput's knee: the best batch is
    big enough to amortise the per-step overhead and small enough not to waste samples.
    """
    if not (noise_scale > 0 and fit.per_sample_s > 0):
        return float("nan")
    if math.isinf(noise_scale):
        return float("inf")
    return math.sqrt(noise_scale * fit.knee)


def critical_batch_fit(batch_sizes: Sequence[float], samples: Sequence[float]) -> dict[str, float] | None:
    """Fit McCandlish's ``samples(M) = E_min (1 + M / B_crit)`` to measured samples-to-target.

    The model is linear in ``M``: ``samples = E_min + S_min M``, with ``S_min`` the fewest
    *steps* any batch size can take and ``B_crit = E_min / S_min`` the batch at which a run
    takes twice the minimum samples and twice the minimum steps: the measured point where
    bigger batches stop paying. Relative least squares; ``None`` with fewer than two
    points or a fit that is not positive.
    """
    m = np.asarray(batch_sizes, dtype=float)
    e = np.asarray(samples, dtype=float)
    if m.size < 2:
        return None
    w = 1.0 / e
    a = np.stack([np.ones_like(m), m], axis=1) * w[:, None]
    (e_min, s_min), *_ = np.linalg.lstsq(a, e * w, rcond=None)
    if not (e_min > 0 and s_min > 0):
        return None
    return {"e_min": float(e_min), "s_min": float(s_min), "b_crit": float(e_min / s_min)}


# ---------------------------------------------------------------------------------------
# the sweep: configuration


@dataclass(frozen=True)
class SweepConfig:
    """One batch-size sweep. Every field is a ``goodputlab batch-sweep`` flag (``max_steps`` is ``--max-steps``).

    Each batch size trains a fresh copy of the same seeded model on the same stream of
    sequences until the held-out loss reaches ``target_loss`` or ``max_steps`` steps
    have run; throughput is timed separately on the plain training step.
    """

    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    """Sequences per step, each even (every step's gradient is taken as two halves); sorted ascending."""
    target_loss: float = DEFAULT_TARGET_LOSS
    """Held-out cross-entropy to reach, nats per token: between the source's entropy and ln(vocab)."""
    lr_rule: str = "sqrt"
    """How the learning rate grows with the batch: one of :data:`LR_RULES`."""
    lr: float = 2e-3
    """AdamW's learning rate at the smallest batch size (constant: no schedule, no warm-up)."""
    max_steps: int = 1500
    """Step budget of each batch size; one that has not reached the target by then is reported as missed."""
    model: str = "tiny"
    """Model size preset, one of :data:`goodputlab.training.workload.PRESETS` (dropout is switched off)."""
    seed: int = 0
    """Seeds the model's initialisation, the data and its order."""
    threads: int = 1
    """torch threads for the whole sweep (throughput and training)."""
    timed_steps: int = 6
    """Training steps timed per batch size and round to measure throughput."""
    warmup_steps: int = 2
    """Untimed steps before each round's timed ones."""
    rounds: int = 10
    """Rounds over all batch sizes: short and interleaved, so a busy patch of a shared machine slows all alike."""
    eval_sequences: int = 256
    """Held-out sequences the loss is measured on (the same for every batch size)."""
    eval_growth: float = 1.05
    """The held-out loss is measured at steps growing by this factor (every step for the first ones)."""
    noise_window: float = 2000.0
    """Samples over which the noise-scale estimate is averaged."""
    pool_sequences: int = 65536
    """Training sequences generated (visited in a seeded order, again after the first pass)."""

    def __post_init__(self):
        sizes = self.batch_sizes
        check(isinstance(sizes, (tuple, list)) and len(sizes) >= 2, "batch_sizes", sizes, "at least two batch sizes")
        for m in sizes:
            check(
                isinstance(m, (int, np.integer)) and not isinstance(m, bool) and m >= 2 and m % 2 == 0,
                "batch_sizes", _sizes_text(sizes), "even whole numbers >= 2 (each step splits its batch in two halves)",
            )
        check(len(set(sizes)) == len(sizes), "batch_sizes", _sizes_text(sizes), "distinct batch sizes")
        object.__setattr__(self, "batch_sizes", tuple(sorted(int(m) for m in sizes)))
        check(self.model in PRESETS, "model", self.model, ", ".join(PRESETS))
        check(_whole(self.seed) and self.seed >= 0, "seed", self.seed, "a whole number >= 0")
        check(self.lr_rule in LR_RULES, "lr_rule", self.lr_rule, ", ".join(LR_RULES))
        check(_number(self.lr) and 0 < self.lr <= 1, "lr", self.lr, "a learning rate > 0 and <= 1")
        check(_whole(self.max_steps) and self.max_steps >= 1, "max_steps", self.max_steps, "a whole number of steps >= 1")
        check(_whole(self.threads) and self.threads >= 1, "threads", self.threads, "a whole number >= 1")
        check(_whole(self.timed_steps) and self.timed_steps >= 1, "timed_steps", self.timed_steps, "a whole number >= 1")
        check(_whole(self.warmup_steps) and self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "a whole number >= 0")
        check(_whole(self.rounds) and self.rounds >= 1, "rounds", self.rounds, "a whole number >= 1")
        check(_whole(self.eval_sequences) and self.eval_sequences >= 16, "eval_sequences", self.eval_sequences, "a whole number >= 16")
        check(_number(self.eval_growth) and 1 < self.eval_growth <= 2, "eval_growth", self.eval_growth, "a factor > 1 and <= 2")
        check(_number(self.noise_window) and self.noise_window > 0, "noise_window", self.noise_window, "a number of samples > 0")
        check(
            _whole(self.pool_sequences) and self.pool_sequences >= self.batch_sizes[-1],
            "pool_sequences", self.pool_sequences, f"a whole number >= the largest batch size ({self.batch_sizes[-1]})",
        )
        low, high = self.source_entropy, uniform_loss(PRESETS[self.model].vocab)
        check(
            _number(self.target_loss) and low < self.target_loss < high,
            "target_loss", self.target_loss,
            f"a loss between the source's entropy {low:.3f} (the best any model can do) and ln(vocab) {high:.3f} nats",
        )

    @property
    def base_batch(self) -> int:
        """The smallest batch size: the learning rate is tuned there, efficiency is measured against it."""
        return self.batch_sizes[0]

    @property
    def source_entropy(self) -> float:
        """Entropy of this seed's Markov source, nats per token: the lowest reachable loss."""
        return _entropy(self.seed, PRESETS[self.model].vocab)

    def lr_at(self, batch_size: int, noise_scale: float = float("inf")) -> float:
        """Learning rate of ``batch_size`` under this sweep's rule (``noise_scale`` for ``adascale``)."""
        return self.lr * lr_factor(self.lr_rule, batch_size, self.base_batch, noise_scale)

    def replace(self, **changes: Any) -> SweepConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["batch_sizes"] = list(self.batch_sizes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepConfig:
        d = dict(d)
        d["batch_sizes"] = tuple(d["batch_sizes"])
        return cls(**d)


def _whole(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def _sizes_text(sizes) -> str:
    try:
        return ",".join(str(m) for m in sizes)
    except TypeError:
        return str(sizes)


_ENTROPY: dict[tuple[int, int], float] = {}


def _entropy(seed: int, vocab: int) -> float:
    if (seed, vocab) not in _ENTROPY:
        _ENTROPY[(seed, vocab)] = MarkovSource.make(seed, vocab).entropy_nats
    return _ENTROPY[(seed, vocab)]


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> ``(8, 16, 32)``; :class:`ConfigError` (field ``batch_sizes``) on anything else."""
    allowed = "comma-separated even whole numbers >= 2, e.g. 8,16,32,64"
    try:
        sizes = tuple(int(s) for s in str(text).split(",") if s.strip())
    except ValueError:
        raise ConfigError("batch_sizes", text, allowed) from None
    check(len(sizes) >= 2, "batch_sizes", text, "at least two " + allowed)
    check(all(m >= 2 and m % 2 == 0 for m in sizes), "batch_sizes", text, allowed)
    check(len(set(sizes)) == len(sizes), "batch_sizes", text, "distinct batch sizes")
    return sizes


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
    """The sweep as a table and the headline figures."""
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
        "efficiency: samples the smallest batch needed / samples this batch needed; predicted (B_noise + M0) / (B_noise + M)",
        "goodput: samples/s x efficiency (samples/s worth of progress at the smallest batch)",
        f"gradient noise scale at the target: {_fmt(analysis.noise_scale, '.1f')} sequences "
        f"(median of the runs' estimates)",
        f"critical batch size (samples = E_min (1 + M / B_crit) fitted): {_fmt(None if crit is None else crit['b_crit'], '.1f')}",
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
