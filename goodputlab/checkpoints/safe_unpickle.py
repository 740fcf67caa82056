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
  Before either, :func:`check_zip_sizes` reads the zip's central directory: every
  record must be stored uncompressed and fit in the archive, so a small file cannot
  inflate into gigabytes on load (``torch.save`` never compresses).
* **DCP's ``.metadata``**: a protocol-4 pickle of dataclasses. torch's own
  ``weights_only`` unpickler cannot read it (it knows protocol 2 only: ``FRAME``,
  ``SHORT_BINUNICODE``, ``MEMOIZE`` and ``STACK_GLOBAL`` are "unsupported operands";
  ``tests/test_untrusted_checkpoints.py`` shows it), and DCP itself reads it with a
  plain ``pickle.load``. :class:`DataUnpickler` reads it instead, over an explicit
  :class:`AllowList` (:func:`dcp_metadata_allow_list`):

  - a global resolves only through a map from ``(module, name)`` to an object: no
    import, no dotted name (the published ``torch.distributed.checkpoint.filesystem``
    / ``os.system`` attack finds nothing);
  - ``REDUCE`` calls only the listed data constructors (``torch.Size``, paths, a layout
    or an enum member by name), each with arguments of plain data only;
  - ``NEWOBJ`` makes instances of the listed dataclasses only, and ``BUILD`` sets the
    fields of such a fresh instance, once; never of a class, so ``GLOBAL
    pathlib.PosixPath`` + ``BUILD`` can no longer rewrite ``Path`` for the whole process;
  - ``SETITEM(S)``, ``APPEND(S)`` and ``ADDITEMS`` act on plain dicts, lists and sets only;
  - ``INST``, ``OBJ``, ``EXT*`` and persistent ids are refused.

Every object a pickle makes then passes :func:`check_expansion`: counted with every
repeated reference (a memoised string fetched a thousand times counts a thousand
times, a path as long as its parts), it must stay within a few times the pickle's own
size, so no later message or copy can blow it up. A call is booked the same way
*before* it runs (``PosixPath(s, s, ...)`` joins what it is given: 9,000 references to
one 100 KB string would make a 0.9 GB path), and a message shows an object it does not
know by its type alone, never by a ``repr`` built at full length and cut afterwards.

Everything refused raises :class:`UnsafePickleError` (a ``ValueError``), which
the checkpoint readers treat as damage: the checkpoint is skipped with a
warning and restore falls back to the previous valid one.
"""

from __future__ import annotations

import functools
import io
import pickle
import pickletools
import reprlib
import zipfile
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Callable, Mapping

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
    names = check_zip_sizes(source, what)
    try:
        reader = torch._C.PyTorchFileReader(source)
        if set(reader.get_all_records()) != names:  # torch's zip reader must see the records checked here
            raise UnsafePickleError(f"{what}: torch's zip reader and Python's disagree about the records")
        pkl = reader.get_record("data.pkl")
    except UnsafePickleError:
        raise
    except Exception as e:
        raise UnsafePickleError(f"{what}: unreadable torch archive ({_one_line(e)})") from None
    check_pickle_globals(pkl, TORCH_ARCHIVE_GLOBALS, what)


def check_zip_sizes(source: Any, what: str) -> set[str]:
    """Refuse a zip (a seekable file) whose records would inflate: each must be stored uncompressed
    and all together fit in the archive. Reads the central directory only; returns the records' names
    without the archive's folder (as torch names them)."""
    try:
        end = source.seek(0, io.SEEK_END)
        source.seek(0)
        with zipfile.ZipFile(source) as z:
            infos = z.infolist()
    except Exception as e:  # not a zip, a damaged central directory
        raise UnsafePickleError(f"{what}: unreadable torch archive ({_one_line(e)})") from None
    finally:
        source.seek(0)
    total = 0
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise UnsafePickleError(f"{what}: record {_shown(info.filename)} is compressed ({info.compress_size} bytes "
                                    f"that inflate to {info.file_size}); torch.save stores records uncompressed")
        total += info.file_size
        if total > end:
            raise UnsafePickleError(f"{what}: its records hold {total} bytes or more, more than the archive's {end}")
    return {info.filename.split("/", 1)[-1] for info in infos}


