"""Data parallelism for the model, and the clock that times each rank's wait for the slowest.

:func:`wrap` puts the model in ``DistributedDataParallel`` (every preset, CPU and GPU):
every rank holds the whole model, computes gradients on its shard of the batch, and
DDP averages them with an all-reduce during the backward pass, so every rank takes the
same optimizer step. On GPUs the ``large`` preset is sharded with FSDP instead
(``fully_shard`` on every block and on the whole model): each rank holds a slice of the
parameters and optimizer state, all-gathered for compute and reduce-scattered after.

**The wait for the slowest rank, measured.** DDP calls a *communication hook* for every
gradient bucket once all the bucket's gradients are ready on this rank; the *last* bucket
(the first layers) is ready when this rank's own backward pass is done. :class:`SyncClock`
is such a hook: it notes that moment (``ready_at``), then starts the all-reduce exactly
as DDP's default does (:func:`allreduce_hook`). ``backward()`` returns when every bucket's
all-reduce has finished, which no rank's can before the slowest rank's last bucket joins.
So on each rank, ``backward() returned - ready_at`` is the time it sat in the gradient
all-reduce: waiting for slower ranks, plus the transfer itself. The worker records it as a
``sync_wait`` phase between the step's compute and its optimizer step. On CUDA the hook
first synchronises the compute stream (kernels run asynchronously; the host would
otherwise note when the backward was *queued*, not done).

FSDP has no such hook: its waits are spread over many all-gathers and reduce-scatters
inside forward and backward, and stay booked as compute.
"""

from __future__ import annotations

import hashlib
import time
import torch
import torch.distributed as dist
from torch import nn

from .straggler import Straggler

DDP = "ddp"
FSDP = "fsdp"
FSDP_PRESETS = ("large",)  # sharded with FSDP on GPUs; everything else is replicated with DDP


def parallelism_for(preset_name: str, device: torch.device) -> str:
    """``fsdp`` for the large preset on a GPU, ``ddp`` otherwise."""
    return FSDP if preset_name in FSDP_PRESETS and device.type == "cuda" else DDP


class SyncClock:
    """A DDP communication hook that notes when this rank's gradients are ready (and can slow it).

    Call :meth:`begin` before the step's forward pass. After ``backward()``, ``ready_at``
    (``time.monotonic()``) is when this rank's last gradient bucket was ready (after any straggler
    sleep), ``own_s`` its own forward and backward time, and ``delayed_s`` the straggler sleep
    it added before joining the all-reduce.
    """

    def __init__(self, rank: int, device: torch.device, straggler: Straggler | None = None, group=None):
        self.rank = rank
        self.device = device
        self.straggler = straggler or Straggler()
        self.group = group
        self.step = 0
        self.started_at = 0.0
        self.ready_at: float | None = None
        self.delayed_s = 0.0

    def begin(self, step: int, started_at: float | None = None) -> None:
        """A new step's compute starts now (or at ``started_at``, ``time.monotonic()`` seconds)."""
        self.step = step
        self.started_at = time.monotonic() if started_at is None else started_at
        self.ready_at = None
        self.delayed_s = 0.0
        self.own_s = 0.0

    def hook(self, state, bucket):  # no annotations: DDP checks them, and this module's are strings
        """The communication hook (``ddp.register_comm_hook(None, clock.hook)``)."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        if bucket.is_last():  # this rank's backward pass is done: all its gradients are ready
            if self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()
            now = time.monotonic()
            self.own_s = now - self.started_at
            delay = self.straggler.delay_s(self.rank, self.step, self.own_s)
            if delay > 0:
                time.sleep(delay)
                now = time.monotonic()
            self.delayed_s = delay
            self.ready_at = now
        return allreduce_hook(self.group, bucket)


def wrap(model: nn.Module, device: torch.device, kind: str, clock: SyncClock | None = None) -> nn.Module:
    """``model`` (on ``device``) wrapped for data parallelism: ``kind`` is ``ddp`` or ``fsdp``.

    With DDP, ``clock`` (a :class:`SyncClock`) is registered as the gradient hook. Every
    rank must have initialised the model identically (DDP also broadcasts rank 0's
    parameters once, here). FSDP changes the parameters in place (to sharded tensors):
    build the optimizer after wrapping.
    """
    if kind == DDP:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            forward_sync_buffers=False,  # the model has no buffers; no collective before forward
        )
        if clock is not None:
            ddp.register_comm_hook(None, clock.hook)
        return ddp
    if kind == FSDP:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    raise ValueError(f"unknown parallelism {kind!r}")


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP wrapper (FSDP shards the model in place)."""
    return getattr(model, "module", model)


def full_state_sha256(model: nn.Module, kind: str) -> str | None:
    """sha256 of the whole model state, as :func:`goodputlab.training.model.state_sha256` computes it for one process.

    DDP: every rank holds the whole model, so every rank can hash it. FSDP: the shards are
    gathered to rank 0, which returns the hash; other ranks return ``None``.
    """
    from ..training.model import state_sha256

    if kind == DDP:
        return state_sha256(unwrap(model))
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.get_rank() != 0:
        return None
    h = hashlib.sha256()
    for name, t in full.items():
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
