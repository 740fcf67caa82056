"""Reading a ``dcp``-layout checkpoint (the files of ``torch.distributed.checkpoint``) without running code.

The dcp strategy (:mod:`goodputlab.checkpoints.strategies.dcp`) writes the layout:
DCP's shards (``__<rank>_<n>.distcp``), its ``.metadata`` index and a small
``skeleton.pt`` with everything that is not a tensor, sealed by the store's manifest.
The store (:meth:`~goodputlab.checkpoints.store.CheckpointStore.load`) reads it here.
Nothing read back can run code:

* DCP's own ``.metadata`` is a pickle; it is read with
  :class:`~goodputlab.checkpoints.safe_unpickle.DataUnpickler` over an explicit allow-list of
  DCP's metadata classes, torch sizes and dtypes (no import, no dotted name, no call but a data
  constructor, fields set only on fresh instances, no memory bomb), then
  checked field by field: only tensor entries (DCP loads a "bytes" entry with
  ``torch.load(weights_only=False)``), every read inside a file the manifest lists;
* the skeleton and every tensor record in the shards pass the torch-archive
  allow-list (:func:`~goodputlab.checkpoints.safe_unpickle.check_torch_archive`) before any
  ``torch.load(weights_only=True)``;
* the load planner refuses "bytes" reads outright, should anything get that far.
"""

from __future__ import annotations

import io
import math
import os
import stat
import warnings
from pathlib import Path
from typing import Any, Mapping

import torch

from ..safe_io import UnsafeFileError, default_max_file_bytes, open_regular, read_regular
from .safe_unpickle import _shown, check_torch_archive, data_loads, dcp_metadata_allow_list, safe_torch_load
from .snapshot import unflatten

SKELETON_FILE = "skeleton.pt"

# DCP warns on every call that it assumes a single process; here that is the intent (no_dist=True).
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def dcp():
    """``torch.distributed.checkpoint`` (imported on first use: about a second)."""
    import torch.distributed.checkpoint as dcp

    return dcp


METADATA_FILE = ".metadata"
_METADATA_MAX_BYTES = 64 << 20  # an index of shapes and offsets: kilobytes for these models


def read_dcp_metadata(path: Path | str, files: Mapping[str, Any] | None = None, max_file_bytes: int | None = None):
    """DCP's ``.metadata`` of a checkpoint directory, unpickled through an explicit allow-list and checked.

    ``files``: the checkpoint's files (name -> manifest entry or size in bytes); every
    read the metadata asks for must fall inside one of them. Without it, the regular
    files in the directory. Raises ``ValueError`` when it holds anything but the
    metadata of a tensors-only checkpoint.
    """
    path = Path(path)
    max_file_bytes = max_file_bytes or default_max_file_bytes()
    try:
        data = read_regular(path / METADATA_FILE, min(_METADATA_MAX_BYTES, max_file_bytes))
    except FileNotFoundError:
        raise ValueError(f"{METADATA_FILE} missing") from None
    except UnsafeFileError as e:
        raise ValueError(str(e)) from None
    try:
        metadata = data_loads(data, dcp_metadata_allow_list(), "DCP metadata")
    except ValueError as e:
        raise ValueError(f"{METADATA_FILE} refused: {e}") from None
    _check_metadata(metadata, _file_sizes(path, files))
    return metadata


def _file_sizes(path: Path, files: Mapping[str, Any] | None) -> dict[str, int]:
    if files is not None:
        return {name: (entry["bytes"] if isinstance(entry, dict) else int(entry)) for name, entry in files.items()}
    sizes = {}
    for p in path.iterdir():
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            sizes[p.name] = st.st_size
    return sizes


def _named(v: Any) -> str:
    """A name from the metadata for a message: as it is when short, else cut (a message never copies a bomb)."""
    return v if isinstance(v, str) and len(v) <= 120 else _shown(v)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_size(v: Any, dims: int | None = None) -> bool:
    return isinstance(v, torch.Size) and all(_is_count(d) for d in v) and (dims is None or len(v) == dims)


