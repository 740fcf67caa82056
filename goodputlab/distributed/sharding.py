"""Each rank's share of every step's batch (pure: numpy, no torch).

The batch of step *s* is a pure function of ``(seed, s)`` (:class:`~goodputlab.pipeline.loader.StepSampler`):
the same global batch of ``batch_size`` sequences whatever the number of ranks. Rank
*r* of *W* reads the *r*-th of *W* equal, contiguous slices of it. So

* the ranks together read exactly the one-process batch of every step (none repeated, none
  skipped), and data parallelism averages the same gradient a single process would compute;
* the data position is still the step: a job that restarts at step *s*, with the same or
  another number of ranks, reads exactly the batches it has not trained on yet.
"""

from __future__ import annotations

from typing import Iterator

from ..pipeline.loader import BatchRequest, StepSampler


def shard_bounds(batch_size: int, world_size: int, rank: int) -> tuple[int, int]:
    """``(start, stop)`` of ``rank``'s slice of a batch of ``batch_size`` (which ``world_size`` divides)."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not one of {world_size} ranks")
    if batch_size % world_size:
        raise ValueError(f"a batch of {batch_size} does not split into {world_size} equal shards")
    per_rank = batch_size // world_size
    return rank * per_rank, (rank + 1) * per_rank


class ShardedStepSampler(StepSampler):
    """A :class:`StepSampler` over the global batch that yields only ``rank``'s slice of each step.

    ``batch_size`` is the global batch (all ranks together); each request carries
    ``batch_size / world_size`` indices.
    """

    def __init__(
        self, n_samples: int, batch_size: int, seed: int, start_step: int, end_step: int, rank: int, world_size: int
    ):
        super().__init__(n_samples, batch_size, seed, start_step, end_step)
        self.rank = rank
        self.world_size = world_size
        self.start, self.stop = shard_bounds(batch_size, world_size, rank)

    def indices_for(self, step: int) -> list[int]:
        return super().indices_for(step)[self.start : self.stop]

    def __iter__(self) -> Iterator[BatchRequest]:
        for request in super().__iter__():
            yield BatchRequest(request.step, request.indices[self.start : self.stop])
