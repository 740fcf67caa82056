"""The ledger's categories: every second of a run's wall time is booked to exactly one.

Names follow Google's ml-goodput-measurement badput taxonomy where one exists.
"""

from __future__ import annotations

PRODUCTIVE = "productive"  # compute of steps that survive into the final model
DATA_WAIT = "data_wait"  # the training loop blocked waiting for the next batch
STRAGGLER_WAIT = "straggler_wait"  # ranks of a distributed job waiting in the gradient all-reduce for the slowest
CHECKPOINT_SAVE = "checkpoint_save"  # the blocking part of a save
CHECKPOINT_RESTORE = "checkpoint_restore"  # loading state after a restart
LOST_WORK = "lost_work"  # compute of steps later rolled back by a failure
#: In-job recovery (torchft): while ``k`` of a job's ``G`` replica groups are missing and the rest
#: train on without them, ``k/G`` of each second is ``degraded``: the throughput the missing groups
#: would have given. It holds their relaunch (detection, respawn, joining the quorum); their fetch of
#: the live state from a healthy peer is ``checkpoint_restore`` (a restore, from a peer instead of
#: storage), and the surviving groups' ``(G-k)/G`` is booked as any second of training
#: (``productive``, ``checkpoint_save``, ...). A job that stops as a whole (every group down) books
#: ``restart`` as before. Zero for a job without replica groups. See docs/IN_JOB_RECOVERY.md.
DEGRADED = "degraded"
RESTART = "restart"  # failure -> new process ready to train
STARTUP = "startup"  # first launch -> first step
OTHER = "other"  # whatever is left (logging, evaluation, teardown)

CATEGORIES: tuple[str, ...] = (
    PRODUCTIVE,
    DATA_WAIT,
    STRAGGLER_WAIT,
    CHECKPOINT_SAVE,
    CHECKPOINT_RESTORE,
    LOST_WORK,
    DEGRADED,
    RESTART,
    STARTUP,
    OTHER,
)

#: One line per category for a reader: what the seconds in it were spent on.
MEANINGS: dict[str, str] = {
    PRODUCTIVE: "computing steps that survive into the final model",
    DATA_WAIT: "the training loop waiting for its next batch",
    STRAGGLER_WAIT: "ranks of a distributed job waiting in the gradient all-reduce for the slowest one",
    CHECKPOINT_SAVE: "the part of each save that blocks training",
    CHECKPOINT_RESTORE: "loading a checkpoint after a restart",
    LOST_WORK: "computing steps a failure later threw away",
    DEGRADED: "the share of missing replica groups while the rest trained on without them (in-job recovery)",
    RESTART: "from a failure until a worker trains again (detection, relaunch or hand-over, set-up)",
    STARTUP: "from the first launch to the first step",
    OTHER: "everything else (step bookkeeping, logging, teardown, what stragglers add)",
}

#: Colours used by every chart, so a category looks the same everywhere.
COLORS: dict[str, str] = {
    PRODUCTIVE: "#2ca02c",
    DATA_WAIT: "#ff7f0e",
    STRAGGLER_WAIT: "#17becf",
    CHECKPOINT_SAVE: "#1f77b4",
    CHECKPOINT_RESTORE: "#9467bd",
    LOST_WORK: "#d62728",
    DEGRADED: "#e377c2",
    RESTART: "#8c564b",
    STARTUP: "#7f7f7f",
    OTHER: "#c7c7c7",
}


def empty_buckets() -> dict[str, float]:
    """A dict with every category at 0.0 seconds, in the canonical order."""
    return {c: 0.0 for c in CATEGORIES}
