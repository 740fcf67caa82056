"""Clusters of devices that fail independently, and the public figures the book reproduces.

A synchronous job on ``N`` devices stops when any one fails, so its MTBF is the
device's over ``N`` (:func:`cluster_mtbf`). The public figures: Llama 3's
pretraining interruptions (54 days on 16,384 GPUs, 466 interruptions, Table 5's
causes) and the GUIDE's worked example of 8.6 interruptions a day. Times in
seconds.
"""

from __future__ import annotations

import math
from typing import Sequence

from .. import validate
from .closed_forms import daly_goodput
from .units import SECONDS_PER_DAY, compact_duration


def cluster_mtbf(n_devices: int, device_mtbf_s: float) -> float:
    """Job-level MTBF (seconds) of ``n_devices`` that each fail independently.

    Each device fails as a Poisson process with rate ``1/device_mtbf_s``; a
    synchronous job stops when any one fails, and the superposition of
    independent Poisson processes is Poisson with the summed rate, so the job's
    MTBF is ``device_mtbf_s / n_devices``.
    """
    validate.whole("n_devices", n_devices, 1)
    validate.seconds("device_mtbf_s", device_mtbf_s, positive=True)
    return device_mtbf_s / n_devices


def expected_failures(n_devices: int, device_mtbf_s: float, duration_s: float) -> float:
    """Expected number of job failures in ``duration_s`` seconds: ``n * T / M_device``."""
    validate.seconds("duration_s", duration_s)
    return duration_s / cluster_mtbf(n_devices, device_mtbf_s)


def p_any_failure(n_devices: int, device_mtbf_s: float, duration_s: float) -> float:
    """Probability that at least one of ``n_devices`` fails within ``duration_s`` seconds.

    ``1 - exp(-n * T / M_device)``: the chance the job's first Poisson event
    comes before ``T``.
    """
    return -math.expm1(-expected_failures(n_devices, device_mtbf_s, duration_s))


def device_mtbf_for_count(n_devices: int, duration_s: float, failure_count: float) -> float:
    """Per-device MTBF (seconds) that makes ``failure_count`` job failures expected.

    The inverse of :func:`expected_failures`: ``n * T / count``. For Llama 3
    (16,384 GPUs, 54 days, 466 interruptions) it is about 5.2 years per GPU.
    """
    validate.whole("n_devices", n_devices, 1)
    validate.seconds("duration_s", duration_s, positive=True)
    validate.number("failure_count", failure_count, 0, low_open=True)
    return n_devices * duration_s / failure_count


# ---------------------------------------------------------------------------
# public figures
#
# Llama 3 pretraining: "The Llama 3 Herd of Models", Llama Team, AI @ Meta,
# 2024, section 3.3.4 (Reliability and Operational Challenges) and Table 5.
# A 54-day snapshot of the 405B pretraining run on 16,384 H100 GPUs.

LLAMA3_DAYS = 54
LLAMA3_DURATION_S = LLAMA3_DAYS * SECONDS_PER_DAY
LLAMA3_GPUS = 16_384
LLAMA3_INTERRUPTIONS = 466  # all job interruptions in the snapshot
LLAMA3_PLANNED_INTERRUPTIONS = 47  # automated maintenance (firmware, config, dataset updates)
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419  # the rows of Table 5
LLAMA3_EFFECTIVE_TRAINING_TIME = 0.90  # reported as "higher than 90%": a lower bound

# Table 5, root causes of the 419 unexpected interruptions: (component,
# category as the paper groups it, count). The paper's percentage column has
# Faulty GPU at 30.1%, which does not match 148/419 = 35.3% (the other rows do
# match count/419); we keep the counts, which sum to 419, and recompute shares.
_LLAMA3_TABLE5 = (
    ("Faulty GPU", "GPU", 148),
    ("GPU HBM3 memory", "GPU", 72),
    ("Software bug", "Dependency", 54),
    ("Network switch/cable", "Network", 35),
    ("Host maintenance", "Unplanned maintenance", 32),
    ("GPU SRAM memory", "GPU", 19),
    ("GPU system processor", "GPU", 17),
    ("NIC", "Host", 7),
    ("NCCL watchdog timeouts", "Unknown", 7),
    ("Silent data corruption", "GPU", 6),
    ("GPU thermal interface + sensor", "GPU", 6),
    ("SSD", "Host", 3),
    ("Power supply", "Host", 3),
    ("Server chassis", "Host", 2),
    ("IO expansion board", "Host", 2),
    ("Dependency", "Dependency", 2),
    ("CPU", "Host", 2),
    ("System memory", "Host", 2),
)

