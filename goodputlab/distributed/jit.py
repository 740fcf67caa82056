"""Just-in-time checkpoints (``--ckpt-jit``, after Gupta et al., EuroSys'24): when a rank of a
data-parallel job sees a failure (a collective that fails because a peer died, or torchrun's SIGTERM
that stops the group), it saves the state it holds before the group restarts, so the restart resumes
from the step of the failure instead of the last periodic checkpoint.

Under DDP every rank holds the whole model and optimizer, so one healthy rank can save the job's
state alone: it writes a sharded checkpoint as a job of one rank (:class:`SoloRank`, no collective),
which the restarted group restores like any other (a checkpoint restores onto any number of ranks).
The first healthy rank to claim the attempt's marker saves; the others do not. It cannot help where
the failure takes the state with it: a machine that loses its memory (power, kernel panic, a
host that is gone), or a job whose every replica is on the failed machine. FSDP's shards are
spread over the ranks, so a rank alone cannot save them: refused there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


class SoloRank:
    """This rank as a job of one, for a save that no other rank takes part in."""

    rank, world_size, is_coordinator, ckpt_group = 0, 1, True, None

    def gather(self, obj):
        return [obj]


class GroupStopping(Exception):
    """torchrun's agent sent SIGTERM: a peer failed and the group is being stopped."""


def raise_on_sigterm() -> None:
    """Turn torchrun's SIGTERM into :class:`GroupStopping`, so the loop can save before it exits."""

    def handler(signum, frame):
        raise GroupStopping()

    signal.signal(signal.SIGTERM, handler)


class SigtermHeld:
    """Hold SIGTERM during a local state change (optimizer and schedule step), so a save never sees half of it."""

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def claim(store_root: Path, attempt: int) -> bool:
    """Whether this rank is the one that saves for ``attempt`` (the first to create the marker)."""
    try:
        os.close(os.open(store_root / f".jit-claim-a{attempt}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True


def save_just_in_time(store, model, optimizer, scheduler, done: int, data_position: dict, attempt: int,
                      parallelism: str, on_commit) -> bool:
    """Save the state after ``done`` steps as a checkpoint of one rank; False when another rank claimed it."""
    from .sharded import ShardedCheckpointer

    if not claim(store.root, attempt):
        return False
    saver = ShardedCheckpointer(store, SoloRank(), on_commit=on_commit, attempt=f"{attempt}-jit", parallelism=parallelism)
    saver.save(model, optimizer, scheduler, done, data_position)
    return True