def safe_torch_load(data: bytes, what: str) -> Any:
    """``torch.load`` of a checked archive (:func:`check_torch_archive`), ``weights_only=True``, onto the CPU;
    what it made passes :func:`check_expansion`."""
    import torch

    check_torch_archive(data, what)
    try:
        loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's message is a page; its reason is the first line after "WeightsUnpickler error:"
        after = str(e).partition("WeightsUnpickler error:")[2].strip().splitlines()
        reason = after[0] if after else _one_line(e)
        raise UnsafePickleError(f"{what}: refused by torch.load(weights_only=True) ({_shown(reason, 200)[1:-1]})") from None
    check_expansion(loaded, len(data), what)
    return loaded


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return _shown(text[0], 200) if text else type(e).__name__


class _ShortRepr(reprlib.Repr):
    """``reprlib``'s cut-down ``repr`` that never formats an object it does not know at full length: such an
    object (a path, a tensor, an instance) is shown by its type alone (``reprlib`` would build its whole
    ``repr`` first and cut it after: 1.9 GB for a path joined from one memoised string)."""

    def repr_instance(self, x: Any, level: int) -> str:
        if isinstance(x, type):
            return f"<class '{x.__module__[:80]}.{x.__qualname__[:80]}'>"
        name = f"{type(x).__module__}.{type(x).__qualname__}"
        if isinstance(x, tuple):  # torch.Size and the like: its items, cut as a tuple's
            return f"{name}({self.repr_tuple(tuple(x), level)})"
        return f"<{name} object>"


def _shown(value: Any, width: int = 80) -> str:
    """``repr(value)`` cut to about ``width`` characters: a message never copies what a pickle made."""
    r = _ShortRepr()
    r.maxstring = r.maxother = r.maxlong = width
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = 4
    r.maxlevel = 3
    return r.repr(value)


#: How far the objects a pickle makes may outgrow it: bytes of strings and containers,
#: counted once per reference, over the pickle's own size (plus a floor for tiny pickles).
EXPANSION_FACTOR = 32  # a genuine DCP index: 4 to 8
EXPANSION_FLOOR = 1 << 20


def check_expansion(obj: Any, pickle_bytes: int, what: str) -> None:
    """Refuse ``obj`` when, counted with every repeated reference (each element of a container
    8 bytes, each string or bytes its length, a tensor 64 bytes: its storage was read from the
    archive already), it holds more than ``EXPANSION_FACTOR`` times ``pickle_bytes`` (at least
    ``EXPANSION_FLOOR``). The walk stops as soon as the budget is spent: it costs at most that.
    """
    budget = expansion_budget(pickle_bytes)
    spent, todo = 0, [obj]
    while todo:
        x = todo.pop()
        spent += 8
        if isinstance(x, (str, bytes, bytearray)):
            spent += len(x)
        elif isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            todo.extend(x)
        elif hasattr(x, "__dict__") and not isinstance(x, type) and type(x).__module__.startswith("torch.distributed"):
            todo.extend(vars(x).items())
        elif isinstance(x, PurePath):
            spent += 56 + sum(len(part) for part in x.parts)  # a path: as long as its parts
        else:
            spent += 56  # a number, a tensor, a dtype
        if spent > budget:
            raise _bomb(what, budget, pickle_bytes)


def expansion_budget(pickle_bytes: int) -> int:
    """Bytes the objects of a pickle of ``pickle_bytes`` may hold (:func:`check_expansion`)."""
    return EXPANSION_FACTOR * pickle_bytes + EXPANSION_FLOOR


def _bomb(what: str, budget: int, pickle_bytes: int) -> UnsafePickleError:
    return UnsafePickleError(f"{what}: its objects, counted with every repeated reference, exceed {budget} bytes "
                             f"({EXPANSION_FACTOR} times its {pickle_bytes}): a memory bomb")