def _check_metadata(md: Any, sizes: dict[str, int]) -> None:
    """Refuse DCP metadata that is not the index of a tensors-only checkpoint whose reads stay in ``sizes``."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        Metadata,
        MetadataIndex,
        StorageMeta,
        TensorProperties,
        TensorStorageMetadata,
    )

    def bad(why: str):
        return ValueError(f"{METADATA_FILE} refused: {why}")

    if type(md) is not Metadata:
        raise bad(f"it holds a {type(md).__name__}, not DCP metadata")
    entries = md.state_dict_metadata
    if not isinstance(entries, dict):
        raise bad("no tensor index")
    for fqn, entry in entries.items():
        if not isinstance(fqn, str):
            raise bad(f"a key of type {type(fqn).__name__}")
        if type(entry) is not TensorStorageMetadata:
            raise bad(f"{_named(fqn)} is a {type(entry).__name__}; only tensors are read")
        props = entry.properties
        if type(props) is not TensorProperties or not isinstance(props.dtype, torch.dtype):
            raise bad(f"{_named(fqn)} has no tensor properties")
        if not _is_size(entry.size) or not isinstance(entry.chunks, list):
            raise bad(f"{_named(fqn)} has no valid size")
        for chunk in entry.chunks:
            if (
                type(chunk) is not ChunkStorageMetadata
                or not _is_size(chunk.offsets, len(entry.size))
                or not _is_size(chunk.sizes, len(entry.size))
                or any(o + n > d for o, n, d in zip(chunk.offsets, chunk.sizes, entry.size))
            ):
                raise bad(f"{_named(fqn)} has a chunk outside the tensor")
    storage = md.storage_data
    if not isinstance(storage, dict):
        raise bad("no storage index")
    for index, where in storage.items():
        if type(index) is not MetadataIndex or index.fqn not in entries:
            raise bad("a storage entry for no listed tensor")
        if type(where) is not _StorageInfo:
            raise bad(f"the storage of {_named(index.fqn)} is a {type(where).__name__}")
        name = where.relative_path
        if not isinstance(name, str) or name not in sizes or name in (METADATA_FILE, SKELETON_FILE):
            raise bad(f"{_named(index.fqn)} is read from {_shown(name)}, which the checkpoint does not list")
        if not (_is_count(where.offset) and _is_count(where.length)) or where.offset + where.length > sizes[name]:
            raise bad(f"{_named(index.fqn)} is read from outside {_named(name)}")
        if where.transform_descriptors:
            raise bad(f"{_named(index.fqn)} asks for storage transforms")
    if md.planner_data is not None and not isinstance(md.planner_data, dict):
        raise bad("planner data of the wrong type")
    if md.storage_meta is not None and type(md.storage_meta) is not StorageMeta:
        raise bad("storage meta of the wrong type")


class _FileSlice(io.RawIOBase):
    """A read-only, seekable view of ``length`` bytes of ``f`` from ``offset`` (one tensor record of a shard)."""

    def __init__(self, f, offset: int, length: int):
        self.f, self.offset, self.length, self.pos = f, offset, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.length}[whence]
        self.pos = max(0, min(self.length, base + pos))
        return self.pos

    def readinto(self, b) -> int:
        n = min(len(b), self.length - self.pos)
        if n <= 0:
            return 0
        self.f.seek(self.offset + self.pos)
        data = self.f.read(n)
        b[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _check_shards(path: Path, metadata, max_file_bytes: int) -> None:
    """Every tensor record the metadata points to passes the torch-archive allow-list (reads only each
    record's central directory and its small pickle, not the tensor bytes)."""
    by_file: dict[str, list] = {}
    for index, where in metadata.storage_data.items():
        by_file.setdefault(where.relative_path, []).append((index.fqn, where))
    for name, records in by_file.items():
        try:
            fd, _ = open_regular(path / name, max_file_bytes)
        except (FileNotFoundError, UnsafeFileError) as e:
            raise ValueError(f"{name}: {e}") from None
        with os.fdopen(fd, "rb") as f:
            for fqn, where in records:
                check_torch_archive(_FileSlice(f, where.offset, where.length), f"{name} ({fqn})")


def _safe_reader(path: Path, metadata):
    """A DCP ``FileSystemReader`` that returns the metadata already read and checked here."""
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeFileSystemReader(dcp().FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeFileSystemReader(str(path))


def _tensors_only_planner():
    """DCP's default load planner, except that a "bytes" entry (``torch.load(weights_only=False)``) is refused."""
    from torch.distributed.checkpoint import DefaultLoadPlanner

    class TensorsOnlyLoadPlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item, value) -> None:
            raise ValueError(f"{read_item.dest_index.fqn}: a bytes entry; only tensors are read")

    return TensorsOnlyLoadPlanner()


def load_dcp_checkpoint(
    path: Path | str, files: Mapping[str, Any] | None = None, max_file_bytes: int | None = None
) -> dict[str, Any]:
    """Load a (verified) dcp-layout checkpoint directory onto the CPU; returns the training state.

    ``files``: the manifest's file entries (every read must stay inside them);
    ``max_file_bytes``: the largest file or tensor accepted. The skeleton gives the
    name, shape and dtype of every tensor, which must agree with DCP's metadata; DCP
    fills freshly allocated tensors with ``dcp.load``. Raises ``ValueError`` for
    anything that is not a tensors-only checkpoint written by this module.
    """
    path = Path(path)
    max_file_bytes = max_file_bytes or default_max_file_bytes()
    metadata = read_dcp_metadata(path, files, max_file_bytes)  # refuse a bad .metadata before DCP sees it
    try:
        meta = safe_torch_load(read_regular(path / SKELETON_FILE, max_file_bytes), SKELETON_FILE)
    except FileNotFoundError:
        raise ValueError(f"{SKELETON_FILE} missing") from None
    except UnsafeFileError as e:
        raise ValueError(str(e)) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("tensors"), dict) or "skeleton" not in meta:
        raise ValueError(f"{SKELETON_FILE} holds no skeleton and tensor index")
    tensors = {}
    for name, info in meta["tensors"].items():
        if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
            raise ValueError(f"{SKELETON_FILE}: no dtype for {name}")
        dtype = getattr(torch, info["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{SKELETON_FILE}: unknown dtype {info['dtype']!r} for {name}")
        shape = info.get("shape")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise ValueError(f"{SKELETON_FILE}: no valid shape for {name}")
        if math.prod(shape) * dtype.itemsize > max_file_bytes:
            raise ValueError(f"{SKELETON_FILE}: {name} would take more than {max_file_bytes} bytes")
        entry = metadata.state_dict_metadata.get(name)
        if entry is None or list(entry.size) != shape or entry.properties.dtype != dtype:
            raise ValueError(f"{SKELETON_FILE} and {METADATA_FILE} disagree about {name}")
        tensors[name] = torch.empty(shape, dtype=dtype)
    _check_shards(path, metadata, max_file_bytes)
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        dcp().load(tensors, storage_reader=_safe_reader(path, metadata), planner=_tensors_only_planner(), no_dist=True)
    except CheckpointException as e:  # a BaseException: it would escape "skip a damaged checkpoint"
        failures = list(getattr(e, "failures", {}).values())
        cause = failures[0] if failures else e
        raise ValueError(f"DCP could not load it ({type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''})") from None
    return unflatten(meta["skeleton"], tensors)
