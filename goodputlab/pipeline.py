"""The input pipeline: a model of the data stall, and its anatomy measured by differencing runs.

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
per-batch latencies, and :func:`predict` feeds it the very latencies the emulated
storage will draw (:func:`goodputlab.data.read_latency_s`), so a prediction and a
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

**Anatomy.** :func:`stall_anatomy` runs three real, supervised variants of one
configuration, as DS-Analyzer does (Mohan et al., "Analyzing and Mitigating Data
Stalls in DNN Training", VLDB 2021): *compute-only* (data from memory, in the loop:
the ceiling), *prep-only* (the same workers and transform, no storage latency) and
*full*. The differences of their step periods are the *prep stall* and the *fetch
stall*; beside them stands the data wait that each run's ledger booked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import categories as C
from .config import RunConfig
from .data import read_latency_s
from .errors import check

if TYPE_CHECKING:  # pragma: no cover
    from .api import RunResult

#: PyTorch's ``prefetch_factor`` when none is given (and workers > 0).
DEFAULT_PREFETCH = 2


# ---------------------------------------------------------------------------
# input checks


def _seconds(value: float, name: str) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    check(ok, name, value, "a finite number of seconds >= 0")


def _count(value: int, name: str, minimum: int) -> None:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum
    check(ok, name, value, f"a whole number >= {minimum}")


def _resolve_prefetch(workers: int, prefetch: int | None) -> int:
    if workers == 0:
        check(prefetch is None, "prefetch", prefetch, "None with 0 workers (nothing loads ahead)")
        return 0
    if prefetch is None:
        return DEFAULT_PREFETCH
    _count(prefetch, "prefetch", 1)
    return int(prefetch)


# ---------------------------------------------------------------------------
# the closed forms


def loader_batch_s(load_s: float, transform_s: float, read_s: float = 0.0) -> float:
    """Seconds one loader (a worker, or the loop itself) spends on one batch: ``L + T + R``."""
    for v, n in ((load_s, "load_s"), (transform_s, "transform_s"), (read_s, "read_s")):
        _seconds(v, n)
    return load_s + transform_s + read_s


def cpu_bound_period_s(step_s: float, transform_s: float, cores: int, read_s: float = 0.0, handoff_s: float = 0.0) -> float:
    """The shortest step period ``cores`` CPU cores allow, in seconds: ``(S + T + R + H) / cores``.

    Assumes the step computes on one core for ``step_s`` and the transform, the
    read and the hand-off of each batch are CPU work too (storage latency is not:
    it sleeps). A lower bound on the period by conservation of work.
    """
    _count(cores, "cores", 1)
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
    _count(workers, "workers", 0)
    _seconds(step_s, "step_s")
    _seconds(handoff_s, "handoff_s")
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
    _count(workers, "workers", 0)
    _seconds(step_s, "step_s")
    per_batch = loader_batch_s(load_s, transform_s, read_s)
    if workers == 0:
        return 0.0
    return math.inf if per_batch == 0 else workers * step_s / per_batch


def workers_needed(load_s: float, transform_s: float, step_s: float, read_s: float = 0.0, headroom: float = 1.0) -> int:
    """The fewest workers whose supply is at least ``headroom`` times the step's appetite.

    ``ceil(headroom * (L + T + R) / S)``, at least 1. ``headroom`` 1.2 leaves 20%
    spare throughput for jitter.
    """
    _seconds(step_s, "step_s")
    check(step_s > 0, "step_s", step_s, "seconds > 0")
    check(math.isfinite(headroom) and headroom >= 1, "headroom", headroom, "a number >= 1")
    per_batch = loader_batch_s(load_s, transform_s, read_s)
    return max(1, math.ceil(headroom * per_batch / step_s - 1e-9))


def batch_bytes(batch_size: int, context: int) -> int:
    """Bytes of one of this lab's batches: int64 rows of ``context + 1`` tokens plus the sample index."""
    _count(batch_size, "batch_size", 1)
    _count(context, "context", 1)
    return 8 * batch_size * (context + 2)


