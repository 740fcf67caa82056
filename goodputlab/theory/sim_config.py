"""What the simulator takes: :class:`SimConfig`, one simulated job (what it gives, :class:`SimResult`, is re-exported here).

The simulation itself is :func:`goodputlab.theory.simulator.simulate`. Times in seconds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

from .. import validate
from ..errors import check

# Above this many expected failures per trial the event arrays get large and a
# run takes minutes; such a job would be all restarts anyway.
MAX_EXPECTED_FAILURES_PER_TRIAL = 1_000_000
#: The longest job simulated (seconds): a century. Past it the expected failures would blame the MTBF for a length.
MAX_DURATION_S = 100 * 365 * 86400.0

#: How a job recovers from a failure (``SimConfig.recovery``): ``restart``, the whole job restarts
#: from its last checkpoint; ``in-job``, the failed replica group relaunches and heals from a peer
#: while the others train on (torchft), see :mod:`goodputlab.theory.in_job_sim`.
RECOVERY_MODES = ("restart", "in-job")



MAX_TRIALS = 1_000_000
@dataclass(frozen=True)
class SimConfig:
    """One simulated job. Times in seconds; validated on construction.

    The failure rate comes from exactly one of:

    - ``device_mtbf_s``: each device's mean time between failures (``math.inf``
      for no failures); the job fails at rate ``devices / device_mtbf_s``.
    - ``failure_causes``: a table of ``(cause, count)`` observed over
      ``causes_reference_s`` seconds on ``causes_reference_devices`` devices
      (e.g. :func:`goodputlab.theory.llama3_cause_table`). The rate per device
      is ``sum(counts) / (reference devices * reference seconds)``, scaled to
      ``devices``; each failure's cause is drawn in proportion to the counts.

    Other fields: ``duration_s`` the job's wall-clock length; ``interval_s``
    useful compute between checkpoints; ``save_s`` the time to persist a
    checkpoint; ``save_blocking_s`` the part of it that blocks training
    (``None`` or ``save_s``: a synchronous save, durable when it ends; less:
    an asynchronous save, durable ``save_s`` after the blocking part ends);
    ``restore_s`` loading a
    checkpoint after a restart; ``restart_s`` detection + reschedule + init;
    ``startup_s`` first launch to first step; ``hot_spares`` how many failures
    are absorbed by warm standby devices, each costing ``spare_restart_s``
    instead of ``restart_s``; ``data_stall_fraction`` the share of surviving
    compute spent waiting for input; ``failure_shape`` the Weibull shape of the
    time between the job's failures (1: Poisson; below 1 a job that has just
    restarted is more likely to fail again; the clock restarts at every
    failure, a renewal process with mean ``job_mtbf_s``, see
    :mod:`goodputlab.theory.renewal`); ``straggler_factor``,
    ``straggler_share`` and ``straggler_devices``: that many devices (``None``: every device) are
    each slowed by ``straggler_factor`` on a ``straggler_share`` of their
    steps, and every step waits for its slowest device
    (:mod:`goodputlab.theory.scaling`); the wait is booked ``straggler_wait``,
    a share of the compute that is not data stall; ``trials`` independent
    runs; ``seed``.

    In-job recovery (docs/IN_JOB_RECOVERY.md): ``recovery`` is ``"restart"``
    (every failure restarts the whole job from its last checkpoint) or
    ``"in-job"``: the devices form ``replica_groups`` equal groups, each a
    whole replica of the model (torchft's replica groups); a failure takes its
    group out for a relaunch (``restart_s``, or ``spare_restart_s`` while hot
    spares last) and a heal (``heal_s``: fetching the live state from a
    healthy peer) while the other groups train on, and the job as a whole
    stops and restarts from its last checkpoint only when fewer than
    ``min_groups`` groups are left. ``replica_groups=1`` (or ``min_groups =
    replica_groups``) is exactly ``"restart"``.

    Papers' parameters: ``job_failure_rate_per_s`` failures per second that do
    not grow with the devices (a per-job part beside the per-device rate,
    :class:`goodputlab.theory.failure_rates.FailureRate`); ``queue_s`` the wait to
    be scheduled again after each failure that stops the job (Kokolis et al.'s
    ``q``): booked ``restart``, but no failure strikes it and it is counted apart
    (``SimResult.queue_s_mean``). Just-in-time checkpoints (restart only,
    :mod:`goodputlab.theory.jit`): a share ``jit_share`` of failures is followed by
    a save of ``jit_save_s`` (``checkpoint_save``; no failure strikes it) that
    keeps every step but the one in flight (uniform over ``step_s``); the rest
    fall back to the periodic checkpoints. In-job recovery's steady costs:
    ``collective_timeout_s``, every group stalled in a collective after each
    failure that leaves the job training (``straggler_wait``), and
    ``step_overhead_share`` of each step (``other``;
    :mod:`goodputlab.theory.in_job_costs`).

    Failure domains: ``domain_size`` devices (a host, a switch) that a single
    event can take at once, in contiguous blocks; a share ``domain_share`` of
    device losses comes as such events and the rest one device at a time,
    each device still lost once per ``device_mtbf_s`` on average, so the job
    sees fewer, larger events (:func:`goodputlab.theory.recovery_at_scale.domain_interruption_rate`).
    """

    devices: int
    duration_s: float
    interval_s: float
    device_mtbf_s: float | None = None
    failure_causes: Sequence[tuple[str, float]] | None = None
    causes_reference_s: float | None = None
    causes_reference_devices: int | None = None
    save_s: float = 0.0
    save_blocking_s: float | None = None
    restore_s: float = 0.0
    restart_s: float = 0.0
    startup_s: float = 0.0
    hot_spares: int = 0
    spare_restart_s: float | None = None
    data_stall_fraction: float = 0.0
    failure_shape: float = 1.0
    straggler_factor: float = 1.0
    straggler_share: float = 0.0
    straggler_devices: int | None = None
    trials: int = 1000
    seed: int = 0
    recovery: str = "restart"
    replica_groups: int = 1
    min_groups: int = 1
    heal_s: float | None = None
    domain_size: int = 1
    domain_share: float = 1.0
    job_failure_rate_per_s: float = 0.0
    queue_s: float = 0.0
    jit_share: float = 0.0
    jit_save_s: float = 0.0
    step_s: float = 0.0
    collective_timeout_s: float = 0.0
    step_overhead_share: float = 0.0

    def __post_init__(self) -> None:
        validate.whole("devices", self.devices, 1)
        validate.number("duration_s", self.duration_s, 0, MAX_DURATION_S, low_open=True,
                        allowed=f"a length > 0 and at most a century ({MAX_DURATION_S:.0f} seconds, "
                        f"{MAX_DURATION_S / 86400:.0f} days)")
        validate.seconds("interval_s", self.interval_s, positive=True)
        self._check_domains()  # before the failure source: the failure rate depends on them
        self._check_failure_source()
        for name in ("save_s", "restore_s", "restart_s", "startup_s"):
            validate.seconds(name, getattr(self, name))
        if self.save_blocking_s is not None:
            allowed = f"seconds >= 0 and at most the whole save ({self.save_s:g} s)"
            validate.number("save_blocking_s", self.save_blocking_s, 0, self.save_s, allowed=allowed)
        validate.whole("hot_spares", self.hot_spares, 0)
        if self.spare_restart_s is None:
            check(self.hot_spares == 0, "spare_restart_s", None, "the seconds a hot spare takes to take over (needed with hot spares)")
        else:
            validate.seconds("spare_restart_s", self.spare_restart_s)
        validate.share("data_stall_fraction", self.data_stall_fraction)
        validate.number(
            "failure_shape", self.failure_shape, 0.2, 5.0,
            note="the Weibull shape of the time between failures: 1 is Poisson",
        )
        validate.number("straggler_factor", self.straggler_factor, 1, 100, note="1: no straggler")
        validate.number("straggler_share", self.straggler_share, 0, 1, allowed="a share of steps between 0 and 1")
        if self.straggler_devices is not None:
            validate.whole("straggler_devices", self.straggler_devices, 0, self.devices,
                           note="None: every device may straggle")
        validate.whole("trials", self.trials, 1, MAX_TRIALS,  # each trial is an array row: more only exhausts memory
                       allowed=f"a whole number between 1 and {MAX_TRIALS}")
        validate.whole("seed", self.seed, 0)
        self._check_in_job()
        self._check_papers_parameters()

    def _check_papers_parameters(self) -> None:
        """The queue, just-in-time checkpoints and in-job recovery's steady costs."""
        validate.seconds("queue_s", self.queue_s)
        validate.share("jit_share", self.jit_share, high_open=False)
        validate.seconds("jit_save_s", self.jit_save_s)
        validate.seconds("step_s", self.step_s)
        check(self.step_s <= self.interval_s, "step_s", self.step_s,
              f"seconds >= 0 and at most the interval ({self.interval_s:g} s): a step is part of one")
        check(self.jit_share == 0 or self.recovery == "restart", "jit_share", self.jit_share,
              "0 with recovery='in-job' (a just-in-time save restarts the whole job)")
        check(self.jit_share > 0 or self.jit_save_s == 0, "jit_save_s", self.jit_save_s,
              "0 unless jit_share > 0 (the share of failures a just-in-time save covers)")
        validate.seconds("collective_timeout_s", self.collective_timeout_s)
        validate.share("step_overhead_share", self.step_overhead_share)
        for name in ("collective_timeout_s", "step_overhead_share"):
            check(getattr(self, name) == 0 or self.recovery == "in-job", name, getattr(self, name),
                  "0 unless recovery='in-job' (a cost of replica groups that train on)")

    def _check_in_job(self) -> None:
        """The in-job recovery fields, and the rules between them."""
        validate.choice("recovery", self.recovery, RECOVERY_MODES)
        groups = validate.whole("replica_groups", self.replica_groups, 1, self.devices,
                                note="each a whole replica of the model; at most one per device")
        check(self.devices % groups == 0, "replica_groups", groups,
              f"a number of replica groups that divides the {self.devices:,} devices into equal groups")
        in_job = self.recovery == "in-job"
        check(in_job or groups == 1, "replica_groups", groups,
              "1 unless recovery='in-job' (groups recover on their own only in-job)")
        validate.whole("min_groups", self.min_groups, 1, groups, note="the fewest replica groups the job trains on")
        if in_job:
            check(self.heal_s is not None, "heal_s", None,
                  "the seconds a relaunched group takes to fetch the live state from a peer (needed with recovery='in-job')")
            validate.seconds("heal_s", self.heal_s)
        else:
            check(self.heal_s is None, "heal_s", self.heal_s,
                  "None unless recovery='in-job' (a whole-job restart loads a checkpoint: restore_s)")

    def _check_domains(self) -> None:
        size = validate.whole("domain_size", self.domain_size, 1, self.devices,
                              note="devices a single failure can take at once")
        check(self.devices % size == 0, "domain_size", size,
              f"a domain size that divides the {self.devices:,} devices into whole domains")
        validate.number("domain_share", self.domain_share, 0, 1,
                        allowed="a share between 0 and 1 of device losses that take a whole domain")
        check(size > 1 or self.domain_share == 1.0, "domain_share", self.domain_share,
              "1 (the default) unless domain_size > 1")
        check(self.failure_causes is None or size == 1, "domain_size", size,
              "1 with a cause table (its counts are interruptions already, whatever each took)")

    def _check_failure_source(self) -> None:
        validate.number("job_failure_rate_per_s", self.job_failure_rate_per_s, 0, unit="failures per second",
                        note="a rate that does not grow with the devices")
        has_mtbf = self.device_mtbf_s is not None
        has_causes = self.failure_causes is not None
        check(
            has_mtbf != has_causes,
            "device_mtbf_s",
            self.device_mtbf_s,
            "give exactly one of device_mtbf_s and failure_causes",
        )
        if has_mtbf:
            validate.seconds("device_mtbf_s", self.device_mtbf_s, positive=True, allow_inf=True, note="math.inf for no failures")
        else:
            causes = self.failure_causes
            well_formed = isinstance(causes, (list, tuple)) and len(causes) > 0 and all(
                isinstance(row, (list, tuple))
                and len(row) == 2
                and isinstance(row[0], str)
                and validate.is_number(row[1])
                and math.isfinite(row[1])
                and row[1] >= 0
                for row in causes
            )
            check(
                well_formed and sum(row[1] for row in causes) > 0,
                "failure_causes",
                causes,
                "a non-empty list of (cause, count) pairs with counts >= 0 and a positive total",
            )
            validate.seconds("causes_reference_s", self.causes_reference_s, positive=True, note="the span the cause counts cover")
            validate.whole(
                "causes_reference_devices", self.causes_reference_devices, 1, note="the cluster size the cause counts cover"
            )
        expected = self.expected_failures
        check(
            expected <= MAX_EXPECTED_FAILURES_PER_TRIAL,
            "failure_causes" if has_causes else "device_mtbf_s",
            self.failure_causes if has_causes else self.device_mtbf_s,
            f"a failure rate giving at most {MAX_EXPECTED_FAILURES_PER_TRIAL:,} expected failures "
            f"in the job's duration (this gives {expected:,.0f})",
        )

    def to_dict(self) -> dict:
        """The fields as plain Python (``failure_causes`` as lists), ready for JSON."""
        d = dataclasses.asdict(self)
        if self.failure_causes is not None:
            d["failure_causes"] = [[cause, count] for cause, count in self.failure_causes]
        return d

    # -- derived quantities -------------------------------------------------

    @property
    def failure_rate_per_s(self) -> float:
        """Job-level failure rate (failure events per second of wall time).

        With failure domains it is the rate of events, each taking one device
        or a whole domain: ``N / M * ((1 - c) + c / d)``
        (:func:`goodputlab.theory.recovery_at_scale.domain_interruption_rate`).
        ``job_failure_rate_per_s`` adds the part that does not grow with the devices.
        """
        return self.job_failure_rate_per_s + self._device_failure_rate_per_s

    @property
    def _device_failure_rate_per_s(self) -> float:
        if self.failure_causes is not None:
            total = float(sum(count for _, count in self.failure_causes))
            per_device = total / (self.causes_reference_devices * self.causes_reference_s)
            return self.devices * per_device
        if self.domain_size == 1:
            return self.devices / self.device_mtbf_s
        c, d = self.domain_share, self.domain_size
        return self.devices / self.device_mtbf_s * ((1.0 - c) + c / d)

    @property
    def domain_event_share(self) -> float:
        """Share of failure events that take a whole domain (0 without domains; a per-job failure takes one device)."""
        if self.domain_size == 1:
            return 0.0
        c, d = self.domain_share, self.domain_size
        total = self.failure_rate_per_s
        domain_events = self._device_failure_rate_per_s * (c / d) / ((1.0 - c) + c / d)
        return 0.0 if total == 0 else domain_events / total

    @property
    def group_devices(self) -> int:
        """Devices in each replica group."""
        return self.devices // self.replica_groups

    @property
    def groups_to_stop(self) -> int:
        """How many replica groups down at once stop the whole job: ``replica_groups - min_groups + 1``."""
        return self.replica_groups - self.min_groups + 1

    @property
    def recovers_in_job(self) -> bool:
        """True when a failure can leave the job training (in-job recovery with a group to spare).

        ``False`` for ``recovery="restart"`` and for the in-job settings in which
        every failure stops the job (one group, or ``min_groups = replica_groups``):
        those are the restart model exactly, and simulated by it.
        """
        return self.recovery == "in-job" and self.groups_to_stop > 1

    @property
    def job_mtbf_s(self) -> float:
        """Job-level mean time between failures (seconds); ``inf`` when nothing fails."""
        rate = self.failure_rate_per_s
        return math.inf if rate == 0 else 1.0 / rate

    @property
    def expected_failures(self) -> float:
        """Expected failures in ``duration_s``: rate x duration."""
        return self.failure_rate_per_s * self.duration_s

    @property
    def blocking_save_s(self) -> float:
        """Seconds each save blocks training (``save_blocking_s``, defaulting to ``save_s``)."""
        return self.save_s if self.save_blocking_s is None else self.save_blocking_s

    @property
    def straggler_wait_share(self) -> float:
        """Share of the (non-stalled) compute time spent waiting for a slow device (:mod:`goodputlab.theory.scaling`)."""
        from .scaling import straggler_wait_share

        slow = self.devices if self.straggler_devices is None else self.straggler_devices
        return straggler_wait_share(self.straggler_factor, self.straggler_share, slow)

    @property
    def is_async(self) -> bool:
        """True when saves persist in the background after a shorter blocking part."""
        return self.blocking_save_s < self.save_s

    @property
    def cause_names(self) -> list[str]:
        """Names of the causes in the table (empty without one)."""
        return [] if self.failure_causes is None else [cause for cause, _ in self.failure_causes]


from .sim_result import SimResult  # noqa: E402  (re-exported: SimConfig and SimResult are imported together)
