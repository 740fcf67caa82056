"""The data stall model: how long the training loop waits for its input, and how deep a pipeline must be.

Every time here is in **seconds** (per batch or per step); sizes are in **bytes**.
The symbols:

- ``L`` (``load_s``): mean storage read latency of one batch; ``jitter`` is its
  coefficient of variation (the emulated storage draws it log-normal, seeded per step).
- ``T`` (``transform_s``): CPU transform of one batch (decode, augment).
- ``R`` (``read_s``): what loading a batch costs when ``L = T = 0``: indexing the
  memory-mapped tokens and building tensors. Whoever loads pays it: the training
  loop itself with 0 workers, a worker process otherwise.
- ``H`` (``handoff_s``): what the training process pays per batch to receive it
  from a worker process (unpickling, one file-descriptor round trip per tensor
  storage), inside ``next()``, even when the batch is ready.
- ``W`` (``workers``) DataLoader worker processes, each with ``p`` (``prefetch``)
  batches in flight; the pipeline depth is ``D = W * p``.
- ``S`` (``step_s``): the loop's busy time per step (compute and bookkeeping)
  when it never waits; measured from a run fed from memory.

**Steady state, no jitter.** With 0 workers the loop loads each batch itself and
nothing overlaps: the wait per step is ``R + L + T``. With ``W`` workers, each takes
``L + T + R`` per batch, so together they deliver one batch every ``(L + T + R) / W``;
the loop consumes one every ``S + H``. The period is the slower of the two and the
wait per step is ``max(H, (L + T + R) / W - S)``: zero stall (beyond the hand-off)
needs ``W >= (L + T + R) / S``.

**Jitter and depth.** Throughput alone ignores variance: a slow read at the head
of the queue stalls the loop even when the average keeps pace, unless enough
batches were loaded ahead. :func:`simulate_waits` replays the DataLoader's rules
exactly (batch ``k`` goes to worker ``k mod W``; batch ``k + W*p`` is dispatched
when the loop takes batch ``k``; batches are returned in order) over a sequence of
per-batch latencies, and :func:`predict_stall` feeds it the very latencies the emulated
storage will draw (:func:`read_latency_s`, the law the emulated storage itself uses), so a prediction and a
measurement of the same seed see the same slow reads.

**Cores.** On a machine with few cores, workers that burn CPU (``T``) take it from
the training process. Work is conserved, so the period cannot be shorter than all
the CPU work of a step divided by the cores: ``(S + T + R + H) / cores``
(:func:`cpu_bound_period_s`, used when ``cores`` is given). It is a bound, not a
scheduler model: when it binds the prediction is optimistic.

**Restarts.** A failure kills the worker process group, DataLoader workers included, so
``persistent_workers`` (which keeps workers across epochs of one process) cannot carry
them over: every attempt forks new workers and waits for the resume step's batch
(``L + T`` of it) in its ``warmup`` phase. The ledger books that phase as ``startup`` in
the first attempt and as ``restart`` in every later one.
The measurements that calibrate and test this model (loop statistics of real runs,
the DS-Analyzer anatomy) are in :mod:`goodputlab.experiments.data_stall`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .. import validate
from ..errors import check

#: PyTorch's ``prefetch_factor`` when none is given (and workers > 0).
DEFAULT_PREFETCH = 2


# ---------------------------------------------------------------------------
# input checks


def _resolve_prefetch(workers: int, prefetch: int | None) -> int:
    if workers == 0:
        check(prefetch is None, "prefetch", prefetch, "None with 0 workers (nothing loads ahead)")
        return 0
    if prefetch is None:
        return DEFAULT_PREFETCH
    validate.whole("prefetch", prefetch, 1)
    return int(prefetch)


# ---------------------------------------------------------------------------
# the emulated storage


def read_latency_s(mean_s: float, cv: float, seed: int, step: int) -> float:
    """Seconds the emulated storage read of ``step``'s batch takes.

    Log-normal with mean ``mean_s`` seconds and coefficient of variation ``cv``,
    drawn from a generator seeded by ``(seed, step)``: the same step always waits
    the same time, in any process, so a model can replay a run's exact draws.
    The input pipeline's storage (:class:`goodputlab.pipeline.loader.SlowStorageDataset`)
    sleeps exactly this long.
    """
    if mean_s <= 0:
        return 0.0
    if cv <= 0:
        return mean_s
    sigma = math.sqrt(math.log1p(cv**2))  # log-normal with this coefficient of variation
    z = np.random.default_rng([seed, step, 0x10]).standard_normal()
    return mean_s * math.exp(sigma * z - sigma * sigma / 2)


# ---------------------------------------------------------------------------
# the closed forms


def loader_batch_s(load_s: float, transform_s: float, read_s: float = 0.0) -> float:
    """Seconds one loader (a worker, or the loop itself) spends on one batch: ``L + T + R``."""
    for v, n in ((load_s, "load_s"), (transform_s, "transform_s"), (read_s, "read_s")):
        validate.seconds(n, v)
    return load_s + transform_s + read_s


def cpu_bound_period_s(step_s: float, transform_s: float, cores: int, read_s: float = 0.0, handoff_s: float = 0.0) -> float:
    """The shortest step period ``cores`` CPU cores allow, in seconds: ``(S + T + R + H) / cores``.

    Assumes the step computes on one core for ``step_s`` and the transform, the
    read and the hand-off of each batch are CPU work too (storage latency is not:
    it sleeps). A lower bound on the period by conservation of work.
    """
    validate.whole("cores", cores, 1)
    return (step_s + loader_batch_s(0.0, transform_s, read_s) + handoff_s) / cores


def steady_state_wait_s(
    load_s: float,
    transform_s: float,
    workers: int,
    step_s: float,
    read_s: float = 0.0,
    handoff_s: float = 0.0,
    cores: int | None = None,
) -> float:
    """Data wait per step in the steady state without jitter, in seconds.

    0 workers: ``R + L + T`` (the loop loads every batch itself). ``W`` workers:
    ``max(H, (L + T + R) / W - S)``. With ``cores`` the period is also held to
    :func:`cpu_bound_period_s` when workers share the cores with the step.

    >>> round(steady_state_wait_s(0.030, 0.010, workers=2, step_s=0.015), 6)  # (30+10)/2 - 15 ms
    0.005
    """
    validate.whole("workers", workers, 0)
    validate.seconds("step_s", step_s)
    validate.seconds("handoff_s", handoff_s)
    per_batch = loader_batch_s(load_s, transform_s, read_s)
    if workers == 0:
        return per_batch
    period = max(step_s + handoff_s, per_batch / workers)
    if cores is not None:
        period = max(period, cpu_bound_period_s(step_s, transform_s, cores, read_s, handoff_s))
    return period - step_s


def supply_ratio(load_s: float, transform_s: float, workers: int, step_s: float, read_s: float = 0.0) -> float:
    """Batches per second the workers can deliver over batches per second the step consumes: ``W S / (L + T + R)``.

    Above 1 the pipeline can keep pace on average; 0 with 0 workers (nothing
    loads in parallel with the step); infinite when loading costs nothing.
    """
    validate.whole("workers", workers, 0)
    validate.seconds("step_s", step_s)
    per_batch = loader_batch_s(load_s, transform_s, read_s)
    if workers == 0:
        return 0.0
    return math.inf if per_batch == 0 else workers * step_s / per_batch


def workers_needed(load_s: float, transform_s: float, step_s: float, read_s: float = 0.0, headroom: float = 1.0) -> int:
    """The fewest workers whose supply is at least ``headroom`` times the step's appetite.

    ``ceil(headroom * (L + T + R) / S)``, at least 1. ``headroom`` 1.2 leaves 20%
    spare throughput for jitter.
    """
    validate.seconds("step_s", step_s, positive=True)
    validate.number("headroom", headroom, 1)
    per_batch = loader_batch_s(load_s, transform_s, read_s)
    return max(1, math.ceil(headroom * per_batch / step_s - 1e-9))


def batch_bytes(batch_size: int, context: int) -> int:
    """Bytes of one of this lab's batches: int64 rows of ``context + 1`` tokens plus the sample index."""
    validate.whole("batch_size", batch_size, 1)
    validate.whole("context", context, 1)
    return 8 * batch_size * (context + 2)


