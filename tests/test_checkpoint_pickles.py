"""Checkpoint pickles that change the process without running a named function, and memory bombs.

* ``GLOBAL pathlib.PosixPath`` then ``BUILD (None, {'_str': TARGET})``: both names are allowed,
  nothing is called, yet ``BUILD`` on the *class* sets a class attribute, and from then on every
  ``Path`` in the process prints as TARGET. The control shows it against an allow-list that only
  maps names (the reader before this change); the readers now refuse ``BUILD`` on anything but a
  new instance of an allowed data class, and the classes stay exactly as they were.
* torch's own ``weights_only`` unpickler refuses that payload too, but it cannot read DCP's
  ``.metadata`` at all (a protocol-4 pickle): the evidence for keeping our own reader for it.
* Memory bombs are refused before memory grows, measured as the peak RSS of a child process that
  restores a genuine checkpoint, then the bomb (its own ``getrusage`` after each): a small ``state.pt`` whose deflated record inflates to 1 GiB, a
  ``.metadata`` whose memoised 700 KB string is referenced 1500 times (about 1 GiB as a message), and one whose
  path is that of a call ``PosixPath(s, s, ...)`` on one memoised 100 KB string, 9,000 times (0.9 GB).
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile
from collections import OrderedDict
from pathlib import Path, PosixPath, PurePath, PurePosixPath

import pytest
import torch

from goodputlab.checkpoints.safe_unpickle import UnsafePickleError, data_loads, dcp_metadata_allow_list
from test_untrusted_checkpoints import objs, restore, rewrite, saved  # noqa: F401 (objs is a fixture)

ROOT = Path(__file__).resolve().parent.parent


def class_build_payload(module: str, name: str, attribute: str, value: str) -> bytes:
    """Protocol 2: ``GLOBAL module name``, ``BUILD (None, {attribute: value})`` on it, ``STOP``."""

    def text(s: str) -> bytes:
        b = s.encode()
        return b"X" + len(b).to_bytes(4, "little") + b  # BINUNICODE

    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"N}" + text(attribute) + text(value) + b"s\x86b."


def posix_path_payload(target: Path) -> bytes:
    return class_build_payload("pathlib", "PosixPath", "_str", str(target))


def snapshot(*classes) -> list[dict]:
    return [dict(vars(c)) for c in classes]


PATH_CLASSES = (PosixPath, PurePosixPath, PurePath, Path)


# --- a pickle that acts on a class ------------------------------------------------------------------
def test_control_a_names_only_allow_list_lets_build_rewrite_every_path(tmp_path):
    """The reader before this change (a find_class map that allows pathlib.PosixPath), in a child
    process so that this one is not damaged: the payload is refused afterwards, but Path is rewritten."""
    target = tmp_path / "victim"
    script = textwrap.dedent(f"""
        import io, pathlib, pickle
        class NamesOnly(pickle.Unpickler):
            def find_class(self, module, name):
                return {{("pathlib", "PosixPath"): pathlib.PosixPath}}[(module, name)]
        loaded = NamesOnly(io.BytesIO({posix_path_payload(target)!r})).load()
        print(loaded is pathlib.PosixPath, str(pathlib.Path("/etc/passwd")))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", str(target)], out.stderr


def test_the_class_build_payload_is_refused_and_leaves_the_path_classes_as_they_were(tmp_path, objs):
    """The exact payload, in this process, as the newest checkpoint's .metadata: restore falls back."""
    store = saved(tmp_path, objs, "dcp")
    before = snapshot(*PATH_CLASSES)
    rewrite(store, 10, ".metadata", posix_path_payload(tmp_path / "victim"))
    found, skipped, _ = restore(store, objs, match="step-00000010")
    assert snapshot(*PATH_CLASSES) == before
    assert str(Path("/etc/passwd")) == "/etc/passwd" and Path("/etc") / "x" == PosixPath("/etc/x")
    assert found[0].step == 5
    assert "BUILD on <class 'pathlib.PosixPath'> is not allowed in DCP metadata" in skipped[0][2]


