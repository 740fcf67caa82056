"""The event kinds recovery adds to the event log, and the category each one is booked to.

The ledger's rule stays the one of ``docs/ARCHITECTURE.md``: consecutive phase events
partition the wall clock, and each phase is booked to one of the eight categories.
Recovery adds phases (each with its category here) and markers (facts that change no
phase). Everything from a failure until the job is ready to train again is
``restart``, whoever spends it: a hung worker nobody has noticed yet, a dying worker
unwinding its error, the handover to a hot spare, a DataLoader rebuilt in place.

=================  ==========  ============  =====================================================
kind               written by  category      what the time is
=================  ==========  ============  =====================================================
``hang``           supervisor  restart       from the hung worker's last sign of progress to the
                                             watchdog's verdict (written afterwards, at the time
                                             of that last sign)
``handover``       supervisor  restart       giving the job to the hot spare: writing its
                                             attempt number, and waiting while it finishes a
                                             start-up the failure cut short
``resume``         supervisor  restart       a stopped run continued (``--resume``): the new
                                             session's set-up, before its first launch
``activate``       worker      restart       the hot spare took the job: joining the event log
``crash``          worker      restart       an error is unwinding the worker: traceback, exit
``loader_rebuild`` worker      restart       a DataLoader worker died: the loader is rebuilt
                                             from the current step, in the same process
``straggle``       worker      other         the extra time of a slowed step (a straggler):
                                             the step's compute stays ``productive`` or
                                             ``lost_work``; what the slowdown added is
                                             ``other``, and the summary reports it apart
                                             (``straggler_s``, ``straggler_steps``)
=================  ==========  ============  =====================================================

Markers: ``failure_injected`` (``mode`` and what was hit: the step, a DataLoader worker's
pid, the bytes left on a filled disk), ``ckpt_failed`` (a save that did not happen:
``ckpt_step``, ``reason``; the previous checkpoint stays the newest), ``disk_freed`` (the
injected full disk was emptied again), ``standby_spawned`` (a hot spare was launched, off
the critical path).

A hot spare's own start-up is not in the log as phases at all: it happens beside the
job, not in its way. The ``activate`` event carries how long it took
(``standby_startup_s``) and whether the spare was ready when the failure came.
"""

from __future__ import annotations

from .. import categories as C

# --- phases --------------------------------------------------------------------------------------
SUP_HANG = "hang"
SUP_HANDOVER = "handover"
SUP_RESUME = "resume"
W_ACTIVATE = "activate"
W_CRASH = "crash"
W_LOADER_REBUILD = "loader_rebuild"
W_STRAGGLE = "straggle"

#: Every phase recovery adds, with its category.
PHASE_CATEGORIES: dict[str, str] = {
    SUP_HANG: C.RESTART,
    SUP_HANDOVER: C.RESTART,
    SUP_RESUME: C.RESTART,
    W_ACTIVATE: C.RESTART,
    W_CRASH: C.RESTART,
    W_LOADER_REBUILD: C.RESTART,
    W_STRAGGLE: C.OTHER,
}

#: The phases the supervisor writes (kept by the ledger even when stamped after the worker's kill).
SUPERVISOR_PHASES = frozenset({SUP_HANG, SUP_HANDOVER, SUP_RESUME})

# --- markers -------------------------------------------------------------------------------------
M_FAILURE_INJECTED = "failure_injected"  # {"mode", "step"?, "pid"?, "left_bytes"?}
M_CKPT_FAILED = "ckpt_failed"  # {"ckpt_step", "reason", "tier"}: a save that did not happen
M_DISK_FREED = "disk_freed"  # {"bytes"}: the ballast of an injected full disk was removed
M_STANDBY_SPAWNED = "standby_spawned"  # {"standby", "pid"}: a hot spare was launched beside the job
M_EXPOSED = "exposed"  # {"clock"}: a worker's failure clock started (its first step, or its launch with
#                         --failure-clock wall; a handover; again after a failure it survived)

M_PARTITION = "partition"  # {"node", "at_step", "seconds"}: an emulated node's link went down (--partition-at-steps)
M_PARTITION_END = "partition_end"  # {"node"}: its link is up again

