"""The RAM tier of the memory strategy: two slots in ``/dev/shm`` that outlive the worker, written and read.

Where the tier lives, who owns it and how its files are laid out: :mod:`goodputlab.checkpoints.ram_tier_layout`
(its names are importable from here too).

A save copies the state into the slot that is *not* current (the blocking part:
one memcpy, or a device-to-host copy); the background writer then checksums
it, writes its meta file and points ``current.json`` at it. A kill at any moment
leaves ``current.json`` naming a complete, checksummed slot. The strategy that
saves into it, with a disk copy every k-th save, is
:mod:`goodputlab.checkpoints.strategies.memory`.

Safety: every file of the tier is read only as a regular file of a sane size
(never through a link), and the meta file passes the torch-archive allow-list
(:mod:`goodputlab.checkpoints.safe_unpickle`) before ``torch.load(weights_only=True)``.

Integrity: restore checks the meta file's sha256 and the data's CRC-32s (fast:
several GB/s, and they detect accidental damage such as a stray write or a
flipped bit; the disk tier's sha256 is the slower, stronger check). The checksums
are computed by a helper thread while the tensors are copied out, so verifying
costs little beyond the copy. A missing or damaged RAM
snapshot is reported as ``ckpt_invalid`` with ``tier="memory"`` and restore
falls back to the newest valid disk checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import mmap
import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..safe_io import UnsafeFileError, default_max_file_bytes, open_regular, read_regular, write_atomic
from .ram_tier_layout import (
    CRC_CHUNK_BYTES,
    CURRENT,
    MEMORY_TIER_ENV,
    OWNER_LOCK,
    SHM_DIR_ENV,
    choose_memory_root,
    chunk_crcs,
    create_memory_tier_dir,
    free_bytes,
    memory_root,
    remove_memory_tier_dir,
    slot_layout,
    sweep_stale_memory_tiers,
    tier_bytes,
)
from .safe_unpickle import safe_torch_load
from .store import Checkpoint

# the tier's layout is importable from here, as it was before it had a module of its own
__all__ = [
    "CRC_CHUNK_BYTES", "CURRENT", "MEMORY_TIER_ENV", "OWNER_LOCK", "SHM_DIR_ENV", "MemoryTier", "choose_memory_root",
    "chunk_crcs", "create_memory_tier_dir", "free_bytes", "memory_root", "remove_memory_tier_dir", "slot_layout",
    "sweep_stale_memory_tiers", "tier_bytes",
]

_CRC_THREADS = 2  # helper threads that checksum the chunks a restore has copied
_CURRENT_MAX_BYTES = 64 << 10
_META_MAX_BYTES = 256 << 20


# --- the two slots, checked, written and read --------------------------------------------------
def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check_meta(meta: Any, slot: int, max_bytes: int) -> int:
    """Refuse a slot meta file that does not describe tensors inside its data file; returns the data's size."""
    import torch

    where = f"slot-{slot}.meta"
    if not isinstance(meta, dict) or not {"step", "skeleton", "index", "data_bytes", "chunk_crc32"} <= set(meta):
        raise ValueError(f"{where} holds no snapshot description")
    nbytes = meta["data_bytes"]
    if not _is_count(nbytes) or nbytes > max_bytes or not _is_count(meta["step"]):
        raise ValueError(f"{where} gives a data size of {nbytes!r}")
    crcs = meta["chunk_crc32"]
    if not isinstance(crcs, list) or len(crcs) != (nbytes + CRC_CHUNK_BYTES - 1) // CRC_CHUNK_BYTES:
        raise ValueError(f"{where} lists {len(crcs) if isinstance(crcs, list) else crcs!r} checksums for {nbytes} bytes")
    if not isinstance(meta["index"], list):
        raise ValueError(f"{where} has no tensor index")
    for e in meta["index"]:
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not isinstance(e.get("dtype"), str):
            raise ValueError(f"{where} has a malformed tensor entry")
        dtype = getattr(torch, e["dtype"], None)
        shape = e.get("shape")
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {e['dtype']!r}")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise ValueError(f"{where} gives {e['name']} no valid shape")
        off, size = e.get("offset"), e.get("nbytes")
        if not (_is_count(off) and _is_count(size)) or size != math.prod(shape) * dtype.itemsize or off + size > nbytes:
            raise ValueError(f"{where} places {e['name']} outside the data")
    return nbytes



