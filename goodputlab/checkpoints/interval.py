"""``--ckpt-every auto``: the checkpoint interval from Daly's formula, with both inputs measured as the run goes.

Daly's optimum (:func:`goodputlab.theory.daly_interval`) needs two numbers: the
save cost ``delta`` (seconds a save blocks training) and the job's mean time
between failures ``M``. Neither is known in advance, and both change: a save
gets slower when the disk is busy, and an async save costs almost nothing
until saves come so close together that one waits for the previous. So the
worker estimates both and re-tunes after every save.

**Save cost.** ``delta`` is an exponentially weighted mean (weight
:data:`SAVE_COST_WEIGHT` on the newest) of the measured blocking time of each
save, the duration of its ``ckpt_save`` phase. A restarted worker starts from
the saves of earlier attempts, read from the event log. Before any save has
been measured the prior is a write of the state at :data:`PRIOR_WRITE_BYTES_PER_S`
plus :data:`PRIOR_SAVE_OVERHEAD_S`: pessimistic for the cheap strategies, so the
first interval errs long, and the first measurement corrects it.

**Failure rate.** Failures are a Poisson process with rate ``1/M`` over the
time a worker is alive: the supervisor draws each worker's time to failure from
its launch, so the time between a failure and the next launch (the kill, the
rescheduling delay) is not exposed to failures. After ``n`` failures in ``T``
seconds of exposed time, the estimate is the posterior mean of the rate under a
Gamma prior worth ``w`` failures seen in ``w * M0`` seconds::

    M_hat = (w * M0 + T) / (w + n)

With no failures yet it is the prior ``M0`` stretched by the time survived
(``M0 + T / w``: a run that has lived long without a failure is evidence of a
long MTBF); as failures accumulate it tends to the plain ``T / n``. The prior
weight ``w`` = :data:`PRIOR_FAILURES` is a tenth of a failure, so the prior is
worth only ``w * M0`` = 6 seconds of exposure and the first failures dominate
it: a run whose true MTBF is 6 s estimates 6-8 s after five failures, not the
10-14 s a heavier prior gave. The worker cannot see failures, because a
failure kills it; the supervisor writes each one (``failure`` events, with
their times) into the event log, and a new worker reads them at start, with
the unexposed time that followed each.

**Interval.** ``tau = daly_interval(delta, M_hat)`` seconds of training
between the end of one save and the start of the next. The worker checks
after every step whether that much time has passed since the last save.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..measure import events as E
from ..recovery.booking import M_EXPOSED
from ..theory import daly_interval

PRIOR_MTBF_S = 60.0
"""Prior mean time between failures, seconds (the lab compresses time: failures every few seconds to minutes)."""
PRIOR_FAILURES = 0.1
"""Weight of the prior, in failures: a tenth of a failure's worth of evidence (6 s of exposure at 60 s)."""
PRIOR_WRITE_BYTES_PER_S = 500e6
"""Bytes per second assumed for the first save's cost, before one is measured."""
PRIOR_SAVE_OVERHEAD_S = 0.01
"""Fixed seconds added to the first save's assumed cost."""
SAVE_COST_WEIGHT = 0.3
"""Weight of the newest measurement in the save-cost average (the rest: the older ones)."""
MIN_INTERVAL_S = 0.01
"""The interval never drops below this (a step's bookkeeping), however cheap saves are."""