def _plain_bytes(value: Any) -> int:
    """What plain data (:func:`_plain`) costs as the argument of a call: 8 bytes a value, a string its length
    too, counted once per reference (a memoised string passed 9,000 times costs 9,000 times)."""
    if isinstance(value, str):
        return 8 + len(value)
    if isinstance(value, (tuple, list)):
        return 8 + sum(_plain_bytes(v) for v in value)
    return 8 + (value.bit_length() // 8 if isinstance(value, int) else 0)


def _plain(value: Any) -> bool:
    """Plain data: None, a bool, an int, a str, or a tuple or list of them."""
    if value is None or isinstance(value, (bool, int, str)):
        return type(value) in (type(None), bool, int, str)
    if type(value) in (tuple, list):
        return all(_plain(v) for v in value)
    return False


@dataclass(frozen=True)
class AllowList:
    """What a :class:`DataUnpickler` may touch.

    ``names``: ``(module, name)`` -> the object a global stands for; ``constructors``: the
    callables ``REDUCE`` may call (with plain-data arguments only); ``classes``: the data
    classes ``NEWOBJ`` may make and ``BUILD`` may fill in; ``setstate``: those of them whose
    own ``__setstate__`` fills a fresh instance (any other is filled through its ``__dict__``).
    """

    names: Mapping[tuple[str, str], Any]
    constructors: frozenset
    classes: frozenset
    setstate: frozenset = frozenset()


class DataUnpickler(pickle._Unpickler):
    """Python's own unpickler, with every opcode that imports, calls or changes an object checked.

    The pure-Python unpickler keeps one method per opcode, so each dangerous one is replaced
    here (the C unpickler offers only ``find_class``): see the module's docstring for the rules.
    Anything outside them raises :class:`UnsafePickleError`.
    """

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, allowed: AllowList, what: str, pickle_bytes: int | None = None):
        super().__init__(file)
        self._allowed = allowed
        self._what = what
        self._fresh: dict[int, Any] = {}  # id -> an instance NEWOBJ made and BUILD has not filled yet
        self._pickle_bytes = pickle_bytes  # the size of the pickle: the calls' arguments may cost expansion_budget() of it
        self._called = 0  # bytes of arguments handed to constructors so far

    def _refuse(self, what: str, why: str = ""):
        raise UnsafePickleError(f"{what} is not allowed in {self._what}{why}")

    def find_class(self, module: str, name: str) -> Any:
        if "." in name:
            self._refuse(f"{module}.{name}", " (a dotted name)")
        try:
            return self._allowed.names[(module, name)]
        except (KeyError, TypeError):
            self._refuse(f"{module[:80]}.{name[:80]}")  # STACK_GLOBAL gives strs only; a name is cut, not copied

    def persistent_load(self, pid: Any) -> Any:
        self._refuse("a persistent id")

    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if not any(func is c for c in self._allowed.constructors):
            self._refuse(f"calling {_shown(func, 60)}")
        if type(args) is not tuple or not _plain(args):
            self._refuse(f"calling {_shown(func, 60)} with {_shown(args, 60)}")
        if self._pickle_bytes is not None:  # booked before the call: PosixPath(s, s, ...) makes as much as it is given
            self._called += _plain_bytes(args)
            budget = expansion_budget(self._pickle_bytes)
            if self._called > budget:
                raise _bomb(self._what, budget, self._pickle_bytes)
        self.stack[-1] = func(*args)

    def _new(self, cls, args, kwargs):
        if not isinstance(cls, type) or not any(cls is c for c in self._allowed.classes):
            self._refuse(f"making a {_shown(cls, 60)}")
        if args or kwargs:
            self._refuse(f"arguments to {cls.__name__}.__new__")
        obj = cls.__new__(cls)
        self._fresh[id(obj)] = obj
        self.append(obj)

    def load_newobj(self):
        args = self.stack.pop()
        self._new(self.stack.pop(), args, None)

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        self._new(self.stack.pop(), args, kwargs)

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if self._fresh.pop(id(inst), None) is not inst:  # a class, a global, or an instance filled already
            self._refuse(f"BUILD on {_shown(inst, 60)}", " (only on a new instance of an allowed class, once)")
        cls = type(inst)
        if cls in self._allowed.setstate:
            cls.__setstate__(inst, state)
            return
        if isinstance(state, tuple) and len(state) == 2 and state[1] is None:
            state = state[0]
        if type(state) is not dict or not all(type(k) is str for k in state):
            self._refuse(f"BUILD of a {cls.__name__} from {_shown(state, 60)}")
        inst.__dict__.update(state)

    def _target(self, kind: type, opcode: str):
        target = self.stack[-1]
        if type(target) is not kind:
            self._refuse(f"{opcode} on a {type(target).__name__}")
        return target

    def load_setitem(self):
        value = self.stack.pop()
        key = self.stack.pop()
        self._target(dict, "SETITEM")[key] = value

    def load_setitems(self):
        items = self.pop_mark()
        target = self._target(dict, "SETITEMS")
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def load_append(self):
        value = self.stack.pop()
        self._target(list, "APPEND").append(value)

    def load_appends(self):
        items = self.pop_mark()
        self._target(list, "APPENDS").extend(items)

    def load_additems(self):
        items = self.pop_mark()
        self._target(set, "ADDITEMS").update(items)

    def _refuse_opcode(self):
        self._refuse("this opcode (INST, OBJ or EXT)")


