"""Claims about goodput, inverted: what must be true of a cluster for "lever X took us from B to A on N GPUs".

A claim such as "RAM-tier checkpoints took our goodput from 85% to 95% on 8,192 GPUs" has two
numbers, so it pins two unknowns of the capstone's model (:mod:`goodputlab.theory.capstone`,
chapter 10): the job's failure rate, and the one setting the lever changed. :func:`explain` finds
them and holds each against the published range it should fall in (:data:`RANGES`, each with its
source in ``book/references.md``); a claim that needs a value far outside is called implausible,
with the reason.

The model is the capstone's for synchronous and asynchronous saves, Poisson failures and a
continuous interval (:func:`goodput`: the renewal-reward closed form of
:func:`goodputlab.theory.renewal.periodic_goodput`). Every function here is arithmetic on numbers
or a bisection of a monotone function, so the same formulas can run anywhere (a web page's
expression language included):

- :func:`goodput` ``(tau, delta, L, R, M)``: closed form;
- :func:`best_interval` ``(delta, L, M)``: the root of ``M (1 - exp(-(tau + delta)/M)) = tau`` (bisection),
  at least ``L``; the restart ``R`` does not move it;
- :func:`solve_mtbf`: the job MTBF at which the best goodput is a target (bisection; it rises with M);
- :func:`solve_recovery`: the recovery that gives a target, ``R = M ln(G(R=0) / target)`` (closed form);
- :func:`solve_intervals`: the two intervals, shorter and longer than the best, that give a target.

What each lever pins (the *after* state fixes the failure rate where it can; the *before* state the
setting the lever changed; the rest are :class:`ClaimCluster`'s defaults, the book's):

==========  ==================================  =====================================================
lever       before -> after                     solved for
==========  ==================================  =====================================================
async       sync saves -> asynchronous saves    storage bandwidth and MTBF together (nested bisection)
memory      sync saves -> a RAM copy on a peer  MTBF from the after state, then the storage bandwidth
hot-spare   cold restarts -> a spare swapped in MTBF from the after state, then the cold restart
interval    some interval -> the best one       MTBF from the after state, then the interval before
detection   a 10-minute watchdog -> faster      MTBF from the before state, then the detection after
restart     a 5-minute restart -> faster        MTBF from the before state, then the restart after
==========  ==================================  =====================================================

Times in seconds, bandwidths in bytes per second inside; the report's keys carry their units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from .. import validate
from ..errors import ConfigError
from .checkpoint_cost import H200_HOST_COPY_BPS, LLAMA3_STORAGE_PEAK_BPS, LLAMA3_STORAGE_SUSTAINED_BPS, checkpoint_cost
from .cluster import LLAMA3_DURATION_S, LLAMA3_GPUS
from .recovery_at_scale import NCCL_DEFAULT_TIMEOUT_S

LEVERS = ("async", "memory", "hot-spare", "interval", "detection", "restart")
HOUR = 3600.0
YEAR_H = 365.0 * 24.0
#: A published span is widened by this factor each way before a value is called implausible.
TOLERANCE = 3.0
#: Each lever in words (the panel's list, the website's).
WHAT = {"async": "asynchronous saves", "memory": "a RAM copy on a peer", "hot-spare": "hot spares",
        "interval": "the best interval", "detection": "faster detection", "restart": "faster restarts"}
#: How each implied value reads in a table (chapter 10's panel, the website's page): (label, unit).
LABELS = {
    "device_mtbf_h": ("device MTBF", "h per GPU"), "job_mtbf_h": ("job MTBF", "h"),
    "storage_gbps": ("storage bandwidth", "GB/s in all"), "storage_per_gpu_mbps": ("per GPU", "MB/s"),
    "save_s": ("a synchronous save", "s"), "restart_s": ("cold restart before the spares", "s"),
    "restart_after_s": ("restart after", "s"), "detect_after_s": ("detection after", "s"),
    "interval_before_min": ("best interval before", "min"), "interval_after_min": ("best interval after", "min"),
    "interval_before_long_min": ("interval before (too rare)", "min"),
    "interval_before_short_min": ("interval before (too often)", "min"),
}


# --- the model: closed forms and bisections ------------------------------------------------------


def goodput(interval_s: float, blocking_s: float, lag_s: float, recovery_s: float, mtbf_s: float) -> float:
    """Expected goodput of periodic checkpointing under Poisson failures (the renewal closed form).

    ``tau e^{-(R + c1 + L)/M} / (M (1 - e^{-c/M}))`` with ``c1 = tau + delta`` and
    ``c = c1 + max(0, L - tau)`` (a save waits for the previous persist): exactly
    :func:`~goodputlab.theory.renewal.periodic_goodput` with ``shape=1``.
    """
    first = interval_s + blocking_s
    cycle = first + max(0.0, lag_s - interval_s)
    exponent = (recovery_s + first + lag_s) / mtbf_s
    if exponent > 700:
        return 0.0
    return interval_s * math.exp(-exponent) / (mtbf_s * -math.expm1(-cycle / mtbf_s))


def _bisect(f: Callable[[float], float], lo: float, hi: float, *, log: bool = True, steps: int = 200) -> float:
    """The root of ``f`` between ``lo`` and ``hi`` (``f(lo)`` and ``f(hi)`` of opposite signs), by halving."""
    f_lo = f(lo)
    for _ in range(steps):
        mid = math.sqrt(lo * hi) if log else 0.5 * (lo + hi)
        f_mid = f(mid)
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def best_interval(blocking_s: float, lag_s: float, mtbf_s: float, floor_s: float = 0.0) -> float:
    """The interval (seconds) that maximises :func:`goodput`: the root of ``M (1 - e^{-(tau+delta)/M}) = tau``
    (setting the derivative of the log goodput to zero), and no shorter than the lag ``L`` (below it a
    save waits for the previous one, and a longer interval costs nothing) nor than ``floor_s`` (a
    constraint: a RAM tier's storage copy must keep up). ``R`` does not enter."""
    if blocking_s <= 0:
        root = mtbf_s * 1e-9
    else:
        root = _bisect(lambda t: mtbf_s * -math.expm1(-(t + blocking_s) / mtbf_s) - t, mtbf_s * 1e-12, mtbf_s, log=True)
    candidates = [root, min(lag_s, mtbf_s)] + ([lag_s] if lag_s > mtbf_s else [])
    best = max(candidates, key=lambda t: goodput(t, blocking_s, lag_s, 0.0, mtbf_s))
    return max(best, floor_s)  # the goodput falls on either side of its best: a floor above it binds


def best_goodput(blocking_s: float, lag_s: float, recovery_s: float, mtbf_s: float, floor_s: float = 0.0) -> tuple[float, float]:
    """``(goodput, interval_s)`` at the best interval (no shorter than ``floor_s``)."""
    tau = best_interval(blocking_s, lag_s, mtbf_s, floor_s)
    return goodput(tau, blocking_s, lag_s, recovery_s, mtbf_s), tau


def solve_mtbf(target: float, blocking_s: float, lag_s: float, recovery_s: float, floor_s: float = 0.0) -> float:
    """The job MTBF (seconds) at which the best goodput is ``target``; it rises with the MTBF."""
    return _bisect(lambda m: best_goodput(blocking_s, lag_s, recovery_s, m, floor_s)[0] - target, 1e-3, 1e13)


def solve_recovery(target: float, blocking_s: float, lag_s: float, mtbf_s: float) -> float:
    """The recovery (seconds) that gives ``target`` at the best interval: ``M ln(G(R=0) / target)``.

    The recovery scales the whole curve by ``e^{-R/M}`` and does not move its best interval, so this
    is closed form; negative when even an instant recovery stays below ``target``.
    """
    ceiling = best_goodput(blocking_s, lag_s, 0.0, mtbf_s)[0]
    return mtbf_s * math.log(ceiling / target)


def solve_intervals(target: float, blocking_s: float, lag_s: float, recovery_s: float, mtbf_s: float) -> tuple[float, float] | None:
    """The intervals (seconds) shorter and longer than the best that give ``target``; None if even the best does not."""
    best, tau = best_goodput(blocking_s, lag_s, recovery_s, mtbf_s)
    if best < target:
        return None
    f = lambda t: goodput(t, blocking_s, lag_s, recovery_s, mtbf_s) - target  # noqa: E731
    short = _bisect(f, mtbf_s * 1e-12, tau) if f(mtbf_s * 1e-12) < 0 else 0.0
    return short, _bisect(f, tau, mtbf_s * 1e4)


# --- the cluster a claim is read against -----------------------------------------------------------


@dataclass(frozen=True)
class ClaimCluster:
    """What a claim leaves unsaid, set to the book's defaults (chapter 10's Llama 3 scenario, per GPU).

    ``storage_bps_per_gpu``: Llama 3's sustained 2 TB/s over its 16,384 GPUs; ``detect_s``,
    ``restart_s``: 90 s to notice a failure, 5 minutes to reschedule and initialise; ``watchdog_s``:
    detection before a faster-detection lever (PyTorch's NCCL default); ``spare_swap_s``: a hot
    spare taking over; ``host_copy_bps``, ``peer_copy_bps``: a snapshot into host memory, and one
    GPU's share of the network to a peer (a RAM copy on another machine); ``disk_every``: a RAM tier
    also writes every k-th checkpoint to storage, and that write must keep up.
    """

    storage_bps_per_gpu: float = LLAMA3_STORAGE_SUSTAINED_BPS / LLAMA3_GPUS
    detect_s: float = 90.0
    restart_s: float = 300.0
    watchdog_s: float = NCCL_DEFAULT_TIMEOUT_S
    spare_swap_s: float = 60.0
    host_copy_bps: float = H200_HOST_COPY_BPS
    peer_copy_bps: float = 25e9
    disk_every: int = 10

    def __post_init__(self) -> None:
        validate.whole("disk_every", self.disk_every, 1)
        validate.number("storage_bps_per_gpu", self.storage_bps_per_gpu, 0, low_open=True, unit="bytes per second")
        for name in ("detect_s", "restart_s", "watchdog_s", "spare_swap_s"):
            validate.seconds(name, getattr(self, name))
        validate.number("host_copy_bps", self.host_copy_bps, 0, low_open=True, unit="bytes per second")
        validate.number("peer_copy_bps", self.peer_copy_bps, 0, low_open=True, unit="bytes per second")


# --- published ranges -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """A published span of a quantity (``low`` to ``high``, in ``unit``) and where it comes from."""

    quantity: str
    unit: str
    low: float
    high: float
    published: str  # the span in words, with its sources
    refs: tuple[str, ...]  # anchors in book/references.md

    def plausible(self, value: float) -> bool:
        """Within the span widened by :data:`TOLERANCE` each way (a zero low end stays zero)."""
        return self.low / TOLERANCE <= value <= self.high * TOLERANCE


_GPU_ONLY_MTBF_H = LLAMA3_GPUS * LLAMA3_DURATION_S / HOUR / 268  # Llama 3's GPU faults alone: about 9 years
RANGES = {
    "device_mtbf_h": Range(
        "device MTBF", "hours per GPU", 1024 * 8.0, _GPU_ONLY_MTBF_H,
        "about 8,200 h per GPU (jobs of 1,024 GPUs failing about every 8 hours, Kokolis et al. 2025) to "
        f"{_GPU_ONLY_MTBF_H:,.0f} h (Llama 3's GPU faults alone; every cause: 45,600 h)",
        ("kokolis-2025", "llama3-2024")),
    "storage_per_gpu_mbps": Range(
        "storage bandwidth", "MB/s per GPU", LLAMA3_STORAGE_SUSTAINED_BPS / LLAMA3_GPUS / 1e6,
        LLAMA3_STORAGE_PEAK_BPS / LLAMA3_GPUS / 1e6,
        "122 to 427 MB/s per GPU (Llama 3's Tectonic: 2 TB/s sustained, 7 TB/s peak for 16,384 GPUs; "
        "DeepSeek's 3FS reads 6.6 TiB/s in all)", ("llama3-2024", "deepseek-3fs")),
    "restart_s": Range(
        "restart", "seconds", 40.0, 300.0,
        "40 s (a hot swap, DeadPool 2026) to 5 minutes (a failed node found and replaced, Crusoe's AutoClusters; "
        "FlashRecovery restores 4,800 devices in 150 s)", ("deadpool-2026", "crusoe-autoclusters", "flashrecovery-2025")),
    "detect_s": Range(
        "detection", "seconds", 0.0, NCCL_DEFAULT_TIMEOUT_S,
        "a crash is seen in seconds; a hang when the watchdog gives up, 10 minutes by PyTorch's default",
        ("pytorch-nccl-timeout",)),
}


@dataclass(frozen=True)
class Check:
    """One implied value against its published range."""

    key: str
    value: float
    plausible: bool
    range: Range

    def to_dict(self) -> dict:
        r = self.range
        return {"key": self.key, "value": self.value, "plausible": self.plausible, "unit": r.unit,
                "published_low": r.low, "published_high": r.high, "published": r.published, "sources": list(r.refs)}


# --- the explanation -------------------------------------------------------------------------------


@dataclass
class Claim:
    """What :func:`explain` finds: the implied values, the assumed ones, each check, the verdict and why."""

    lever: str
    before: float
    after: float
    gpus: int
    model_params_b: float
    implied: dict[str, float] = field(default_factory=dict)
    assumed: dict[str, float] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why it is implausible
    effects: dict[str, float] | None = None  # a lever that moves the best interval: its two effects, points
    notes: list[str] = field(default_factory=list)

    @property
    def plausible(self) -> bool:
        return not self.reasons

    def check(self, key: str, value: float, unit_value: str) -> None:
        """Hold ``value`` against :data:`RANGES` ``[key]``; an implausible one adds its reason."""
        r = RANGES[key]
        ok = r.plausible(value)
        self.checks.append(Check(key, value, ok, r))
        if not ok:
            factor, side = (value / r.high, "above") if value > r.high else (r.low / value if value > 0 else math.inf, "below")
            self.reasons.append(f"it needs a {r.quantity} of {unit_value}, {_fmt(factor)} times {side} the published "
                                f"range: {r.published}")

    def to_dict(self) -> dict:
        return {
            "lever": self.lever, "before_share": self.before, "after_share": self.after, "gpus": self.gpus,
            "model_params_b": self.model_params_b, "plausible": self.plausible, "implied": self.implied,
            "assumed": self.assumed, "checks": [c.to_dict() for c in self.checks], "reasons": self.reasons,
            "effects": self.effects, "notes": self.notes,
        }


def _fmt(value: float) -> str:
    """A value for the text: thousands separated, three significant digits below 1,000."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * HOUR:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / HOUR:,.1f} h"


def explain(lever: str, before: float, after: float, gpus: int, model_params_b: float = 70.0,
            cluster: ClaimCluster | None = None) -> Claim:
    """Invert the claim "``lever`` took a job on ``gpus`` GPUs from goodput ``before`` to ``after``"
    (shares, ``0 < before < after < 1``; a model of ``model_params_b`` billion parameters in mixed
    precision with Adam). See the module's docstring for what each lever pins."""
    validate.choice("lever", lever, LEVERS)
    validate.number("before", before, 0, 1, low_open=True, high_open=True)
    validate.number("after", after, 0, 1, low_open=True, high_open=True)
    if after <= before:
        raise ConfigError("after", after, f"a goodput above the one before ({before:.1%}): a lever that helps")
    validate.whole("gpus", gpus, 1, 10_000_000)
    validate.number("model_params_b", model_params_b, 0.001, 100_000, unit="billion parameters")
    c = cluster or ClaimCluster()
    claim = Claim(lever, before, after, gpus, model_params_b)
    storage = c.storage_bps_per_gpu * gpus
    ckpt = checkpoint_cost(model_params_b * 1e9, gpus, storage, host_copy_bps=c.host_copy_bps)
    claim.assumed.update(checkpoint_tb=ckpt.total_bytes / 1e12, snapshot_s=ckpt.snapshot_s)
    {"async": _saves, "memory": _saves, "hot-spare": _hot_spare, "interval": _interval,
     "detection": _recovery, "restart": _recovery}[lever](claim, c, ckpt, storage)
    return claim


def _mtbf_check(claim: Claim, job_mtbf_s: float) -> None:
    device_h = job_mtbf_s * claim.gpus / HOUR
    claim.implied.update(device_mtbf_h=device_h, job_mtbf_h=job_mtbf_s / HOUR)
    claim.check("device_mtbf_h", device_h, f"{_fmt(device_h)} h per GPU ({_fmt(device_h / YEAR_H)} years)")


def _assume_storage(claim: Claim, storage_bps: float, write_s: float) -> None:
    claim.assumed.update(storage_gbps=storage_bps / 1e9, save_s=write_s)


def _recovery(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float) -> None:
    """restart, detection: the before state (book defaults) pins M; the after state the new time."""
    w = ckpt.write_s
    _assume_storage(claim, storage_bps, w)
    name = "restart" if claim.lever == "restart" else "detect"
    old = {"restart": c.restart_s, "detect": c.watchdog_s}[name]
    other = c.detect_s if name == "restart" else c.restart_s
    claim.assumed.update({f"{name}_before_s": old, ("detect_s" if name == "restart" else "restart_s"): other})
    m = solve_mtbf(claim.before, w, 0.0, old + other + w)
    _mtbf_check(claim, m)
    new = solve_recovery(claim.after, w, 0.0, m) - other - w
    claim.implied[f"{name}_after_s"] = new
    if new < 0:
        ceiling = best_goodput(w, 0.0, other + w, m)[0]
        claim.reasons.append(f"even an instant {name} gives at most {ceiling:.1%}, below the claimed {claim.after:.1%}")
    else:
        key = "restart_s" if name == "restart" else "detect_s"
        claim.check(key, new, _hours(new))
    claim.notes.append(f"the best interval does not move: a {'restart' if name == 'restart' else 'detection'} "
                       "scales the whole goodput curve by exp(-R/M) (chapter 3)")


def _hot_spare(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float) -> None:
    """hot spares for every failure: the after state pins M, the before state the cold restart."""
    w = ckpt.write_s
    _assume_storage(claim, storage_bps, w)
    claim.assumed.update(detect_s=c.detect_s, spare_swap_s=c.spare_swap_s)
    m = solve_mtbf(claim.after, w, 0.0, c.detect_s + c.spare_swap_s + w)
    _mtbf_check(claim, m)
    cold = solve_recovery(claim.before, w, 0.0, m) - c.detect_s - w
    claim.implied["restart_s"] = cold
    claim.check("restart_s", cold, _hours(cold) + " before the spares")
    claim.notes.append("the best interval does not move: the spares shorten the recovery, which scales the whole "
                       "goodput curve by exp(-R/M) (chapter 3)")


def _interval(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float) -> None:
    """the best interval: the after state pins M, the before state the interval it replaced."""
    w = ckpt.write_s
    _assume_storage(claim, storage_bps, w)
    claim.assumed.update(detect_s=c.detect_s, restart_s=c.restart_s)
    r = c.detect_s + c.restart_s + w
    m = solve_mtbf(claim.after, w, 0.0, r)
    _mtbf_check(claim, m)
    best = best_interval(w, 0.0, m)
    short, long = solve_intervals(claim.before, w, 0.0, r, m)  # type: ignore[misc]  (before < after: it exists)
    claim.implied.update(interval_after_min=best / 60, interval_before_long_min=long / 60,
                         interval_before_short_min=short / 60)
    claim.notes.append(f"before, the job checkpointed either every {_hours(long)} (too rarely: lost work) or every "
                       f"{_hours(short)} (too often: saving), against the best {_hours(best)}")


def _saves(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float) -> None:
    """async, memory: sync saves before; the storage bandwidth and M are both unknown."""
    claim.assumed.update(detect_s=c.detect_s, restart_s=c.restart_s)
    r0 = c.detect_s + c.restart_s
    gpus, total = claim.gpus, ckpt.total_bytes

    def after_state(w: float) -> tuple[float, float, float, float]:
        """(blocking, lag, recovery, shortest interval) after the lever, with a sync save of ``w`` s before it."""
        if claim.lever == "async":
            return ckpt.snapshot_s, w, r0 + w, 0.0  # restores still read storage
        copy = ckpt.rank_bytes / c.peer_copy_bps  # a RAM copy on a peer: written and read over the network
        return ckpt.snapshot_s, copy, r0 + copy, max(0.0, w / c.disk_every - ckpt.snapshot_s)

    def before_at(w: float, m: float) -> float:
        return best_goodput(w, 0.0, r0 + w, m)[0]

    # M from the after state, the storage from the before state; the after state depends on the
    # storage too (an async save's lag, a RAM tier's storage copy), so the two are found together:
    # the before goodput implied falls as the storage slows, and a bisection over the storage finds it
    m_of = lambda x: solve_mtbf(claim.after, *after_state(x))  # noqa: E731
    gap = lambda x: before_at(x, m_of(x)) - claim.before  # noqa: E731
    hi_w = 1e7
    w = _bisect(gap, 1e-6, hi_w) if gap(hi_w) < 0 < gap(1e-6) else None
    m = m_of(w) if w is not None else m_of(hi_w)
    if w is None:
        lowest = before_at(hi_w, m)
        claim.reasons.append(
            f"no storage bandwidth makes it true: {claim.lever} saves that reach {claim.after:.1%} cannot start from "
            f"below {lowest:.1%}, because saves slow enough to cost the synchronous run more would hold back the "
            + ("asynchronous one too (its checkpoints become durable only after the write)" if claim.lever == "async"
               else "RAM copy's run too (its storage copies must keep up)"))
        return
    bps = total / w
    claim.implied.update(storage_gbps=bps / 1e9, storage_per_gpu_mbps=bps / gpus / 1e6, save_s=w)
    _mtbf_check(claim, m)
    claim.check("storage_per_gpu_mbps", bps / gpus / 1e6,
                f"{_fmt(bps / 1e9)} GB/s in all ({_fmt(1000 * bps / gpus / 1e9)} MB/s per GPU)")
    tau_before = best_interval(w, 0.0, m)
    blocking, lag, recovery, floor = after_state(w)
    tau_after = best_interval(blocking, lag, m, floor)
    at_old = goodput(tau_before, blocking, lag, recovery, m)
    claim.implied.update(interval_before_min=tau_before / 60, interval_after_min=tau_after / 60)
    claim.effects = {"cheaper_saves_pts": 100 * (at_old - claim.before), "shorter_interval_pts": 100 * (claim.after - at_old),
                     "interval_before_min": tau_before / 60, "interval_after_min": tau_after / 60}
    claim.notes.append(
        f"two effects: at the old interval ({_hours(tau_before)}) the cheaper saves alone give "
        f"{100 * (at_old - claim.before):+.1f} points; moving to the new best interval ({_hours(tau_after)}), which "
        f"cuts the lost work, gives the other {100 * (claim.after - at_old):+.1f}")


def lines(claim: Claim) -> list[str]:
    """The explanation as text: the claim, what it implies, each check, the verdict and its reasons."""
    what = {"async": "asynchronous saves", "memory": "a RAM copy of each checkpoint on a peer",
            "hot-spare": "hot spares", "interval": "the best checkpoint interval",
            "detection": "faster detection", "restart": "faster restarts"}[claim.lever]
    out = [f"claim: {what} took a job on {claim.gpus:,} GPUs ({claim.model_params_b:g}B parameters) "
           f"from {claim.before:.1%} to {claim.after:.1%} goodput"]
    out.append("implied: " + (", ".join(f"{k} {_fmt(v)}" for k, v in claim.implied.items()) or "nothing (no solution)"))
    out.append("assumed: " + ", ".join(f"{k} {_fmt(v)}" for k, v in claim.assumed.items()))
    for ch in claim.checks:
        verdict = "plausible" if ch.plausible else "IMPLAUSIBLE"
        out.append(f"  {ch.range.quantity} {_fmt(ch.value)} {ch.range.unit}: {verdict} (published: {ch.range.published})")
    out += [f"note: {n}" for n in claim.notes]
    if claim.plausible:
        out.append("verdict: plausible: every implied value is within a factor of "
                   f"{TOLERANCE:g} of its published range")
    else:
        out.append("verdict: implausible: " + "; ".join(claim.reasons))
    return out
