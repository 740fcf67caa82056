"""The schedulers of the lab's model server: one colocated worker, or a prefill and a decode worker.

Each runs one measurement at a time: a list of jobs with arrival times on the machine's
monotonic clock (shared by every process), until every job finished or the horizon passed.
Requests are not sent by a client process: a worker admits a job once the clock passes its
arrival time, which is what an open-loop client would do, without a third process competing
for the cores.

* :class:`ColocatedEngine`: prefill and decode on one worker. Between decode steps it admits
  every request that has arrived (continuous batching, up to ``max_batch`` running), and runs
  their prefills *first*, up to ``prefill_token_budget`` prompt tokens per iteration: new
  requests get their first token soon, and the running ones wait. That wait is the
  prefill-decode interference DistServe describes.
* :class:`PrefillEngine` and :class:`DecodeEngine`: the two phases in separate workers. The
  prefill worker writes each prompt's keys and values into a free row of a transfer buffer in
  shared memory and sends the decode worker a short message (row, length, first token); the
  decode worker copies the row into its own running batch, frees the transfer row, and never
  stops decoding for a prefill.

Every span of work is kept in a trace ``(kind, start, end, size, waiting)`` for the timeline charts:
``size`` is the prompt tokens of a prefill, the batch of a decode step, the positions copied by
a hand-over; ``waiting`` counts the running sequences that got no token during the span (for a
prefill on a colocated worker: the sequences it interrupted).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..training.model import GPT
from ..training.workload import ModelPreset
from . import kv

Clock = Callable[[], float]
MAX_TRACE = 50_000  # spans kept per measurement (a long overloaded run would otherwise grow without bound)


@dataclass
class Job:
    """A request inside a worker; ``arrival`` on the monotonic clock."""

    id: int
    arrival: float
    prompt: torch.Tensor
    output_len: int

    @property
    def prompt_len(self) -> int:
        return int(self.prompt.shape[0])


@dataclass
class Sequence:
    """A request being generated: ``last`` is its newest token, not yet in the cache."""

    job: Job
    length: int  # positions in its cache row
    last: int
    tokens: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    joined_running: int = 0  # sequences already decoding when it joined the batch

    @property
    def done(self) -> bool:
        return len(self.tokens) >= self.job.output_len


class Trace:
    """Spans of work: (kind, start, end, size, waiting), times in seconds since ``t0``."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.spans: list[tuple[str, float, float, int, int]] = []

    def add(self, kind: str, start: float, end: float, size: int, waiting: int = 0) -> None:
        if len(self.spans) < MAX_TRACE:
            self.spans.append((kind, start - self.t0, end - self.t0, size, waiting))


def jobs_from(requests: list[tuple[int, float, Any, int]], t0: float) -> list[Job]:
    """Jobs from ``(id, arrival_s, prompt token ids, output_len)`` tuples, arrivals offset by ``t0``."""
    return sorted(
        (Job(i, t0 + a, torch.as_tensor(p, dtype=torch.long), int(n)) for i, a, p, n in requests),
        key=lambda j: (j.arrival, j.id),
    )


def record(seq_or_job: Sequence | Job, t0: float, worker: str) -> dict[str, Any]:
    """A request's record as a plain dict (what a worker sends back)."""
    if isinstance(seq_or_job, Sequence):
        job, tokens, times, joined = seq_or_job.job, seq_or_job.tokens, seq_or_job.times, seq_or_job.joined_running
    else:
        job, tokens, times, joined = seq_or_job, [], [], 0
    return {
        "id": job.id, "arrival_s": job.arrival - t0, "prompt_len": job.prompt_len, "output_len": job.output_len,
        "token_times_s": [t - t0 for t in times], "tokens": list(tokens), "worker": worker, "joined_running": joined,
    }