# The pure-Python unpickler looks each opcode up in ``dispatch``: point the checked ones at the methods above.
_CHECKED_OPCODES = {
    "load_reduce": (pickle.REDUCE,), "load_newobj": (pickle.NEWOBJ,), "load_newobj_ex": (pickle.NEWOBJ_EX,),
    "load_build": (pickle.BUILD,), "load_setitem": (pickle.SETITEM,), "load_setitems": (pickle.SETITEMS,),
    "load_append": (pickle.APPEND,), "load_appends": (pickle.APPENDS,), "load_additems": (pickle.ADDITEMS,),
    "_refuse_opcode": (pickle.INST, pickle.OBJ, pickle.EXT1, pickle.EXT2, pickle.EXT4),
}
for _method, _opcodes in _CHECKED_OPCODES.items():
    for _opcode in _opcodes:
        DataUnpickler.dispatch[_opcode[0]] = getattr(DataUnpickler, _method)


def data_loads(data: bytes, allowed: AllowList, what: str) -> Any:
    """Unpickle ``data`` with :class:`DataUnpickler`, then :func:`check_expansion`; any failure is an
    :class:`UnsafePickleError` with a one-line reason."""
    try:
        obj = DataUnpickler(io.BytesIO(data), allowed, what, pickle_bytes=len(data)).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # truncated, malformed, or an allowed class given bad arguments
        raise UnsafePickleError(f"{what} unreadable ({type(e).__name__}: {_one_line(e)})") from None
    check_expansion(obj, len(data), what)
    return obj


@functools.cache
def dcp_metadata_allow_list() -> AllowList:
    """The classes DCP's ``.metadata`` of a tensors-only checkpoint is made of, and nothing else.

    ``BytesStorageMetadata`` is deliberately absent: DCP loads a "bytes" entry with
    ``torch.load(weights_only=False)``, which would run code from a shard.
    """
    import pathlib

    import torch
    import torch.serialization
    from torch.distributed.checkpoint import filesystem, metadata

    data_classes = (
        metadata.Metadata,
        metadata.MetadataIndex,
        metadata.StorageMeta,
        metadata.TensorProperties,
        metadata.TensorStorageMetadata,
        metadata.ChunkStorageMetadata,
        filesystem._StorageInfo,
    )
    names: dict[tuple[str, str], Any] = {(cls.__module__, cls.__name__): cls for cls in data_classes}
    constructors = (metadata._MEM_FORMAT_ENCODING, torch.Size, torch.serialization._get_layout,
                    pathlib.PosixPath, pathlib.PurePosixPath)  # an enum member, a shape, a layout, a path: by value
    for c in constructors:
        names[(c.__module__, c.__name__)] = c
    for name in dir(torch):  # dtypes are pickled by name: torch.float32, torch.int64, ...
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            names[("torch", name)] = value
    return AllowList(names=names, constructors=frozenset(constructors), classes=frozenset(data_classes),
                     setstate=frozenset({metadata.TensorProperties}))
