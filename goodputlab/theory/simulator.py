"""Monte Carlo simulation of one long training job on N devices that fail at random.

The job's timeline, all times in seconds of wall clock::

    startup | compute tau | save | compute tau | save | ... X failure
            | restart | restore | compute tau | save | ...       ... | end

- Each device fails as a Poisson process with mean gap ``device_mtbf_s``. A
  synchronous job stops when any device fails, and the superposition of N
  independent Poisson processes is one Poisson process with rate
  ``N / device_mtbf_s``, so we draw job-level failure gaps directly instead of
  simulating devices one by one. With ``failure_shape != 1`` the gaps are
  Weibull with the same mean instead, and the clock restarts at each failure
  (a renewal process, :mod:`goodputlab.theory.renewal`).
- ``interval_s`` is useful compute between checkpoints (Daly's tau, the same
  meaning as in :mod:`goodputlab.theory`), excluding the save.
- A failure can strike in any phase. It loses the compute done since the last
  *durable* checkpoint (booked as ``lost_work``); then the job restarts
  (``restart_s``, or ``spare_restart_s`` while hot spares last) and loads the
  checkpoint (``restore_s``, only if a durable checkpoint exists). A failure
  during restart or restore starts the recovery again.
- Stragglers: every step waits for its slowest device, so a share of the
  surviving compute (:attr:`SimConfig.straggler_wait_share`) is booked
  ``straggler_wait`` (:mod:`goodputlab.theory.scaling`).
- A synchronous save (``save_blocking_s == save_s``) blocks training for
  ``save_s`` and is durable when it ends. An asynchronous one
  (``save_blocking_s < save_s``) blocks for ``save_blocking_s`` (taking a
  snapshot), then persists in the background for ``save_s``; it is durable
  only then, and the next save waits for it if it is still running.
- A queue (``queue_s``): after each failure the job waits to be scheduled
  again; no failure strikes it there (the failure clock stands still), and the
  wait is booked ``restart`` and counted apart (``SimResult.queue_s``).
- Just-in-time checkpoints (``jit_share``, ``jit_save_s``, ``step_s``,
  :mod:`goodputlab.theory.jit`): a covered failure is followed (after the queue)
  by a save of ``jit_save_s`` that no failure strikes, booked
  ``checkpoint_save``; it keeps every step but the one in flight (a uniform
  share of ``step_s``), and the job restores from it.
- Failure domains (``domain_size``, ``domain_share``): an event may take a
  whole domain of devices at once; the job stops once per event, so it sees
  fewer, larger interruptions
  (:func:`goodputlab.theory.recovery_at_scale.domain_interruption_rate`), and
  ``devices_lost`` counts what they took.
- In-job recovery (``recovery="in-job"``, ``replica_groups``): a failure takes
  one replica group out while the others train on, and only a failure that
  leaves fewer than ``min_groups`` groups stops the job. That model is
  :mod:`goodputlab.theory.in_job_sim`; the settings in which every failure
  stops the job anyway (one group, ``min_groups = replica_groups``) run the
  restart model below, with the same draws.

Because the failure clock restarts at every failure (memoryless Poisson
failures, or a renewal process), the job between two failures (an *up period*)
is deterministic: given its length we can book every second in closed form.
So the simulator draws the failure gaps for all trials at once, a chunk of
failures at a time, and books all up periods of the chunk with array
arithmetic: vectorised over trials and failures, no Python loop per event.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from ..categories import (
    CATEGORIES,
    CHECKPOINT_RESTORE,
    CHECKPOINT_SAVE,
    DATA_WAIT,
    LOST_WORK,
    PRODUCTIVE,
    RESTART,
    STARTUP,
    STRAGGLER_WAIT,
)
from .in_job_sim import InJobTrials
from .sim_config import SimConfig, SimResult
from .sim_cycle import cause_shares, compute_and_durable, cycle_shape, failure_gaps, trial_result

# Up to this many (trial, failure) cells are processed per chunk (~8 MB per array).
_CELLS_PER_CHUNK = 1_000_000

# ---------------------------------------------------------------------------
# the simulation


def _restart_schedule(config: SimConfig) -> Callable[[np.ndarray], np.ndarray]:
    """Restart cost (seconds) after failure number ``k`` (1-based): ``spare_restart_s``
    for the first ``hot_spares`` failures (each swaps in one warm spare), then
    ``restart_s``."""
    spare = config.restart_s if config.spare_restart_s is None else config.spare_restart_s

    def restart_cost(failure_number: np.ndarray) -> np.ndarray:
        return np.where(failure_number <= config.hot_spares, spare, config.restart_s)

    return restart_cost


def _chunk_columns(config: SimConfig) -> int:
    """Failures per chunk: enough to finish almost every trial in one chunk,
    capped so a chunk stays around ``_CELLS_PER_CHUNK`` cells."""
    expected = config.expected_failures
    wanted = int(math.ceil(expected + 6.0 * math.sqrt(expected) + 8.0))
    return max(8, min(wanted, _CELLS_PER_CHUNK // config.trials))


def simulate(
    config: SimConfig,
    progress: Callable[[float], None] | None = None,
    tqdm: bool = False,
) -> SimResult:
    """Simulate ``config.trials`` runs of the job; returns a :class:`SimResult`.

    Seeded and deterministic: the same config (seed included) gives the same
    result. ``progress``, if given, is called with the share of simulated wall
    time done (0 to 1) after each chunk of failures; ``tqdm=True`` shows a
    ``tqdm.auto`` bar instead or as well. Both are off by default.
    """
    rng = np.random.default_rng(config.seed)
    if config.recovers_in_job:
        trials = InJobTrials(config)
        advance = trials.advance
    else:  # restart from a checkpoint (also in-job recovery that no failure can leave training)
        trials = _Trials(config)
        columns = _chunk_columns(config)

        def advance(rng: np.random.Generator) -> None:
            trials.book(_up_periods(config, trials, rng, columns), rng)

    bar = None
    if tqdm:
        from tqdm.auto import tqdm as tqdm_bar

        bar = tqdm_bar(total=100, unit="%", desc="simulate")
    reported = 0.0
    while trials.active.size:
        advance(rng)
        if progress is not None or bar is not None:
            done = float(np.mean(np.minimum(trials.period_start, config.duration_s)) / config.duration_s)
            if progress is not None:
                progress(done)
            if bar is not None:
                bar.update(100.0 * (done - reported))
            reported = done
    if bar is not None:
        bar.close()
    return trials.result()


def sweep_replica_groups(config: SimConfig, groups: Sequence[int]) -> list[SimResult]:
    """Simulate ``config`` once restarting from checkpoints and once per replica-group count.

    Returns the results in order: the restart model first (``recovery="restart"``,
    one group, without in-job recovery's stall and overhead), then in-job recovery with
    each of ``groups`` (the settings of ``config`` otherwise, its ``heal_s``, ``min_groups``,
    ``collective_timeout_s`` and ``step_overhead_share`` included; the same seed).
    """
    restart = dataclasses.replace(config, recovery="restart", replica_groups=1, min_groups=1, heal_s=None,
                                  collective_timeout_s=0.0, step_overhead_share=0.0)  # costs of groups that train on
    results = [simulate(restart)]
    for g in groups:
        results.append(simulate(dataclasses.replace(config, recovery="in-job", replica_groups=g)))
    return results


def sweep_rows(results: Sequence[SimResult]) -> list[dict]:
    """Tidy rows of :func:`sweep_replica_groups`'s results, one per simulated job.

    Each row: ``recovery``, ``replica_groups``, ``label`` (``"restart"`` or ``"G groups"``),
    ``goodput_mean``, ``goodput_stderr``, ``goodput_p5``, ``goodput_p95``, ``ettr_mean``,
    ``interruptions_mean``, ``job_restarts_mean``, and the mean share of the wall time
    of every ledger category (``share_<category>``).
    """
    rows = []
    for r in results:
        c = r.config
        row = {
            "recovery": c.recovery,
            "replica_groups": c.replica_groups,
            "label": "restart" if c.recovery == "restart" else f"{c.replica_groups} groups",
            "goodput_mean": r.goodput_mean,
            "goodput_stderr": r.goodput_stderr,
            "goodput_p5": r.goodput_p5,
            "goodput_p95": r.goodput_p95,
            "ettr_mean": r.ettr_mean,
            "interruptions_mean": r.interruptions_mean,
            "job_restarts_mean": r.job_restarts_mean,
        }
        row.update({f"share_{k}": v / c.duration_s for k, v in r.buckets.items()})
        rows.append(row)
    return rows


class _UpPeriods(NamedTuple):
    """The next chunk of up periods of every active trial (arrays: active trials x periods), in seconds."""

    ends: np.ndarray  # where each period ends (a failure, or beyond the job's end)
    failed: np.ndarray  # the period ended in a failure before the job's end
    covered: np.ndarray  # its failure is covered by a just-in-time save
    in_flight: np.ndarray  # the compute of the step in flight at its failure (lost even when covered)
    queue: np.ndarray  # waiting to be scheduled at its start (no failure strikes it)
    jit_save: np.ndarray  # the just-in-time save at its start, after the queue (no failure strikes it)
    startup: np.ndarray
    restart: np.ndarray
    restore: np.ndarray
    train: np.ndarray  # training time: compute and saves
    ever: np.ndarray  # a durable checkpoint exists by the end of this period (within the chunk)


def _up_periods(config: SimConfig, trials: _Trials, rng: np.random.Generator, columns: int) -> _UpPeriods:
    """Draw the next ``columns`` failure gaps of every active trial and split each up period into phases."""
    active, duration = trials.active, config.duration_s
    n = active.size
    gaps = failure_gaps(config, rng, (n, columns))
    index = trials.periods_done + np.arange(columns)  # period 0 starts with startup, the rest with a restart
    is_first = index == 0
    # A just-in-time save covers a share of the failures; draws only when it is on, so a job
    # without one draws exactly what it always did.
    covered = np.zeros((n, columns), dtype=bool)
    in_flight = np.zeros((n, columns))
    if config.jit_share > 0:
        covered = rng.random((n, columns)) < config.jit_share
        if config.step_s > 0:
            in_flight = rng.random((n, columns)) * config.step_s
    covered_before = np.concatenate([trials.last_covered[active, None], covered[:, :-1]], axis=1)
    queue_cost = np.where(is_first, 0.0, config.queue_s)
    jit_cost = np.where(~is_first & covered_before, config.jit_save_s, 0.0)
    ahead = queue_cost + jit_cost  # before the restart, and no failure strikes it
    ends = trials.period_start[active, None] + np.cumsum(ahead + gaps, axis=1)
    # Each period starts where the previous one ended, so the lengths
    # telescope exactly to the wall time (ledger closure).
    starts = np.concatenate([trials.period_start[active, None], ends[:, :-1]], axis=1)
    failed = ends < duration
    length = np.maximum(np.minimum(ends, duration) - starts, 0.0)

    restart_cost = np.where(is_first, 0.0, trials.restart_at(index))
    startup_cost = np.where(is_first, config.startup_s, 0.0)

    # Restore only once a durable checkpoint exists (a periodic one, or a
    # just-in-time save). Until the first one, recovery is restart only, so
    # whether a period reaches its first durable checkpoint can be read off
    # before restores are known.
    train_without_restore = np.maximum(length - ahead - restart_cost - startup_cost, 0.0)
    makes_checkpoint = (train_without_restore >= trials.first_durable_at) | (failed & covered)
    ever = np.logical_or.accumulate(makes_checkpoint, axis=1)
    checkpoint_before = np.concatenate([np.zeros((n, 1), dtype=bool), ever[:, :-1]], axis=1)
    checkpoint_before |= trials.has_checkpoint[active, None]
    restore_cost = np.where(checkpoint_before & ~is_first, config.restore_s, 0.0)
    recovering = length - ahead

    return _UpPeriods(
        ends=ends,
        failed=failed,
        covered=failed & covered,
        in_flight=in_flight,
        queue=np.minimum(length, queue_cost),
        jit_save=np.clip(length - queue_cost, 0.0, jit_cost),
        startup=np.minimum(length, startup_cost),
        restart=np.clip(recovering, 0.0, restart_cost),
        restore=np.clip(recovering - restart_cost, 0.0, restore_cost),
        train=np.maximum(recovering - startup_cost - restart_cost - restore_cost, 0.0),
        ever=ever,
    )


class _Trials:
    """Every trial's running totals, and which trials have not yet reached the job's end."""

    def __init__(self, config: SimConfig):
        self.config = config
        trials = config.trials
        # "other" stays at 0 (no logging or evaluation is modelled); it is kept so
        # simulated and measured ledgers have the same columns.
        self.totals = {c: np.zeros(trials) for c in CATEGORIES}
        self.interruptions = np.zeros(trials, dtype=np.int64)
        self.cause_counts = np.zeros((trials, len(config.cause_names)), dtype=np.int64)
        self.devices_lost = np.zeros(trials, dtype=np.int64)
        self.cause_shares = cause_shares(config)
        self.active = np.arange(trials)  # trials whose wall clock has not reached duration
        self.period_start = np.zeros(trials)  # where each active trial's next up period starts
        self.has_checkpoint = np.zeros(trials, dtype=bool)  # a durable checkpoint exists
        self.last_covered = np.zeros(trials, dtype=bool)  # the last failure was covered by a just-in-time save
        self.queue = np.zeros(trials)  # seconds waiting to be scheduled (part of restart)
        self.periods_done = 0  # up periods booked so far; the same for every active trial
        self.restart_at = _restart_schedule(config)
        first_cycle, _, durable_lag = cycle_shape(config)
        self.first_durable_at = first_cycle + durable_lag  # training seconds until a period's first durable checkpoint

    def book(self, p: _UpPeriods, rng: np.random.Generator) -> None:
        """Book a chunk of up periods into the totals and move the active trials on."""
        config, rows = self.config, self.active  # the trials this chunk's rows belong to
        compute, durable = compute_and_durable(p.train, config)
        # A failure rolls back to the last durable checkpoint, or with a just-in-time
        # save to the step in flight; at the job's end nothing is rolled back.
        kept = np.where(p.failed, np.where(p.covered, np.maximum(compute - p.in_flight, 0.0), durable), compute)
        totals = self.totals
        totals[STARTUP][rows] += p.startup.sum(axis=1)
        totals[RESTART][rows] += (p.queue + p.restart).sum(axis=1)
        self.queue[rows] += p.queue.sum(axis=1)
        totals[CHECKPOINT_RESTORE][rows] += p.restore.sum(axis=1)
        totals[CHECKPOINT_SAVE][rows] += (p.train - compute + p.jit_save).sum(axis=1)
        totals[LOST_WORK][rows] += (compute - kept).sum(axis=1)
        kept_sum = kept.sum(axis=1)
        totals[DATA_WAIT][rows] += config.data_stall_fraction * kept_sum
        computing = (1.0 - config.data_stall_fraction) * kept_sum
        wait = config.straggler_wait_share  # every step waits for its slowest device
        totals[STRAGGLER_WAIT][rows] += wait * computing
        totals[PRODUCTIVE][rows] += (1.0 - wait) * computing
        self.interruptions[rows] += p.failed.sum(axis=1)

        if self.cause_shares is not None:
            n, columns, k = rows.size, p.failed.shape[1], len(self.cause_shares)
            causes = rng.choice(k, size=(n, columns), p=self.cause_shares)
            flat = (np.arange(n)[:, None] * k + causes)[p.failed]
            self.cause_counts[rows] += np.bincount(flat, minlength=n * k).reshape(n, -1)

        self.devices_lost[rows] += self._devices_taken(p.failed, rng)

        self.has_checkpoint[rows] |= p.ever[:, -1]
        self.last_covered[rows] = p.covered[:, -1]
        self.period_start[rows] = p.ends[:, -1]
        self.periods_done += p.ends.shape[1]
        self.active = rows[p.ends[:, -1] < config.duration_s]

    def _devices_taken(self, failed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Devices the chunk's failures took, per row: one each, or a whole domain for a domain event.

        Draws only when some events take a domain and some do not, so a job
        without failure domains draws exactly what it always did.
        """
        config = self.config
        share = config.domain_event_share
        if share == 0.0:
            return failed.sum(axis=1)
        if share == 1.0:
            return failed.sum(axis=1) * config.domain_size
        takes_domain = rng.random(failed.shape) < share
        return np.where(failed, np.where(takes_domain, config.domain_size, 1), 0).sum(axis=1)

    def result(self) -> SimResult:
        return trial_result(self.config, self.totals, self.interruptions, self.cause_counts, devices_lost=self.devices_lost,
                            queue_s=self.queue)
