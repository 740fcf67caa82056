"""One job, many ranks: merge per-rank event logs into the job's event log.

Under ``torchrun`` every rank records its own log (``events-rank{R}.jsonl``). The
job's ledger needs one stream of phases, and this module builds it, so the same
ledger, report and charts serve one process or many. Pure: no torch, no files.

The rules:

* **Attempts.** Ranks number their attempts on their own, and a rank that died
  before it started recording has a gap. So attempts are matched by time: the
  attempts of different ranks that overlap in time are one attempt of the job
  (``torchrun`` kills every rank before it restarts them).
* **The job is as far as its slowest rank.** In synchronous data or model
  parallel training a rank that is ahead blocks in the next collective, so at
  every instant the job's phase is the phase of the rank that holds it back,
  by this order (first = holds back most): a rank that failed or is between
  attempts, one that is launching (or has not started yet in this attempt),
  restoring, saving, waiting for data, in the loop's own code, computing. Among
  ranks computing, the lowest step holds the job back. The job computes only
  while every rank computes.
* **Checkpoints.** A checkpoint counts once, when the last rank that reported
  it did; the job resumes from the newest checkpoint that every rank that
  reports checkpoints has committed (ranks that save nothing, as when only rank
  0 calls ``torch.save``, do not hold it back).
* **The end.** The job completed when every rank of its last attempt did.

Each rank's log must already end with an ``end`` event (the recorder's reader
adds one for an attempt that never closed). The result is sorted by time and
ends with one ``end`` event carrying ``completed``, ``reason`` and
``resume_step``, as the ledger expects.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from . import events as E

#: How strongly a rank in each phase holds the job back (lower: more).
HOLD_BACK: dict[str, int] = {
    E.SUP_FAILURE: 0,
    E.SUP_RESTART_DELAY: 1,
    E.SUP_START: 2,
    E.SUP_SPAWN: 2,
    E.W_INIT: 2,
    E.W_WARMUP: 2,
    E.W_RESTORE: 3,
    E.W_CKPT_SAVE: 4,
    E.W_DATA_WAIT: 5,
    E.W_STEP_END: 6,
    E.R_LOOP: 6,
    E.W_EXIT: 6,
    E.SUP_TEARDOWN: 6,
    E.SUP_END: 6,
    E.W_COMPUTE: 7,
}


def job_attempts(ranks: Mapping[int, Sequence[dict]]) -> dict[tuple[int, int], int]:
    """``(rank, rank's attempt) -> the job's attempt``: attempts overlapping in time are one."""
    spans = []
    for rank, events in ranks.items():
        bounds: dict[int, list[float]] = {}
        for e in events:
            b = bounds.setdefault(e["attempt"], [e["t"], e["t"]])
            b[0], b[1] = min(b[0], e["t"]), max(b[1], e["t"])
        spans.extend((lo, hi, rank, a) for a, (lo, hi) in bounds.items())
    spans.sort()
    out: dict[tuple[int, int], int] = {}
    job, group_end = -1, float("-inf")
    for lo, hi, rank, a in spans:
        if lo > group_end:
            job += 1
            group_end = hi
        else:
            group_end = max(group_end, hi)
        out[(rank, a)] = job
    return out


def newest_common_checkpoint(ranks: Mapping[int, Sequence[dict]]) -> int:
    """The step the job resumes at: the newest checkpoint every saving rank committed (0: none)."""
    newest = [
        max(e["ckpt_step"] for e in evs if e["kind"] == E.M_CKPT_COMMIT)
        for evs in ranks.values()
        if any(e["kind"] == E.M_CKPT_COMMIT for e in evs)
    ]
    return min(newest) if newest else 0


def merge_ranks(ranks: Mapping[int, Sequence[dict]]) -> list[dict]:
    """The job's event log from each rank's (``rank -> events``); see the module's rules.

    Every event of the result has ``t, attempt, step, kind``; phases also carry the
    ``rank`` that set them (and that event's fields, such as a step's loss).
    """
    ranks = {r: sorted(evs, key=lambda e: e["t"]) for r, evs in ranks.items() if evs}
    if not ranks:
        return []
    attempt_of = job_attempts(ranks)
    participants: dict[int, set[int]] = {}
    for (rank, _), job in attempt_of.items():
        participants.setdefault(job, set()).add(rank)
    t_end = max(e["t"] for evs in ranks.values() for e in evs)
    out = _job_phases(ranks, attempt_of, participants, t_end)
    out.extend(_job_commits(ranks, attempt_of))
    out.extend(_job_end(ranks, participants, t_end))
    out.sort(key=lambda e: e["t"])  # stable: the end stays last
    return out


def _job_phases(ranks, attempt_of, participants, t_end: float) -> list[dict]:
    """The job's phases: at each instant, the phase of the rank that holds the job back most."""
    # every rank's phases, in time order, relabelled with the job's attempt
    changes = sorted(
        (e["t"], rank, n, {**e, "attempt": attempt_of[(rank, e["attempt"])], "rank": rank})
        for rank, evs in ranks.items()
        for n, e in enumerate(evs)  # n keeps a rank's events at one instant in file order
        if e["kind"] in E.PHASES
    )
    current: dict[int, dict] = {}  # rank -> its phase now
    job = 0
    out: list[dict] = []
    last_key = None
    i = 0
    while i < len(changes):
        t = changes[i][0]
        while i < len(changes) and changes[i][0] == t:
            _, rank, _, e = changes[i]
            current[rank] = e
            job = max(job, e["attempt"])
            i += 1
        worst = None
        for rank in sorted(participants[job]):
            e = current.get(rank)
            if e is None or e["attempt"] < job:  # not started in this attempt yet: launching
                e = {"t": t, "attempt": job, "step": None, "kind": E.W_INIT, "rank": rank}
            step = e["step"] if e["kind"] == E.W_COMPUTE else 0
            key = (HOLD_BACK.get(e["kind"], 6), step if step is not None else 0, rank)
            if worst is None or key < worst[0]:
                worst = (key, e)
        e = worst[1]
        if e["kind"] == E.SUP_END and t >= t_end:
            continue  # the job's own end is added by _job_end
        state = (e["kind"], e["attempt"], e.get("step"))
        if state != last_key:
            out.append({**e, "t": t})
            last_key = state
    return out


def _job_commits(ranks, attempt_of) -> list[dict]:
    """Each checkpoint once, when its last rank committed it."""
    commits: dict[tuple[int, int], dict] = {}
    for rank, evs in ranks.items():
        for e in evs:
            if e["kind"] == E.M_CKPT_COMMIT:
                key = (attempt_of[(rank, e["attempt"])], e["ckpt_step"])
                if key not in commits or e["t"] > commits[key]["t"]:
                    commits[key] = {**e, "attempt": key[0], "rank": rank}
    return list(commits.values())


def _job_end(ranks, participants, t_end: float) -> list[dict]:
    """The job's ``finish`` (when every rank of its last attempt completed) and its ``end``."""
    last_job = max(participants)
    final_ends = []
    for rank in participants[last_job]:
        ends = [e for e in ranks[rank] if e["kind"] == E.SUP_END]
        final_ends.append(ends[-1] if ends else {"completed": False, "reason": "no end"})
    completed = all(e.get("completed", False) for e in final_ends)
    out = []
    if completed:
        finishes = [e for evs in ranks.values() for e in evs if e["kind"] == E.M_FINISH]
        steps = max((e.get("step") or 0 for e in finishes), default=0)
        out.append({"t": t_end, "attempt": last_job, "step": steps, "kind": E.M_FINISH,
                    "final_state_sha256": None, "final_loss": None})
    reasons = sorted({e.get("reason", "unknown") for e in final_ends})
    out.append(
        {
            "t": t_end,
            "attempt": last_job,
            "step": None,
            "kind": E.SUP_END,
            "completed": completed,
            "clean": all(e.get("clean", False) for e in final_ends),
            "reason": "; ".join(reasons),
            "resume_step": None if completed else newest_common_checkpoint(ranks),
        }
    )
    return out
