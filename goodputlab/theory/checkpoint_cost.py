"""What a checkpoint of a real model costs, from first principles: bytes per parameter, ranks, bandwidth.

A training state holds, per parameter (mixed-precision training as in the
ZeRO paper, Rajbhandari et al. 2020):

====================  ==========================================  =====================
part                  what                                        bytes per parameter
====================  ==========================================  =====================
weights               the working copy the forward pass uses       2 (bf16/fp16), 4 (fp32)
master weights        an fp32 copy the optimizer updates           4 with bf16/fp16 weights
gradients             one per weight, in the weights' precision    2 or 4 (not saved)
optimizer state       Adam's two fp32 moments                      8 (4 with SGD momentum)
====================  ==========================================  =====================

Mixed-precision Adam is 2 + 4 + 2 + 8 = 16 bytes per parameter in memory, of
which a checkpoint keeps 14 (gradients are recomputed). Sharded across
``ranks`` (FSDP, ZeRO, torch.distributed.checkpoint's one file per rank), each
rank saves ``bytes / ranks``; the save then takes the longer of two times: the
whole checkpoint at the storage system's aggregate bandwidth, and the largest
rank's share through its own link. An asynchronous save blocks only for the
copy of a rank's share into host memory (:attr:`CheckpointCost.snapshot_s`).

Llama 3 405B on 16,384 H100s (the paper's figures: storage at 2 TB/s
sustained, 7 TB/s peak; each GPU's checkpoint 1 MB to 4 GB):
405e9 x 14 B = 5.67 TB, 346 MB per GPU on average, written in 2.8 s at the
sustained rate (0.8 s at peak). Per GPU that is 122 MB/s of storage
bandwidth, less than one laptop disk: the cluster is fast because it writes
from 16,384 GPUs at once. What carries over between the lab and a cluster is
the ratio of the save to the time between failures, not the seconds
(:func:`goodputlab.theory.capstone.lab_ratio_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import validate

#: Bytes per value of each precision.
PRECISION_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
#: Optimizer state per parameter (bytes, fp32): Adam/AdamW two moments, SGD with momentum one, plain SGD none.
OPTIMIZER_BYTES = {"adam": 8.0, "sgd_momentum": 4.0, "sgd": 0.0}

#: Llama 3 405B: parameters, GPUs and Tectonic's sustained and peak bandwidth (bytes/s), from the paper.
LLAMA3_405B_PARAMETERS = 405e9
LLAMA3_STORAGE_SUSTAINED_BPS = 2e12
LLAMA3_STORAGE_PEAK_BPS = 7e12
#: Per-GPU checkpoint sizes the paper reports (bytes): the layout is not even.
LLAMA3_RANK_BYTES_RANGE = (1e6, 4e9)
#: A device-to-host copy into pinned memory, measured in chapter 4 on one H200 (1.8 GB in about 37 ms), bytes/s.
H200_HOST_COPY_BPS = 1.8e9 / 0.037


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of each part of a training state."""

    weights: float
    master: float
    gradients: float
    optimizer: float

    @property
    def in_memory(self) -> float:
        """Bytes per parameter the training state occupies (all four parts)."""
        return self.weights + self.master + self.gradients + self.optimizer

    @property
    def checkpoint(self) -> float:
        """Bytes per parameter a checkpoint keeps: everything but the gradients."""
        return self.weights + self.master + self.optimizer

    def rows(self) -> list[dict]:
        """Tidy rows ``{part, bytes_per_parameter, saved}`` for a chart or table."""
        return [
            {"part": "weights", "bytes_per_parameter": self.weights, "saved": True},
            {"part": "master weights", "bytes_per_parameter": self.master, "saved": True},
            {"part": "gradients", "bytes_per_parameter": self.gradients, "saved": False},
            {"part": "optimizer state", "bytes_per_parameter": self.optimizer, "saved": True},
        ]


def bytes_per_parameter(precision: str = "bf16", optimizer: str = "adam", master_weights: bool | None = None) -> StateBytes:
    """The training state's bytes per parameter by part.

    ``precision`` of the weights and gradients (``fp32``, ``bf16``, ``fp16``,
    ``fp8``); ``optimizer`` (``adam``, ``sgd_momentum``, ``sgd``);
    ``master_weights``: keep an fp32 copy for the optimizer (default: yes,
    unless the weights are already fp32). Mixed-precision Adam: 2 + 4 + 2 + 8.
    """
    w = PRECISION_BYTES[validate.choice("precision", precision, PRECISION_BYTES)]
    o = OPTIMIZER_BYTES[validate.choice("optimizer", optimizer, OPTIMIZER_BYTES)]
    if master_weights is None:
        master_weights = precision != "fp32"
    validate.boolean("master_weights", master_weights)
    return StateBytes(weights=w, master=4.0 if master_weights else 0.0, gradients=w, optimizer=o)


