"""The dcp strategy: ``torch.distributed.checkpoint.async_save`` inside the store's integrity envelope.

``torch.distributed.checkpoint`` (DCP) is PyTorch's checkpoint format for
sharded training: every rank writes its shards (``__<rank>_<n>.distcp``) and
the coordinator writes a ``.metadata`` index. Here it runs in one process
without a process group (``no_dist=True``: DCP's single-process mode, which
torch 2.13 supports for both ``async_save`` and ``load``), so no port or
rendezvous is needed.

What training waits for (the ``ckpt_save`` phase): the previous save, if it is
still being written (at most one in flight), and ``async_save``'s staging, a
copy of every tensor into freshly allocated CPU memory. DCP then writes the
files in its own thread; our background writer waits for that, adds
``skeleton.pt`` and seals the directory with :meth:`CheckpointStore.commit_files`
(every file fsynced and listed with its sha256 in ``manifest.json``, then an
atomic rename), and emits ``ckpt_commit``. Keep-newest-k and skipping damaged
checkpoints come from the store, as for every strategy.

Only tensors go through DCP. The rest of the state (data position, RNG states,
scheduler, optimizer hyper-parameters) is a tensor-free skeleton saved with
``torch.save`` and loaded with ``weights_only=True``. DCP's own ``.metadata``
is a pickle; it is read with an unpickler that admits only DCP's metadata
classes, torch sizes and dtypes, so a checkpoint can never run code on
restore, as with the other layouts.
"""

from __future__ import annotations

import os
import pickle
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from .background import BackgroundCheckpointer
from .checkpoint import LAYOUT_DCP, CheckpointStore
from .snapshot import flatten, unflatten

SKELETON_FILE = "skeleton.pt"

# DCP warns on every call that it assumes a single process; here that is the intent (no_dist=True).
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def _dcp():
    import torch.distributed.checkpoint as dcp

    return dcp


class DcpCheckpointer(BackgroundCheckpointer):
    """Saves with ``dcp.async_save`` (thread-based upload), sealed by the store's manifest.

    ``on_commit(step, tier="disk")`` is called from the background writer once
    the checkpoint is durable and listed in its manifest; ``last_snapshot_s`` is
    DCP's staging and planning.
    """

    name = "dcp"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None]):
        _dcp()  # import DCP now (about a second), not inside the first save's blocking time
        super().__init__(store, on_commit, "goodputlab-dcp-ckpt")

    def save(self, state: dict[str, Any], step: int) -> None:
        t = time.perf_counter()
        self.last_wait_s = self.writer.wait()
        skeleton, tensors = flatten(state)
        index = {name: {"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")} for name, x in tensors.items()}
        tmp = self.store.begin(step)
        writer = _dcp().FileSystemWriter(str(tmp), single_file_per_rank=True, sync_files=True)
        # Returns once the tensors are staged (copied to CPU); the files are written by DCP's thread.
        upload = _dcp().async_save(tensors, storage_writer=writer, no_dist=True)
        self.last_snapshot_s = time.perf_counter() - t - self.last_wait_s
        started = time.perf_counter()
        self.writer.submit(lambda: self._seal(upload, tmp, step, skeleton, index, started))
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1

    def _seal(self, upload, tmp: Path, step: int, skeleton: Any, index: dict, started: float) -> None:
        upload.result()  # DCP's files are written (and fsynced: sync_files=True)
        with open(tmp / SKELETON_FILE, "wb") as f:
            torch.save({"skeleton": skeleton, "tensors": index}, f)
            f.flush()
            os.fsync(f.fileno())
        self.store.commit_files(tmp, step, LAYOUT_DCP)
        self.last_persist_s = time.perf_counter() - started
        self.on_commit(step, tier="disk")


# --- restore ---------------------------------------------------------------------------------
_DCP_MODULES = ("torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem")


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's ``.metadata`` but refuses every class that is not part of that format."""

    def find_class(self, module: str, name: str):
        if module in _DCP_MODULES and not name.startswith("__"):
            return super().find_class(module, name)
        if module == "torch" and (name == "Size" or isinstance(getattr(torch, name, None), torch.dtype)):
            return getattr(torch, name)
        if (module, name) in {("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath")}:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in DCP metadata")


def read_dcp_metadata(path: Path | str):
    """DCP's ``.metadata`` of a checkpoint directory, unpickled with :class:`_MetadataUnpickler`.

    Raises ``ValueError`` when it holds anything but DCP metadata.
    """
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        with open(Path(path) / ".metadata", "rb") as f:
            metadata = _MetadataUnpickler(f).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError) as e:
        raise ValueError(f".metadata refused: {e}") from None
    if not isinstance(metadata, Metadata):
        raise ValueError(f".metadata holds a {type(metadata).__name__}, not DCP metadata")
    return metadata


def _safe_reader(path: Path):
    """A DCP ``FileSystemReader`` whose ``read_metadata`` uses :func:`read_dcp_metadata`."""
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeFileSystemReader(_dcp().FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            metadata = read_dcp_metadata(path)
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeFileSystemReader(str(path))


def load_dcp_checkpoint(path: Path | str) -> dict[str, Any]:
    """Load a (verified) dcp-layout checkpoint directory onto the CPU; returns the training state.

    The skeleton gives the name, shape and dtype of every tensor; DCP fills
    freshly allocated tensors with ``dcp.load`` (tensors are read with
    ``weights_only=True`` by DCP itself).
    """
    path = Path(path)
    read_dcp_metadata(path)  # refuse a bad .metadata with a clear message before DCP wraps the error
    meta = torch.load(path / SKELETON_FILE, map_location="cpu", weights_only=True)
    tensors = {}
    for name, info in meta["tensors"].items():
        dtype = getattr(torch, info["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{SKELETON_FILE}: unknown dtype {info['dtype']!r} for {name}")
        tensors[name] = torch.empty(info["shape"], dtype=dtype)
    _dcp().load(tensors, storage_reader=_safe_reader(path), no_dist=True)
    return unflatten(meta["skeleton"], tensors)
