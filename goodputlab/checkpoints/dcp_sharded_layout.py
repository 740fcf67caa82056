"""The ``dcp_sharded`` layout on disk, read without a process group (written by :mod:`goodputlab.distributed.sharded`).

A sharded checkpoint folder holds each rank's tensors (``__R_0.distcp``, written by
``torch.distributed.checkpoint``), DCP's index (``.metadata``), ``skeleton.pt`` (rank 0: the
tensor-free rest of the state, each tensor's global name, shape and dtype, the world size) and
``rank-RRRRR.pt`` (each rank's RNG states), listed with their sha256 in ``manifest.json``.

Here: :func:`read_sharded_parts` checks what a reader will use (the skeleton through the
torch-archive allow-list, every rank's file listed, DCP's metadata through
:func:`~goodputlab.checkpoints.dcp_layout.read_dcp_metadata` with every read inside a listed
shard, every tensor record of the shards through the allow-list, the skeleton and the metadata
agreeing); :func:`load_unsharded` reads the whole state in one process (``CheckpointStore.load``
for a one-process run resuming a job of many ranks). The collective restore onto any number of
ranks is :func:`goodputlab.distributed.sharded.restore_newest`.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from ..safe_io import UnsafeFileError, default_max_file_bytes, read_regular
from .dcp_layout import _check_shards, _safe_reader, _tensors_only_planner, read_dcp_metadata
from .safe_unpickle import safe_torch_load
from .snapshot import unflatten

FORMAT = 1  # of skeleton.pt and the rank files (the checkpoint store's format version)
SKELETON_FILE = "skeleton.pt"
METADATA_FILE = ".metadata"
RANK_FILE = re.compile(r"^rank-(\d{5})\.pt$")
SHARD_FILE = re.compile(r"^__(\d+)_(\d+)\.distcp$")


def rank_file(rank: int) -> str:
    """The name of rank ``rank``'s own file in a sharded checkpoint."""
    return f"rank-{rank:05d}.pt"


def _dcp():
    import torch.distributed.checkpoint as dcp

    return dcp


# DCP warns that it assumes a single process in load_unsharded (no_dist=True): that is the intent there.
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def _check_common(common: Any, step: int) -> dict[str, Any]:
    if not isinstance(common, dict) or common.get("format") != FORMAT:
        raise ValueError(f"{SKELETON_FILE} is not a sharded checkpoint's common state")
    for key, kind in (("step", int), ("world_size", int), ("tensors", dict), ("scheduler", dict), ("data", dict)):
        if not isinstance(common.get(key), kind) or isinstance(common.get(key), bool):
            raise ValueError(f"{SKELETON_FILE} has no valid {key}")
    if common["step"] != step or common["world_size"] < 1:
        raise ValueError(f"{SKELETON_FILE} is of step {common['step']} and {common['world_size']} ranks")
    if "skeleton" not in common:
        raise ValueError(f"{SKELETON_FILE} holds no skeleton")
    return common


def read_file(path: Path, name: str, max_file_bytes: int) -> bytes:
    """The bytes of a file of the checkpoint folder (a regular file, not a link, of bounded size);
    ``ValueError`` otherwise. Its hash is the caller's to check."""
    try:
        return read_regular(path / name, max_file_bytes)
    except FileNotFoundError:
        raise ValueError(f"{name} missing") from None
    except UnsafeFileError as e:
        raise ValueError(str(e)) from None


def read_sharded_parts(path: Path, step: int, files: dict[str, Any], max_file_bytes: int):
    """The checked common state (``skeleton.pt``) and DCP metadata of a sharded checkpoint; ``ValueError``
    naming the first problem. File hashes are not checked here (the caller verifies them)."""
    common = _check_common(safe_torch_load(read_file(path, SKELETON_FILE, max_file_bytes), SKELETON_FILE), step)
    missing = [rank_file(r) for r in range(common["world_size"]) if rank_file(r) not in files]
    if missing:
        raise ValueError(f"written by {common['world_size']} ranks, but {', '.join(missing[:3])} not listed")
    shards = {n: e for n, e in files.items() if SHARD_FILE.match(n)}  # every DCP read must fall in one of these
    metadata = read_dcp_metadata(path, shards, max_file_bytes)
    _check_shards(path, metadata, max_file_bytes)
    for name, info in common["tensors"].items():
        entry = metadata.state_dict_metadata.get(name)
        if not isinstance(info, dict) or entry is None or list(entry.size) != info.get("shape"):
            raise ValueError(f"{SKELETON_FILE} and {METADATA_FILE} disagree about {name}")
    return common, metadata


def load_unsharded(path: Path | str, files: dict[str, Any], max_file_bytes: int | None = None) -> dict[str, Any]:
    """A (verified) sharded checkpoint read whole in one process, without a process group.

    Returns the one-process training state (:func:`~goodputlab.checkpoints.state.capture_state`'s
    keys; the optimizer keyed by parameter number again, and rank 0's RNG states), so a job
    of many ranks resumes as one process.
    """
    path = Path(path)
    max_file_bytes = max_file_bytes or default_max_file_bytes()
    common, metadata = read_sharded_parts(path, int(path.name.removeprefix("step-")), files, max_file_bytes)
    tensors = {}
    for name, info in common["tensors"].items():
        dtype = getattr(torch, str(info.get("dtype")), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{SKELETON_FILE}: unknown dtype {info.get('dtype')!r} for {name}")
        tensors[name] = torch.empty(info["shape"], dtype=dtype)
    _dcp().load(tensors, storage_reader=_safe_reader(path, metadata), planner=_tensors_only_planner(), no_dist=True)
    job = unflatten(common["skeleton"], tensors)
    rank0 = safe_torch_load(read_file(path, rank_file(0), max_file_bytes), rank_file(0))
    if not isinstance(rank0, dict) or not isinstance(rank0.get("rng"), dict):
        raise ValueError(f"{rank_file(0)} holds no RNG state")
    return {
        "format": FORMAT,
        "step": common["step"],
        "model": job["model"],
        "optimizer": optimizer_by_number(job["optimizer"]),
        "scheduler": common["scheduler"],
        "data": common["data"],
        "rng": rank0["rng"],
    }


def optimizer_by_number(osd: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state keyed by parameter name (DCP's) keyed by number again (``optimizer.state_dict()``'s).

    The numbers follow the order of the parameters in the groups, as ``torch.optim`` numbers them.
    """
    number: dict[str, int] = {}
    groups = []
    for group in osd["param_groups"]:
        ids = []
        for name in group["params"]:
            number.setdefault(name, len(number))
            ids.append(number[name])
        groups.append({**group, "params": ids})
    return {"state": {number[n]: s for n, s in osd["state"].items()}, "param_groups": groups}