class _MappedSlot:
    """One slot's data file, memory-mapped read-write, with a tensor view per state tensor."""

    def __init__(self, path: Path, index: list[dict[str, Any]], nbytes: int):
        import torch

        self.index, self.nbytes = index, nbytes
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size != max(nbytes, 1):
                os.ftruncate(fd, max(nbytes, 1))
                # reserve the pages now: on a full tmpfs a write into a sparse mapping is a SIGBUS,
                # a reservation that does not fit is a clean OSError (ENOSPC)
                if hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(fd, 0, max(nbytes, 1))
            self.mm = mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)  # the mapping keeps the memory; no descriptor stays open per slot
        self.views = {}
        for e in index:
            dtype = getattr(torch, e["dtype"])
            count = e["nbytes"] // dtype.itemsize
            if count == 0:
                self.views[e["name"]] = torch.empty(e["shape"], dtype=dtype)
            else:
                self.views[e["name"]] = torch.frombuffer(self.mm, dtype=dtype, count=count, offset=e["offset"]).view(e["shape"])

    def matches(self, tensors) -> bool:
        return len(tensors) == len(self.views) and all(
            name in self.views and self.views[name].shape == t.shape and self.views[name].dtype == t.dtype
            for name, t in tensors.items()
        )

    def close(self) -> None:
        self.views.clear()  # the views export the mapping's buffer; drop them before closing it
        self.mm.close()


def _copy_out_verified(mm: mmap.mmap, meta: dict, nbytes: int, target, slot: int, into=None) -> dict[str, Any]:
    """Every tensor of a slot copied out of its mapping (to ``target`` when it was saved from a device of
    that type, else to the CPU), each chunk's CRC-32 checked; ``ValueError`` on the first mismatch.

    Helper threads checksum the chunks already copied, which are still in the CPU cache:
    verification overlaps the copy instead of adding a second pass over the memory. Nothing is
    returned unless every chunk matches. ``into``: tensors allocated (and touched) ahead, by
    name; a tensor of the same shape, dtype and device is copied into, not allocated.
    """
    import torch

    expected = meta["chunk_crc32"]
    tensors = {}
    checks, view = [], None
    try:
        with ThreadPoolExecutor(max_workers=_CRC_THREADS) as helper:
            submitted = 0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "buffer is not writable": we only read, then copy
                for e in meta["index"]:
                    dtype = getattr(torch, e["dtype"], None)
                    if not isinstance(dtype, torch.dtype):
                        raise ValueError(f"unknown dtype {e['dtype']!r}")
                    count = e["nbytes"] // dtype.itemsize
                    where = target if e.get("device", "cpu") == target.type else torch.device("cpu")
                    if count == 0:
                        tensors[e["name"]] = torch.empty(e["shape"], dtype=dtype, device=where)
                        continue
                    view = torch.frombuffer(mm, dtype=dtype, count=count, offset=e["offset"])
                    dst = (into or {}).get(e["name"])
                    if dst is not None and dst.shape == tuple(e["shape"]) and dst.dtype == dtype and dst.device == where:
                        tensors[e["name"]] = dst.copy_(view.view(e["shape"]))  # into memory touched ahead
                    else:
                        tensors[e["name"]] = view.view(e["shape"]).to(where, copy=True)
                    del view
                    done = (e["offset"] + e["nbytes"]) // CRC_CHUNK_BYTES  # chunks wholly copied so far
                    if done > submitted:
                        checks.append((submitted, helper.submit(chunk_crcs, mm, nbytes, submitted, done)))
                        submitted = done
                checks.append((submitted, helper.submit(chunk_crcs, mm, nbytes, submitted)))
                for first, future in checks:
                    for i, crc in enumerate(future.result(), start=first):
                        if crc != expected[i]:
                            raise ValueError(f"slot-{slot}.data CRC-32 mismatch in bytes {i * CRC_CHUNK_BYTES}+")
    finally:
        checks.clear()
        view = None  # noqa: F841 a view left by an error would keep the mapping exported (its close would fail)
    return tensors