def pipeline_memory_bytes(batch_nbytes: int, workers: int, prefetch: int | None = None, pin_memory: bool = False) -> int:
    """Host memory the loader holds ahead of the loop, in bytes: ``batch_nbytes * W * p``.

    Up to ``W * p`` batches are in flight at once (loaded, or being loaded). Pinned
    memory keeps a second, pinned copy of each loaded batch (the pin thread copies
    it out of shared memory), so ``pin_memory`` doubles it. A device prefetcher
    adds one batch in device memory (not counted here).
    """
    _count(batch_nbytes, "batch_nbytes", 0)
    _count(workers, "workers", 0)
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
    _count(workers, "workers", 0)
    p = _resolve_prefetch(workers, prefetch)
    for v, name in ((transform_s, "transform_s"), (read_s, "read_s"), (handoff_s, "handoff_s")):
        _seconds(v, name)
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

    Exactly :meth:`goodputlab.data.SlowStorageDataset.read_latency`'s draws.
    """
    _seconds(load_s, "load_s")
    check(math.isfinite(jitter) and jitter >= 0, "jitter", jitter, "a coefficient of variation >= 0")
    _count(steps, "steps", 0)
    return np.array([read_latency_s(load_s, jitter, seed, s) for s in range(start_step, start_step + steps)])


@dataclass(frozen=True)
class Prediction:
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


def predict(
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
) -> Prediction:
    """Predict the data wait of a loop of ``steps`` steps, replaying the emulated storage's draws.

    ``step_s`` (``S``: one number, or each step's busy time), ``read_s`` and
    ``handoff_s`` are measured (see :func:`calibrate` and :func:`busy_times_s`);
    ``cores`` (optional) applies :func:`cpu_bound_period_s` when workers share the
    machine's cores with the step.
    """
    _count(steps, "steps", 1)
    busy = np.broadcast_to(np.asarray(step_s, dtype=float), (steps,)).copy()
    check(bool(np.all(np.isfinite(busy)) and np.all(busy >= 0)), "step_s", step_s, "finite seconds >= 0")
    ceiling = float(busy.mean()) + read_s
    if cores is not None and workers > 0:
        floor = cpu_bound_period_s(float(busy.mean()), transform_s, cores, read_s, handoff_s) - handoff_s
        busy = np.maximum(busy, floor)
    latencies = emulated_latencies(load_s, jitter, seed, steps)
    waits = simulate_waits(latencies, transform_s, workers, prefetch, busy, read_s, handoff_s)
    return Prediction(waits, busy, batch_size, ceiling)


def predict_run(
    config: RunConfig,
    calibration: Calibration,
    cores: int | None = None,
    step_times_s: Sequence[float] | np.ndarray | None = None,
) -> Prediction:
    """:func:`predict` for a :class:`~goodputlab.config.RunConfig` (without failures).

    The step's busy time is ``calibration.step_s``, or each step's own when
    ``step_times_s`` is given (see :func:`busy_times_s`).
    """
    return predict(
        load_s=config.io_latency_ms / 1000,
        transform_s=config.transform_ms / 1000,
        workers=config.workers,
        prefetch=config.prefetch,
        step_s=calibration.step_s if step_times_s is None else step_times_s,
        steps=config.steps,
        jitter=config.io_jitter,
        seed=config.seed,
        read_s=calibration.read_s,
        handoff_s=calibration.handoff_s,
        batch_size=config.resolved_batch_size(),
        cores=cores,
    )


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
    check(math.isfinite(target_share) and 0 < target_share < 1, "target_share", target_share, "a share between 0 and 1")
    _count(workers, "workers", 0)
    _count(max_prefetch, "max_prefetch", 1)
    check(step_s > 0, "step_s", step_s, "seconds > 0")
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


# ---------------------------------------------------------------------------
# measuring real runs


@dataclass(frozen=True)
class LoopStats:
    """The training loop of one real run, measured from its ledger.

    The loop of an attempt runs from its first ``data_wait`` to the end of its
    last step's compute; its first step is left out (that batch's wait is
    warm-up). ``data_wait_s`` is the ledger's data-wait booking, all of which
    lies inside the loops. Blocking checkpoint saves are taken out of ``loop_s``.
    """

    label: str
    steps: int
    loop_s: float
    data_wait_s: float
    compute_s: float
    batch_size: int
    warmup_s: float
    """Seconds of the ``warmup`` phase (loader start and first batch), all attempts."""

    @property
    def period_s(self) -> float:
        """Mean wall seconds per step."""
        return self.loop_s / self.steps

    @property
    def wait_per_step_s(self) -> float:
        return self.data_wait_s / self.steps

    @property
    def busy_per_step_s(self) -> float:
        """Mean seconds per step not spent waiting for data (compute and bookkeeping)."""
        return (self.loop_s - self.data_wait_s) / self.steps

    @property
    def wait_share(self) -> float:
        """Data wait over the loop's wall time."""
        return self.data_wait_s / self.loop_s if self.loop_s > 0 else 0.0

    @property
    def samples_per_s(self) -> float:
        return self.batch_size * self.steps / self.loop_s


