"""Failure rates as papers give them: per 1,000 node-days, a per-job part and a per-device part, and their fits.

Times in **seconds** inside; rates per second unless a name says otherwise. The book's
default reading of a cluster's reliability is one number per device, the device MTBF, and a
synchronous job of ``N`` devices fails ``N`` times as often (:func:`goodputlab.theory.cluster_mtbf`).
Papers give the same thing in other units, and measured jobs do not always follow ``1/N``:

- **Per 1,000 node-days.** Kokolis et al. (HPCA 2025) count ``r_f`` failures per node per day
  over jobs of more than 128 GPUs (8 GPUs a node): 6.50 per 1,000 node-days on RSC-1, 2.34 on
  RSC-2, and project a job's MTTF as ``1 / (N_nodes r_f)``.
  :func:`device_mtbf_from_node_rate` and :func:`node_rate_from_device_mtbf` convert.
- **A per-job part and a per-device part.** :class:`FailureRate` is
  ``lambda(N) = a + b N^k``: ``a`` failures per second whatever the size (the job's own
  software, its storage, its scheduler), ``b`` per device, and an exponent ``k`` (1 for
  independent devices). The simulator takes ``a`` as ``SimConfig.job_failure_rate_per_s``.
- **Fits to measured MTTFs** (:func:`fit_two_part`, :func:`fit_power_law`). Kokolis et al.
  measured MTTFs of 47.7 days for 8-GPU jobs and 7.9 hours for 1,024-GPU jobs. Those two
  cannot both be a per-job rate plus a per-device rate: through both points the per-job rate is
  negative (the rate grows slightly *faster* than ``N``), so the constrained fit sets it to zero
  and misses the two points by 5% and 7%; a power law ``b N^k`` passes through both with
  ``k = 1.026``. And the paper's ``r_f`` model says 28.8 hours at 1,024 GPUs, 3.65 times the
  measured 7.9: the two readings do not agree, and the package does not reconcile them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .. import validate
from ..errors import ConfigError
from .units import SECONDS_PER_DAY, SECONDS_PER_HOUR

#: Kokolis et al. 2025 (section IV): failures per 1,000 node-days over jobs of more than 128 GPUs.
KOKOLIS_RSC1_PER_1000_NODE_DAYS = 6.50
KOKOLIS_RSC2_PER_1000_NODE_DAYS = 2.34
#: Their nodes: DGX A100, 8 GPUs each.
KOKOLIS_GPUS_PER_NODE = 8
#: Their measured job MTTF by size (GPUs -> seconds), RSC-1: 47.7 days at 8 GPUs, 7.9 hours at 1,024.
KOKOLIS_MEASURED_MTTF_S = {8: 47.7 * SECONDS_PER_DAY, 1024: 7.9 * SECONDS_PER_HOUR}
#: Their MTTF projected from RSC-1's r_f (GPUs -> seconds): 1.8 hours at 16,384 GPUs, 0.23 at 131,072.
KOKOLIS_PROJECTED_MTTF_S = {16_384: 1.8 * SECONDS_PER_HOUR, 131_072: 0.23 * SECONDS_PER_HOUR}

_NODE_DAYS = 1000.0 * SECONDS_PER_DAY  # seconds in 1,000 node-days, per node


def device_mtbf_from_node_rate(failures_per_1000_node_days: float, gpus_per_node: int = 8) -> float:
    """Per-device MTBF (seconds) of a rate given per 1,000 node-days: ``1000 days x gpus_per_node / r``.

    Each node's failures are spread over its ``gpus_per_node`` devices, so a job of ``N`` devices
    (``N / gpus_per_node`` nodes) fails at ``N / M_device``, as :func:`goodputlab.theory.cluster_mtbf`
    has it. 6.50 per 1,000 node-days with 8 GPUs a node is 154 days per node, 1,231 days (3.4 years)
    per GPU.
    """
    rate = validate.number("failures_per_1000_node_days", failures_per_1000_node_days, 0, low_open=True,
                           unit="failures per 1,000 node-days")
    gpus = validate.whole("gpus_per_node", gpus_per_node, 1)
    return _NODE_DAYS * gpus / rate


def node_rate_from_device_mtbf(device_mtbf_s: float, gpus_per_node: int = 8) -> float:
    """Failures per 1,000 node-days of a per-device MTBF (seconds): the inverse of :func:`device_mtbf_from_node_rate`."""
    mtbf = validate.seconds("device_mtbf_s", device_mtbf_s, positive=True)
    gpus = validate.whole("gpus_per_node", gpus_per_node, 1)
    return _NODE_DAYS * gpus / mtbf


def node_rate_from_count(failures: float, duration_s: float, devices: int, gpus_per_node: int = 8) -> float:
    """Failures per 1,000 node-days of ``failures`` counted over ``duration_s`` seconds on ``devices`` devices.

    Llama 3's 466 interruptions in 54 days on 16,384 GPUs (2,048 nodes of 8) are 4.21.
    """
    count = validate.number("failures", failures, 0)
    duration = validate.seconds("duration_s", duration_s, positive=True)
    n = validate.whole("devices", devices, 1)
    gpus = validate.whole("gpus_per_node", gpus_per_node, 1)
    node_days = n / gpus * duration / SECONDS_PER_DAY
    return 1000.0 * count / node_days


def job_mtbf_from_node_rate(devices: int, failures_per_1000_node_days: float, gpus_per_node: int = 8) -> float:
    """A job's MTBF (seconds) from a rate per 1,000 node-days: ``1 / (N_nodes r_f)``, Kokolis et al.'s projection.

    ``N_nodes = devices / gpus_per_node``. At 6.50 per 1,000 node-days: 1.80 hours at 16,384 GPUs.
    """
    n = validate.whole("devices", devices, 1)
    return device_mtbf_from_node_rate(failures_per_1000_node_days, gpus_per_node) / n


@dataclass(frozen=True)
class FailureRate:
    """A job's failure rate against its size: ``lambda(N) = per_job_per_s + per_device_per_s x N^exponent``.

    ``per_job_per_s``: failures per second that do not grow with the job (its own software, its
    storage); ``per_device_per_s``: per device; ``exponent``: 1 for devices that fail
    independently (the book's model), above 1 where a job's failures grow faster than its size.
    Validated on construction.
    """

    per_device_per_s: float
    per_job_per_s: float = 0.0
    exponent: float = 1.0

    def __post_init__(self) -> None:
        validate.number("per_device_per_s", self.per_device_per_s, 0, unit="failures per second")
        validate.number("per_job_per_s", self.per_job_per_s, 0, unit="failures per second")
        validate.number("exponent", self.exponent, 0.5, 2.0, note="1: devices that fail independently")
        if self.per_device_per_s == 0 and self.per_job_per_s == 0:
            raise ConfigError("per_device_per_s", 0, "a rate > 0 per device or per job (a job that never fails has no rate)")

    def job_rate_per_s(self, devices: int) -> float:
        """Failures per second of a job of ``devices`` devices."""
        n = validate.whole("devices", devices, 1)
        return self.per_job_per_s + self.per_device_per_s * n ** self.exponent

    def job_mtbf_s(self, devices: int) -> float:
        """Mean seconds between the failures of a job of ``devices`` devices."""
        return 1.0 / self.job_rate_per_s(devices)

    def device_mtbf_s(self, devices: int) -> float:
        """The per-device MTBF (seconds) that gives a job of ``devices`` devices the same rate (for ``SimConfig``)."""
        return devices / self.job_rate_per_s(devices)


@dataclass(frozen=True)
class RateFit:
    """A :class:`FailureRate` fitted to measured job MTBFs, and how close it comes.

    ``form``: ``"two-part"`` (``a + b N``) or ``"power"`` (``b N^k``); ``points``: the measured
    ``(devices, mtbf_s)``; ``unconstrained_per_job_per_s``: the per-job rate of the best
    two-part fit before it is held at zero or above (negative when the data want one);
    ``note``: the fit in words.
    """

    form: str
    rate: FailureRate
    points: tuple[tuple[int, float], ...]
    unconstrained_per_job_per_s: float
    note: str

    def rows(self) -> list[dict]:
        """One row per measured point: ``devices``, ``measured_h``, ``fitted_h``, ``error`` (fitted / measured - 1)."""
        return [{"devices": n, "measured_h": m / SECONDS_PER_HOUR, "fitted_h": self.rate.job_mtbf_s(n) / SECONDS_PER_HOUR,
                 "error": self.rate.job_mtbf_s(n) / m - 1.0} for n, m in self.points]

    @property
    def worst_error(self) -> float:
        """The largest relative miss over the measured points."""
        return max(abs(r["error"]) for r in self.rows())


def _points(points: Sequence[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    out = tuple((validate.whole("devices", n, 1), validate.seconds("mtbf_s", m, positive=True)) for n, m in points)
    if len({n for n, _ in out}) < 2:
        raise ConfigError("points", points, "measured MTBFs at two or more job sizes")
    return out


def fit_two_part(points: Sequence[tuple[int, float]]) -> RateFit:
    """``lambda(N) = a + b N`` fitted to measured ``(devices, mtbf_s)``, least squares on relative errors.

    Minimises ``sum ((a + b N_i) / lambda_i - 1)^2`` (exact through two points), with ``a >= 0``:
    when the best ``a`` is negative (the measured rate grows faster than ``N``), ``a`` is held at
    zero and ``b`` refitted, and the note says so.
    """
    pts = _points(points)
    lam = [1.0 / m for _, m in pts]
    # normal equations of the linear least squares in (a, b) with weights 1 / lambda_i
    u = [1.0 / x for x in lam]
    v = [n / x for (n, _), x in zip(pts, lam)]
    suu, svv, suv = sum(x * x for x in u), sum(x * x for x in v), sum(x * y for x, y in zip(u, v))
    su, sv = sum(u), sum(v)
    det = suu * svv - suv * suv
    a = (su * svv - sv * suv) / det
    b = (sv * suu - su * suv) / det
    if a >= 0 and b > 0:
        note = f"a per-job rate of {a * SECONDS_PER_DAY:.3g} a day and {b * SECONDS_PER_DAY:.3g} a day per device"
        return RateFit("two-part", FailureRate(b, a), pts, a, note)
    b0 = sv / svv
    note = (f"the best per-job rate is {a * SECONDS_PER_DAY:.3g} a day, below zero: the measured rate grows faster "
            f"than the job, so the per-job part is held at 0 and the per-device rate refitted")
    return RateFit("two-part", FailureRate(b0, 0.0), pts, a, note)


def fit_power_law(points: Sequence[tuple[int, float]]) -> RateFit:
    """``lambda(N) = b N^k`` fitted to measured ``(devices, mtbf_s)``: a line in log-log (exact through two points)."""
    pts = _points(points)
    xs = [math.log(n) for n, _ in pts]
    ys = [-math.log(m) for _, m in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    b = math.exp(my - k * mx)
    if not 0.5 <= k <= 2.0:
        raise ConfigError("points", points, f"MTBFs that fall with the job's size as N^-k, 0.5 <= k <= 2 (these give k = {k:.3g})")
    note = f"the rate grows as N^{k:.3f}: {'faster' if k > 1 else 'slower'} than independent devices (N^1)"
    return RateFit("power", FailureRate(b, 0.0, k), pts, math.nan, note)


def kokolis_fits() -> tuple[RateFit, RateFit]:
    """Both forms fitted to Kokolis et al.'s measured MTTFs at 8 and 1,024 GPUs: ``(two_part, power)``."""
    points = sorted(KOKOLIS_MEASURED_MTTF_S.items())
    return fit_two_part(points), fit_power_law(points)
