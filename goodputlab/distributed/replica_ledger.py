"""The ledger of an in-job recovery run: the replica groups' event logs folded into one job's books.

A job of ``G`` replica groups is ``G`` equal shares of each second of its wall time
(docs/IN_JOB_RECOVERY.md). Each replica's own timeline, from the run's start to its end, is
booked second by second, and the job's bucket of a category is the mean of the replicas':
so the job's buckets sum to its wall time because every replica's do. A replica's timeline:

| stretch | booked |
|---|---|
| its first launch up to its first step (process start, model, the first quorum) | ``startup`` |
| from a kill (the supervisor's ``failure``) up to its relaunch's heal: respawn, set-up, joining | ``degraded`` |
| its heal: the first quorum of a relaunch, which fetches the live state from a peer | ``checkpoint_restore`` |
| a step's compute, when the quorum committed it | ``productive`` |
| a step's compute that was not committed (a peer failed during it) or that a kill cut | ``lost_work`` |
| waiting for the step's quorum (the other replicas) | ``straggler_wait`` |
| building its batch | ``data_wait`` |
| step bookkeeping, and from its exit to the job's end | ``other`` |

Pure: no torch, no processes. The supervisor (:mod:`goodputlab.engine.torchft_supervision`) calls
:func:`job_books` with its own log and the replicas'.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from .. import categories as C
from ..measure import events as E
from ..measure.ledger import Ledger, Segment

_STATIC = {
    E.W_RESTORE: C.CHECKPOINT_RESTORE,
    E.W_SYNC_WAIT: C.STRAGGLER_WAIT,
    E.W_DATA_WAIT: C.DATA_WAIT,
    E.W_CKPT_SAVE: C.CHECKPOINT_SAVE,
    E.W_STEP_END: C.OTHER,
    E.W_EXIT: C.OTHER,
}


class Stretch(NamedTuple):
    """A stretch of one replica's timeline (seconds since the run started): its category, whether a kill
    ended it, and the launch (``attempt``), event kind and step it began with."""

    start: float
    end: float
    category: str
    cut: bool
    attempt: int
    kind: str
    step: int | None


def replica_stretches(events: Iterable[dict], kills: dict[int, float], wall_s: float) -> list[Stretch]:
    """One replica's timeline as :class:`Stretch` es from 0 to ``wall_s`` (seconds), without gaps.

    ``events`` are the replica's own (every launch, ``attempt`` = its launch); ``kills`` maps an
    attempt to the time the supervisor killed it.
    """
    kept = sorted((e for e in events if e["attempt"] not in kills or e["t"] <= kills[e["attempt"]]),
                  key=lambda e: (e["t"], e["attempt"]))
    committed = {(e["attempt"], e["step"]) for e in kept if e["kind"] == E.W_STEP_END and e.get("committed", True)}
    phases = [e for e in kept if e["kind"] in E.PHASES]
    trained: set[int] = set()  # attempts that have reached their first step or heal
    out: list[Stretch] = []
    t, category, began = 0.0, C.STARTUP, (0, E.SUP_SPAWN, None)  # before its first event: its process starting
    for i, e in enumerate(phases):
        a = e["attempt"]
        kind = e["kind"]
        if kind in (E.W_COMPUTE, E.W_RESTORE) or (kind == E.W_SYNC_WAIT and a in trained):
            trained.add(a)
        end_of_attempt = i + 1 == len(phases) or phases[i + 1]["attempt"] != a
        killed_at = kills.get(a)
        if e["t"] > t:
            out.append(Stretch(t, e["t"], category, False, *began))
        t, began = e["t"], (a, kind, e["step"])
        if a not in trained:
            category = C.STARTUP if a == 0 else C.DEGRADED
        elif kind == E.W_COMPUTE:
            category = C.PRODUCTIVE if (a, e["step"]) in committed and not _recomputed(phases, i) else C.LOST_WORK
        else:
            category = _STATIC.get(kind, C.OTHER)
        if end_of_attempt:
            stop = min(killed_at, wall_s) if killed_at is not None else (
                phases[i + 1]["t"] if i + 1 < len(phases) else wall_s)
            out.append(Stretch(t, max(t, stop), category, killed_at is not None, *began))
            t = max(t, stop)
            category = C.DEGRADED if killed_at is not None else C.OTHER  # away until relaunched, or done
            began = (a, E.SUP_FAILURE if killed_at is not None else E.W_EXIT, None)
    if wall_s > t:
        out.append(Stretch(t, wall_s, category, False, *began))
    return out


def replica_segments(events: Iterable[dict], kills: dict[int, float], wall_s: float) -> list[tuple[float, float, str, bool]]:
    """One replica's timeline as ``(start, end, category, cut_by_kill)`` from 0 to ``wall_s`` (seconds):
    :func:`replica_stretches` without the launch, kind and step."""
    return [(s.start, s.end, s.category, s.cut) for s in replica_stretches(events, kills, wall_s)]


def _recomputed(phases: list[dict], i: int) -> bool:
    """Whether the compute at ``phases[i]`` is thrown away: its attempt ends (killed) before a committed
    ``step_end`` of its step, or an uncommitted one is followed by another compute of the step. A try
    whose all-reduce failed keeps its gradient (``grad_kept``): the retry (a compute marked ``reused``)
    reduces it again without computing, and when that retry commits, both are the step's."""
    e = phases[i]
    for later in phases[i + 1:]:
        if later["attempt"] != e["attempt"]:
            return True  # the attempt ended (killed) inside this step
        if later["step"] != e["step"]:
            continue
        if later["kind"] == E.W_COMPUTE and not later.get("reused"):
            return True  # computed again
        if later["kind"] == E.W_STEP_END:
            if later.get("committed", True):
                return False
            if not later.get("grad_kept"):
                return True
    return True