@dataclass(frozen=True)
class CheckpointCost:
    """The size and the times of one checkpoint (bytes, seconds).

    ``write_s``: the whole save at the bandwidth that binds (a synchronous
    save blocks this long; an asynchronous one is durable this long after its
    snapshot); ``snapshot_s``: a rank's share copied into host memory (what
    an asynchronous save blocks for); ``restore_s``: reading it back.
    """

    parameters: float
    ranks: int
    state: StateBytes
    total_bytes: float
    rank_bytes: float
    write_s: float
    snapshot_s: float
    restore_s: float
    write_bps: float

    @property
    def in_memory_bytes(self) -> float:
        """Bytes of the whole training state in device memory (gradients included)."""
        return self.parameters * self.state.in_memory


def checkpoint_cost(
    parameters: float,
    ranks: int,
    storage_write_bps: float,
    *,
    storage_read_bps: float | None = None,
    rank_link_bps: float = math.inf,
    largest_rank_bytes: float | None = None,
    host_copy_bps: float = H200_HOST_COPY_BPS,
    precision: str = "bf16",
    optimizer: str = "adam",
    master_weights: bool | None = None,
) -> CheckpointCost:
    """Save and restore cost of a sharded checkpoint of a model with ``parameters`` parameters.

    ``ranks`` processes each save their share (``bytes / ranks``, or
    ``largest_rank_bytes`` for the biggest one when the layout is uneven);
    ``storage_write_bps`` and ``storage_read_bps`` (default: the write rate)
    are the storage system's aggregate bandwidth in bytes per second,
    ``rank_link_bps`` each rank's own path to it, ``host_copy_bps`` the
    device-to-host copy of an asynchronous snapshot. The save takes
    ``max(total / storage_write_bps, largest rank / rank_link_bps)``.
    """
    validate.number("parameters", parameters, 0, low_open=True)
    n = validate.whole("ranks", ranks, 1)
    validate.number("storage_write_bps", storage_write_bps, 0, low_open=True, unit="bytes per second")
    read_bps = storage_write_bps if storage_read_bps is None else storage_read_bps
    validate.number("storage_read_bps", read_bps, 0, low_open=True, unit="bytes per second")
    validate.number("rank_link_bps", rank_link_bps, 0, low_open=True, unit="bytes per second", allow_inf=True)
    validate.number("host_copy_bps", host_copy_bps, 0, low_open=True, unit="bytes per second")
    state = bytes_per_parameter(precision, optimizer, master_weights)
    total = parameters * state.checkpoint
    rank_bytes = total / n
    largest = rank_bytes if largest_rank_bytes is None else validate.number(
        "largest_rank_bytes", largest_rank_bytes, rank_bytes, unit="bytes", note="at least the mean share"
    )
    write_s = max(total / storage_write_bps, largest / rank_link_bps)
    restore_s = max(total / read_bps, largest / rank_link_bps)
    return CheckpointCost(
        parameters=parameters,
        ranks=n,
        state=state,
        total_bytes=total,
        rank_bytes=rank_bytes,
        write_s=write_s,
        snapshot_s=largest / host_copy_bps,
        restore_s=restore_s,
        write_bps=total / write_s,
    )


def llama3_405b_checkpoint(storage_bps: float = LLAMA3_STORAGE_SUSTAINED_BPS) -> CheckpointCost:
    """Llama 3 405B's checkpoint on 16,384 GPUs at ``storage_bps`` (default the sustained 2 TB/s)."""
    from .cluster import LLAMA3_GPUS

    return checkpoint_cost(LLAMA3_405B_PARAMETERS, LLAMA3_GPUS, storage_bps)


def bandwidth_for_save(total_bytes: float, save_s: float) -> float:
    """Aggregate bandwidth (bytes/s) that writes ``total_bytes`` in ``save_s`` seconds."""
    validate.number("total_bytes", total_bytes, 0)
    validate.seconds("save_s", save_s, positive=True)
    return total_bytes / save_s
