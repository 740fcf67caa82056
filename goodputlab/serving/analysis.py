"""Reading a measurement: how much decoding waited for prefill, and how the gaps between tokens spread.

Pure: works on a :class:`~goodputlab.serving.slo.RateMeasurement`'s records and its workers'
traces (spans ``(kind, start, end, size, waiting)``, see :mod:`goodputlab.serving.engine`).
"""

from __future__ import annotations

import statistics
from typing import Any

from .slo import RateMeasurement, percentile


def token_gaps_ms(m: RateMeasurement) -> list[float]:
    """Every gap between two consecutive output tokens of every request, in ms."""
    return [1000 * (b - a) for r in m.records for a, b in zip(r.token_times_s, r.token_times_s[1:])]


def interference(m: RateMeasurement) -> dict[str, Any]:
    """What prefill cost the requests that were decoding, from the traces and the token times.

    * ``prefills_interrupting``: prefills that ran while sequences were decoding on the same
      worker; ``stall_seq_s``: the sequence-seconds those sequences spent waiting for them
      (a 30 ms prefill with 8 sequences running costs 0.24 sequence-seconds).
    * ``decode_step_ms_median``, ``prefill_ms_median``: the typical length of each kind of work.
    * ``gap_p50_ms``, ``gap_p99_ms``: inter-token gaps felt by readers; ``gaps_over_tpot``: the
      share of gaps longer than the TPOT objective (one slow gap does not miss the SLO by itself,
      TPOT is an average, but many do).
    """
    prefills = stalled = 0
    stall = 0.0
    decode_ms, prefill_ms = [], []
    for spans in m.info.get("traces", {}).values():
        for kind, a, b, _size, waiting in spans:
            if kind == "decode":
                decode_ms.append(1000 * (b - a))
            elif kind == "prefill":
                prefill_ms.append(1000 * (b - a))
                if waiting:
                    prefills += 1
                    stalled += waiting
                    stall += waiting * (b - a)
    gaps = token_gaps_ms(m)
    return {
        "decode_steps": len(decode_ms),
        "decode_step_ms_median": statistics.median(decode_ms) if decode_ms else None,
        "prefills": len(prefill_ms),
        "prefill_ms_median": statistics.median(prefill_ms) if prefill_ms else None,
        "prefills_interrupting": prefills,
        "stall_seq_s": stall,
        "gap_p50_ms": percentile(gaps, 50) if gaps else None,
        "gap_p99_ms": percentile(gaps, 99) if gaps else None,
        "gaps_over_tpot": sum(g > m.slo.tpot_ms for g in gaps) / len(gaps) if gaps else None,
    }
