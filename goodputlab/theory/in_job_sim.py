"""In-job recovery in the cluster simulator: a failed replica group heals from a peer while the rest train on.

Times in seconds. The job's ``N`` devices form ``G`` equal replica groups (contiguous
blocks of ``N/G`` devices), each a whole replica of the model, as with torchft. A
failure event (the same stream of events as the restart model: Poisson, or Weibull
gaps with the clock restarting at each failure) takes one device, or with failure
domains a whole domain of contiguous devices, and with it every group that holds one
of them. A group taken out:

- relaunches (``restart_s``; ``spare_restart_s`` while hot spares last, one spare per
  failure), booked ``degraded``, and then heals (``heal_s``: it fetches the live state
  from a healthy peer), booked ``checkpoint_restore``; both at the group's share ``1/G``
  of each second (the missing group's throughput);
- a failure that strikes a group while it relaunches or heals starts its recovery again
  (as a failure during a whole job's restart does in the restart model);
- the other groups train on, and their share ``(G-k)/G`` is booked by what the job is
  doing: computing (``productive``), saving (``checkpoint_save``), ... They lose no work:
  the checkpoint cycle runs on untouched, and the survivors keep saving checkpoints;
- when a failure leaves fewer than ``min_groups`` groups training (every group down, by
  default: the live state is gone), the whole job stops: the work since its last durable
  checkpoint is ``lost_work`` (the survivors' share of it that was ``productive``), and
  the job restarts from that checkpoint as in the restart model (``restart_s`` then
  ``restore_s``, a failure during them starting them again, every group back at once).

The whole job's restarts queue for ``queue_s`` first (no failure strikes the queue; booked
``restart`` and counted apart). Every failure that leaves the job training stalls every group for
``collective_timeout_s`` (the collective's timeout that finds the dead peer; stalls of close
failures overlap), and ``step_overhead_share`` of every step goes to in-job bookkeeping (torchft's
quorum and commit, the cross-group all-reduce): like a data stall, both are shares of the
survivors' training (``straggler_wait`` and ``other``), read off the failure times of each period.

Left out, and why it is small: the step in flight when a group fails (torchft discards
it on the survivors: seconds against minutes of relaunch), the load a heal puts on the
peer that serves it (torchft serves the state from a copy, off the training stream), and
the smaller global batch while degraded, which costs statistical efficiency, not time.

How it runs: between two stops of the whole job (a *period*) every group's state is a
function of the failure times alone (a group is down at ``t`` when one of its failures
lies within its recovery time before ``t``), so the simulator draws a period's failures
for all active trials at once, finds the first stop of each row with array arithmetic
(for each failure, the groups whose latest failure is still within their recovery,
counted over a few lags), and books the missing groups' shares by evaluating the
checkpoint cycle (:func:`goodputlab.theory.sim_cycle.compute_and_durable`) at the
start and end of each group's time away. Vectorised over trials and over the failures
of a period; the Python loop runs once per period, so a job that stops often (few
groups, long heals, a high failure rate) costs about one loop per whole-job stop.
"""

from __future__ import annotations

import math

import numpy as np

from ..categories import (
    CATEGORIES,
    CHECKPOINT_RESTORE,
    CHECKPOINT_SAVE,
    DATA_WAIT,
    DEGRADED,
    LOST_WORK,
    OTHER,
    PRODUCTIVE,
    RESTART,
    STARTUP,
    STRAGGLER_WAIT,
)
from .sim_config import SimConfig, SimResult
from .sim_cycle import cause_shares, compute_and_durable, compute_done, failure_gaps, trial_result

# Up to this many (trial, failure, group) cells are processed at once (~8 MB per array).
_CELLS_PER_BATCH = 1_000_000