def pipeline_memory_bytes(batch_nbytes: int, workers: int, prefetch: int | None = None, pin_memory: bool = False) -> int:
    """Host memory the loader holds ahead of the loop, in bytes: ``batch_nbytes * W * p``.

    Up to ``W * p`` batches are in flight at once (loaded, or being loaded). Pinned
    memory keeps a second, pinned copy of each loaded batch (the pin thread copies
    it out of shared memory), so ``pin_memory`` doubles it. A device prefetcher
    adds one batch in device memory (not counted here).
    """
    validate.whole("batch_nbytes", batch_nbytes, 0)
    validate.whole("workers", workers, 0)
    depth = workers * _resolve_prefetch(workers, prefetch)
    return batch_nbytes * depth * (2 if pin_memory else 1)


# ---------------------------------------------------------------------------
# the queue, replayed exactly


def simulate_waits(
    latencies_s: Sequence[float] | np.ndarray,
    transform_s: float,
    workers: int,
    prefetch: int | None,
    step_s: float | Sequence[float] | np.ndarray,
    read_s: float = 0.0,
    handoff_s: float = 0.0,
) -> np.ndarray:
    """Seconds the training loop waits in ``next()`` for each batch; one entry per step.

    ``latencies_s[k]`` is batch ``k``'s storage latency; ``step_s`` is the loop's
    busy time per step (a number, or one per step). Time 0 is the loader's start:
    the first ``W * p`` batches are dispatched then (the first batch's wait, entry 0,
    is the ledger's warm-up, not data wait). Then, as in PyTorch's DataLoader,
    batch ``k`` is loaded by worker ``k mod W`` in order, batch ``k + W*p`` is
    dispatched when the loop takes batch ``k``, and the loop takes batches in order,
    paying ``handoff_s`` for each. With 0 workers the loop loads each batch itself.
    """
    lat = np.asarray(latencies_s, dtype=float)
    n = lat.size
    validate.whole("workers", workers, 0)
    p = _resolve_prefetch(workers, prefetch)
    for v, name in ((transform_s, "transform_s"), (read_s, "read_s"), (handoff_s, "handoff_s")):
        validate.seconds(name, v)
    bad = lat[~(np.isfinite(lat) & (lat >= 0))]
    check(bad.size == 0, "latencies_s", float(bad[0]) if bad.size else None, "finite seconds >= 0")
    steps = np.broadcast_to(np.asarray(step_s, dtype=float), (n,))
    check(bool(np.all(np.isfinite(steps)) and np.all(steps >= 0)), "step_s", step_s, "finite seconds >= 0")
    if workers == 0:
        return lat + transform_s + read_s
    depth = workers * p
    service = lat + transform_s + read_s
    ready = np.empty(n)  # when batch k sits finished in the worker's output queue
    taken = np.empty(n)  # when next() returned batch k to the loop
    waits = np.empty(n)
    dispatch = np.zeros(n)  # batches 0 .. depth-1 are dispatched at the start
    worker_free = np.zeros(workers)
    # Batches are loaded in dispatch order and dispatch only depends on earlier
    # batches being taken, so one pass in k order settles everything.
    for k in range(n):
        w = k % workers
        start = max(dispatch[k], worker_free[w])
        ready[k] = worker_free[w] = start + service[k]
        arrive = 0.0 if k == 0 else taken[k - 1] + steps[k - 1]  # the loop asks for batch k
        taken[k] = max(arrive, ready[k]) + handoff_s
        waits[k] = taken[k] - arrive
        if k + depth < n:
            dispatch[k + depth] = taken[k]
    return waits