@pytest.mark.parametrize("payload, refusal", [
    (b"\x80\x02ctorch\nSize\n(K\x01\x85tR}b.", "BUILD on torch.Size"),  # an object a constructor made: not fillable
    (b"\x80\x02ctorch\nSize\nK\x01K\x02s.", "SETITEM on a type"),  # an item set on a class
    (b"\x80\x02cpathlib\nPosixPath\n(X\x04\x00\x00\x00/etcX\x01\x00\x00\x00xtR.", None),  # a path: allowed
    (b"\x80\x02cpathlib\nPosixPath\n(}tR.", "calling <class 'pathlib.PosixPath'> with"),  # not plain data
    (b"\x80\x02ctorch.serialization\n_get_layout\n(X\x08\x00\x00\x00__main__tR.", "unreadable"),  # no such layout
    (b"\x80\x02cbuiltins\ngetattr\n.", "builtins.getattr is not allowed"),
    (b"\x80\x02(ipathlib\nPosixPath\n.", "this opcode"),  # INST
])
def test_the_dcp_reader_calls_only_data_constructors_and_fills_only_new_instances(payload, refusal):
    before = snapshot(*PATH_CLASSES, torch.Size)
    if refusal is None:
        assert data_loads(payload, dcp_metadata_allow_list(), "DCP metadata") == PosixPath("/etc/x")
    else:
        with pytest.raises(UnsafePickleError, match=refusal.replace("(", r"\(")):
            data_loads(payload, dcp_metadata_allow_list(), "DCP metadata")
    assert snapshot(*PATH_CLASSES, torch.Size) == before


@pytest.mark.filterwarnings("ignore:Detected pickle protocol 4")
def test_torch_weights_only_refuses_the_payload_but_cannot_read_dcp_metadata(tmp_path, objs):
    """Why .metadata keeps a reader of its own: torch's hardened unpickler, with every DCP class
    allowed (add_safe_globals' context), refuses the payload, and refuses genuine metadata too."""
    from torch._weights_only_unpickler import load as weights_only_load
    from torch.distributed.checkpoint import filesystem, metadata

    before = snapshot(*PATH_CLASSES)
    classes = [PosixPath, metadata.Metadata, metadata.MetadataIndex, metadata.StorageMeta, metadata.TensorProperties,
               metadata.TensorStorageMetadata, metadata.ChunkStorageMetadata, metadata._MEM_FORMAT_ENCODING,
               filesystem._StorageInfo, torch.serialization._get_layout]
    genuine = (saved(tmp_path, objs, "dcp").path_for(10) / ".metadata").read_bytes()
    with torch.serialization.safe_globals(classes):
        with pytest.raises(pickle.UnpicklingError, match="Can only build"):
            weights_only_load(io.BytesIO(posix_path_payload(tmp_path / "victim")))
        with pytest.raises(pickle.UnpicklingError, match="Unsupported operand"):
            weights_only_load(io.BytesIO(genuine))
    assert snapshot(*PATH_CLASSES) == before
    assert type(data_loads(genuine, dcp_metadata_allow_list(), "DCP metadata")).__name__ == "Metadata"


def _torch_archive_with_pickle(genuine: bytes, data_pkl: bytes) -> bytes:
    """``genuine`` (a torch.save archive) with its data.pkl replaced, every record stored as torch stores it."""
    src = zipfile.ZipFile(io.BytesIO(genuine))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
        for info in src.infolist():
            out.writestr(info.filename, data_pkl if info.filename.endswith("/data.pkl") else src.read(info))
    return buf.getvalue()


def test_a_class_build_in_a_state_pt_is_refused(tmp_path, objs):
    """In a torch archive the allowed globals are torch's storage classes (Python classes one could set
    attributes on): torch.load(weights_only=True) hands out a stand-in for them and refuses BUILD on it."""
    store = saved(tmp_path, objs)
    before = snapshot(torch.FloatStorage, OrderedDict)
    genuine = (store.path_for(10) / "state.pt").read_bytes()
    rewrite(store, 10, "state.pt", _torch_archive_with_pickle(genuine, class_build_payload("torch", "FloatStorage", "dtype", "x")))
    found, skipped, _ = restore(store, objs, match="step-00000010")
    assert found[0].step == 5 and "Can only build" in skipped[0][2]
    assert snapshot(torch.FloatStorage, OrderedDict) == before and "\n" not in skipped[0][2]


# --- memory bombs, measured in a child process ------------------------------------------------------------
CHILD = textwrap.dedent("""
    import resource, sys, warnings
    from pathlib import Path
    from goodputlab.checkpoints.store import CheckpointStore, CheckpointWarning
    for folder in sys.argv[1:]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = CheckpointStore(Path(folder), keep=5).load_newest_valid()
        # the reader's own warnings (torch adds a note on single-process DCP loads once a process
        # has loaded one)
        caught = [w for w in caught if issubclass(w.category, CheckpointWarning)]
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, found[0].step, len(caught))
        for w in caught:
            print(w.message)
""")


