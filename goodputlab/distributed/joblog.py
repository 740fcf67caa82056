"""The event log of a distributed job: the supervisor's and the ranks', as one (pure: no torch, no files).

Under ``torchrun`` every rank writes its own log (``ranks/events-rank{R}.jsonl``) and the
supervisor writes its own (``ranks/supervisor.jsonl``: the start, the launch of torchrun,
each failure it injects, the end). :func:`job_events` makes the job's log from them, which
``events.jsonl`` holds at the end of the run, so the ledger, the summary, the report and the
charts read a job of many ranks as they read one process:

* the ranks' logs are merged by :func:`goodputlab.measure.merge.merge_ranks` (the job is as far as
  its slowest rank; its wait for the slowest is split out as ``sync_wait``), attempts numbered
  by ``torchrun``'s restart count;
* the supervisor's phases go around them: ``start`` and ``spawn`` (of torchrun) before the
  first rank starts (the supervisor's later ``spawn`` events, torchrun's relaunches, are left
  out); each ``failure`` from the kill until the ranks of the next attempt start (what
  the ranks of the killed attempt did after the kill is dropped by the ledger); a ``hang`` (an
  emulated cluster's supervisor saw no step for ``--hang-timeout`` seconds) from the job's last
  step to its ``failure``, the ranks' phases in between dropped; ``teardown`` and ``end`` after
  the last rank has exited. A failure or a hang is given the job attempt it struck; a marker
  (``exposed``, ``partition``) keeps the attempt the supervisor wrote, which is the job's.

:func:`rank_totals` gives each rank's own seconds per phase, the figures behind "how long
did the healthy ranks wait for the slowest".
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Mapping, Sequence

from ..measure import events as E
from ..measure.merge import job_attempts, merge_ranks

RANKS_DIR = "ranks"
RANK_LOG = "events-rank{rank}.jsonl"
SUPERVISOR_LOG = "supervisor.jsonl"


def close_rank_log(events: Sequence[dict]) -> list[dict]:
    """A rank's log ending with an ``end`` event: completed when its last attempt finished."""
    events = sorted(events, key=lambda e: e["t"])
    if not events or events[-1]["kind"] == E.SUP_END:
        return list(events)
    last = events[-1]["attempt"]
    finished = any(e["kind"] == E.M_FINISH and e["attempt"] == last for e in events)
    reason = "completed" if finished else f"attempt {last} stopped"
    end = {"t": events[-1]["t"], "attempt": last, "step": None, "kind": E.SUP_END,
           "completed": finished, "clean": finished, "reason": reason}
    return events + [end]


def job_events(supervisor: Sequence[dict], ranks: Mapping[int, Sequence[dict]]) -> list[dict]:
    """The job's event log from the supervisor's events and each rank's (see the module's rules)."""
    ranks = {r: close_rank_log(evs) for r, evs in ranks.items() if evs}
    sup = sorted(supervisor, key=lambda e: e["t"])
    if not ranks:
        return sup
    merged = [e for e in merge_ranks(ranks, numbered=True) if e["kind"] != E.SUP_END]
    starts = _attempt_starts(ranks)
    last_attempt = max(starts) if starts else 0
    out = []
    spawned = False
    for e in sup:
        e = dict(e)
        if e["kind"] == E.SUP_SPAWN and spawned:
            continue  # torchrun relaunched the group: the ranks' own phases say what happened then
        if e["kind"] in (E.SUP_START, E.SUP_SPAWN):
            spawned = spawned or e["kind"] == E.SUP_SPAWN
            e["attempt"] = 0
        elif e["kind"] in (E.SUP_FAILURE, E.SUP_HANG):  # a hang: from the job's last step to its verdict
            e["attempt"] = max((a for a, t in starts.items() if t <= e["t"]), default=0)
        elif e["kind"] in (E.SUP_TEARDOWN, E.SUP_END):  # after the last attempt
            e["attempt"] = max(last_attempt, e["attempt"])
        # a marker (exposed, partition) keeps the attempt the supervisor wrote: the job's own numbering
        out.append(e)
    end = [e for e in out if e["kind"] == E.SUP_END]
    killed = {e["attempt"]: e["t"] for e in out if e["kind"] == E.SUP_FAILURE}
    for e in out:  # a hung attempt: its ranks' phases from the hang's start on are the hang's time
        if e["kind"] == E.SUP_HANG and e["attempt"] in killed:
            killed[e["attempt"]] = min(killed[e["attempt"]], e["t"])
    # what the ranks of a killed attempt did from the kill on is the failure's time (the ledger drops it too)
    merged = [e for e in merged if not (e["kind"] in E.PHASES and e["t"] >= killed.get(e["attempt"], float("inf")))]
    body = [e for e in out if e["kind"] != E.SUP_END] + merged
    body.sort(key=lambda e: e["t"])
    return body + end


def _attempt_starts(ranks: Mapping[int, Sequence[dict]]) -> dict[int, float]:
    """Each job attempt's first event time."""
    attempt_of = job_attempts(ranks, numbered=True)
    starts: dict[int, float] = {}
    for rank, evs in ranks.items():
        for e in evs:
            a = attempt_of[(rank, e["attempt"])]
            starts[a] = min(starts.get(a, e["t"]), e["t"])
    return starts


def rank_events(run_dir: Path | str, rank: int) -> list[dict]:
    """Rank ``rank``'s own events in the run folder ``run_dir`` (empty when it has none: one process)."""
    path = Path(run_dir) / RANKS_DIR / RANK_LOG.format(rank=rank)
    return E.read_events(path) if path.exists() else []


def rank_totals(events: Sequence[dict]) -> dict[str, float]:
    """One rank's own seconds in each phase kind (``compute``, ``sync_wait``, ``data_wait``, ...)."""
    phases = [e for e in sorted(events, key=lambda e: e["t"]) if e["kind"] in E.PHASES]
    totals: dict[str, float] = defaultdict(float)
    for cur, nxt in zip(phases, phases[1:]):
        totals[cur["kind"]] += nxt["t"] - cur["t"]
    return dict(totals)
