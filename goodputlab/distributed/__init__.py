"""Distributed runs: the training worker on many ranks under PyTorch's ``torchrun``.

What lives here, one module per idea:

* :mod:`~goodputlab.distributed.launch` (pure): the ``torchrun`` command line, with
  ``--nnodes``, ``--node-rank`` and ``--rdzv-endpoint`` passed through and checked.
* :mod:`~goodputlab.distributed.sharding` (pure): which part of every step's batch each
  rank reads; the batch of step *s* stays a pure function of ``(seed, s)``.
* :mod:`~goodputlab.distributed.straggler` (pure): a chosen rank's steps slowed by a factor.
* :mod:`~goodputlab.distributed.joblog` (pure): the job's event log from the ranks' logs and
  the supervisor's (merged by :mod:`goodputlab.measure.merge`), with the wait for the slowest rank split out.
* :mod:`~goodputlab.distributed.ranks`: this process's rank, its device and its process
  groups (gloo on CPU, NCCL on CUDA, and a gloo group for checkpoints).
* :mod:`~goodputlab.distributed.parallel`: DistributedDataParallel for every preset, FSDP
  for the large one on GPUs, and the gradient-sync clock that times the wait in the all-reduce.
* :mod:`~goodputlab.distributed.sharded`: sharded checkpoints with
  ``torch.distributed.checkpoint`` (sync and async), committed for the whole job at once and
  restored onto any number of ranks.
* :mod:`~goodputlab.distributed.worker`: the training worker that ``torchrun`` starts on every rank.

The pure modules import no torch, so the command line can check a launch before paying for it.
"""