class InJobTrials:
    """Every trial's running totals under in-job recovery, and which trials have not yet reached the job's end."""

    def __init__(self, config: SimConfig):
        self.config = config
        trials = config.trials
        self.totals = {c: np.zeros(trials) for c in CATEGORIES}
        self.interruptions = np.zeros(trials, dtype=np.int64)
        self.job_restarts = np.zeros(trials, dtype=np.int64)
        self.devices_lost = np.zeros(trials, dtype=np.int64)
        self.cause_counts = np.zeros((trials, len(config.cause_names)), dtype=np.int64)
        self.cause_shares = cause_shares(config)
        self.queue = np.zeros(trials)  # seconds waiting to be scheduled after whole-job stops (part of restart)
        self.active = np.arange(trials)
        self.period_start = np.zeros(trials)  # where each active trial's next period (a recovery, then training) starts
        self.has_checkpoint = np.zeros(trials, dtype=bool)
        self.started = np.zeros(trials, dtype=bool)  # past the first period (whose recovery is the start-up)
        group_devices, d = config.group_devices, config.domain_size
        # the most groups a domain of d contiguous devices can straddle
        self.groups_per_event = 1 if d == 1 else (d - 1 + group_devices - 1) // group_devices + 1
        self._stopped_periods = 0  # training periods that ended in a stop, and their failures: sizes the next draw
        self._stopped_period_failures = 0

    # -- one period per active trial -----------------------------------------------

    def advance(self, rng: np.random.Generator) -> None:
        """Simulate the next period of every active trial: a recovery, then training until a stop or the end."""
        rows = self.active
        columns = self._columns()
        batch = max(1, _CELLS_PER_BATCH // (columns * self.groups_per_event))
        for lo in range(0, rows.size, batch):
            self._advance_rows(rows[lo:lo + batch], columns, rng)
        self.active = rows[self.period_start[rows] < self.config.duration_s]

    def _columns(self) -> int:
        """Failures to draw per row: enough to reach the job's end, or a few periods' worth once stops are seen."""
        config = self.config
        remaining = config.duration_s - float(np.min(self.period_start[self.active]))
        expected = config.failure_rate_per_s * remaining
        columns = int(math.ceil(expected + 6.0 * math.sqrt(expected) + 8.0))
        if self._stopped_periods:
            typical = self._stopped_period_failures / self._stopped_periods
            columns = min(columns, int(math.ceil(2.0 * typical)) + 16)
        return max(8, columns)

    def _relaunch_s(self, failure_number: np.ndarray) -> np.ndarray:
        """Restart seconds after failure number ``k`` (1-based): a hot spare's while they last, then ``restart_s``."""
        config = self.config
        spare = config.restart_s if config.spare_restart_s is None else config.spare_restart_s
        return np.where(failure_number <= config.hot_spares, spare, config.restart_s)

    def _hits(self, rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Which groups each failure takes, ``(rows, failures, groups_per_event)`` with -1 for none,
        and how many devices it takes ``(rows, failures)``."""
        config = self.config
        groups, share = config.replica_groups, config.domain_event_share
        if share == 0.0:  # one device: its group, uniform as the groups are equal
            return rng.integers(groups, size=shape)[..., None], np.ones(shape, dtype=np.int64)
        d = config.domain_size
        takes_domain = np.full(shape, True) if share == 1.0 else rng.random(shape) < share
        domain = rng.integers(config.devices // d, size=shape)
        hit = domain_groups(domain, d, config.group_devices, self.groups_per_event)
        if share < 1.0:
            single = np.full(shape + (self.groups_per_event,), -1)
            single[..., 0] = rng.integers(groups, size=shape)
            hit = np.where(takes_domain[..., None], hit, single)
        return hit, np.where(takes_domain, d, 1)

    def _advance_rows(self, rows: np.ndarray, columns: int, rng: np.random.Generator) -> None:
        config, totals = self.config, self.totals
        n = rows.size
        start = self.period_start[rows]
        first = ~self.started[rows]
        restart_cost = np.where(first, 0.0, self._relaunch_s(self.interruptions[rows]))
        startup_cost = np.where(first, config.startup_s, 0.0)
        restore_cost = np.where(~first & self.has_checkpoint[rows], config.restore_s, 0.0)
        queue_cost = np.where(first, 0.0, config.queue_s)  # no failure strikes the queue: the clock starts after it
        recovery = queue_cost + startup_cost + restart_cost + restore_cost

        times = queue_cost[:, None] + np.cumsum(failure_gaps(config, rng, (n, columns)), axis=1)  # after the period's start
        hits, devices = self._hits(rng, (n, columns))
        left = config.duration_s - start
        recovery_len = np.minimum(np.minimum(times[:, 0], recovery), left)
        queued = np.minimum(recovery_len, queue_cost)
        self.queue[rows] += queued
        after_queue = recovery_len - queued
        totals[STARTUP][rows] += np.minimum(after_queue, startup_cost)
        totals[RESTART][rows] += queued + np.minimum(after_queue, restart_cost)
        totals[CHECKPOINT_RESTORE][rows] += np.clip(after_queue - startup_cost - restart_cost, 0.0, restore_cost)

        end = np.full(n, config.duration_s)
        struck = (times[:, 0] < recovery) & (times[:, 0] < left)  # a failure during the recovery starts it again
        end[struck] = start[struck] + times[struck, 0]
        once = np.ones(int(struck.sum()), dtype=np.int64)
        self._count(rows[struck], once, devices[struck, 0], once.astype(bool), rng)
        trains = (times[:, 0] >= recovery) & (recovery < left)
        if trains.any():
            k = np.flatnonzero(trains)
            trained = self._train(rows[k], times[k] - recovery[k, None], hits[k], devices[k], left[k] - recovery[k], rng)
            end[k] = start[k] + recovery[k] + trained
        self.started[rows] = True
        self.period_start[rows] = end

    # -- training until a stop ------------------------------------------------------

    def _train(self, rows, x, hits, devices, limit, rng) -> np.ndarray:
        """Book the training of ``rows`` from their start (failure times ``x`` after it) until a stop or
        ``limit`` seconds; return how long each trained. Rows whose drawn failures end before either
        get more failures drawn (the same stream, continued)."""
        n, columns = x.shape
        stop = _Stops(self, x, hits, limit, self.interruptions[rows])
        trained = stop.length.copy()
        short = ~stop.covered
        if short.any():
            m = int(short.sum())
            more = x[short, -1:] + np.cumsum(failure_gaps(self.config, rng, (m, columns)), axis=1)
            more_hits, more_devices = self._hits(rng, (m, columns))
            trained[short] = self._train(
                rows[short], np.concatenate([x[short], more], axis=1), np.concatenate([hits[short], more_hits], axis=1),
                np.concatenate([devices[short], more_devices], axis=1), limit[short], rng,
            )
        done = stop.covered
        if done.any():
            self._book_training(rows[done], stop.subset(done), x[done], devices[done], rng)
        return trained

    def _book_training(self, rows, stop: _Stops, x, devices, rng) -> None:
        """Book each row's training: the job's cycle at full strength, less the missing groups' shares."""
        config, totals, groups = self.config, self.totals, self.config.replica_groups
        length, stopped = stop.length, stop.stopped
        compute, durable = compute_and_durable(length, config)
        kept = np.where(stopped, durable, compute)  # a stop rolls back to the last durable checkpoint

        # each group's time away, entry by entry (only entries before the last row's stop matter)
        used = max(1, int((stop.x < length[:, None]).sum(axis=1).max(initial=0)))
        at = stop.x[:, :used]
        away = stop.valid[:, :used] & (at < length[:, None])
        begin = np.where(away, at, 0.0)
        back = np.minimum(stop.next_x[:, :used], at + stop.recovery_s[:, :used])  # hit again, or back
        finish = np.where(away, np.minimum(back, length[:, None]), 0.0)
        relaunched = np.minimum(finish, begin + stop.relaunch_s[:, :used]) - begin
        c_begin = compute_done(begin, config)
        c_finish = compute_done(finish, config)
        missed_compute = c_finish - c_begin
        missed_kept = np.minimum(c_finish, kept[:, None]) - np.minimum(c_begin, kept[:, None])
        share = 1.0 / groups
        missing = (finish - begin).sum(axis=1) * share
        missing_compute = missed_compute.sum(axis=1) * share
        missing_kept = missed_kept.sum(axis=1) * share
        relaunch = relaunched.sum(axis=1) * share

        # the survivors' shares; rounding can leave -1e-10 where a part is exactly 0
        kept_sum = np.maximum(kept - missing_kept, 0.0)
        totals[LOST_WORK][rows] += np.maximum(compute - kept - (missing_compute - missing_kept), 0.0)
        totals[CHECKPOINT_SAVE][rows] += np.maximum(length - compute - (missing - missing_compute), 0.0)
        totals[DEGRADED][rows] += relaunch
        totals[CHECKPOINT_RESTORE][rows] += missing - relaunch  # the heal: a restore from a peer
        totals[DATA_WAIT][rows] += config.data_stall_fraction * kept_sum
        computing = (1.0 - config.data_stall_fraction) * kept_sum
        stalled = _stalled_share(x, length, config.collective_timeout_s) * computing  # waiting for a dead peer's timeout
        overhead = config.step_overhead_share * (computing - stalled)
        computing = computing - stalled - overhead
        wait = config.straggler_wait_share
        totals[STRAGGLER_WAIT][rows] += stalled + wait * computing
        totals[OTHER][rows] += overhead
        totals[PRODUCTIVE][rows] += (1.0 - wait) * computing

        # failures: those before the stop (or the end), and the one that stopped the job
        counted = (x < length[:, None]) | (stopped[:, None] & (np.arange(x.shape[1]) == stop.event[:, None]))
        self._count(rows, counted.sum(axis=1), np.where(counted, devices, 0).sum(axis=1), stopped, rng)
        self.has_checkpoint[rows] |= durable > 0
        self._stopped_periods += int(stopped.sum())
        self._stopped_period_failures += int(counted[stopped].sum())

    def _count(self, rows, failures, devices, stops, rng) -> None:
        """Add failures, devices lost and whole-job stops to ``rows``; draw each failure's cause."""
        self.interruptions[rows] += failures
        self.devices_lost[rows] += devices
        self.job_restarts[rows] += stops
        if self.cause_shares is not None and rows.size:
            self.cause_counts[rows] += rng.multinomial(failures, self.cause_shares)

    def result(self) -> SimResult:
        return trial_result(self.config, self.totals, self.interruptions, self.cause_counts,
                            job_restarts=self.job_restarts, devices_lost=self.devices_lost, queue_s=self.queue)


def _stalled_share(x: np.ndarray, length: np.ndarray, timeout_s: float) -> np.ndarray:
    """Per row, the share of ``length`` seconds of training in which some failure (times ``x``, sorted)
    lies within the last ``timeout_s``: the union of ``[x_i, x_i + timeout_s)``. The failure that
    stops the job (at ``length``) stalls nothing: the job restarts."""
    if timeout_s == 0:
        return np.zeros(length.shape)
    following = np.concatenate([x[:, 1:], np.full((x.shape[0], 1), math.inf)], axis=1)
    reach = np.minimum(following, length[:, None]) - x
    stalled = np.where(x < length[:, None], np.clip(reach, 0.0, timeout_s), 0.0).sum(axis=1)
    return np.divide(stalled, length, out=np.zeros(length.shape), where=length > 0)


def domain_groups(domain: np.ndarray, domain_size: int, group_devices: int, slots: int) -> np.ndarray:
    """The replica groups that domain number ``domain`` overlaps, in ``slots`` columns padded with -1.

    Devices are numbered ``0 .. N-1``; domain ``k`` holds devices ``k*d .. k*d + d - 1`` and
    group ``g`` devices ``g*n .. g*n + n - 1``. A domain no larger than a group and
    aligned with it takes one group; a larger one, or one that straddles a boundary
    between groups, takes every group it overlaps.
    """
    first = domain * domain_size // group_devices
    last = (domain * domain_size + domain_size - 1) // group_devices
    spans = first[..., None] + np.arange(slots)
    return np.where(spans <= last[..., None], spans, -1)


class _Stops:
    """Where each row's training stops: the first failure that leaves fewer than ``min_groups`` groups.

    Works on *entries*: one per (failure, group it takes), in time order, so a
    failure that takes several groups is several entries at the same time.
    ``length``: seconds trained (to the stop, or ``limit``); ``stopped``; ``event``:
    the failure that stopped it; ``covered``: the drawn failures reach the stop or
    the limit (else more must be drawn). Per entry: ``x`` its time, ``valid``,
    ``relaunch_s`` and ``recovery_s`` (relaunch + heal) and ``next_x``, the time of
    its group's next failure (``inf`` if none drawn).
    """

    def __init__(self, trials: InJobTrials | None, x=None, hits=None, limit=None, failures_before=None):
        if trials is None:  # filled by subset()
            return
        config = trials.config
        n, columns, per = hits.shape
        entries = columns * per
        self.x = np.repeat(x, per, axis=1)
        label = hits.reshape(n, entries)
        self.valid = (label >= 0) & (self.x < limit[:, None])
        label = np.where(label >= 0, label, -1 - np.arange(entries))  # padding: a group of its own
        event = np.repeat(np.arange(columns), per)
        self.relaunch_s = trials._relaunch_s(failures_before[:, None] + event[None, :] + 1)
        self.recovery_s = self.relaunch_s + config.heal_s

        # Walk back over the entries within the longest recovery before each one, nearest first:
        # that finds each entry's next entry of the same group (the nearest later one) where it
        # matters (within its recovery), and counts the groups down at each entry: its own, and
        # each other group whose latest entry so far is still within its recovery.
        self.next_x = np.full((n, entries), math.inf)
        down = self.valid.astype(np.int64)
        longest = float(self.recovery_s.max()) if entries else 0.0
        for lag in range(1, entries):
            before, now = self.x[:, :-lag], self.x[:, lag:]
            near = self.valid[:, :-lag] & ((before + longest > now) | (before == now))
            if not near.any():
                break
            unfollowed = np.isinf(self.next_x[:, :-lag])  # no entry of the group between the two
            same = near & unfollowed & (label[:, :-lag] == label[:, lag:])
            self.next_x[:, :-lag] = np.where(same, now, self.next_x[:, :-lag])
            latest = unfollowed & ~same
            down[:, lag:] += near & latest & ((before + self.recovery_s[:, :-lag] > now) | (before == now))
        stops = self.valid & (down >= config.groups_to_stop)
        self.stopped = stops.any(axis=1)
        at = np.argmax(stops, axis=1)
        self.length = np.where(self.stopped, self.x[np.arange(n), at], limit)
        self.event = np.where(self.stopped, event[at], -1)
        self.covered = self.stopped | (x[:, -1] >= limit)

    def subset(self, rows: np.ndarray) -> _Stops:
        """The same, for a boolean selection of rows."""
        out = _Stops(None)
        for name in ("x", "valid", "relaunch_s", "recovery_s", "next_x", "length", "stopped", "event", "covered"):
            setattr(out, name, getattr(self, name)[rows])
        return out
