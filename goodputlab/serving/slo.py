"""SLO accounting: what each request's user felt, and the share of requests that met both objectives.

Pure (no torch): records in, figures out. Definitions (DistServe's):

* **TTFT**, time to first token: first token's time minus the request's arrival. The wait
  before anything appears.
* **TPOT**, time per output token: ``(last token - first token) / (tokens - 1)``, the average
  gap between the tokens after the first. How fast the answer streams. A one-token answer
  has a TPOT of 0.
* A request **meets the SLO** when it finished with TTFT <= ``ttft_ms`` and TPOT <= ``tpot_ms``.
  A request still unfinished when its measurement ended meets nothing; its missing latencies
  count as infinite.
* **Attainment**: the share of requests that met the SLO.

Percentiles use the nearest-rank definition (the smallest value with at least ``q`` percent of
the values at or below it): always one of the measured values, and an infinite value (an
unfinished request) stays infinite instead of turning into NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from ..errors import check


@dataclass(frozen=True)
class SLO:
    """The two latency objectives, in milliseconds."""

    ttft_ms: float
    tpot_ms: float

    def __post_init__(self):
        for name in ("ttft_ms", "tpot_ms"):
            value = getattr(self, name)
            check(
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0,
                name, value, "milliseconds > 0",
            )

    def describe(self) -> str:
        return f"TTFT <= {self.ttft_ms:g} ms, TPOT <= {self.tpot_ms:g} ms"


@dataclass(frozen=True)
class RequestRecord:
    """One served request: times in seconds since the measurement started.

    ``token_times_s[k]`` is when output token ``k`` existed (the first from prefill, the rest
    from decode steps); fewer than ``output_len`` of them means it did not finish.
    """

    id: int
    arrival_s: float
    prompt_len: int
    output_len: int
    token_times_s: tuple[float, ...]
    tokens: tuple[int, ...] = field(default=(), repr=False)
    worker: str = ""

    @property
    def finished(self) -> bool:
        return len(self.token_times_s) >= self.output_len

    @property
    def ttft_s(self) -> float:
        return self.token_times_s[0] - self.arrival_s if self.token_times_s else math.inf

    @property
    def tpot_s(self) -> float:
        if not self.finished:
            return math.inf
        n = len(self.token_times_s)
        return (self.token_times_s[-1] - self.token_times_s[0]) / (n - 1) if n > 1 else 0.0

    @property
    def latency_s(self) -> float:
        """Arrival to last token (end-to-end)."""
        return self.token_times_s[-1] - self.arrival_s if self.finished else math.inf

    def meets(self, slo: SLO) -> bool:
        return self.finished and self.ttft_s * 1000 <= slo.ttft_ms and self.tpot_s * 1000 <= slo.tpot_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "arrival_s": self.arrival_s, "prompt_len": self.prompt_len, "output_len": self.output_len,
            "token_times_s": list(self.token_times_s), "tokens": list(self.tokens), "worker": self.worker,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(d["id"], d["arrival_s"], d["prompt_len"], d["output_len"], tuple(d["token_times_s"]),
                   tuple(d.get("tokens", ())), d.get("worker", ""))


def attainment(records: Sequence[RequestRecord], slo: SLO) -> float:
    """Share of ``records`` that met both objectives (NaN for no records)."""
    if not records:
        return math.nan
    return sum(r.meets(slo) for r in records) / len(records)


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank ``q``-th percentile (0 < q <= 100); NaN for no values, infinite values allowed."""
    xs = sorted(values)
    check(0 < q <= 100, "percentile", q, "0 < q <= 100")
    if not xs:
        return math.nan
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def _ms(seconds: float) -> float | None:
    """Seconds to milliseconds for a report; None for an infinite or missing value (JSON has no inf)."""
    return None if not math.isfinite(seconds) else 1000 * seconds


def _share(x: float) -> float | None:
    return None if math.isnan(x) else x


