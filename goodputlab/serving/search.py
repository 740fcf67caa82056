"""The goodput search: the highest request rate whose measured SLO attainment meets a target.

Pure: it calls a ``measure(rate)`` function (a real server run in
:meth:`goodputlab.serving.cluster.ServingCluster.search`; synthetic curves in the tests) and
never extrapolates: every rate it reports was measured.

Attainment is assumed to fall as the rate grows (more load, longer queues). The search
brackets the answer by doubling or halving from a starting rate, then bisects the bracket
until its width is within ``rel_tol`` of its lower end or ``max_probes`` measurements are
spent. The goodput is the highest rate measured to meet the target; by construction every rate measured to miss it is higher.
Measurements are noisy near the edge: where attainment wobbles around the target (a busy
machine, few requests per rate) the search settles on one crossing, and a longer duration per
rate makes the answer steadier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ..errors import check


class Measured(Protocol):
    """What the search needs from one measured rate (e.g. a :class:`~goodputlab.serving.slo.RateMeasurement`)."""

    rate_rps: float
    duration_s: float

    @property
    def attainment(self) -> float: ...

    @property
    def requests(self) -> int: ...


@dataclass(frozen=True)
class GoodputSearch:
    """The answer and every measurement that led to it, in the order they were taken."""

    target: float
    goodput_rps: float  # 0.0 when even the lowest rate tried missed the target
    probes: tuple[Measured, ...] = field(repr=False)
    lowest_failing_rps: float | None  # None when no measured rate missed the target
    capped: bool  # no measured rate missed (max_rps, or the probe budget, reached): goodput is at least this
    floored: bool  # no measured rate met the target: goodput is below the lowest rate tried

    def passed(self, probe: Measured) -> bool:
        return probe.attainment >= self.target

    @property
    def best(self) -> Measured | None:
        """The probe at the goodput rate (None when no rate met the target)."""
        return next((p for p in self.probes if self.passed(p) and p.rate_rps == self.goodput_rps), None)

    def statement(self) -> str:
        """What was measured, in one paragraph: rates, durations, requests, and the answer."""
        durations = sorted({p.duration_s for p in self.probes})
        dur = f"{durations[0]:.3g} s" if len(durations) == 1 else f"{durations[0]:.3g}-{durations[-1]:.3g} s"
        counts = [p.requests for p in self.probes]
        per_rate = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
        text = (
            f"{len(self.probes)} rate{'s' if len(self.probes) > 1 else ''} measured, each for {dur} of Poisson arrivals "
            f"({per_rate} requests per rate, {sum(counts)} in all). "
        )
        if self.capped:
            return text + f"Every rate measured, up to {self.goodput_rps:g} req/s, met {self.target:.0%}: goodput is at least that."
        if self.floored:
            return text + f"Even {self.lowest_failing_rps:g} req/s missed {self.target:.0%}: goodput is below it."
        return text + (
            f"Goodput {self.goodput_rps:.3g} req/s: the highest rate measured with attainment >= {self.target:.0%}; "
            f"{self.lowest_failing_rps:.3g} req/s missed it."
        )

    def table(self) -> str:
        """One line per probe, in the order measured."""
        lines = [f"{'probe':>5}  {'rate req/s':>10}  {'duration s':>10}  {'requests':>8}  {'attainment':>10}  meets {self.target:.0%}"]
        for i, p in enumerate(self.probes, 1):
            lines.append(f"{i:>5}  {p.rate_rps:>10.3g}  {p.duration_s:>10.3g}  {p.requests:>8}  {p.attainment:>10.3f}  "
                         f"{'yes' if self.passed(p) else 'no'}")
        return "\n".join(lines)


def _nice(rate: float) -> float:
    """Three significant digits: rates a reader can repeat on the command line."""
    return float(f"{rate:.3g}")


def search_goodput(
    measure: Callable[[float], Measured],
    target: float = 0.9,
    start_rps: float = 4.0,
    min_rps: float = 0.25,
    max_rps: float = 256.0,
    rel_tol: float = 0.1,
    max_probes: int = 12,
    on_probe: Callable[[Measured], None] | None = None,
) -> GoodputSearch:
    """Bracket, then bisect: the highest rate with ``measure(rate).attainment >= target``.

    ``measure`` runs one rate for real and returns its measurement. Doubling from
    ``start_rps`` (or halving, if it misses) finds a passing and a failing rate within
    ``[min_rps, max_rps]``; bisection then narrows them until ``(fail - pass) / pass <= rel_tol``
    or ``max_probes`` rates were measured. ``on_probe`` sees each measurement as it arrives.
    """
    check(0 < target <= 1, "target", target, "a share of requests in (0, 1]")
    check(math.isfinite(min_rps) and min_rps > 0, "min_rps", min_rps, "requests per second > 0")
    check(math.isfinite(max_rps) and max_rps >= min_rps, "max_rps", max_rps, f"requests per second >= {min_rps:g}")
    check(math.isfinite(start_rps) and min_rps <= start_rps <= max_rps, "start_rps", start_rps, f"between {min_rps:g} and {max_rps:g}")
    check(rel_tol > 0, "rel_tol", rel_tol, "a relative width > 0")
    check(isinstance(max_probes, int) and max_probes >= 1, "max_probes", max_probes, "a whole number >= 1")

    probes: list[Measured] = []

    def passes(rate: float) -> bool:
        m = measure(rate)
        probes.append(m)
        if on_probe is not None:
            on_probe(m)
        return m.attainment >= target  # NaN (no requests arrived) counts as a miss

    lo: float | None = None  # highest passing rate so far
    hi: float | None = None  # lowest failing rate so far
    rate = _nice(start_rps)
    if passes(rate):
        lo = rate
        while hi is None and rate < max_rps and len(probes) < max_probes:
            rate = min(_nice(2 * rate), max_rps)
            if passes(rate):
                lo = rate
            else:
                hi = rate
    else:
        hi = rate
        while lo is None and rate > min_rps and len(probes) < max_probes:
            rate = max(_nice(rate / 2), min_rps)
            if passes(rate):
                lo = rate
            else:
                hi = rate
    while lo is not None and hi is not None and (hi - lo) / lo > rel_tol and len(probes) < max_probes:
        mid = _nice((lo + hi) / 2)
        if not lo < mid < hi:  # three digits cannot split it further
            break
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return GoodputSearch(
        target=target,
        goodput_rps=lo if lo is not None else 0.0,
        probes=tuple(probes),
        lowest_failing_rps=hi,
        capped=hi is None,
        floored=lo is None,
    )