def loop_stats(result: RunResult, label: str = "") -> LoopStats:
    """Measure the training loop of ``result`` (see :class:`LoopStats`)."""
    segments = result.ledger.segments
    loop_s = data_wait_s = compute_s = warmup_s = 0.0
    steps = 0
    for attempt in sorted({s.attempt for s in segments}):
        mine = [s for s in segments if s.attempt == attempt]
        warmup_s += sum(s.duration for s in mine if s.kind == "warmup")
        waits = [s for s in mine if s.kind == "data_wait"]
        computes = [s for s in mine if s.kind == "compute"]
        if not waits or not computes:
            continue
        start, end = waits[0].start, computes[-1].end
        inside = [s for s in mine if start <= s.start < end]
        loop_s += end - start - sum(s.duration for s in inside if s.category == C.CHECKPOINT_SAVE)
        data_wait_s += sum(s.duration for s in inside if s.category == C.DATA_WAIT)
        compute_s += sum(s.duration for s in inside if s.kind == "compute")
        steps += sum(1 for s in inside if s.kind == "compute")
    check(steps > 0, "steps", result.summary["config"]["steps"], "at least 2 steps in an attempt to measure a loop")
    return LoopStats(
        label, steps, loop_s, data_wait_s, compute_s, result.config.resolved_batch_size(), warmup_s
    )


def busy_times_s(result: RunResult) -> np.ndarray:
    """Each step's busy time in a run without failures, seconds, in step order.

    Step ``k``'s busy time runs from the loop taking its batch (its ``compute``
    event) to the loop asking for the next one (the next ``data_wait`` event):
    compute and bookkeeping, no waiting. The last step has no next request; it
    gets the mean of the others. Feeding these to :func:`predict` replays the
    consumer side of the run exactly, so what remains to predict is the loader.
    """
    check(result.summary["failures"] == 0, "failures", result.summary["failures"], "0 (one attempt to replay)")
    took: dict[int, float] = {}
    asked: dict[int, float] = {}
    for e in result.events:
        if e["kind"] == "compute":
            took[e["step"]] = e["t"]
        elif e["kind"] == "data_wait":
            asked[e["step"]] = e["t"]
    steps = sorted(took)
    busy = np.array([asked[s + 1] - took[s] for s in steps[:-1]])
    return np.append(busy, busy.mean() if busy.size else 0.0)


@dataclass(frozen=True)
class Calibration:
    """The measured constants of the model, in seconds per step or per batch."""

    step_s: float
    """``S``: busy time per step of the compute-only run."""
    read_s: float
    """``R``: its data wait per step (loading from memory in the loop)."""
    handoff_s: float
    """``H``: data wait per step of a run with workers whose supply is ample."""


def calibrate(compute_only: LoopStats, handoff: LoopStats | None = None) -> Calibration:
    """``S`` and ``R`` from a compute-only run; ``H`` from a run with workers and ample supply (0 without one)."""
    return Calibration(
        step_s=compute_only.busy_per_step_s,
        read_s=compute_only.wait_per_step_s,
        handoff_s=handoff.wait_per_step_s if handoff is not None else 0.0,
    )


# ---------------------------------------------------------------------------
# the anatomy: three real runs