@dataclass(frozen=True)
class RateMeasurement:
    """One rate, measured: the requests that arrived during ``duration_s`` and what they felt.

    ``horizon_s``: when the measurement stopped (arrivals end at ``duration_s``; the server then
    drains until every request that could still meet the SLO has had its chance). ``records``
    keep every request, so :meth:`rescore` judges the same run against other objectives.
    """

    mode: str
    rate_rps: float
    duration_s: float
    horizon_s: float
    slo: SLO
    records: tuple[RequestRecord, ...] = field(repr=False)
    info: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def requests(self) -> int:
        return len(self.records)

    @property
    def finished(self) -> int:
        return sum(r.finished for r in self.records)

    @property
    def attainment(self) -> float:
        return attainment(self.records, self.slo)

    @property
    def ttft_met(self) -> float:
        """Share that met the TTFT objective (whether or not they met TPOT)."""
        n = len(self.records)
        return sum(r.ttft_s * 1000 <= self.slo.ttft_ms for r in self.records) / n if n else math.nan

    @property
    def tpot_met(self) -> float:
        n = len(self.records)
        return sum(r.tpot_s * 1000 <= self.slo.tpot_ms for r in self.records) / n if n else math.nan

    def ttft_ms(self, q: float) -> float:
        return 1000 * percentile((r.ttft_s for r in self.records), q)

    def tpot_ms(self, q: float) -> float:
        return 1000 * percentile((r.tpot_s for r in self.records), q)

    @property
    def output_tokens(self) -> int:
        return sum(len(r.token_times_s) for r in self.records)

    @property
    def throughput_rps(self) -> float:
        """Finished requests per second of the measurement (arrivals window plus drain actually used)."""
        last = max((r.token_times_s[-1] for r in self.records if r.finished), default=0.0)
        return self.finished / max(self.duration_s, last) if self.records else 0.0

    @property
    def tokens_per_s(self) -> float:
        last = max((t[-1] for t in (r.token_times_s for r in self.records) if t), default=0.0)
        return self.output_tokens / max(self.duration_s, last) if self.records else 0.0

    @property
    def exact_for(self) -> bool:
        """True when the horizon left every request long enough to meet ``slo`` (attainment is exact)."""
        return _horizon_covers(self.horizon_s, self.duration_s, self.slo, max((r.output_len for r in self.records), default=1))

    def rescore(self, slo: SLO) -> RateMeasurement:
        """The same requests judged against ``slo``. With a looser SLO than the horizon covered
        (``exact_for`` false), requests cut off at the horizon count as misses: a lower bound."""
        return replace(self, slo=slo)

    def summary(self) -> dict[str, Any]:
        """The figures as a JSON-safe dict (infinite latencies become None)."""
        return {
            "mode": self.mode,
            "rate_rps": self.rate_rps,
            "duration_s": self.duration_s,
            "horizon_s": self.horizon_s,
            "ttft_slo_ms": self.slo.ttft_ms,
            "tpot_slo_ms": self.slo.tpot_ms,
            "requests": self.requests,
            "finished": self.finished,
            "attainment": _share(self.attainment),
            "ttft_met": _share(self.ttft_met),
            "tpot_met": _share(self.tpot_met),
            **{f"ttft_p{q}_ms": _ms(self.ttft_ms(q) / 1000) for q in (50, 90, 99)},
            **{f"tpot_p{q}_ms": _ms(self.tpot_ms(q) / 1000) for q in (50, 90, 99)},
            "throughput_rps": self.throughput_rps,
            "tokens_per_s": self.tokens_per_s,
        }


def drain_s(slo: SLO, max_output: int, margin_s: float = 0.05) -> float:
    """How long after the last arrival a measurement must run so its attainment is exact.

    A request arriving at ``a`` meets the SLO only if its last token comes by
    ``a + TTFT + TPOT x (output - 1)``; the last arrival is before ``duration_s``, so no request
    that could still meet the SLO is cut off by a horizon of ``duration_s`` plus this.
    """
    return slo.ttft_ms / 1000 + slo.tpot_ms / 1000 * max(0, max_output - 1) + margin_s


def _horizon_covers(horizon_s: float, duration_s: float, slo: SLO, max_output: int) -> bool:
    return horizon_s >= duration_s + drain_s(slo, max_output, margin_s=0.0) - 1e-9


def measure_records(records: Iterable[RequestRecord], slo: SLO, rate_rps: float, duration_s: float, horizon_s: float, mode: str = "", **info: Any) -> RateMeasurement:
    """Bundle one rate's records (sorted by request id) into a :class:`RateMeasurement`."""
    return RateMeasurement(mode, float(rate_rps), float(duration_s), float(horizon_s), slo,
                           tuple(sorted(records, key=lambda r: r.id)), dict(info))