def emulated_latencies(load_s: float, jitter: float, seed: int, steps: int, start_step: int = 0) -> np.ndarray:
    """The storage latencies (seconds) the emulated storage draws for ``steps`` batches from ``start_step``.

    Exactly :meth:`goodputlab.pipeline.loader.SlowStorageDataset.read_latency`'s draws (:func:`read_latency_s`).
    """
    validate.seconds("load_s", load_s)
    validate.number("jitter", jitter, 0, allowed="a coefficient of variation >= 0")
    validate.whole("steps", steps, 0)
    return np.array([read_latency_s(load_s, jitter, seed, s) for s in range(start_step, start_step + steps)])


@dataclass(frozen=True)
class StallPrediction:
    """What the model expects of one configuration's training loop."""

    waits_s: np.ndarray = field(repr=False)
    """Data wait before each step, seconds (entry 0: the first batch, booked as warm-up)."""
    busy_s: np.ndarray = field(repr=False)
    """The busy time of each step the prediction assumed, seconds."""
    batch_size: int
    ceiling_period_s: float
    """Step period when fed from memory (``S + R``), seconds."""

    @property
    def step_s(self) -> float:
        """Mean busy time per step, seconds."""
        return float(self.busy_s.mean())

    @property
    def wait_per_step_s(self) -> float:
        """Mean data wait per step after the first, seconds."""
        return float(self.waits_s[1:].mean()) if self.waits_s.size > 1 else 0.0

    @property
    def period_s(self) -> float:
        """Mean step period after the first step, seconds."""
        return float(self.busy_s[:-1].mean()) + self.wait_per_step_s if self.busy_s.size > 1 else self.step_s

    @property
    def wait_share(self) -> float:
        """Data wait over the training loop's wall time (after the first step)."""
        return self.wait_per_step_s / self.period_s if self.period_s > 0 else 0.0

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.period_s if self.period_s > 0 else math.inf

    @property
    def ceiling_samples_per_s(self) -> float:
        """Samples per second of the compute-only ceiling."""
        return self.batch_size / self.ceiling_period_s if self.ceiling_period_s > 0 else math.inf