class MemoryTier:
    """Two slots of training state in a RAM directory, the newest complete one named by ``current.json``.

    Writers call :meth:`copy_in` (blocking: copy into the free slot) and then
    :meth:`publish` (checksum, meta file, switch ``current.json``). Readers
    call :meth:`load`. One writer at a time (the training worker).
    """

    def __init__(self, root: Path | str, max_file_bytes: int | None = None):
        self.root = Path(root)
        if self.root.is_symlink() or not self.root.is_dir():
            raise FileNotFoundError(f"RAM tier {self.root} does not exist (the supervisor creates it)")
        self.max_file_bytes = max_file_bytes if max_file_bytes is not None else default_max_file_bytes()
        self._slots: dict[int, _MappedSlot] = {}
        # Made ahead by warm() (a hot spare waiting for the job), each used by one load():
        self._warm: dict[str, Any] = {}  # memory a restore copies into, allocated and touched
        self._warm_layout: tuple | None = None
        self._warm_meta: tuple[str, Any] | None = None  # (sha256, parsed meta) of the newest snapshot
        self._mapped: dict[int, tuple[tuple[int, int], mmap.mmap]] = {}  # slot -> ((inode, size), mapping)

    # --- reading --------------------------------------------------------------------------
    def current(self) -> dict[str, Any] | None:
        """The parsed ``current.json`` (slot, step, ...) or ``None`` when no snapshot was published.

        A damaged one reads as ``{"slot": None, "step": -1, "damaged": why}``.
        """
        try:
            cur = json.loads(read_regular(self.root / CURRENT, _CURRENT_MAX_BYTES).decode("utf-8"))
        except FileNotFoundError:
            return None
        except UnsafeFileError as e:
            return {"slot": None, "step": -1, "damaged": f"current.json refused: {e}"}
        except (OSError, ValueError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return {"slot": None, "step": -1, "damaged": "current.json unreadable"}
        if not isinstance(cur, dict) or cur.get("slot") not in (0, 1) or not _is_count(cur.get("step")):
            return {"slot": None, "step": -1, "damaged": "current.json names no slot and step"}
        return cur

    def has_snapshot(self) -> bool:
        return os.path.lexists(self.root / CURRENT)

    def checkpoint(self) -> Checkpoint | None:
        """The newest RAM snapshot as a :class:`Checkpoint` (``tier="memory"``), unverified."""
        cur = self.current()
        if cur is None:
            return None
        return Checkpoint(cur["step"], self.root / f"slot-{cur['slot']}", tier="memory")

    def load(self, device=None) -> tuple[Checkpoint, dict[str, Any]] | None:
        """Verify and load the newest snapshot; ``None`` if there is none.

        Each tensor is copied out of the slot once: to ``device`` when it was saved
        from a device of that type (a GPU run's weights and optimizer moments go
        straight back to device memory, with no host copy in between), else to the
        CPU. Raises ``ValueError`` naming the damage (meta file checksum, data size
        or CRC-32, unknown dtype). The tensors are private copies: nothing the
        training does later writes into the RAM tier.
        """
        import torch

        from .snapshot import unflatten

        cur = self.current()
        if cur is None:
            return None
        if cur.get("damaged"):
            raise ValueError(cur["damaged"])
        slot = cur.get("slot")
        if slot not in (0, 1):
            raise ValueError(f"current.json names slot {slot!r}")
        meta = self._read_meta(slot, cur.get("meta_sha256"))
        nbytes = _check_meta(meta, slot, self.max_file_bytes)
        mm, mapped_ahead = self._map_data(slot, nbytes)
        target = torch.device(device) if device is not None else torch.device("cpu")
        warm, self._warm, self._warm_layout = self._warm, {}, None  # warm memory serves one restore
        try:
            tensors = _copy_out_verified(mm, meta, nbytes, target, slot, into=warm)
        finally:
            if not mapped_ahead:
                mm.close()  # (a mapping made ahead is closed with the tier, after the restore)
        ckpt = Checkpoint(int(meta["step"]), self.root / f"slot-{slot}", tier="memory")
        return ckpt, unflatten(meta["skeleton"], tensors)

    def _read_meta(self, slot: int, sha256: str | None) -> Any:
        """A slot's meta file, checked against the sha256 ``current.json`` gives, loaded through the allow-list."""
        try:
            meta_bytes = read_regular(self.root / f"slot-{slot}.meta", min(_META_MAX_BYTES, self.max_file_bytes))
        except FileNotFoundError:
            raise ValueError(f"slot-{slot}.meta missing") from None
        except UnsafeFileError as e:
            raise ValueError(str(e)) from None
        if hashlib.sha256(meta_bytes).hexdigest() != sha256:
            raise ValueError(f"slot-{slot}.meta sha256 mismatch")
        ahead, self._warm_meta = self._warm_meta, None
        if ahead is not None and ahead[0] == sha256:
            return ahead[1]  # parsed ahead (warm) from bytes with this very sha256
        return safe_torch_load(meta_bytes, f"slot-{slot}.meta")

    def _map_data(self, slot: int, nbytes: int) -> tuple[mmap.mmap, bool]:
        """A read-only mapping of a slot's data file (a regular file of at least ``nbytes``), and whether
        it is one made ahead (:meth:`warm`: its pages already faulted in; the tier closes it)."""
        try:
            fd, size = open_regular(self.root / f"slot-{slot}.data", self.max_file_bytes)
        except FileNotFoundError:
            raise ValueError(f"slot-{slot}.data missing") from None
        except UnsafeFileError as e:
            raise ValueError(str(e)) from None
        try:
            if size < nbytes:
                raise ValueError(f"slot-{slot}.data has {size} bytes, needs {nbytes}")
            ahead = self._mapped.get(slot)
            if ahead is not None and ahead[0] == (os.fstat(fd).st_ino, size):
                return ahead[1], True
            return mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ), False
        finally:
            os.close(fd)

    def warm(self, device=None) -> int:
        """Get ready for a fast :meth:`load`: parse the newest snapshot's meta, map the slots, and
        allocate and touch the memory a restore copies into.

        A restore in a fresh process pays for its memory: every new page is a fault, and on a busy
        machine that costs as much as copying the page. A hot spare
        (:mod:`goodputlab.recovery.standby`) calls this while it waits, again whenever a new
        snapshot is published, so its restore is a checked copy into warm memory (the meta file is
        still read and its sha256 checked; every chunk's CRC-32 still is). Returns the bytes held
        ready (0 without a readable snapshot). Cheap when nothing changed.
        """
        import torch

        cur = self.current()
        if cur is None or cur.get("damaged"):
            return 0
        if self._warm_meta is None or self._warm_meta[0] != cur.get("meta_sha256"):
            try:
                meta = self._read_meta(cur["slot"], cur.get("meta_sha256"))
                _check_meta(meta, cur["slot"], self.max_file_bytes)
            except (OSError, ValueError):
                return 0  # being replaced, or damaged: load() will say so
            self._warm_meta = (cur["meta_sha256"], meta)
        meta = self._warm_meta[1]
        self._map_ahead()
        target = torch.device(device) if device is not None else torch.device("cpu")
        layout = tuple((e["name"], tuple(e["shape"]), e["dtype"], e.get("device", "cpu")) for e in meta["index"])
        if layout != self._warm_layout:
            warm = {}
            for name, shape, dtype, dev in layout:
                where = target if dev == target.type else torch.device("cpu")
                warm[name] = torch.zeros(shape, dtype=getattr(torch, dtype), device=where)  # zeros: every page touched
            self._warm, self._warm_layout = warm, layout
        return sum(t.numel() * t.element_size() for t in self._warm.values())

    def _map_ahead(self) -> None:
        """Map both slots' data files read-only, their pages faulted in, for :meth:`load` (kept while
        the files stay the same)."""
        for slot in (0, 1):
            try:
                fd, size = open_regular(self.root / f"slot-{slot}.data", self.max_file_bytes)
            except (OSError, UnsafeFileError):
                continue
            try:
                key = (os.fstat(fd).st_ino, size)
                if (slot in self._mapped and self._mapped[slot][0] == key) or size == 0:
                    continue
                mm = mmap.mmap(fd, size, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), mmap.PROT_READ)
            finally:
                os.close(fd)
            old = self._mapped.pop(slot, None)
            if old is not None:
                old[1].close()
            self._mapped[slot] = (key, mm)

    # --- writing --------------------------------------------------------------------------
    def free_slot(self) -> int:
        """The slot that does not hold the current snapshot (the one a save may overwrite)."""
        cur = self.current()
        return 1 if cur is not None and cur.get("slot") == 0 else 0

    def copy_in(self, slot: int, tensors) -> dict:
        """Copy ``tensors`` into ``slot`` (the blocking part of a save); returns the slot's views of them."""
        import torch

        mapped = self._slots.get(slot)
        if mapped is None or not mapped.matches(tensors):
            if mapped is not None:
                mapped.close()
            index, nbytes = slot_layout(tensors)
            mapped = self._slots[slot] = _MappedSlot(self.root / f"slot-{slot}.data", index, nbytes)
        with torch.no_grad():
            for name, t in tensors.items():
                mapped.views[name].copy_(t.detach())
        return dict(mapped.views)

    def publish(self, slot: int, step: int, skeleton: Any, **extra: Any) -> None:
        """Checksum ``slot``, write its meta file and make it the current snapshot (atomic switch)."""
        import torch

        mapped = self._slots[slot]
        meta = {
            "step": step,
            "skeleton": skeleton,
            "index": mapped.index,
            "data_bytes": mapped.nbytes,
            "chunk_crc32": chunk_crcs(mapped.mm, mapped.nbytes),
        }
        buf = io.BytesIO()
        torch.save(meta, buf)
        meta_bytes = buf.getvalue()
        # tmpfs lives in RAM: atomic renames, nothing to fsync; never written through a planted link
        write_atomic(self.root / f"slot-{slot}.meta", meta_bytes, fsync=False, mode=0o600)
        current = {
            "slot": slot,
            "step": step,
            "meta_sha256": hashlib.sha256(meta_bytes).hexdigest(),
            "data_bytes": mapped.nbytes,
            "published_unix": time.time(),
            **extra,
        }
        write_atomic(self.root / CURRENT, json.dumps(current).encode(), fsync=False, mode=0o600)

    def slot_bytes(self) -> int:
        """Bytes of RAM the slot files take (both slots)."""
        return sum(p.stat().st_size for p in self.root.glob("slot-*.data"))

    def close(self) -> None:
        """Unmap the slots (the files stay: they belong to the supervisor)."""
        for mapped in self._slots.values():
            mapped.close()
        self._slots.clear()
        for _, mm in self._mapped.values():
            mm.close()
        self._mapped.clear()
