"""Checkpoints: complete, atomic, verified.

Complete: model, optimizer, LR schedule, data position, every RNG (python,
numpy, torch, CUDA) and the step; resuming from one gives bit-identical training.

Atomic: a checkpoint is a directory ``step-00000050/`` holding its data files
and ``manifest.json`` (format version, step, layout, and the sha256 and size of
every data file). It is written under a temporary name, every file and the
directory fsynced, then renamed into place: a reader sees a whole checkpoint or none.
Two layouts share this envelope: ``torch_save`` (one ``state.pt``, written by
the sync and async strategies and the memory strategy's disk tier) and ``dcp``
(the files of ``torch.distributed.checkpoint`` plus a small ``skeleton.pt``,
see :mod:`goodputlab.dcp_checkpoint`).

Verified: restore walks the checkpoints newest first and takes the first whose
manifest parses and whose files match their checksums; a damaged one is skipped
with a warning. A checkpoint folder is input like any other (whoever can write
it can rewrite its manifest), so the reader trusts nothing in it: a file is read
only when it is a regular file (never through a link, never a FIFO or device) of
at most ``max_file_bytes``, and every pickle goes through an explicit allow-list
(:mod:`goodputlab.safe_unpickle`) before ``torch.load(..., weights_only=True)``,
so a checkpoint can hold tensors and plain containers but never code.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import stat
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .safe_io import UnsafeFileError, create_new, open_regular, read_regular, remove_entry, write_all

FORMAT_VERSION = 1
STATE_FILE = "state.pt"
MANIFEST = "manifest.json"
LAYOUT_TORCH = "torch_save"  # one state.pt written by torch.save
LAYOUT_DCP = "dcp"  # a torch.distributed.checkpoint directory (goodputlab.dcp_checkpoint)
LAYOUT_DCP_SHARDED = "dcp_sharded"  # written by every rank of a distributed job (goodputlab.distributed.sharded)
_NAME = re.compile(r"^step-(\d{8,})$")
MANIFEST_MAX_BYTES = 1 << 20  # a manifest lists a handful of files: a few hundred bytes
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def default_max_file_bytes() -> int:
    """The largest checkpoint file a reader accepts unless told otherwise: half the machine's RAM."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return 64 << 30


class CheckpointWarning(UserWarning):
    """A checkpoint was damaged and skipped."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint of the state after ``step`` steps, in one tier (``disk`` or ``memory``)."""

    step: int
    path: Path
    tier: str = "disk"


class _HashingWriter:
    """A file wrapper that hashes and counts what passes through it (one pass over the bytes)."""

    def __init__(self, f):
        self.f = f
        self.sha = hashlib.sha256()
        self.bytes = 0
        self.error: OSError | None = None  # torch.save turns a write error into a vague RuntimeError

    def write(self, data) -> int:
        self.sha.update(data)
        self.bytes += len(data)
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = self.error or e
            raise

    def flush(self) -> None:
        self.f.flush()


_HASH_CHUNK = 8 << 20  # bytes read at a time when hashing files back
_REQUIRED_FILES = {
    LAYOUT_TORCH: (STATE_FILE,),
    LAYOUT_DCP: (".metadata", "skeleton.pt"),
    LAYOUT_DCP_SHARDED: (".metadata", "skeleton.pt", "rank-00000.pt"),  # every rank's rank-R.pt: checked on load
}


def _is_count(value: Any) -> bool:
    """A whole number >= 0 (``bool`` is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _plain_name(name: Any) -> bool:
    """A file name inside the checkpoint folder itself: no folder part, no ``..``, no NUL."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointDirError(ValueError):
    """The checkpoint folder itself is unusable (a symbolic link, or not a folder)."""