class Batch:
    """The running batch: sequences in rows ``0..B-1`` of a KV cache, advanced one token per step."""

    def __init__(self, model: GPT, preset: ModelPreset, rows: int):
        self.model = model
        self.rows = rows
        self.cache = kv.new_cache(preset, rows)
        self.seqs: list[Sequence] = []

    @property
    def free(self) -> int:
        return self.rows - len(self.seqs)

    def prefill(self, job: Job, clock: Clock) -> Sequence:
        """Prefill ``job`` into the next row; its first token exists when this returns.

        A one-token answer is done at once and does not stay in the batch."""
        row = len(self.seqs)
        token = int(kv.prefill(self.model, job.prompt, self.cache, row).argmax())
        seq = Sequence(job, job.prompt_len, token, [token], [clock()], len(self.seqs))
        if not seq.done:
            self.seqs.append(seq)
        return seq

    def join(self, seq: Sequence, source: torch.Tensor, source_row: int) -> None:
        """Take over a sequence prefilled elsewhere: copy its keys and values from ``source``."""
        kv.copy_row(source, source_row, self.cache, len(self.seqs), seq.length)
        seq.joined_running = len(self.seqs)
        self.seqs.append(seq)

    def step(self, clock: Clock) -> list[Sequence]:
        """One decode step for every running sequence; returns those that finished (their rows are reused)."""
        tokens = torch.tensor([s.last for s in self.seqs])
        lengths = torch.tensor([s.length for s in self.seqs])
        nxt = kv.decode(self.model, self.cache, tokens, lengths).argmax(-1).tolist()
        now = clock()
        for s, token in zip(self.seqs, nxt):
            s.length += 1
            s.last = token
            s.tokens.append(token)
            s.times.append(now)
        finished = [r for r in range(len(self.seqs)) if self.seqs[r].done]
        out = [self.seqs[r] for r in finished]
        for r in reversed(finished):  # keep rows dense: the last row moves into the hole
            last = len(self.seqs) - 1
            if r != last:
                kv.copy_row(self.cache, last, self.cache, r, self.seqs[last].length)
                self.seqs[r] = self.seqs[last]
            self.seqs.pop()
        return out

    def clear(self) -> None:
        self.seqs = []


def warm_up(model: GPT, batch: Batch, lengths=(8, 64, 160), steps: int = 4) -> None:
    """Run each kernel shape family once so the first measured request does not pay for first use."""
    clock = time.monotonic
    for i, n in enumerate(lengths):
        if not batch.free:
            batch.clear()
        batch.prefill(Job(-1 - i, 0.0, torch.zeros(n, dtype=torch.long), 1 + steps), clock)
    for _ in range(steps):
        batch.step(clock)
    batch.clear()


def _sleep_until(t: float, clock: Clock) -> None:
    delay = t - clock()
    if delay > 0:
        time.sleep(delay)


class ColocatedEngine:
    """Prefill and decode on one worker, prefill first (see the module's docstring)."""

    def __init__(self, model: GPT, preset: ModelPreset, max_batch: int, prefill_token_budget: int, name: str = "colocated"):
        self.model = model
        self.batch = Batch(model, preset, max_batch)
        self.prefill_token_budget = prefill_token_budget
        self.name = name

    def run(self, jobs: list[Job], t0: float, horizon: float, clock: Clock = time.monotonic) -> tuple[list[dict], list[tuple]]:
        """Serve ``jobs`` until all finished or ``horizon`` (monotonic seconds); returns (records, trace spans)."""
        pending, waiting = deque(jobs), deque()
        done: list[Sequence] = []
        trace = Trace(t0)
        batch = self.batch
        batch.clear()
        while True:
            now = clock()
            if now >= horizon:
                break
            while pending and pending[0].arrival <= now:
                waiting.append(pending.popleft())
            if not waiting and not batch.seqs:
                if not pending:
                    break
                _sleep_until(min(pending[0].arrival, horizon), clock)
                continue
            budget = self.prefill_token_budget
            while waiting and batch.free and budget > 0 and clock() < horizon:  # at least one per iteration
                job = waiting.popleft()
                start = clock()
                running = len(batch.seqs)
                seq = batch.prefill(job, clock)
                trace.add("prefill", start, seq.times[0], job.prompt_len, running)
                budget -= job.prompt_len
                if seq.done:
                    done.append(seq)
            if batch.seqs and clock() < horizon:
                start = clock()
                size = len(batch.seqs)
                done.extend(batch.step(clock))
                trace.add("decode", start, clock(), size)
        records = [record(s, t0, self.name) for s in done]
        records += [record(s, t0, self.name) for s in batch.seqs]
        records += [record(j, t0, self.name) for j in (*waiting, *pending)]
        batch.clear()
        return records, trace.spans