MARKERS = frozenset({M_FAILURE_INJECTED, M_CKPT_FAILED, M_DISK_FREED, M_STANDBY_SPAWNED, M_EXPOSED, M_PARTITION,
                     M_PARTITION_END})


def category_of(kind: str) -> str | None:
    """The category of a recovery phase, ``None`` for any other kind."""
    return PHASE_CATEGORIES.get(kind)


class RecoveryTally:
    """What recovery did, counted one event at a time (the ledger's single pass feeds it).

    :meth:`see` takes every event of the log in time order (the ledger passes only the kinds in
    :data:`TALLIED`); :meth:`phase_ended` the length of each phase of the log that ended (for the
    straggler time); :meth:`facts` says what was counted so far.
    """

    def __init__(self) -> None:
        self.injected: dict[str, int] = {}
        self._hang_at: dict[int, float] = {}
        self.detection: list[float] = []
        self.straggle_s, self.straggle_steps = 0.0, 0
        self.ckpt_failed = self.rebuilds = self.handovers = 0
        self.standby_startup: list[float] = []

    def see(self, t: float, attempt: int, kind: str, fields: dict) -> None:
        if kind == M_FAILURE_INJECTED:
            mode = fields.get("mode", "?")
            self.injected[mode] = self.injected.get(mode, 0) + 1
        elif kind == SUP_HANG:
            self._hang_at[attempt] = t
        elif kind == "failure" and attempt in self._hang_at:
            self.detection.append(t - self._hang_at.pop(attempt))
        elif kind == M_CKPT_FAILED:
            self.ckpt_failed += 1
        elif kind == W_LOADER_REBUILD:
            self.rebuilds += 1
        elif kind == SUP_HANDOVER:
            self.handovers += 1
        elif kind == W_ACTIVATE and fields.get("standby_startup_s") is not None:
            self.standby_startup.append(float(fields["standby_startup_s"]))

    def straggled(self, seconds: float) -> None:
        """A ``straggle`` phase ended after ``seconds``."""
        self.straggle_s += seconds
        self.straggle_steps += 1

    def facts(self) -> dict:
        """See :func:`recovery_facts`."""
        return {
            "injected": dict(self.injected),
            "hang_detection_s": list(self.detection),
            "straggler_s": self.straggle_s,
            "straggler_steps": self.straggle_steps,
            "ckpt_failed": self.ckpt_failed,
            "loader_rebuilds": self.rebuilds,
            "handovers": self.handovers,
            "standby_startup_s": list(self.standby_startup),
        }


#: The kinds :class:`RecoveryTally` counts.
TALLIED = frozenset({M_FAILURE_INJECTED, SUP_HANG, "failure", M_CKPT_FAILED, W_LOADER_REBUILD, SUP_HANDOVER, W_ACTIVATE})


def recovery_facts(events: list[dict], phases: frozenset[str]) -> dict:
    """What recovery did in a run, from its event log (for the summary); ``phases`` is the
    set of phase kinds (``goodputlab.events.PHASES``, which includes this module's).

    Keys: ``injected`` (failures injected, by mode), ``hang_detection_s`` (for each hang:
    seconds from the last sign of progress to the watchdog's verdict),
    ``straggler_s`` and ``straggler_steps`` (the time slowed steps added, and how many
    step executions were slowed), ``ckpt_failed`` (saves that did not happen),
    ``loader_rebuilds``, ``handovers`` (failures a hot spare took over) and
    ``standby_startup_s`` (each activated spare's start-up, spent off the critical path).
    """
    tally = RecoveryTally()
    straggle_t = None
    for e in sorted(events, key=lambda e: e["t"]):
        if e["kind"] in phases:
            if straggle_t is not None:
                tally.straggled(e["t"] - straggle_t)
            straggle_t = e["t"] if e["kind"] == W_STRAGGLE else None
        if e["kind"] in TALLIED:
            tally.see(e["t"], e["attempt"], e["kind"], e)
    return tally.facts()