class CheckpointStore:
    """A directory of checkpoints with atomic commit, verification and keep-newest-k.

    ``max_file_bytes``: the largest file a reader accepts (default: half the
    machine's RAM); a file listed as larger is damage, not something to read.
    The folder must be a real directory: a symbolic link is refused
    (:class:`CheckpointDirError`), and so are links inside it.
    """

    def __init__(self, root: Path | str, keep: int = 3, max_file_bytes: int | None = None):
        self.root = Path(root)
        self.keep = keep
        self.max_file_bytes = max_file_bytes if max_file_bytes is not None else default_max_file_bytes()
        if self.root.is_symlink():
            raise CheckpointDirError(f"{self.root} is a symbolic link: checkpoints are never read or written through one")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise CheckpointDirError(f"{self.root} exists and is not a folder") from None

    # --- listing -----------------------------------------------------------------
    def list(self) -> list[Checkpoint]:
        """Committed checkpoints (valid or not), newest first. Only real folders count: a link named
        like a checkpoint is neither read nor deleted."""
        found = []
        for p in self.root.iterdir():
            m = _NAME.match(p.name)
            if m and stat.S_ISDIR(os.lstat(p).st_mode):
                found.append(Checkpoint(int(m.group(1)), p))
        return sorted(found, key=lambda c: c.step, reverse=True)

    def path_for(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    # --- writing -----------------------------------------------------------------
    def save(self, state: dict[str, Any], step: int) -> Path:
        """Serialise ``state`` and commit it atomically as the checkpoint of ``step``."""
        import torch

        def write_state(f) -> None:
            torch.save(state, f)

        return self.commit(step, write_state)

    def commit(self, step: int, write_state: Callable[[Any], None]) -> Path:
        """Write a checkpoint whose ``state.pt`` bytes come from ``write_state(file)``.

        The sequence: temporary directory, state file written and fsynced,
        manifest written and fsynced, directory fsynced, rename, parent fsynced,
        then old checkpoints beyond ``keep`` removed. The file is hashed while it
        is written (one pass over the bytes).
        """
        tmp = self.begin(step)
        f = None
        try:
            with os.fdopen(create_new(tmp / STATE_FILE), "wb") as raw:
                f = _HashingWriter(raw)
                write_state(f)
                raw.flush()
                os.fsync(raw.fileno())
            files = {STATE_FILE: {"sha256": f.sha.hexdigest(), "bytes": f.bytes}}
            return self.seal(tmp, step, files, LAYOUT_TORCH)
        except BaseException as e:
            self.discard(tmp)  # a full disk or a failed serialisation leaves no temporary behind
            if f is not None and f.error is not None and not isinstance(e, OSError):
                raise OSError(f.error.errno, f"{f.error.strerror} (writing {STATE_FILE} of step {step})") from None
            raise

    def begin(self, step: int) -> Path:
        """A fresh temporary directory for the files of the checkpoint of ``step`` (invisible to readers)."""
        self._remove_stale_temporaries()
        tmp = self.root / f".tmp-step-{step:08d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        return tmp

    def discard(self, tmp: Path) -> None:
        """Remove a temporary directory from :meth:`begin` after a save failed (no error if it is gone)."""
        try:
            remove_entry(tmp)
        except OSError:
            pass

    def commit_files(self, tmp: Path, step: int, layout: str) -> Path:
        """Seal a temporary directory from :meth:`begin` whose files are already written.

        Every regular file under ``tmp`` is fsynced and listed in the manifest
        with its sha256 and size (read back once to hash it), then the
        directory is committed like :meth:`commit`.
        """
        files = {}
        for f in sorted(p for p in tmp.rglob("*") if p.is_file()):
            sha = hashlib.sha256()
            with open(f, "rb") as fh:
                while chunk := fh.read(_HASH_CHUNK):
                    sha.update(chunk)
                os.fsync(fh.fileno())
            files[f.relative_to(tmp).as_posix()] = {"sha256": sha.hexdigest(), "bytes": f.stat().st_size}
        for d in sorted({p.parent for p in tmp.rglob("*")} - {tmp}):
            _fsync_dir(d)
        return self.seal(tmp, step, files, layout)

    def seal(self, tmp: Path, step: int, files: dict[str, dict[str, Any]], layout: str) -> Path:
        """Write the manifest of ``files`` (already fsynced) into ``tmp`` and rename it into place."""
        manifest = {
            "format": FORMAT_VERSION,
            "step": step,
            "layout": layout,
            "created_unix": time.time(),
            "files": files,
        }
        fd = create_new(tmp / MANIFEST)
        try:
            write_all(fd, json.dumps(manifest, indent=1).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(tmp)
        final = self.path_for(step)
        if os.path.lexists(final):  # the same step saved again after a rollback past it
            trash = self.root / f".trash-{final.name}-{uuid.uuid4().hex[:8]}"
            os.rename(final, trash)  # renames a planted link itself, never its target
            os.rename(tmp, final)
            self.discard(trash)
        else:
            os.rename(tmp, final)
        _fsync_dir(self.root)
        self.prune()
        return final

    def prune(self) -> None:
        """Delete all but the newest ``keep`` checkpoints."""
        for c in self.list()[self.keep :]:
            self.discard(c.path)

    def _remove_stale_temporaries(self) -> None:
        self.remove_temporaries()

    def remove_temporaries(self) -> list[str]:
        """Delete leftovers of saves that a kill or an error interrupted (never visible as
        checkpoints); returns their names. Only when no process is saving into this store."""
        removed = []
        for p in self.root.iterdir():
            if p.name.startswith((".tmp-", ".trash-")):
                self.discard(p)
                removed.append(p.name)
        return removed

    # --- reading -----------------------------------------------------------------
    def manifest(self, path: Path) -> dict[str, Any]:
        """The parsed, checked manifest of a checkpoint; raises ``ValueError`` if it is missing or malformed.

        Checked: a regular file of at most 1 MiB holding a JSON object with the
        format version, the step of the folder's name, a known layout and, for
        every file, a plain file name (no folder, no ``..``), its size (bytes >= 0)
        and its sha256 (64 hex digits); the layout's required files are listed.
        """
        try:
            raw = read_regular(path / MANIFEST, MANIFEST_MAX_BYTES)
        except FileNotFoundError:
            raise ValueError("no manifest") from None
        except UnsafeFileError as e:
            raise ValueError(f"manifest refused: {e}") from None
        except OSError as e:
            raise ValueError(f"manifest unreadable ({e.strerror or e})") from None
        try:
            manifest = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError("manifest unreadable (not UTF-8)") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"manifest unreadable ({e.msg})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
            found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
            raise ValueError(f"format {found!r}, expected {FORMAT_VERSION}")
        m = _NAME.match(Path(path).name)
        step = manifest.get("step")
        if m and (not _is_count(step) or step != int(m.group(1))):
            raise ValueError(f"manifest step {step!r} does not match {Path(path).name}")
        layout = manifest.get("layout", LAYOUT_TORCH)  # manifests before layouts existed were torch_save
        if not isinstance(layout, str) or layout not in _REQUIRED_FILES:
            raise ValueError(f"unknown layout {layout!r}")
        files = manifest.get("files")
        if not isinstance(files, dict) or not files:
            raise ValueError("manifest lists no files")
        for name, entry in files.items():
            if not _plain_name(name):
                raise ValueError(f"manifest names a file outside the checkpoint: {name!r}")
            if not isinstance(entry, dict):
                raise ValueError(f"manifest entry of {name} is {type(entry).__name__}, not an object")
            if not _is_count(entry.get("bytes")):
                raise ValueError(f"manifest gives {name} a size of {entry.get('bytes')!r}")
            if entry["bytes"] > self.max_file_bytes:
                raise ValueError(f"manifest gives {name} {entry['bytes']} bytes, more than the {self.max_file_bytes} accepted")
            if not isinstance(entry.get("sha256"), str) or not _SHA256.match(entry["sha256"]):
                raise ValueError(f"manifest gives {name} no valid sha256")
        for name in _REQUIRED_FILES[layout]:
            if name not in files:
                raise ValueError(f"manifest lists no {name}")
        manifest["layout"] = layout
        return manifest

    def _open_listed(self, path: Path, name: str, entry: dict[str, Any]) -> int:
        """A descriptor of a listed file after the regular-file and size checks (not yet hashed)."""
        try:
            fd, size = open_regular(path / name, self.max_file_bytes)
        except FileNotFoundError:
            raise ValueError(f"{name} missing") from None
        except UnsafeFileError as e:
            raise ValueError(str(e)) from None
        if size != entry["bytes"]:
            os.close(fd)
            raise ValueError(f"{name} has {size} bytes, manifest says {entry['bytes']}")
        return fd

    def verify(self, path: Path, names: list[str] | None = None) -> dict[str, Any]:
        """Check every file the manifest lists (a regular file, its size and sha256); returns the manifest.

        ``names``: check only these listed files (the ranks of a job each check a share).
        Raises ``ValueError`` naming the first problem. Reads every byte once.
        """
        manifest = self.manifest(path)
        for name, entry in manifest["files"].items():
            if names is not None and name not in names:
                continue
            sha = hashlib.sha256()
            with os.fdopen(self._open_listed(path, name, entry), "rb") as fh:
                while chunk := fh.read(_HASH_CHUNK):
                    sha.update(chunk)
            if sha.hexdigest() != entry["sha256"]:
                raise ValueError(f"{name} sha256 mismatch")
        return manifest

    def read_listed(self, path: Path, name: str, manifest: dict[str, Any] | None = None) -> bytes:
        """The bytes of one listed file, checked against the manifest; raises ``ValueError`` if damaged."""
        manifest = manifest if manifest is not None else self.manifest(path)
        entry = manifest["files"].get(name)
        if entry is None:
            raise ValueError(f"manifest lists no {name}")
        with os.fdopen(self._open_listed(path, name, entry), "rb") as fh:
            data = fh.read(entry["bytes"] + 1)
        if len(data) != entry["bytes"]:
            raise ValueError(f"{name} has {len(data)} bytes, manifest says {entry['bytes']}")
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ValueError(f"{name} sha256 mismatch")
        return data

    def read_verified(self, path: Path) -> bytes:
        """The bytes of ``state.pt`` after checking the manifest; raises ``ValueError`` if damaged."""
        manifest = self.manifest(path)
        if manifest["layout"] != LAYOUT_TORCH:
            raise ValueError(f"layout {manifest['layout']!r} has no {STATE_FILE}")
        return self.read_listed(path, STATE_FILE, manifest)

    def load(self, path: Path) -> dict[str, Any]:
        """Load a verified checkpoint onto the CPU. No layout can run code: every pickle passes
        an explicit allow-list first (:mod:`goodputlab.safe_unpickle`), then ``weights_only=True``."""
        from .safe_unpickle import safe_torch_load

        manifest = self.manifest(path)
        if manifest["layout"] == LAYOUT_DCP:
            from .dcp_checkpoint import load_dcp_checkpoint

            self.verify(path)
            return load_dcp_checkpoint(path, files=manifest["files"], max_file_bytes=self.max_file_bytes)
        if manifest["layout"] == LAYOUT_DCP_SHARDED:  # written by the ranks of a distributed job: read whole here
            from .distributed.sharded import load_unsharded

            self.verify(path)
            return load_unsharded(path, files=manifest["files"], max_file_bytes=self.max_file_bytes)
        return safe_torch_load(self.read_verified(path), STATE_FILE)

    def load_newest_valid(
        self,
        on_invalid: Callable[[Checkpoint, str], None] | None = None,
        accept: Callable[[Checkpoint, dict[str, Any]], None] | None = None,
    ) -> tuple[Checkpoint, dict[str, Any]] | None:
        """The newest checkpoint that verifies and loads, or ``None``.

        ``accept(checkpoint, state)`` may raise ``ValueError`` to refuse a state that
        loaded but cannot be used (see :func:`check_training_state`). Each damaged or
        refused one is reported through ``on_invalid(checkpoint, reason)`` and a
        :class:`CheckpointWarning`, then skipped.
        """
        for c in self.list():
            try:
                state = self.load(c.path)
                if accept is not None:
                    accept(c, state)
            except Exception as e:  # damaged in any way: verified bytes that still fail to unpickle
                reason = str(e) or type(e).__name__
                warnings.warn(f"skipping damaged checkpoint {c.path.name}: {reason}", CheckpointWarning, stacklevel=2)
                if on_invalid:
                    on_invalid(c, reason)
                continue
            return c, state
        return None

    def newest_valid_step(self) -> int:
        """Step of the newest checkpoint that verifies (0 when there is none); reads but does not unpickle."""
        for c in self.list():
            try:
                self.verify(c.path)
            except (ValueError, OSError):
                continue
            return c.step
        return 0


# --- complete training state -------------------------------------------------------------
def capture_rng() -> dict[str, Any]:
    """Every RNG the training touches, in a form ``torch.load(weights_only=True)`` accepts."""
    import torch

    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "name": np_state[0],
            "keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng(state: dict[str, Any]) -> None:
    import torch

    random.setstate(_as_tuple(state["python"]))
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(x):
    return tuple(_as_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def capture_state(model, optimizer, scheduler, step: int, data_position: dict[str, Any]) -> dict[str, Any]:
    """The complete state after ``step`` steps: enough to continue bit-exactly."""
    return {
        "format": FORMAT_VERSION,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "data": data_position,
        "rng": capture_rng(),
    }


def check_training_state(state: Any, step: int, model, optimizer=None) -> None:
    """Raise ``ValueError`` unless ``state`` is a complete training state of ``model`` after ``step`` steps.

    Checked before anything is applied (so a refused checkpoint leaves the live objects
    untouched): the keys :func:`capture_state` writes, the step, and every model tensor's
    name, shape and dtype. A checkpoint that verifies but fails this is skipped like a
    damaged one.
    """
    import torch

    if not isinstance(state, dict):
        raise ValueError(f"the state is a {type(state).__name__}, not a training state")
    missing = [k for k in ("step", "model", "optimizer", "scheduler", "data", "rng") if k not in state]
    if missing:
        raise ValueError(f"the state has no {', '.join(missing)}")
    if not _is_count(state["step"]) or state["step"] != step:
        raise ValueError(f"the state is of step {state['step']!r}, its checkpoint of step {step}")
    if not isinstance(state["data"], dict) or not _is_count(state["data"].get("batch_size")):
        raise ValueError("the state has no data position")
    for key in ("optimizer", "scheduler", "rng"):
        if not isinstance(state[key], dict):
            raise ValueError(f"the state's {key} is a {type(state[key]).__name__}")
    if not {"python", "numpy", "torch"} <= set(state["rng"]):
        raise ValueError("the state lacks an RNG state")
    expected, got = model.state_dict(), state["model"]
    if not isinstance(got, dict) or set(got) != set(expected):
        raise ValueError("the state's model has other parameters than this model")
    for name, t in expected.items():
        v = got[name]
        if not isinstance(v, torch.Tensor) or v.shape != t.shape or v.dtype != t.dtype:
            raise ValueError(f"the state's {name} does not match this model")
    if optimizer is not None:
        groups = state["optimizer"].get("param_groups")
        live = optimizer.state_dict()["param_groups"]
        if (
            not isinstance(state["optimizer"].get("state"), dict)
            or not isinstance(groups, list)
            or len(groups) != len(live)
            or any(not isinstance(g, dict) or len(g.get("params") or ()) != len(h["params"]) for g, h in zip(groups, live))
        ):
            raise ValueError("the state's optimizer does not match this optimizer")


def apply_state(state: dict[str, Any], model, optimizer, scheduler) -> int:
    """Load ``state`` into the live objects; returns the step to continue from."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    restore_rng(state["rng"])
    return int(state["step"])


# --- strategies ----------------------------------------------------------------------------
class SyncCheckpointer:
    """The baseline: serialise and persist while training waits.

    ``on_commit(step, tier="disk")`` is called once the checkpoint is durable.
    """

    name = "sync"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None]):
        self.store = store
        self.on_commit = on_commit
        self.saves = 0
        self.last_blocking_s = 0.0

    def save(self, state: dict[str, Any], step: int) -> None:
        t = time.perf_counter()
        self.store.save(state, step)
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1
        self.on_commit(step, tier="disk")

    @property
    def in_flight(self) -> bool:
        return False

    def finalize(self) -> None:
        """Wait for saves in flight (none: sync saves finish before returning)."""

    def close(self) -> None:
        pass


def make_checkpointer(
    strategy: str,
    store: CheckpointStore,
    on_commit: Callable[..., None],
    memory_tier=None,
    memory_disk_every: int = 4,
):
    """The checkpointer of ``strategy`` (``sync``, ``async``, ``dcp`` or ``memory``).

    Every checkpointer has ``save(state, step)`` (returns when training may
    continue), ``finalize()`` (returns when the newest save is durable) and
    ``close()``, and calls ``on_commit(step, tier=...)`` when a save is complete.
    ``memory`` needs ``memory_tier`` (a :class:`~goodputlab.memory_checkpoint.MemoryTier`)
    and writes every ``memory_disk_every``-th save to disk too.
    """
    if strategy == "sync":
        return SyncCheckpointer(store, on_commit)
    if strategy == "async":
        from .async_checkpoint import AsyncCheckpointer

        return AsyncCheckpointer(store, on_commit)
    if strategy == "dcp":
        from .dcp_checkpoint import DcpCheckpointer

        return DcpCheckpointer(store, on_commit)
    if strategy == "memory":
        from .memory_checkpoint import MemoryCheckpointer

        if memory_tier is None:
            raise ValueError("the memory strategy needs a MemoryTier (the supervisor's RAM directory)")
        return MemoryCheckpointer(store, on_commit, memory_tier, disk_every=memory_disk_every)
    raise ValueError(f"unknown checkpoint strategy {strategy!r}")


def load_newest(
    store: CheckpointStore,
    memory_tier=None,
    on_invalid: Callable[[Checkpoint, str], None] | None = None,
    device=None,
    accept: Callable[[Checkpoint, dict[str, Any]], None] | None = None,
) -> tuple[Checkpoint, dict[str, Any]] | None:
    """The newest valid state: the RAM tier's snapshot when there is one at least as new
    as the newest disk checkpoint, else the newest valid disk checkpoint.

    ``device``: where the RAM tier puts back the tensors that were saved from a device
    of that type (see :meth:`MemoryTier.load`); disk checkpoints load onto the CPU.

    A damaged RAM snapshot is reported like a damaged disk checkpoint
    (``on_invalid`` and a :class:`CheckpointWarning`) and restore falls back to disk.
    Restoring from RAM reads no checkpoint file on disk (it only lists the directory).
    ``accept`` refuses a loaded state as in :meth:`CheckpointStore.load_newest_valid`.
    """
    if memory_tier is not None and memory_tier.has_snapshot():
        listed = store.list()
        candidate = memory_tier.checkpoint()
        # step -1: current.json is unreadable; load() reports the damage
        if candidate is not None and (candidate.step < 0 or not listed or candidate.step >= listed[0].step):
            try:
                found = memory_tier.load(device)
                if found is not None and accept is not None:
                    accept(*found)
            except Exception as e:  # damaged in any way
                reason = str(e) or type(e).__name__
                warnings.warn(f"skipping damaged RAM snapshot {candidate.path.name}: {reason}", CheckpointWarning, stacklevel=2)
                if on_invalid:
                    on_invalid(candidate, reason)
            else:
                if found is not None:
                    return found
    return store.load_newest_valid(on_invalid, accept)