#: Table 5 as chart-ready rows: cause, component category, count, share of the 419.
LLAMA3_INTERRUPTION_CAUSES: list[dict] = [
    {"cause": cause, "component": component, "count": count, "share": count / LLAMA3_UNEXPECTED_INTERRUPTIONS}
    for cause, component, count in _LLAMA3_TABLE5
]


def llama3_cause_table(include_planned: bool = True) -> list[tuple[str, int]]:
    """Llama 3's interruption causes as ``(cause, count)`` pairs for :class:`~goodputlab.theory.simulator.SimConfig`.

    The counts are over the 54-day snapshot on 16,384 GPUs. With
    ``include_planned`` a row "Planned maintenance" (47) is added so the table
    sums to all 466 interruptions; without it, to the 419 unexpected ones.
    """
    rows = [(cause, count) for cause, _, count in _LLAMA3_TABLE5]
    if include_planned:
        rows.append(("Planned maintenance", LLAMA3_PLANNED_INTERRUPTIONS))
    return rows


def llama3_mtbf_s() -> float:
    """Llama 3's job-level MTBF in seconds: 54 days over 466 interruptions, about 2.78 hours."""
    return LLAMA3_DURATION_S / LLAMA3_INTERRUPTIONS


def llama3_cost_grid(
    intervals_s: Sequence[float],
    restarts_s: Sequence[float],
    save_s: float,
    mtbf_s: float | None = None,
) -> list[dict]:
    """Daly's goodput at Llama 3's interruption rate for each (checkpoint interval, restart time).

    Which checkpoint and restart costs give the reported "effective training
    time above 90%"? ``intervals_s`` and ``restarts_s`` are in seconds,
    ``save_s`` the blocking part of a save (seconds); ``mtbf_s`` defaults to
    :func:`llama3_mtbf_s` (all 466 interruptions counted as failures). One row
    per pair: ``interval_s, restart_s, goodput``, and ``x_label``, ``y_label``,
    ``x_title``, ``y_title`` for :func:`goodputlab.charts.theory.goodput_grid_chart`.
    """
    mtbf = llama3_mtbf_s() if mtbf_s is None else mtbf_s
    rows = []
    for restart in restarts_s:
        for interval in intervals_s:
            rows.append(
                {
                    "interval_s": float(interval),
                    "restart_s": float(restart),
                    "goodput": daly_goodput(interval, save_s, restart, mtbf),
                    "x_label": compact_duration(interval),
                    "y_label": compact_duration(restart),
                    "x_title": "checkpoint interval",
                    "y_title": "restart (detect, reschedule, reload)",
                }
            )
    return rows


def grid_reach(grid: Sequence[dict], threshold: float) -> dict:
    """What a :func:`llama3_cost_grid` says about reaching ``threshold`` (a goodput share), in its labels.

    ``interval``: the longest interval that reaches it with a restart slower than the grid's fastest;
    ``interval_fast_restart``: the longest that reaches it at all, with ``fast_restart``, the grid's
    fastest restart; ``restart``: the slowest restart that reaches it; ``never_interval`` and
    ``never_restart``: the shortest interval and the fastest restart that reach it with no setting of
    the other (None when every one does). Labels as the grid's (``"20 min"``).
    """
    above = [r for r in grid if r["goodput"] >= threshold]
    if not above:
        raise ValueError(f"no setting of the grid reaches {threshold:.0%}")
    interval_label = {r["interval_s"]: r["x_label"] for r in grid}
    restart_label = {r["restart_s"]: r["y_label"] for r in grid}
    fastest = min(restart_label)
    slower = [r["interval_s"] for r in above if r["restart_s"] > fastest] or [min(interval_label)]
    never_interval = sorted(set(interval_label) - {r["interval_s"] for r in above})
    never_restart = sorted(set(restart_label) - {r["restart_s"] for r in above})
    return {
        "interval": interval_label[max(slower)],
        "interval_fast_restart": interval_label[max(r["interval_s"] for r in above)],
        "fast_restart": restart_label[fastest],
        "restart": restart_label[max(r["restart_s"] for r in above)],
        "never_interval": interval_label[never_interval[0]] if never_interval else None,
        "never_restart": restart_label[never_restart[0]] if never_restart else None,
    }


# The GUIDE's worked example: about 8.6 interruptions a day (Llama 3's rate,
# 466 / 54 = 8.63). First order: a 2-hour interval loses ~1 h per failure,
# 8.6 h a day (64% goodput); a 30-minute interval ~2.15 h a day (91%).
WORKED_EXAMPLE_INTERRUPTIONS_PER_DAY = 8.6
WORKED_EXAMPLE_MTBF_S = SECONDS_PER_DAY / WORKED_EXAMPLE_INTERRUPTIONS_PER_DAY  # ~10,047 s = 2.79 h