def restore_in_child(*ckpts: Path) -> list[tuple[int, list[str]]]:
    """Restore the newest valid checkpoint of each folder, one after the other, in one fresh process:
    for each, the process's peak RSS in bytes after it, and its output lines (the step restored,
    then one line per warning of the checkpoint reader)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, *map(str, ckpts)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines, found = proc.stdout.splitlines(), []
    while lines:
        rss, step, warned = lines.pop(0).split()
        found.append((int(rss), [step] + [lines.pop(0) for _ in range(int(warned))]))
    return found


def zip_bomb(genuine: bytes, inflated_bytes: int = 1 << 30) -> bytes:
    """``genuine`` with its first tensor record deflated from ``inflated_bytes`` zeros (written in chunks:
    the test never holds the gigabyte)."""
    src = zipfile.ZipFile(io.BytesIO(genuine))
    target = next(i.filename for i in src.infolist() if "/data/" in i.filename and not i.filename.endswith(".pkl"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
        for info in src.infolist():
            if info.filename != target:
                out.writestr(info.filename, src.read(info))
                continue
            record = zipfile.ZipInfo(info.filename)
            record.compress_type = zipfile.ZIP_DEFLATED
            with out.open(record, "w", force_zip64=True) as f:
                chunk = bytes(1 << 20)
                for _ in range(inflated_bytes >> 20):
                    f.write(chunk)
    return buf.getvalue()


def string_bomb(genuine: bytes, size: int = 700_000, copies: int = 1500) -> bytes:
    """DCP metadata whose first storage entry reads from a list of one memoised string, ``copies`` times."""
    md = pickle.loads(genuine)
    key = next(iter(md.storage_data))
    info = md.storage_data[key]
    md.storage_data[key] = type(info)(relative_path=["x" * size] * copies, offset=0, length=1)
    return pickle.dumps(md)


class _JoinedPath:
    """Pickles as ``PosixPath(part, part, ...)``: one memoised string, joined ``copies`` times by the call itself."""

    def __init__(self, part: str, copies: int):
        self.part, self.copies = part, copies

    def __reduce__(self):
        return PosixPath, (self.part,) * self.copies


def path_bomb(genuine: bytes, size: int = 100_000, copies: int = 9_000) -> bytes:
    """DCP metadata whose first storage entry's path is ``PosixPath(s, s, ...)`` of one memoised 100 KB string,
    9,000 times: a 0.9 GB path from a 120 KB file (round 3: a 142 KB ``.metadata`` peaked at 1.86 GB)."""
    md = pickle.loads(genuine)
    key = next(iter(md.storage_data))
    info = md.storage_data[key]
    md.storage_data[key] = type(info)(relative_path=_JoinedPath("x" * size, copies), offset=0, length=1)
    return pickle.dumps(md)


@pytest.mark.parametrize("strategy, name, bomb, reason", [
    ("sync", "state.pt", zip_bomb, "state.pt: record 'archive/data/0' is compressed"),
    ("dcp", ".metadata", string_bomb, "a memory bomb"),
    ("dcp", ".metadata", path_bomb, "a memory bomb"),
])
def test_a_bomb_is_refused_before_memory_grows(tmp_path, objs, strategy, name, bomb, reason):
    store = saved(tmp_path / "genuine", objs, strategy)
    poisoned = saved(tmp_path / "poisoned", objs, strategy)
    data = bomb((poisoned.path_for(10) / name).read_bytes())
    assert len(data) < 2 << 20  # a small file
    rewrite(poisoned, 10, name, data)
    # one process restores the genuine checkpoint, then the poisoned one: its peak RSS after the
    # first is the baseline, and the poisoned restore must not raise it by more than 64 MiB
    (baseline_rss, baseline_lines), (rss, lines) = restore_in_child(store.root, poisoned.root)
    assert baseline_lines == ["10"]
    assert lines[0] == "5" and len(lines) == 2  # fell back, with one warning of one line
    assert reason in lines[1] and len(lines[1]) < 400, lines[1]
    assert rss - baseline_rss < 64 << 20, f"peak RSS grew by {(rss - baseline_rss) >> 20} MiB"