def predict_stall(
    load_s: float,
    transform_s: float,
    workers: int,
    prefetch: int | None,
    step_s: float | Sequence[float] | np.ndarray,
    steps: int,
    jitter: float = 0.0,
    seed: int = 0,
    read_s: float = 0.0,
    handoff_s: float = 0.0,
    batch_size: int = 1,
    cores: int | None = None,
) -> StallPrediction:
    """Predict the data wait of a loop of ``steps`` steps, replaying the emulated storage's draws.

    ``step_s`` (``S``: one number, or each step's busy time), ``read_s`` and
    ``handoff_s`` are measured (see :func:`goodputlab.experiments.data_stall.calibrate` and
    :func:`goodputlab.experiments.data_stall.busy_times_s`);
    ``cores`` (optional) applies :func:`cpu_bound_period_s` when workers share the
    machine's cores with the step.
    """
    validate.whole("steps", steps, 1)
    busy = np.broadcast_to(np.asarray(step_s, dtype=float), (steps,)).copy()
    check(bool(np.all(np.isfinite(busy)) and np.all(busy >= 0)), "step_s", step_s, "finite seconds >= 0")
    ceiling = float(busy.mean()) + read_s
    if cores is not None and workers > 0:
        floor = cpu_bound_period_s(float(busy.mean()), transform_s, cores, read_s, handoff_s) - handoff_s
        busy = np.maximum(busy, floor)
    latencies = emulated_latencies(load_s, jitter, seed, steps)
    waits = simulate_waits(latencies, transform_s, workers, prefetch, busy, read_s, handoff_s)
    return StallPrediction(waits, busy, batch_size, ceiling)


@dataclass(frozen=True)
class DepthAdvice:
    """How deep a pipeline must be for a target stall share."""

    feasible: bool
    """False when no depth is enough: the workers cannot keep pace on average (or the hand-off alone exceeds the target)."""
    workers: int
    prefetch: int | None
    """Batches per worker; None when not feasible."""
    depth: int | None
    """``workers * prefetch`` batches in flight; None when not feasible."""
    predicted_share: float
    """Data-wait share at that depth (or at the deepest tried, when not feasible)."""
    workers_needed: int
    """Workers for a supply of 1.2x the step's appetite (what to raise when not feasible)."""
    memory_bytes: int | None
    """Host bytes held by that depth (:func:`pipeline_memory_bytes`); None when not feasible."""


def depth_for_share(
    target_share: float,
    load_s: float,
    transform_s: float,
    workers: int,
    step_s: float,
    jitter: float = 0.0,
    read_s: float = 0.0,
    handoff_s: float = 0.0,
    batch_nbytes: int = 0,
    max_prefetch: int = 64,
    steps: int = 2000,
    seed: int = 0,
) -> DepthAdvice:
    """The smallest prefetch per worker that keeps the data-wait share at or below ``target_share``.

    Simulates ``steps`` steps of seeded jittered latencies (:func:`simulate_waits`)
    for prefetch 1, 2, ... ``max_prefetch`` and judges the steady state: the first
    tenth of the steps (the pipeline filling up after the loader starts, which no
    depth can hide) is left out. With ``workers == 0`` only the share of the serial
    loop is reported (nothing can be loaded ahead).
    """
    validate.number("target_share", target_share, 0, 1, low_open=True, high_open=True, allowed="a share between 0 and 1")
    validate.whole("workers", workers, 0)
    validate.whole("max_prefetch", max_prefetch, 1)
    validate.seconds("step_s", step_s, positive=True)
    needed = workers_needed(load_s, transform_s, step_s, read_s, headroom=1.2)
    latencies = emulated_latencies(load_s, jitter, seed, steps)

    settled = max(1, steps // 10)

    def share(prefetch: int | None) -> float:
        w = simulate_waits(latencies, transform_s, workers, prefetch, step_s, read_s, handoff_s)[settled:]
        return float(w.sum() / (w.sum() + step_s * w.size))

    if workers == 0:
        return DepthAdvice(share(None) <= target_share, 0, None, 0, share(None), needed, 0)
    last = 1.0
    for p in range(1, max_prefetch + 1):
        last = share(p)
        if last <= target_share:
            return DepthAdvice(True, workers, p, workers * p, last, needed, pipeline_memory_bytes(batch_nbytes, workers, p))
    return DepthAdvice(False, workers, None, None, last, needed, None)


@dataclass(frozen=True)
class Calibration:
    """The measured constants of the model, in seconds per step or per batch."""

    step_s: float
    """``S``: busy time per step of the compute-only run."""
    read_s: float
    """``R``: its data wait per step (loading from memory in the loop)."""
    handoff_s: float
    """``H``: data wait per step of a run with workers whose supply is ample."""
