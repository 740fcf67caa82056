"""The checkpoint store on disk: atomic commit, verification, keep-newest-k.

What a checkpoint holds (model, optimizer, LR schedule, data position, every RNG,
the step) is :mod:`goodputlab.checkpoints.state`; how and when it is written, the
strategies (:mod:`goodputlab.checkpoints.strategies`). The store only knows files.

Atomic: a checkpoint is a directory ``step-00000050/`` holding its data files
and ``manifest.json`` (format version, step, layout, and the sha256 and size of
every data file). It is written under a temporary name, every file and the
directory fsynced, then renamed into place: a reader sees a whole checkpoint or none.
Two layouts share this envelope: ``torch_save`` (one ``state.pt``, written by
the sync and async strategies and the memory strategy's disk tier) and ``dcp``
(the files of ``torch.distributed.checkpoint`` plus a small ``skeleton.pt``,
see :mod:`goodputlab.checkpoints.dcp_layout`).

Verified: restore walks the checkpoints newest first and takes the first whose
manifest parses and whose files match their checksums; a damaged one is skipped
with a warning. A checkpoint folder is input like any other (whoever can write
it can rewrite its manifest), so the reader trusts nothing in it: a file is read
only when it is a regular file (never through a link, never a FIFO or device) of
at most ``max_file_bytes``, and every pickle goes through an explicit allow-list
(:mod:`goodputlab.checkpoints.safe_unpickle`) before ``torch.load(..., weights_only=True)``,
so a checkpoint can hold tensors and plain containers but never code.

Owned: a run folder's store (:meth:`CheckpointStore.of_run`) stamps every manifest with the id of
the job that holds the folder, and lists only the checkpoints that job may restore
(:mod:`goodputlab.checkpoints.ownership`): another job's, committed into the same folder, is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .ownership import CheckpointOwner
from ..safe_io import (
    UnsafeFileError, create_new, default_max_file_bytes, directory_lock, open_regular, read_regular, remove_entry, write_all,
)

FORMAT_VERSION = 1
STATE_FILE = "state.pt"
MANIFEST = "manifest.json"
LAYOUT_TORCH = "torch_save"  # one state.pt written by torch.save
LAYOUT_DCP = "dcp"  # a torch.distributed.checkpoint directory (goodputlab.checkpoints.strategies.dcp)
LAYOUT_DCP_SHARDED = "dcp_sharded"  # written by every rank of a distributed job (goodputlab.checkpoints.dcp_sharded_layout)
_NAME = re.compile(r"^step-(\d{8,})$")
MANIFEST_MAX_BYTES = 1 << 20  # a manifest lists a handful of files: a few hundred bytes
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def state_file_cap(state_bytes: int) -> int:
    """The largest checkpoint file a run of a model whose training state is ``state_bytes`` reads (bytes): four
    times that state, and 256 MiB more. A file listed as larger is damage or an attack, refused before a byte is
    read (the machine's default, half its RAM, let a 2 GiB sparse ``state.pt`` cost 2.3 GB per torchft replica)."""
    return 4 * state_bytes + (256 << 20)


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


def _sha256_of(f) -> str:
    """The sha256 of what is left to read in the binary file ``f``, read in chunks."""
    sha = hashlib.sha256()
    while chunk := f.read(_HASH_CHUNK):
        sha.update(chunk)
    return sha.hexdigest()


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

    def __init__(self, root: Path | str, keep: int = 3, max_file_bytes: int | None = None,
                 owner: CheckpointOwner | None = None, storage_bps: float = 0.0):
        self.root = Path(root)
        self.keep = keep
        self.owner = owner
        self._ignored: set[str] = set()  # other jobs' checkpoints already warned about
        self.storage_bps = storage_bps  # > 0: emulated storage of this bandwidth (bytes/s), see pace
        self._began: dict[Path, float] = {}
        self.max_file_bytes = max_file_bytes if max_file_bytes is not None else default_max_file_bytes()
        if self.root.is_symlink():
            raise CheckpointDirError(f"{self.root} is a symbolic link: checkpoints are never read or written through one")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise CheckpointDirError(f"{self.root} exists and is not a folder") from None

    @classmethod
    def of_run(cls, run_dir: Path | str, keep: int = 3, max_file_bytes: int | None = None,
               storage_bps: float = 0.0) -> CheckpointStore:
        """The store of run folder ``run_dir`` (its ``ckpt/``), for the job that holds the folder now: what it
        commits names the job, and it sees only what that job may restore (:mod:`~goodputlab.checkpoints.ownership`).
        ``storage_bps``: emulated storage (:meth:`pace`)."""
        return cls(Path(run_dir) / "ckpt", keep, max_file_bytes, owner=CheckpointOwner.of_run(run_dir),
                   storage_bps=storage_bps)

    # --- listing -----------------------------------------------------------------
    def list(self) -> list[Checkpoint]:
        """Committed checkpoints (valid or not), newest first. Only real folders count: a link named
        like a checkpoint is neither read nor deleted. With an ``owner``, only those its job may restore
        (another job's are skipped with a :class:`CheckpointWarning`, and never pruned)."""
        found = []
        for p in self.root.iterdir():
            m = _NAME.match(p.name)
            if m and stat.S_ISDIR(os.lstat(p).st_mode) and self._restorable(p):
                found.append(Checkpoint(int(m.group(1)), p))
        return sorted(found, key=lambda c: c.step, reverse=True)

    def _restorable(self, path: Path) -> bool:
        """May the owner's job restore the checkpoint at ``path``? (A damaged manifest: listed, to be
        reported as damaged where it is read.)"""
        if self.owner is None:
            return True
        try:
            why = self.owner.refusal(self.manifest(path))
        except ValueError:
            return True
        if why is not None and path.name not in self._ignored:
            self._ignored.add(path.name)
            warnings.warn(f"ignoring checkpoint {path.name}: {why}", CheckpointWarning, stacklevel=3)
        return why is None

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
        is written (one pass over the bytes). The store's folder is locked meanwhile
        (:func:`~goodputlab.safe_io.directory_lock`).
        """
        with directory_lock(self.root):  # an injected full disk is never filled during a save
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
        self._began[tmp] = time.monotonic()
        return tmp

    def pace(self, nbytes: int, started: float | None) -> None:
        """Emulated storage: with ``storage_bps`` set, a write or read of ``nbytes`` begun at ``started``
        (monotonic seconds) ends no sooner than ``nbytes / storage_bps`` after it, as on a file system of
        that bandwidth (the lab's stand-in for a cluster's storage; the bytes are written and read for real).
        The store paces its own saves and loads; the ranks of a sharded checkpoint, who write and read its
        folder themselves, call it too (:mod:`goodputlab.distributed.sharded`)."""
        if self.storage_bps > 0 and started is not None:
            wait = nbytes / self.storage_bps - (time.monotonic() - started)
            if wait > 0:
                time.sleep(wait)

    def discard(self, tmp: Path) -> None:
        """Remove a temporary directory from :meth:`begin` after a save failed (no error if it is gone)."""
        self._began.pop(tmp, None)
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
            with open(f, "rb") as fh:
                digest = _sha256_of(fh)
                os.fsync(fh.fileno())
            files[f.relative_to(tmp).as_posix()] = {"sha256": digest, "bytes": f.stat().st_size}
        for d in sorted({p.parent for p in tmp.rglob("*")} - {tmp}):
            _fsync_dir(d)
        return self.seal(tmp, step, files, layout)

    def seal(self, tmp: Path, step: int, files: dict[str, dict[str, Any]], layout: str) -> Path:
        """Write the manifest of ``files`` (already fsynced) into ``tmp`` and rename it into place."""
        self.pace(sum(int(f["bytes"]) for f in files.values()), self._began.pop(tmp, None))
        manifest = {
            "format": FORMAT_VERSION,
            "step": step,
            "layout": layout,
            "created_unix": time.time(),
            "files": files,
        }
        if self.owner is not None:
            manifest["job_id"] = self.owner.job_id  # which job wrote it (ownership.py)
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
            with os.fdopen(self._open_listed(path, name, entry), "rb") as fh:
                digest = _sha256_of(fh)
            if digest != entry["sha256"]:
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
        an explicit allow-list first (:mod:`goodputlab.checkpoints.safe_unpickle`), then ``weights_only=True``."""
        from .safe_unpickle import safe_torch_load

        started = time.monotonic()
        manifest = self.manifest(path)
        if manifest["layout"] == LAYOUT_DCP:
            from .dcp_layout import load_dcp_checkpoint

            self.verify(path)
            state = load_dcp_checkpoint(path, files=manifest["files"], max_file_bytes=self.max_file_bytes)
        elif manifest["layout"] == LAYOUT_DCP_SHARDED:  # written by the ranks of a distributed job: read whole here
            from .dcp_sharded_layout import load_unsharded

            self.verify(path)
            state = load_unsharded(path, files=manifest["files"], max_file_bytes=self.max_file_bytes)
        else:
            state = safe_torch_load(self.read_verified(path), STATE_FILE)
        self.pace(sum(int(f["bytes"]) for f in manifest["files"].values()), started)
        return state

    def load_newest_valid(
        self,
        on_invalid: Callable[[Checkpoint, str], None] | None = None,
        accept: Callable[[Checkpoint, dict[str, Any]], None] | None = None,
    ) -> tuple[Checkpoint, dict[str, Any]] | None:
        """The newest checkpoint that verifies and loads, or ``None``.

        ``accept(checkpoint, state)`` may raise ``ValueError`` to refuse a state that
        loaded but cannot be used (see :func:`goodputlab.checkpoints.state.check_training_state`). Each damaged or
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
