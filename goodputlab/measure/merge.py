"""One job, many ranks: merge per-rank event logs into the job's event log.

Under ``torchrun`` every rank records its own log (``events-rank{R}.jsonl``). The
job's ledger needs one stream of phases, and this module builds it, so the same
ledger, report and charts serve one process or many. Pure: no torch, no files.

The rules:

* **Attempts.** Ranks number their attempts on their own, and a rank that died
  before it started recording has a gap. So attempts are matched by time: the
  attempts of different ranks that overlap in time are one attempt of the job
  (``torchrun`` kills every rank before it restarts them). When the ranks number
  them alike (the lab's distributed worker records ``torchrun``'s restart count),
  ``numbered=True`` takes the numbers as they are: an attempt killed right after
  it started has too few events to overlap.
* **The job is as far as its slowest rank.** In synchronous data or model
  parallel training a rank that is ahead blocks in the next collective, so at
  every instant the job's phase is the phase of the rank that holds it back,
  by this order (first = holds back most): a rank that failed or is between
  attempts, one that is launching (or has not started yet in this attempt),
  restoring, saving, waiting for data, in the loop's own code, computing. Among
  ranks computing, the lowest step holds the job back. The job computes only
  while every rank computes.
* **Waiting for the slowest rank.** A rank in ``sync_wait`` (its backward is done,
  it waits in the gradient all-reduce) holds the job back least: the job is then as
  far as the rank it waits for. While *every* rank is in ``sync_wait`` the
  all-reduce is moving data, which is part of the step: the job computes. Of the
  stretch in which the job computes a step up to that collective, as long as the
  fastest rank's own compute of the step took is ``compute``; the rest is
  ``sync_wait`` (booked ``straggler_wait``): the time the faster ranks waited for the
  slowest. The split is read off the ranks' own phases, so it is measured, and a rank
  that started late because of its data is not counted twice (its late start is
  ``data_wait``, its compute is as long as the others').
* **Steps.** The job's ``step_end`` of a step carries the mean of its ranks' losses
  (each rank's loss is the mean over an equal shard) and the ranks' sample indices
  in rank order (the whole batch).
* **Checkpoints.** A checkpoint counts once, when the last rank that reported
  it did; the job resumes from the newest checkpoint that every rank that
  reports checkpoints has committed (ranks that save nothing, as when only rank
  0 calls ``torch.save``, do not hold it back).
* **Markers.** Every other marker (a restore, a damaged checkpoint skipped, a
  rank's part of a checkpoint written) is kept, with its rank and the job's attempt.
* **The end.** The job completed when every rank of its last attempt did. Its
  ``final_state_sha256`` is the ranks' when they all report the same one.

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
    E.W_SYNC_WAIT: 8,  # waiting for the others: never the rank that holds the job back
}


def job_attempts(ranks: Mapping[int, Sequence[dict]], numbered: bool = False) -> dict[tuple[int, int], int]:
    """``(rank, rank's attempt) -> the job's attempt``: attempts overlapping in time are one.

    ``numbered``: the ranks already number their attempts alike (``torchrun``'s
    ``TORCHELASTIC_RESTART_COUNT``, the same on every rank of a group): taken as they are.
    """
    if numbered:
        return {(rank, e["attempt"]): e["attempt"] for rank, evs in ranks.items() for e in evs}
    spans = []
    for rank, events in ranks.items():
        bounds: dict[int, list[float]] = {}
        for e in events:
            b = bounds.setdefault(e["attempt"], [e["t"], e["t"]])
            b[0], b[1] = min(b[0], e["t"]), max(b[1], e["t"])
        spans.extend((lo, hi, rank, a) for a, (lo, hi) in bounds.items())
    return attempts_of_spans(spans)


def attempts_of_spans(spans: list[tuple[float, float, int, int]]) -> dict[tuple[int, int], int]:
    """``(rank, rank's attempt) -> the job's attempt`` from each rank's attempts' spans
    ``(first t, last t, rank, attempt)`` (seconds): attempts overlapping in time are one."""
    out: dict[tuple[int, int], int] = {}
    job, group_end = -1, float("-inf")
    for lo, hi, rank, a in sorted(spans):
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


def merge_ranks(ranks: Mapping[int, Sequence[dict]], numbered: bool = False) -> list[dict]:
    """The job's event log from each rank's (``rank -> events``); see the module's rules.

    ``numbered``: the ranks' attempt numbers are the job's (see :func:`job_attempts`).

    Every event of the result has ``t, attempt, step, kind``; phases also carry the
    ``rank`` that set them (and that event's fields, such as a step's loss).
    """
    ranks = {r: sorted(evs, key=lambda e: e["t"]) for r, evs in ranks.items() if evs}
    if not ranks:
        return []
    attempt_of = job_attempts(ranks, numbered)
    participants: dict[int, set[int]] = {}
    for (rank, _), job in attempt_of.items():
        participants.setdefault(job, set()).add(rank)
    t_end = max(e["t"] for evs in ranks.values() for e in evs)
    out = _split_straggler_wait(_job_phases(ranks, attempt_of, participants, t_end), ranks, attempt_of)
    _job_steps(out, ranks, attempt_of)
    out.extend(_job_commits(ranks, attempt_of))
    out.extend(_job_markers(ranks, attempt_of))
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
            i += 1
            if e["kind"] == E.SUP_END and t >= t_end:
                continue  # a log's last event ends it; at that instant the rank is still in its last phase
            current[rank] = e
            job = max(job, e["attempt"])
        found = job_phase_at(current, sorted(participants[job]), job, t, t_end)
        if found is not None and found[0] != last_key:
            last_key, e = found
            out.append(e)
    return out


def job_phase_at(current: dict[int, dict], participants: list[int], job: int, t: float,
                 t_end: float) -> tuple[tuple, dict] | None:
    """``(state, the job's phase event)`` at ``t`` (seconds) from each rank's ``current`` phase: the
    phase of the rank that holds the job back most; None at the job's own end (added by ``_job_end``)."""
    worst = None
    for rank in participants:
        e = current.get(rank)
        if e is None or e["attempt"] < job:  # not started in this attempt yet: launching
            e = {"t": t, "attempt": job, "step": None, "kind": E.W_INIT, "rank": rank}
        step = e["step"] if e["kind"] == E.W_COMPUTE else 0
        key = (HOLD_BACK.get(e["kind"], 6), step if step is not None else 0, rank)
        if worst is None or key < worst[0]:
            worst = (key, e)
    e = worst[1]
    if e["kind"] == E.SUP_END and t >= t_end:
        return None
    state = (e["kind"], e["attempt"], e.get("step"))
    if e["kind"] == E.W_SYNC_WAIT:  # every rank is in the all-reduce: it transfers, the step computes
        e = {**e, "kind": E.W_COMPUTE, "collective": True}
        state = ("collective", e["attempt"], e.get("step"))
    return state, {**e, "t": t}


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


def _job_markers(ranks, attempt_of) -> list[dict]:
    """Every other marker of every rank (a restore, a skipped checkpoint, a part written), with its rank."""
    kept = (E.M_CKPT_COMMIT, E.M_FINISH)
    return [
        {**e, "attempt": attempt_of[(rank, e["attempt"])], "rank": rank}
        for rank, evs in ranks.items()
        for e in evs
        if e["kind"] not in E.PHASES and e["kind"] not in kept
    ]


def _job_end(ranks, participants, t_end: float) -> list[dict]:
    """The job's ``finish`` (when every rank of its last attempt completed) and its ``end``."""
    last_job = max(participants)
    final_ends = []
    for rank in participants[last_job]:
        ends = [e for e in ranks[rank] if e["kind"] == E.SUP_END]
        final_ends.append(ends[-1] if ends else {"completed": False, "reason": "no end"})
    finishes = [e for evs in ranks.values() for e in evs if e["kind"] == E.M_FINISH]
    return job_end_events(final_ends, finishes, last_job, t_end, lambda: newest_common_checkpoint(ranks))


def job_end_events(final_ends: list[dict], finishes: list[dict], last_job: int, t_end: float,
                   resume_step) -> list[dict]:
    """The job's ``finish`` and ``end`` at ``t_end`` (seconds) from each last-attempt rank's last ``end``
    and every rank's ``finish``; ``resume_step()``: the step a stopped job resumes at."""
    completed = all(e.get("completed", False) for e in final_ends)
    out = []
    if completed:
        steps = max((e.get("step") or 0 for e in finishes), default=0)
        hashes = {e.get("final_state_sha256") for e in finishes}
        losses = [e["final_loss"] for e in finishes if isinstance(e.get("final_loss"), (int, float))]
        out.append({"t": t_end, "attempt": last_job, "step": steps, "kind": E.M_FINISH,
                    "final_state_sha256": hashes.pop() if len(hashes) == 1 else None,
                    "final_loss": sum(losses) / len(losses) if losses and len(losses) == len(finishes) else None})
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
            "resume_step": None if completed else resume_step(),
        }
    )
    return out


def _own_compute(ranks: Mapping[int, Sequence[dict]], attempt_of) -> dict[tuple[int, int], dict[int, tuple[float, float]]]:
    """``(job attempt, step) -> {rank: (seconds of its own compute before its all-reduce, when that ended)}``."""
    found: dict[tuple[int, int], dict[int, tuple[float, float]]] = {}
    for rank, evs in ranks.items():
        phases = [e for e in evs if e["kind"] in E.PHASES]
        for cur, nxt in zip(phases, phases[1:]):
            if cur["kind"] == E.W_COMPUTE and nxt["kind"] == E.W_SYNC_WAIT and cur["step"] == nxt["step"]:
                mine = found.setdefault((attempt_of[(rank, cur["attempt"])], cur["step"]), {})
                mine.setdefault(rank, (nxt["t"] - cur["t"], nxt["t"]))  # the first part: forward and own backward
    return found


def _split_straggler_wait(out: list[dict], ranks: Mapping[int, Sequence[dict]], attempt_of) -> list[dict]:
    """Split each stretch in which the job computes a step up to its collective into the fastest
    rank's compute time and the wait for the slowest (a ``sync_wait`` phase); see the module's rules."""
    own = _own_compute(ranks, attempt_of)
    result: list[dict] = []
    for cur, nxt in zip(out, out[1:] + [None]):
        result.append(cur)
        if (
            nxt is None
            or cur["kind"] != E.W_COMPUTE
            or cur.get("collective")
            or not nxt.get("collective")
            or (nxt["attempt"], nxt["step"]) != (cur["attempt"], cur["step"])
        ):
            continue
        times = own.get((cur["attempt"], cur["step"]))
        if not times:
            continue
        at = cur["t"] + min(d for d, _ in times.values())
        slowest = max(times, key=lambda r: times[r][1])  # the rank that joined the all-reduce last
        if at < nxt["t"]:
            result.append({**cur, "t": at, "kind": E.W_SYNC_WAIT, "rank": slowest, "waiting_for": slowest})
    return result


def _job_steps(out: list[dict], ranks: Mapping[int, Sequence[dict]], attempt_of) -> None:
    """Give every job ``step_end`` the mean of its ranks' losses and their samples in rank order."""
    by_step: dict[tuple[int, int], dict[int, dict]] = {}
    for rank, evs in ranks.items():
        for e in evs:
            if e["kind"] == E.W_STEP_END:
                by_step.setdefault((attempt_of[(rank, e["attempt"])], e["step"]), {})[rank] = e
    for e in out:
        if e["kind"] == E.W_STEP_END:
            annotate_step(e, by_step.get((e["attempt"], e["step"]), {}))


def annotate_step(e: dict, done: dict[int, dict]) -> None:
    """The job's ``step_end`` ``e`` takes the mean of its ranks' losses and their samples in rank order
    (``done``: rank -> that rank's ``step_end`` of the step; fewer than two: ``e`` is left as it is)."""
    if len(done) < 2:
        return
    losses = [d.get("loss") for d in done.values()]
    if all(isinstance(v, (int, float)) for v in losses):
        e["loss"] = sum(losses) / len(losses)
    if all(isinstance(d.get("samples"), list) for d in done.values()):
        e["samples"] = [i for r in sorted(done) for i in done[r]["samples"]]
