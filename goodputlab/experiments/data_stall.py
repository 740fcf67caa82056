"""The data stall of real runs: the training loop measured from the ledger, the model calibrated, the anatomy.

:func:`loop_stats` measures the training loop of a real run from its ledger (data
wait and busy time per step); :func:`calibrate` turns a compute-only run (and one
with ample workers) into the constants of the stall model
(:class:`goodputlab.theory.data_stall.Calibration`), and :func:`predict_stall_for`
applies the model (:func:`goodputlab.theory.data_stall.predict_stall`) to a
:class:`~goodputlab.engine.config.RunConfig`.

**At a cluster's ratios.** :func:`at_cluster_ratios` gives each pipeline the settings of a scale model
(:func:`goodputlab.experiments.scale_model.scale_model`: the cluster's save and recovery ratios, the same
failure draws), so that its depth is measured where failures and checkpoints also cost what they cost
on the cluster.

**Anatomy.** :func:`stall_anatomy` runs three real, supervised variants of one
configuration, as DS-Analyzer does (Mohan et al., "Analyzing and Mitigating Data
Stalls in DNN Training", VLDB 2021): *compute-only* (data from memory, in the loop:
the ceiling), *prep-only* (the same workers and transform, no storage latency) and
*full*. The differences of their step periods are the *prep stall* and the *fetch
stall*; beside them stands the data wait that each run's ledger booked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .. import categories as C
from ..engine.config import RunConfig
from ..errors import check
from ..theory.data_stall import Calibration, StallPrediction, predict_stall

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult


def predict_stall_for(
    config: RunConfig,
    calibration: Calibration,
    cores: int | None = None,
    step_times_s: Sequence[float] | np.ndarray | None = None,
) -> StallPrediction:
    """:func:`~goodputlab.theory.data_stall.predict_stall` for a :class:`~goodputlab.engine.config.RunConfig` (without failures).

    The step's busy time is ``calibration.step_s``, or each step's own when
    ``step_times_s`` is given (see :func:`busy_times_s`).
    """
    return predict_stall(
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
    gets the mean of the others. Feeding these to :func:`~goodputlab.theory.data_stall.predict_stall` replays the
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



def calibrate(compute_only: LoopStats, handoff: LoopStats | None = None) -> Calibration:
    """The step and read times (``t_step``, ``t_read``) from a compute-only run; the hand-off (``t_hand``) from
    a run with workers and ample supply (0 without one). Seconds."""
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
    from ..engine.api import run

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


# ---------------------------------------------------------------------------
# pipelines at a cluster's ratios


def at_cluster_ratios(scale: Any, pipelines: dict[str, dict[str, Any]], periods_s: dict[str, float],
                      strategy: str = "sync") -> dict[str, RunConfig]:
    """One run configuration per pipeline (``{name: RunConfig settings}``, e.g. ``{"workers": 4, "prefetch": 4}``):
    ``scale``'s configuration for ``strategy`` (a :class:`~goodputlab.experiments.scale_model.ScaleModel`: the
    MTBF, checkpoint storage, rescheduling delay, interval and seed that put the lab at a cluster's ratios)
    with the pipeline's settings.

    ``periods_s``: each pipeline's step period measured on this machine (seconds: :attr:`LoopStats.period_s` of
    a run of it). A run's steps are the plan's training time over its period: a slower loop runs fewer steps,
    so every run trains for about as long and meets about as many failures, at the same moments (the failure
    clock counts training time, and the runs share their seed).
    """
    base = scale.config(strategy)
    training_s = base.steps * scale.calibration.step_s
    return {name: base.replace(steps=max(2, round(training_s / periods_s[name])), **settings)
            for name, settings in pipelines.items()}
