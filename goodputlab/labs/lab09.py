"""Checks of Lab 9, "Goodput in serving" (``labs/09_serving_goodput.ipynb``).

What a user feels (TTFT and TPOT of one request), attainment under an SLO, a
percentile by nearest rank, and the goodput read off measured rates.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from ..serving.slo import SLO, RequestRecord, attainment, percentile
from .checks import CheckResult, as_number, as_share, check, diagnose, direction, near


@check("TTFT", "first token's time minus the arrival, in milliseconds")
def check_ttft(answer_ms: Any, record: RequestRecord) -> CheckResult:
    """Exercise 1a: a request's time to first token, in milliseconds."""
    name = check_ttft.check_name
    value = as_number(answer_ms, "milliseconds")
    expected = 1000 * record.ttft_s
    if near(value, expected, 0.001, 1e-6):
        return CheckResult(name, True, f"{value:.0f} ms of blank screen: queueing plus prefill")
    mistake = diagnose(value, [
        (expected / 1000, "that looks like seconds: give milliseconds"),
        (1000 * record.token_times_s[0], "that is when the first token came, counted from the start of the measurement; subtract the arrival"),
        (1000 * record.latency_s, "that is the time to the *last* token; TTFT ends at the first"),
    ], 0.001)
    return CheckResult(name, False, mistake or f"{value:g} ms is {direction(value, expected)}")


@check("TPOT", "(last token - first token) / (tokens - 1), in milliseconds")
def check_tpot(answer_ms: Any, record: RequestRecord) -> CheckResult:
    """Exercise 1b: a request's time per output token after the first, in milliseconds."""
    name = check_tpot.check_name
    value = as_number(answer_ms, "milliseconds")
    expected = 1000 * record.tpot_s
    n = len(record.token_times_s)
    span_ms = 1000 * (record.token_times_s[-1] - record.token_times_s[0])
    if near(value, expected, 0.001, 1e-6):
        return CheckResult(name, True, f"{value:.2f} ms per token: how fast the answer streams")
    mistake = diagnose(value, [
        (span_ms / n, f"{n} tokens leave {n - 1} gaps between them: divide by tokens - 1"),
        (1000 * record.latency_s / n, "TPOT starts at the first token, not at the arrival (that part is TTFT)"),
        (1000 * record.latency_s / (n - 1), "TPOT starts at the first token, not at the arrival (that part is TTFT)"),
        (expected / 1000, "that looks like seconds: give milliseconds"),
    ], 0.001)
    return CheckResult(name, False, mistake or f"{value:g} ms is {direction(value, expected)}")


@check("attainment", "the share of *all* requests that met both objectives (an unfinished one missed)")
def check_attainment(answer: Any, records: Sequence[RequestRecord], slo: SLO) -> CheckResult:
    """Exercise 2: the share of requests meeting both TTFT and TPOT objectives."""
    name = check_attainment.check_name
    share = as_share(answer, "a share of requests")
    expected = attainment(records, slo)
    if near(share, expected, 1e-6, 1e-9):
        return CheckResult(name, True, f"{share:.0%} of the requests were served in time")
    finished = [r for r in records if r.finished]
    ttft_only = sum(r.ttft_s * 1000 <= slo.ttft_ms for r in records) / len(records)
    tpot_only = sum(r.finished and r.tpot_s * 1000 <= slo.tpot_ms for r in records) / len(records)
    mistake = diagnose(share, [
        (attainment(finished, slo) if finished else math.nan,
         "an unfinished request is a miss: keep it in the denominator"),
        (ttft_only, "that counts only TTFT; a request must also stream fast enough (TPOT)"),
        (tpot_only, "that counts only TPOT; a request must also start in time (TTFT)"),
    ], 1e-6)
    return CheckResult(name, False, mistake or f"{share:.3f} is {direction(share, expected)}")


@check("p90 TTFT", "nearest rank: sort, take the value at rank ceil(0.9 n)")
def check_p90_ttft(answer_ms: Any, records: Sequence[RequestRecord]) -> CheckResult:
    """Exercise 3: the 90th percentile of TTFT (nearest rank), in milliseconds."""
    name = check_p90_ttft.check_name
    value = as_number(answer_ms, "milliseconds")
    ttfts = [1000 * r.ttft_s for r in records]
    expected = percentile(ttfts, 90)
    if near(value, expected, 1e-6, 1e-6):
        return CheckResult(name, True, f"{value:.0f} ms: nine requests in ten started at least this soon")
    finite = sorted(t for t in ttfts if math.isfinite(t))
    interpolated = float(_interpolated(finite, 0.9)) if finite else math.nan
    mistake = diagnose(value, [
        (interpolated, "that is an interpolated percentile (numpy's default); a latency report uses nearest rank, a value that was measured"),
        (sum(finite) / len(finite) if finite else math.nan, "that is the mean; the p90 is the value 90% of requests stay under"),
        (expected / 1000, "that looks like seconds: give milliseconds"),
    ], 1e-6)
    return CheckResult(name, False, mistake or f"{value:g} ms is {direction(value, expected)}")


def _interpolated(xs: list[float], q: float) -> float:
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@check("goodput", "the highest *measured* rate whose attainment reached the target")
def check_goodput(answer_rps: Any, probes: Iterable[tuple[float, float]], target: float) -> CheckResult:
    """Exercise 4: goodput (requests per second) from measured (rate, attainment) pairs."""
    name = check_goodput.check_name
    value = as_number(answer_rps, "requests per second")
    probes = sorted(probes)
    passing = [rate for rate, att in probes if att >= target]
    expected = max(passing) if passing else 0.0
    if near(value, expected, 1e-6, 1e-9):
        return CheckResult(name, True, f"{value:g} req/s at {target:.0%} attainment")
    rates = {rate for rate, _ in probes}
    if not any(near(value, r, 1e-6) for r in rates):
        return CheckResult(name, False, f"{value:g} req/s was not measured: goodput is a rate that was measured, never interpolated")
    if value > expected:
        return CheckResult(name, False, f"at {value:g} req/s fewer than {target:.0%} of requests met the objectives: busy is not useful")
    return CheckResult(name, False, f"{value:g} req/s passed, but a higher measured rate passed too")