def _timelines(supervisor: list[dict], replicas: dict[int, list[dict]], groups: int) -> tuple[float, dict[int, list[Stretch]]]:
    """The job's wall time (its ``end``) and each replica's :class:`Stretch` es, 0 to the wall."""
    end = next((e for e in reversed(supervisor) if e["kind"] == E.SUP_END), None)
    wall = end["t"] if end is not None else max((e["t"] for e in supervisor), default=0.0)
    kills: dict[int, dict[int, float]] = {}
    for e in supervisor:
        if e["kind"] == E.SUP_FAILURE and "replica" in e:
            kills.setdefault(e["replica"], {})[e["replica_attempt"]] = e["t"]
    return wall, {r: replica_stretches(replicas.get(r, []), kills.get(r, {}), wall) for r in range(groups)}


def job_books(supervisor: list[dict], replicas: dict[int, list[dict]], groups: int) -> dict:
    """The job's ledger from the supervisor's log and each replica's: ``wall_s``, ``buckets`` (the
    replicas' mean, seconds), ``goodput``, ``replicas`` (each one's buckets), ``lost_work_survivors_s``
    (the job's share of lost compute that no kill of its own replica cut: steps the survivors
    discarded) and ``degraded_s``."""
    wall, timelines = _timelines(supervisor, replicas, groups)
    buckets = C.empty_buckets()
    per_replica, survivors_lost = {}, 0.0
    for r, stretches in timelines.items():
        own = C.empty_buckets()
        for s in stretches:
            own[s.category] += s.end - s.start
            if s.category == C.LOST_WORK and not s.cut:
                survivors_lost += (s.end - s.start) / groups
        per_replica[str(r)] = own
        for k, v in own.items():
            buckets[k] += v / groups
    return {
        "wall_s": wall,
        "buckets": buckets,
        "goodput": buckets[C.PRODUCTIVE] / wall if wall > 0 else 0.0,
        "shares": {k: (v / wall if wall > 0 else 0.0) for k, v in buckets.items()},
        "replicas": per_replica,
        "lost_work_survivors_s": survivors_lost,
        "degraded_s": buckets[C.DEGRADED],
    }


def recoveries(supervisor: list[dict], replicas: dict[int, list[dict]]) -> list[dict]:
    """Each kill's recovery, in seconds: ``away_s`` from the kill to the relaunch's heal (its first quorum:
    respawn or hand-over, set-up, joining), ``heal_s`` the heal (fetching the live state from a peer),
    ``hot`` whether a standby took the group over; ``away_s`` and ``heal_s`` are None when the relaunch
    never healed (the job ended first)."""
    handovers = {(e["replica"], e["replica_attempt"]) for e in supervisor if e["kind"] == "handover" and "replica" in e}
    out = []
    for e in supervisor:
        if e["kind"] != E.SUP_FAILURE or "replica" not in e:
            continue
        r, a = e["replica"], e["replica_attempt"] + 1
        mine = [x for x in replicas.get(r, []) if x["attempt"] == a]
        restore = next((x["t"] for x in mine if x["kind"] == E.W_RESTORE), None)
        healed = next((x["t"] for x in mine if x["kind"] == E.M_RESTORED), None)
        out.append({"replica": r, "attempt": a, "hot": (r, a) in handovers,
                    "away_s": None if restore is None else restore - e["t"],
                    "heal_s": None if healed is None or restore is None else healed - restore})
    return out


