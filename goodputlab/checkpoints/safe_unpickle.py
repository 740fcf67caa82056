"""Reading pickles from a run folder without ever running code: explicit allow-lists, no dotted names.

A pickle can name any importable callable (``os.system``) and call it. Two
kinds of pickle sit in a run folder, and each has its own reader here:

* **torch archives** (``state.pt``, ``skeleton.pt``, the RAM tier's meta files,
  the tensors inside DCP shards): a zip whose ``data.pkl`` is a protocol-2
  pickle. :func:`check_torch_archive` reads that pickle's opcodes *without
  executing them* and refuses every ``GLOBAL`` that is not in
  :data:`TORCH_ARCHIVE_GLOBALS` (the few names ``torch.save`` writes for a
  training state), every name with a dot in it, and every opcode that could
  import by other means (``STACK_GLOBAL``, ``INST``, ``OBJ``, ``EXT*``). Only then
  does :func:`safe_torch_load` call ``torch.load(weights_only=True)``, torch's
  own restricted unpickler, as a second wall.
* **DCP's ``.metadata``**: a protocol-4 pickle of dataclasses.
  :class:`RestrictedUnpickler` resolves a global only through an explicit map
  from ``(module, name)`` to an object (:func:`dcp_metadata_globals`): it never
  imports a module and never follows a dotted name, so the published attack
  (``torch.distributed.checkpoint.filesystem`` / ``os.system``, which a
  "this module, no dunder" rule let through) finds nothing.

Everything refused raises :class:`UnsafePickleError` (a ``ValueError``), which
the checkpoint readers treat as damage: the checkpoint is skipped with a
warning and restore falls back to the previous valid one.
"""

from __future__ import annotations

import functools
import io
import pickle
import pickletools
from typing import Any, Mapping

_STORAGES = (
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool",
    "ComplexFloat", "ComplexDouble",
)  # fmt: skip

#: Every global a ``torch.save`` of a training state (tensors in dicts, lists and tuples of
#: numbers and strings) writes: the tensor rebuild function, the storage types, ``OrderedDict``.
TORCH_ARCHIVE_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2")}
    | {("torch", f"{kind}Storage") for kind in _STORAGES}
)

# Opcodes that resolve a global without a GLOBAL opcode we can read statically.
_IMPORTING_OPCODES = frozenset({"STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4"})


class UnsafePickleError(ValueError):
    """A pickle asks for something outside its allow-list (or cannot be parsed at all)."""


def check_pickle_globals(data: bytes, allowed: frozenset[tuple[str, str]], what: str) -> None:
    """Refuse a protocol-2 pickle that names any global outside ``allowed``; nothing is executed.

    Reads the opcodes with :func:`pickletools.genops` (a parser, not an unpickler).
    """
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "GLOBAL":
                module, _, name = str(arg).partition(" ")
                if "." in name:
                    raise UnsafePickleError(f"{what}: {module}.{name} is not allowed (a dotted name)")
                if (module, name) not in allowed:
                    raise UnsafePickleError(f"{what}: {module}.{name} is not allowed")
            elif op.name in _IMPORTING_OPCODES:
                raise UnsafePickleError(f"{what}: opcode {op.name} is not allowed")
    except UnsafePickleError:
        raise
    except Exception as e:  # a truncated or malformed pickle
        raise UnsafePickleError(f"{what}: unreadable pickle ({e})") from None


def check_torch_archive(source: Any, what: str) -> None:
    """Refuse a ``torch.save`` archive (bytes or a seekable file) whose ``data.pkl`` names
    anything outside :data:`TORCH_ARCHIVE_GLOBALS`. Reads the archive with torch's own zip
    reader, so the pickle checked is the pickle ``torch.load`` would run."""
    import torch

    if isinstance(source, (bytes, bytearray, memoryview)):
        if bytes(source[:4]) != b"PK\x03\x04":
            raise UnsafePickleError(f"{what}: not a torch zip archive")
        source = io.BytesIO(source)
    else:
        head = source.read(4)
        source.seek(0)
        if head != b"PK\x03\x04":
            raise UnsafePickleError(f"{what}: not a torch zip archive")
    try:
        pkl = torch._C.PyTorchFileReader(source).get_record("data.pkl")
    except Exception as e:
        raise UnsafePickleError(f"{what}: unreadable torch archive ({e})") from None
    check_pickle_globals(pkl, TORCH_ARCHIVE_GLOBALS, what)


def safe_torch_load(data: bytes, what: str) -> Any:
    """``torch.load`` of a checked archive (:func:`check_torch_archive`), ``weights_only=True``, onto the CPU."""
    import torch

    check_torch_archive(data, what)
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise UnsafePickleError(f"{what}: refused by torch.load(weights_only=True) ({e})") from None


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler whose globals come only from an explicit ``{(module, name): object}`` map.

    :meth:`find_class` never imports and never walks a dotted name; anything not in
    the map raises :class:`UnsafePickleError`. Persistent ids are refused too.
    """

    def __init__(self, file, allowed: Mapping[tuple[str, str], Any], what: str):
        super().__init__(file)
        self._allowed = allowed
        self._what = what

    def find_class(self, module: str, name: str) -> Any:
        if "." in name:
            raise UnsafePickleError(f"{module}.{name} is not allowed in {self._what} (a dotted name)")
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise UnsafePickleError(f"{module}.{name} is not allowed in {self._what}") from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"persistent ids are not allowed in {self._what}")


def restricted_loads(data: bytes, allowed: Mapping[tuple[str, str], Any], what: str) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`; any failure is an :class:`UnsafePickleError`."""
    try:
        return RestrictedUnpickler(io.BytesIO(data), allowed, what).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # truncated, malformed, or an allowed class given bad arguments
        raise UnsafePickleError(f"{what} unreadable ({type(e).__name__}: {e})") from None


@functools.cache
def dcp_metadata_globals() -> dict[tuple[str, str], Any]:
    """The classes DCP's ``.metadata`` of a tensors-only checkpoint is made of, and nothing else.

    ``BytesStorageMetadata`` is deliberately absent: DCP loads a "bytes" entry with
    ``torch.load(weights_only=False)``, which would run code from a shard.
    """
    import pathlib

    import torch
    import torch.serialization
    from torch.distributed.checkpoint import filesystem, metadata

    allowed: dict[tuple[str, str], Any] = {
        ("torch.distributed.checkpoint.metadata", cls.__name__): cls
        for cls in (
            metadata.Metadata,
            metadata.MetadataIndex,
            metadata.StorageMeta,
            metadata.TensorProperties,
            metadata.TensorStorageMetadata,
            metadata.ChunkStorageMetadata,
            metadata._MEM_FORMAT_ENCODING,
        )
    }
    allowed[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = filesystem._StorageInfo
    allowed[("torch", "Size")] = torch.Size
    allowed[("torch.serialization", "_get_layout")] = torch.serialization._get_layout
    allowed[("pathlib", "PosixPath")] = pathlib.PosixPath
    allowed[("pathlib", "PurePosixPath")] = pathlib.PurePosixPath
    for name in dir(torch):  # dtypes are pickled by name: torch.float32, torch.int64, ...
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            allowed[("torch", name)] = value
    return allowed
