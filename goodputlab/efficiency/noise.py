"""The gradient noise scale, statistical efficiency, the learning-rate rules, throughput against batch size.

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

The module also holds the three learning-rate rules the sweep compares and a two-parameter
model of throughput (``t(M) = alpha + beta M`` seconds per step) that gives the best
batch size in closed form. Pure arithmetic (numpy only), unit-tested without training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import ConfigError

#: Learning-rate rules: how the base learning rate (tuned at the smallest batch size) grows with the batch.
LR_RULES = ("linear", "sqrt", "adascale")


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