def anatomy_configs(config: RunConfig) -> dict[str, RunConfig]:
    """The three variants of ``config`` that :func:`stall_anatomy` runs.

    ``compute_only``: no workers, no latency, no transform (batches come from the
    memory map in the loop: the compute ceiling). ``prep_only``: ``config``'s
    workers and transform without storage latency. ``full``: ``config``. All three
    run without failures and save only at the end, so their loops are data wait and
    compute alone.
    """
    base = config.replace(mtbf=0.0, kill_at_steps=(), ckpt_every=0, ckpt_every_s=None)
    return {
        "compute_only": base.replace(
            workers=0, prefetch=None, persistent_workers=False, io_latency_ms=0.0, io_jitter=0.0, transform_ms=0.0
        ),
        "prep_only": base.replace(io_latency_ms=0.0, io_jitter=0.0),
        "full": base,
    }


@dataclass
class StallAnatomy:
    """A configuration's step period split into compute, prep stall and fetch stall.

    The stalls are differences of step periods (seconds per step); ``loops`` holds
    each variant's :class:`LoopStats`, whose ``wait_per_step_s`` is the ledger's.
    """

    loops: dict[str, LoopStats]
    results: dict[str, RunResult] = field(repr=False)

    @property
    def compute_s(self) -> float:
        """Step period fed from memory: the ceiling."""
        return self.loops["compute_only"].period_s

    @property
    def prep_stall_s(self) -> float:
        """Extra seconds per step that preparation costs: prep-only minus compute-only period.

        Includes the transform, the hand-off from worker processes, and any slowdown
        of the step itself by workers competing for the cores.
        """
        return self.loops["prep_only"].period_s - self.loops["compute_only"].period_s

    @property
    def fetch_stall_s(self) -> float:
        """Extra seconds per step that storage costs: full minus prep-only period."""
        return self.loops["full"].period_s - self.loops["prep_only"].period_s

    @property
    def full_period_s(self) -> float:
        return self.loops["full"].period_s

    def rows(self) -> list[dict[str, Any]]:
        """One row per variant: period, the ledger's data wait and compute per step, samples/s."""
        ceiling = self.loops["compute_only"].samples_per_s
        return [
            {
                "variant": name,
                "period_ms": 1000 * s.period_s,
                "data_wait_ms": 1000 * s.wait_per_step_s,
                "compute_ms": 1000 * s.compute_s / s.steps,
                "wait_share": s.wait_share,
                "samples_per_s": s.samples_per_s,
                "of_ceiling": s.samples_per_s / ceiling,
            }
            for name, s in self.loops.items()
        ]

    def table(self) -> str:
        """The anatomy as text."""
        lines = [f"{'variant':<14}{'period ms':>10}{'data wait ms':>14}{'compute ms':>12}{'samples/s':>11}{'of ceiling':>12}"]
        for r in self.rows():
            lines.append(
                f"{r['variant']:<14}{r['period_ms']:>10.2f}{r['data_wait_ms']:>14.2f}{r['compute_ms']:>12.2f}"
                f"{r['samples_per_s']:>11.0f}{r['of_ceiling']:>12.1%}"
            )
        lines.append(
            f"prep stall {1000 * self.prep_stall_s:.2f} ms/step, fetch stall {1000 * self.fetch_stall_s:.2f} ms/step"
        )
        return "\n".join(lines)


def stall_anatomy(
    config: RunConfig | None = None,
    *,
    out: str | Path | None = None,
    progress: Any = False,
    **settings: Any,
) -> StallAnatomy:
    """Run the three variants of :func:`anatomy_configs` (real supervised runs) and difference them.

    Pass a :class:`RunConfig` or its fields as keywords. ``out``: a directory for
    the three runs (``out/compute_only`` ...; temporary ones by default).
    Real runs rather than an in-process loop, because the data wait must be the one
    the ledger books from the real worker's events; each costs a worker start-up
    (about 2 s here) on top of its steps.
    """
    from .api import run

    if config is None:
        config = RunConfig(**settings)
    elif settings:
        config = config.replace(**settings)
    loops, results = {}, {}
    for name, variant in anatomy_configs(config).items():
        where = Path(out) / name if out is not None else None
        result = run(variant, out=where, progress=progress)
        results[name] = result
        loops[name] = loop_stats(result, name)
    return StallAnatomy(loops, results)
