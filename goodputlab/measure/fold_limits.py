"""What a log may make the ledger's fold keep: documented limits, so a crafted log costs time, never memory (pure).

The fold (:mod:`goodputlab.measure.fold`) keeps per attempt its steps as ranges, its open executions and its
chunks; a genuine job keeps a handful of each. A crafted log could make it keep one per event (an attempt per
step, step numbers that skip, computes that never end), so past each limit below the log is refused with one
line (:class:`LogLimitError`, exit 2 in ``goodputlab report``). Checked every :data:`_CHECK_EVERY` events, so
what a log holds before its refusal is bounded too. docs/BAD_INPUT.md ("report") lists them.
"""

from __future__ import annotations

from typing import Any

from .logread import EventLogError

#: What a log may make the fold keep (docs/BAD_INPUT.md, "report"): past one of these a log is refused with
#: :class:`LogLimitError`, so a crafted log costs time, never memory. A real job stays far below each.
MAX_ATTEMPTS = 10_000  # attempts (Llama 3's 54 days on 16,384 GPUs had 466 interruptions)
MAX_STEP_RANGES = 200_000  # runs of consecutive step numbers, over every attempt (a gap starts a new one)
MAX_OPEN = 100_000  # step executions begun and not ended, and failures, starts and recovery facts held
MAX_CHUNKS = 100_000  # checkpoints' resume points kept as chunks; past it a second pass cuts them exactly
_CHECK_EVERY = 4096  # events fed between two checks of the limits


class LogLimitError(EventLogError):
    """A log that would make the ledger keep more than a documented limit (:data:`MAX_ATTEMPTS` and the
    others): refused, in one line, before it costs memory."""


def check(fold: Any) -> None:
    """Raise :class:`LogLimitError` when what ``fold`` (a :class:`~goodputlab.measure.fold.LedgerFold`) keeps
    has passed a limit. Costs one look at each attempt."""
    ranges = sum(len(A.computed.los) + len(A.done.los) for A in fold.attempts.values())
    if ranges > MAX_STEP_RANGES:
        raise LogLimitError(f"more than {MAX_STEP_RANGES:,} runs of consecutive step numbers (steps that skip "
                            "numbers or go back): not a log this ledger reads (docs/BAD_INPUT.md, report)")
    tally = fold.tally
    held = (sum(len(A.pending) for A in fold.attempts.values()) + len(fold.extra_executed) + len(fold.killed)
            + len(fold.failure_times) + len(fold.inits) + len(tally.detection) + len(tally.standby_startup)
            + len(tally.injected) + len(tally._hang_at) + len(fold.custom))  # fmt: skip
    if held > MAX_OPEN:
        raise LogLimitError(f"more than {MAX_OPEN:,} steps begun and never ended, failures, starts or recovery "
                            "events: not a log this ledger reads (docs/BAD_INPUT.md, report)")
