"""Claims about goodput, inverted: what must be true of a cluster for "lever X took us from B to A on N GPUs".

A claim such as "RAM-tier checkpoints took our goodput from 85% to 95% on 8,192 GPUs" has two
numbers, so it pins two unknowns of the capstone's model (:mod:`goodputlab.theory.capstone`,
chapter 10): the job's failure rate, and the one setting the lever changed. :func:`explain` finds
them and holds each against the published range it should fall in (:data:`RANGES`, from the slowest
published cluster to the fastest, each end with its source in ``book/references.md``); a claim that
needs a value far outside every published cluster, or two goodputs that contradict each other, is
called implausible, the decisive reason first. What a claim leaves unsaid is
:class:`ClaimCluster`'s defaults, and a user pins what they know (:class:`Pins`: the storage or the
save, the restart, the detection); the explanation states the model size it assumed and how it reads
the lever (:data:`READING`).

The model is the capstone's for synchronous and asynchronous saves, Poisson failures and a
continuous interval (:func:`goodput`: the renewal-reward closed form of
:func:`goodputlab.theory.renewal.periodic_goodput`). Every function here is arithmetic on numbers
or a bisection of a monotone function, so the same formulas can run anywhere (a web page's
expression language included):

- :func:`goodput` ``(tau, delta, L, R, M)``: closed form; :func:`ettr` the same job's ETTR;
- :func:`best_interval` ``(delta, L, M)``: the root of ``M (1 - exp(-(tau + delta)/M)) = tau`` (bisection),
  at least ``L``; the restart ``R`` does not move it;
- :func:`solve_mtbf`: the job MTBF at which the best goodput is a target (bisection; it rises with M);
- :func:`solve_recovery`: the recovery that gives a target, ``R = M ln(G(R=0) / target)`` (closed form);
- :func:`solve_intervals`: the two intervals, shorter and longer than the best, that give a target.

What each lever pins (the *after* state fixes the failure rate where it can; the *before* state the
setting the lever changed; the rest are :class:`ClaimCluster`'s defaults, the book's, or the user's
:class:`Pins`; a pin on the very setting the lever solves for turns that into a check of the claim's
two goodputs against each other):

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

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

from .. import validate
from ..errors import ConfigError
from .checkpoint_cost import checkpoint_cost
from .claim_ranges import (  # noqa: F401  (re-exported: the explainer's model and what it reads a claim against)
    HOUR, LABELS, RANGES, READING, TOLERANCE, WHAT, ClaimCluster, Pins, Range,
)

LEVERS = ("async", "memory", "hot-spare", "interval", "detection", "restart")
YEAR_H = 365.0 * 24.0
#: A claim's two goodputs contradict each other, given a pinned value, when the model misses one by more.
CONSISTENCY = 0.005


# --- the model: closed forms and bisections ------------------------------------------------------


def ettr(interval_s: float, blocking_s: float, lag_s: float, recovery_s: float, mtbf_s: float) -> float:
    """The effective training time ratio of the same job as :func:`goodput`: saves count as training.

    ``e^{-R/M} (M - E[C] + E[D]) / M``: of each up period (mean ``M``) the recovery is lost, and of
    the training the compute a failure throws away, ``E[C] - E[D]`` (the compute done, less the
    durable checkpoints'); exactly :func:`goodputlab.theory.jit.restart_goodput`'s ETTR.
    """
    first = interval_s + blocking_s
    cycle = first + max(0.0, lag_s - interval_s)
    if (recovery_s + first + lag_s) / mtbf_s > 700:
        return 0.0
    survive = -math.expm1(-cycle / mtbf_s)
    computed = mtbf_s * -math.expm1(-interval_s / mtbf_s) * (1.0 + math.exp(-first / mtbf_s) / survive)
    durable = interval_s * math.exp(-(first + lag_s) / mtbf_s) / survive
    return math.exp(-recovery_s / mtbf_s) * (mtbf_s - computed + durable) / mtbf_s


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
    """What :func:`explain` finds: the implied values, the assumed ones, each check, the verdict and why.

    ``reasons`` holds why it is implausible, the decisive one first (a failure rate no published cluster
    has before anything else); ``ettr``: the claim's two goodputs read as effective training time
    ratios at the implied failure rate (``before``, ``after``); ``reading``: how the lever is read;
    ``pinned``: the values the user pinned.
    """

    lever: str
    before: float
    after: float
    gpus: int
    model_params_b: float
    implied: dict[str, float] = field(default_factory=dict)
    assumed: dict[str, float] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    effects: dict[str, float] | None = None  # a lever that moves the best interval: its two effects, points
    notes: list[str] = field(default_factory=list)
    ettr: dict[str, float] = field(default_factory=dict)
    reading: str = ""
    pinned: dict[str, float] = field(default_factory=dict)

    @property
    def plausible(self) -> bool:
        return not self.reasons

    def check(self, key: str, value: float, unit_value: str) -> None:
        """Hold ``value`` against :data:`RANGES` ``[key]``; an implausible one adds its reason (a failure rate's first)."""
        r = RANGES[key]
        ok = r.plausible(value)
        self.checks.append(Check(key, value, ok, r))
        if not ok:
            factor, side = (value / r.high, "above") if value > r.high else (r.low / value if value > 0 else math.inf, "below")
            reason = (f"it needs a {r.quantity} of {unit_value}, {_fmt(factor)} times {side} the published "
                      f"range: {r.published}")
            self.reasons.insert(0, reason) if key == "device_mtbf_h" else self.reasons.append(reason)

    def to_dict(self) -> dict:
        return {
            "lever": self.lever, "before_share": self.before, "after_share": self.after, "gpus": self.gpus,
            "model_params_b": self.model_params_b, "plausible": self.plausible, "implied": self.implied,
            "assumed": self.assumed, "checks": [c.to_dict() for c in self.checks], "reasons": self.reasons,
            "effects": self.effects, "notes": self.notes, "ettr": self.ettr, "reading": self.reading,
            "pinned": self.pinned,
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
            cluster: ClaimCluster | None = None, pins: Pins | None = None) -> Claim:
    """Invert the claim "``lever`` took a job on ``gpus`` GPUs from goodput ``before`` to ``after``"
    (shares, ``0 < before < after < 1``; a model of ``model_params_b`` billion parameters in mixed
    precision with Adam), with what the user knows pinned (``pins``). See the module's docstring for
    what each lever pins."""
    validate.choice("lever", lever, LEVERS)
    validate.number("before", before, 0, 1, low_open=True, high_open=True)
    validate.number("after", after, 0, 1, low_open=True, high_open=True)
    if after <= before:
        raise ConfigError("after", after, f"a goodput above the one before ({before:.1%}): a lever that helps")
    validate.whole("gpus", gpus, 1, 10_000_000)
    validate.number("model_params_b", model_params_b, 0.001, 100_000, unit="billion parameters")
    pins = pins or Pins()
    c = cluster or ClaimCluster()
    claim = Claim(lever, before, after, gpus, model_params_b, reading=READING[lever], pinned=pins.given())
    total = checkpoint_cost(model_params_b * 1e9, gpus, 1.0, host_copy_bps=c.host_copy_bps).total_bytes
    if pins.storage_gbps is not None:
        c = dataclasses.replace(c, storage_bps_per_gpu=pins.storage_gbps * 1e9 / gpus)
    elif pins.save_s is not None:
        c = dataclasses.replace(c, storage_bps_per_gpu=total / pins.save_s / gpus)
    if pins.restart_s is not None:
        c = dataclasses.replace(c, restart_s=pins.restart_s)
    if pins.detect_s is not None:
        c = dataclasses.replace(c, **{"watchdog_s" if lever == "detection" else "detect_s": pins.detect_s})
    storage = c.storage_bps_per_gpu * gpus
    ckpt = checkpoint_cost(model_params_b * 1e9, gpus, storage, host_copy_bps=c.host_copy_bps)
    claim.assumed.update(checkpoint_tb=ckpt.total_bytes / 1e12, snapshot_s=ckpt.snapshot_s)
    storage_pinned = pins.storage_gbps is not None or pins.save_s is not None
    {"async": _saves, "memory": _saves, "hot-spare": _hot_spare, "interval": _interval,
     "detection": _recovery, "restart": _recovery}[lever](claim, c, ckpt, storage,
                                                          storage_pinned if lever in ("async", "memory") else
                                                          pins.restart_s is not None and lever == "hot-spare")
    return claim


def _mtbf_check(claim: Claim, job_mtbf_s: float) -> None:
    device_h = job_mtbf_s * claim.gpus / HOUR
    claim.implied.update(device_mtbf_h=device_h, job_mtbf_h=job_mtbf_s / HOUR)
    claim.check("device_mtbf_h", device_h, f"{_fmt(device_h)} h per GPU ({_fmt(device_h / YEAR_H)} years)")


def _assume_storage(claim: Claim, storage_bps: float, write_s: float) -> None:
    claim.assumed.update(storage_gbps=storage_bps / 1e9, save_s=write_s)


def _ettr(claim: Claim, before: tuple, after: tuple, mtbf_s: float) -> None:
    """The claim's two goodputs as ETTRs: each state ``(interval, blocking, lag, recovery)`` at the implied MTBF."""
    claim.ettr = {"before": ettr(*before, mtbf_s), "after": ettr(*after, mtbf_s)}


def _contradiction(claim: Claim, implied_before: float, what: str) -> None:
    """With ``what`` pinned, the after state fixes the failure rate, and the before state must match it."""
    if abs(implied_before - claim.before) > CONSISTENCY:
        claim.reasons.append(f"with {what} pinned, the failure rate that gives {claim.after:.1%} after gives "
                             f"{implied_before:.1%} before, not the claimed {claim.before:.1%}: the two goodputs "
                             "contradict each other")
    else:
        claim.notes.append(f"with {what} pinned, the two goodputs agree: the after state's failure rate gives "
                           f"{implied_before:.1%} before")


def _recovery(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float, _pinned: bool) -> None:
    """restart, detection: the before state (book defaults or pins) pins M; the after state the new time."""
    w = ckpt.write_s
    _assume_storage(claim, storage_bps, w)
    name = "restart" if claim.lever == "restart" else "detect"
    old = {"restart": c.restart_s, "detect": c.watchdog_s}[name]
    other = c.detect_s if name == "restart" else c.restart_s
    claim.assumed.update({f"{name}_before_s": old, ("detect_s" if name == "restart" else "restart_s"): other})
    m = solve_mtbf(claim.before, w, 0.0, old + other + w)
    _mtbf_check(claim, m)
    new = solve_recovery(claim.after, w, 0.0, m) - other - w
    tau = best_interval(w, 0.0, m)
    if new < 0:  # no time reaches it: the bound, not a negative time
        ceiling = best_goodput(w, 0.0, other + w, m)[0]
        word = "restart" if name == "restart" else "detection"
        claim.reasons.append(f"even an instant {word} gives at most {ceiling:.1%}, below the claimed {claim.after:.1%}")
        claim.ettr = {"before": ettr(tau, w, 0.0, old + other + w, m)}  # no after state reaches the claim
    else:
        claim.implied[f"{name}_after_s"] = new
        key = "restart_s" if name == "restart" else "detect_s"
        claim.check(key, new, _hours(new))
        _ettr(claim, (tau, w, 0.0, old + other + w), (tau, w, 0.0, new + other + w), m)
    claim.notes.append(f"the best interval does not move: a {'restart' if name == 'restart' else 'detection'} "
                       "scales the whole goodput curve by exp(-R/M) (chapter 3)")


def _hot_spare(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float, pinned: bool) -> None:
    """hot spares for every failure: the after state pins M, the before state the cold restart (or, pinned, checks it)."""
    w = ckpt.write_s
    _assume_storage(claim, storage_bps, w)
    claim.assumed.update(detect_s=c.detect_s, spare_swap_s=c.spare_swap_s)
    m = solve_mtbf(claim.after, w, 0.0, c.detect_s + c.spare_swap_s + w)
    _mtbf_check(claim, m)
    tau = best_interval(w, 0.0, m)
    if pinned:
        claim.assumed["restart_s"] = c.restart_s
        _contradiction(claim, best_goodput(w, 0.0, c.detect_s + c.restart_s + w, m)[0], f"a cold restart of {_hours(c.restart_s)}")
        cold = c.restart_s
    else:
        cold = solve_recovery(claim.before, w, 0.0, m) - c.detect_s - w
        claim.implied["restart_s"] = cold
        claim.check("restart_s", cold, _hours(cold) + " before the spares")
    _ettr(claim, (tau, w, 0.0, c.detect_s + cold + w), (tau, w, 0.0, c.detect_s + c.spare_swap_s + w), m)
    claim.notes.append("the best interval does not move: the spares shorten the recovery, which scales the whole "
                       "goodput curve by exp(-R/M) (chapter 3)")


def _interval(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float, _pinned: bool) -> None:
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
    _ettr(claim, (long, w, 0.0, r), (best, w, 0.0, r), m)
    claim.notes.append(f"before, the job checkpointed either every {_hours(long)} (too rarely: lost work) or every "
                       f"{_hours(short)} (too often: saving), against the best {_hours(best)}")


def _saves(claim: Claim, c: ClaimCluster, ckpt, storage_bps: float, pinned: bool) -> None:
    """async, memory: sync saves before; the storage bandwidth and M are both unknown (or, pinned, the storage known)."""
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
    if pinned:
        w = total / storage_bps
        claim.assumed.update(storage_gbps=storage_bps / 1e9, save_s=w)
    else:
        w = _bisect(gap, 1e-6, hi_w) if gap(hi_w) < 0 < gap(1e-6) else None
    if w is None:
        lowest = before_at(hi_w, m_of(hi_w))
        # the failure rate comes first when even the fastest storage needs one no published cluster has
        least_h = m_of(1e-6) * gpus / HOUR
        r = RANGES["device_mtbf_h"]
        if least_h > r.high * TOLERANCE:
            claim.reasons.append(f"it needs a device MTBF of at least {_fmt(least_h)} h per GPU, "
                                 f"{_fmt(least_h / r.high)} times above the published range: {r.published}")
        claim.reasons.append(
            f"no storage bandwidth makes it true: {claim.lever} saves that reach {claim.after:.1%} cannot start from "
            f"below {lowest:.1%}, because saves slow enough to cost the synchronous run more would hold back the "
            + ("asynchronous one too (its checkpoints become durable only after the write)" if claim.lever == "async"
               else "RAM copy's run too (its storage copies must keep up)"))
        return
    m = m_of(w)
    bps = total / w
    if not pinned:
        claim.implied.update(storage_gbps=bps / 1e9, storage_per_gpu_mbps=bps / gpus / 1e6, save_s=w)
    _mtbf_check(claim, m)
    if pinned:
        _contradiction(claim, before_at(w, m), f"a synchronous save of {_hours(w)} ({_fmt(bps / 1e9)} GB/s)")
    else:
        claim.check("save_s", w, f"{_hours(w)} ({_fmt(bps / 1e9)} GB/s in all, {_fmt(1000 * bps / gpus / 1e9)} MB/s per GPU)")
    tau_before = best_interval(w, 0.0, m)
    blocking, lag, recovery, floor = after_state(w)
    tau_after = best_interval(blocking, lag, m, floor)
    at_old = goodput(tau_before, blocking, lag, recovery, m)
    start = before_at(w, m) if pinned else claim.before  # pinned: the before the model gives, which the claim may miss
    claim.implied.update(interval_before_min=tau_before / 60, interval_after_min=tau_after / 60)
    _ettr(claim, (tau_before, w, 0.0, r0 + w), (tau_after, blocking, lag, recovery), m)
    claim.effects = {"cheaper_saves_pts": 100 * (at_old - start), "shorter_interval_pts": 100 * (claim.after - at_old),
                     "interval_before_min": tau_before / 60, "interval_after_min": tau_after / 60}
    claim.notes.append(
        f"two effects: at the old interval ({_hours(tau_before)}) the cheaper saves alone give "
        f"{100 * (at_old - start):+.1f} points; moving to the new best interval ({_hours(tau_after)}), which "
        f"cuts the lost work, gives the other {100 * (claim.after - at_old):+.1f}")


def lines(claim: Claim) -> list[str]:
    """The explanation as text: the claim, how the lever is read, what it implies, each check, the verdict."""
    what = {"async": "asynchronous saves", "memory": "a RAM copy of each checkpoint on a peer",
            "hot-spare": "hot spares", "interval": "the best checkpoint interval",
            "detection": "faster detection", "restart": "faster restarts"}[claim.lever]
    out = [f"claim: {what} took a job on {claim.gpus:,} GPUs ({claim.model_params_b:g}B parameters) "
           f"from {claim.before:.1%} to {claim.after:.1%} goodput"]
    out.append(f"reading: {claim.reading}")
    if claim.pinned:
        out.append("pinned: " + ", ".join(f"{k} {_fmt(v)}" for k, v in claim.pinned.items()))
    out.append("implied: " + (", ".join(f"{k} {_fmt(v)}" for k, v in claim.implied.items()) or "nothing (no solution)"))
    out.append("assumed: " + ", ".join(f"{k} {_fmt(v)}" for k, v in claim.assumed.items()))
    if claim.ettr:
        both = [f"{claim.ettr[k]:.1%} {k}" for k in ("before", "after") if k in claim.ettr]
        out.append(f"as ETTR (saves counted as training): {', '.join(both)}, at the implied failure rate")
    for ch in claim.checks:
        verdict = "plausible" if ch.plausible else "IMPLAUSIBLE"
        out.append(f"  {ch.range.quantity} {_fmt(ch.value)} {ch.range.unit}: {verdict} (published: {ch.range.published})")
    out += [f"note: {n}" for n in claim.notes]
    size = f"for a {claim.model_params_b:g}B-parameter model"
    if claim.plausible:
        out.append(f"verdict ({size}): plausible: every implied value is within a factor of {TOLERANCE:g} of its "
                   "published range")
    else:
        out.append(f"verdict ({size}): implausible: " + "; ".join(claim.reasons))
    return out