def survivor_quorum_waits(supervisor: list[dict], replicas: dict[int, list[dict]]) -> list[float]:
    """Per kill and surviving replica, the seconds it spent in quorums (``sync_wait``) from the kill to its
    next committed step: the survivors wait there until the lighthouse drops the dead group (its
    heartbeat timeout), or until a hot spare joins in its place. Booked ``straggler_wait`` like any
    quorum; a quorum with every group up takes about a millisecond here, so this is nearly all the
    failure's cost to the survivors besides their uncommitted step. The next committed step is the first
    one whose quorum began after the kill: a step in flight whose all-reduce the killed group had already
    joined commits without it, and its survivors meet the dead group's absence only in the quorum after."""
    waits = []
    for e in supervisor:
        if e["kind"] != E.SUP_FAILURE or "replica" not in e:
            continue
        for r, evs in replicas.items():
            if r == e["replica"]:
                continue
            phases = [x for x in evs if x["kind"] in E.PHASES or x["kind"] == E.W_STEP_END]
            waited, quorum_after = 0.0, False
            for x, after in zip(phases, phases[1:]):
                if x["kind"] == E.W_STEP_END and x["t"] > e["t"] and x.get("committed", True) and quorum_after:
                    break
                if x["kind"] == E.W_SYNC_WAIT and x["t"] > e["t"] and not x.get("failed"):
                    quorum_after = True
                if x["kind"] == E.W_SYNC_WAIT and after["t"] > e["t"]:
                    waited += after["t"] - max(x["t"], e["t"])
            waits.append(waited)
    return waits


def split_job_log(events: Iterable[dict]) -> tuple[list[dict], dict[int, list[dict]]]:
    """A torchft job's ``events.jsonl`` split back into the supervisor's events and each replica's own.

    The merge (:meth:`~goodputlab.engine.torchft_supervision.TorchftSupervision.finish`) marks every
    replica's event with its ``replica``; of the supervisor's, only the ``spawn`` and ``failure`` of a
    replica name one, and they also carry ``replica_attempt``, which no replica's own event does."""
    supervisor: list[dict] = []
    replicas: dict[int, list[dict]] = {}
    for e in events:
        if "replica" in e and "replica_attempt" not in e:
            replicas.setdefault(int(e["replica"]), []).append(e)
        else:
            supervisor.append(e)
    return supervisor, replicas


def replica_lane(replica: int) -> str:
    """The name of replica group ``replica``'s strip in a timeline."""
    return f"replica {replica}"


def job_ledger(events: Iterable[dict], groups: int) -> Ledger:
    """The :class:`~goodputlab.measure.ledger.Ledger` of a torchft job from its ``events.jsonl``, by the
    job's rules (the module's table): one strip (``lane``) per replica group from 0 to the wall, its
    launches as ``attempt``; the buckets are the replicas' mean, as in ``summary.json`` (so a strip's
    seconds sum to the wall, and all strips' to ``groups`` walls); the failures are the supervisor's kills."""
    supervisor, replicas = split_job_log(sorted(events, key=lambda e: e["t"]))
    wall, timelines = _timelines(supervisor, replicas, groups)
    segments = [Segment(s.start, s.end, s.category, s.attempt, s.kind, s.step, lane=replica_lane(r))
                for r, stretches in timelines.items() for s in stretches if s.end > s.start]
    buckets = C.empty_buckets()
    for seg in segments:
        buckets[seg.category] += seg.duration / groups
    end = next((e for e in reversed(supervisor) if e["kind"] == E.SUP_END), None)
    failures = [e["t"] for e in supervisor if e["kind"] == E.SUP_FAILURE]
    return Ledger(segments, wall, buckets, failures, bool(end and end.get("completed")))


_STEP_PARTS = {E.W_DATA_WAIT: "data_wait_s", E.W_COMPUTE: "compute_s", E.W_SYNC_WAIT: "sync_wait_s"}


def job_per_step(events: Iterable[dict], groups: int) -> list[dict]:
    """A torchft job's rows per step execution, each replica group's own (what ``RunResult.per_step`` gives
    for one): ``replica``, ``attempt`` (its launch), ``step``, the seconds of its ``data_wait``, ``compute``
    and ``sync_wait`` (the quorum and a failed all-reduce) as its timeline books them, the committed
    ``loss``, and ``survived``: its compute was booked ``productive`` (committed, not thrown away). The
    tries of one step within a launch are one row (a retry reduces the kept gradient again). Sorted by
    replica, launch and step."""
    supervisor, replicas = split_job_log(sorted(events, key=lambda e: e["t"]))
    wall, timelines = _timelines(supervisor, replicas, groups)
    losses = {(r, e["attempt"], e["step"]): e.get("loss") for r, evs in replicas.items() for e in evs
              if e["kind"] == E.W_STEP_END and e.get("committed", True)}
    rows: dict[tuple[int, int, int], dict] = {}
    for r, stretches in timelines.items():
        for s in stretches:
            part = _STEP_PARTS.get(s.kind)
            if part is None or s.step is None or s.category in (C.DEGRADED, C.STARTUP):
                continue
            row = rows.setdefault((r, s.attempt, s.step), {"replica": r, "attempt": s.attempt, "step": s.step, "data_wait_s": 0.0,
                                                             "compute_s": 0.0, "sync_wait_s": 0.0, "survived": False})
            row[part] += s.end - s.start
            row["survived"] |= s.kind == E.W_COMPUTE and s.category == C.PRODUCTIVE
    return [{**row, "loss": losses.get(key)} for key, row in sorted(rows.items())]