class PrefillEngine:
    """The prefill worker of a disaggregated server: prompts in, keys and values out to the decode worker."""

    def __init__(self, model: GPT, transfer: torch.Tensor, name: str = "prefill"):
        self.model = model
        self.transfer = transfer  # (n_layer, 2, rows, n_head, context, head_dim) in shared memory
        self.name = name

    def run(self, jobs: list[Job], t0: float, horizon: float, peer, probe: int, clock: Clock = time.monotonic) -> tuple[list[dict], list[tuple]]:
        """Prefill ``jobs`` as they arrive and hand each over through a free transfer row.

        Waits for a free row when the decode worker has not yet taken the earlier ones (back
        pressure). Returns (no records: the decode worker keeps them, trace spans)."""
        pending, waiting = deque(jobs), deque()
        free = list(range(self.transfer.shape[2]))[::-1]
        trace = Trace(t0)
        while True:
            now = clock()
            if now >= horizon:
                break
            while peer.poll():
                msg = peer.recv()
                if msg[0] == "free" and msg[1] == probe:
                    free.append(msg[2])
            while pending and pending[0].arrival <= now:
                waiting.append(pending.popleft())
            if waiting and free:
                job = waiting.popleft()
                row = free.pop()
                start = clock()
                token = int(kv.prefill(self.model, job.prompt, self.transfer, row).argmax())
                first = clock()
                peer.send(("kv", probe, job.id, row, job.prompt_len, token, first, job.output_len, job.arrival))
                trace.add("prefill", start, first, job.prompt_len)
                continue
            if not waiting and not pending:
                break
            wake = horizon if waiting else min(pending[0].arrival, horizon)
            peer.poll(max(0.0, wake - clock()))  # a freed row, or the next arrival
        return [], trace.spans


class DecodeEngine:
    """The decode worker of a disaggregated server: takes prefilled sequences over and never prefills."""

    def __init__(self, model: GPT, preset: ModelPreset, transfer: torch.Tensor, max_batch: int, name: str = "decode"):
        self.model = model
        self.transfer = transfer
        self.batch = Batch(model, preset, max_batch)
        self.name = name
        self.handoffs = 0  # sequences taken over in the last run
        self.handoff_bytes = 0  # keys and values they carried
        # hand-overs of a later measurement that arrived while this worker was still finishing an
        # earlier one (the prefill worker can start the next measurement first)
        self.early: list[tuple] = []

    def run(self, expected: int, t0: float, horizon: float, peer, probe: int, clock: Clock = time.monotonic) -> tuple[list[dict], list[tuple]]:
        """Decode until ``expected`` requests finished or ``horizon``; returns (records, trace spans)."""
        batch = self.batch
        batch.clear()
        self.handoffs = self.handoff_bytes = 0
        queue: deque = deque(m for m in self.early if m[1] == probe)
        self.early = [m for m in self.early if m[1] > probe]
        done: list[Sequence] = []
        trace = Trace(t0)
        preset = self.model.preset
        while True:
            now = clock()
            if now >= horizon:
                break
            while peer.poll():
                msg = peer.recv()
                if msg[0] == "kv" and msg[1] == probe:
                    queue.append(msg)
                elif msg[0] == "kv" and msg[1] > probe:
                    self.early.append(msg)  # kept for its own measurement; older ones are dropped
            while queue and batch.free:
                _, _, rid, row, length, token, first, output_len, arrival = queue.popleft()
                start = clock()
                seq = Sequence(Job(rid, arrival, torch.empty(length, dtype=torch.long), output_len), length, token, [token], [first])
                if seq.done:
                    done.append(seq)
                else:
                    batch.join(seq, self.transfer, row)
                peer.send(("free", probe, row))
                trace.add("handoff", start, clock(), length, len(batch.seqs) - (0 if seq.done else 1))
                self.handoffs += 1
                self.handoff_bytes += kv.cache_nbytes(preset, length)
            if batch.seqs:
                start = clock()
                size = len(batch.seqs)
                done.extend(batch.step(clock))
                trace.add("decode", start, clock(), size)
                continue
            if len(done) >= expected:
                break
            peer.poll(max(0.0, horizon - clock()))
        records = [record(s, t0, self.name) for s in (*done, *batch.seqs)]
        records += [
            record(Sequence(Job(m[2], m[8], torch.empty(m[4]), m[7]), m[4], m[5], [m[5]], [m[6]]), t0, self.name) for m in queue
        ]
        batch.clear()
        return records, trace.spans