@dataclass
class AutoInterval:
    """Estimates save cost and MTBF and turns them into Daly's interval (seconds).

    ``state_bytes`` sizes the prior save cost. ``failure_times`` are the run's
    failures so far (seconds since the run started).
    """

    state_bytes: int = 0
    prior_mtbf_s: float = PRIOR_MTBF_S
    prior_failures: float = PRIOR_FAILURES
    save_cost_weight: float = SAVE_COST_WEIGHT
    failure_times: list[float] = field(default_factory=list)
    unexposed_s: float = 0.0
    unexposed_since: float | None = None  # an unexposed span still open when the log was read (run time)
    """Seconds of run time in which no worker was alive to fail (from each failure to the next launch)."""
    save_s: float | None = None
    """The save-cost estimate, seconds (``None`` until a save was measured)."""
    saves_measured: int = 0

    # --- inputs ------------------------------------------------------------------------------
    def observe_save(self, blocking_s: float) -> None:
        """Record one save that blocked training for ``blocking_s`` seconds."""
        if self.save_s is None:
            self.save_s = blocking_s
        else:
            w = self.save_cost_weight
            self.save_s = w * blocking_s + (1 - w) * self.save_s
        self.saves_measured += 1

    def observe_failure(self, t: float) -> None:
        """Record a failure at ``t`` seconds since the run started."""
        self.failure_times.append(t)

    # --- estimates ---------------------------------------------------------------------------
    @property
    def prior_save_s(self) -> float:
        return PRIOR_SAVE_OVERHEAD_S + self.state_bytes / PRIOR_WRITE_BYTES_PER_S

    def save_cost_s(self) -> float:
        """The save cost used now: the measured average, or the prior before any measurement."""
        return self.save_s if self.save_s is not None else self.prior_save_s

    def observe_unexposed(self, seconds: float) -> None:
        """Record ``seconds`` of run time in which no worker was alive (a failure until the next launch)."""
        self.unexposed_s += max(0.0, seconds)

    def exposed_s(self, now_s: float) -> float:
        """Seconds of the first ``now_s`` of run time in which a worker was alive and could fail."""
        return max(0.0, now_s - self.unexposed_s)

    def mtbf_s(self, now_s: float) -> float:
        """Posterior-mean MTBF after the failures seen in the exposed part of ``now_s`` seconds of run time."""
        n = len(self.failure_times)
        return (self.prior_failures * self.prior_mtbf_s + self.exposed_s(now_s)) / (self.prior_failures + n)

    def interval_s(self, now_s: float) -> float:
        """Daly's interval (seconds of training between saves) for the current estimates."""
        return max(MIN_INTERVAL_S, daly_interval(self.save_cost_s(), self.mtbf_s(now_s)))

    def due(self, since_last_save_s: float, now_s: float) -> bool:
        """Should the worker save now, ``since_last_save_s`` seconds after the last save ended?"""
        return since_last_save_s >= self.interval_s(now_s)

    def describe(self, now_s: float) -> dict[str, float]:
        """The current estimates, for the ``ckpt_interval`` marker: seconds and a count."""
        return {
            "interval_s": round(self.interval_s(now_s), 6),
            "save_s": round(self.save_cost_s(), 6),
            "mtbf_s": round(self.mtbf_s(now_s), 6),
            "failures_seen": len(self.failure_times),
        }

    # --- what earlier attempts left in the event log -------------------------------------------
    @classmethod
    def from_event_log(cls, path: Path | str, state_bytes: int = 0, clock: str | None = None, **kwargs) -> AutoInterval:
        """An estimator primed with the failures and the save costs recorded so far in ``events.jsonl``.

        Save costs are the durations of earlier ``ckpt_save`` phases (to the
        next phase event of the same attempt); failures are the supervisor's
        ``failure`` events, and the time from each to the next ``spawn`` is
        unexposed. A missing log gives the bare prior.
        """
        try:
            events = E.read_events(path)  # strict: a line that is not an event stops the run with its line number
        except FileNotFoundError:
            events = []
        return cls.from_events(events, state_bytes=state_bytes, clock=clock, **kwargs)

    @classmethod
    def from_events(cls, events: list[dict], state_bytes: int = 0, clock: str | None = None, **kwargs) -> AutoInterval:
        """:meth:`from_event_log` for events already read (time order), e.g. a distributed job's
        supervisor and rank 0 together. ``clock``: the run's failure clock (``"train"``: nothing before
        a worker's first step is exposed, even before any ``exposed`` marker is written); ``None``: as
        the markers say."""
        est = cls(state_bytes=state_bytes, **kwargs)
        open_saves: dict[int, float] = {}
        # a failure clock starts at its ``exposed`` marker (the train clock: a worker's first step); a
        # log without markers was written when every clock started at a launch
        marked = clock == "train" or any(e["kind"] == M_EXPOSED for e in events)
        failed_at: float | None = 0.0 if marked else None  # unexposed since: the start, or the last failure
        for e in events:
            kind = e["kind"]
            if kind == E.SUP_FAILURE:
                est.observe_failure(float(e["t"]))
                failed_at = float(e["t"])
                open_saves.pop(e["attempt"], None)  # a save cut short by the kill measured nothing
            elif kind == M_EXPOSED and failed_at is not None:
                est.observe_unexposed(float(e["t"]) - failed_at)
                failed_at = None
            elif kind in E.PHASES:
                if kind == E.SUP_SPAWN and failed_at is not None and not marked:
                    est.observe_unexposed(float(e["t"]) - failed_at)
                    failed_at = None
                started = open_saves.pop(e["attempt"], None)
                if started is not None:
                    est.observe_save(float(e["t"]) - started)
                if kind == E.W_CKPT_SAVE:
                    open_saves[e["attempt"]] = float(e["t"])
        est.unexposed_since = failed_at
        return est

    def training_started(self, t_s: float) -> None:
        """This worker's first step began at ``t_s`` (run time): with the train clock the time since the
        last failure (or the run's start) was not exposed; a worker calls this at its first compute."""
        if self.unexposed_since is not None:
            self.observe_unexposed(t_s - self.unexposed_since)
            self.unexposed_since = None
