"""The RAM tier's layout: where its directory goes, who owns it, and how a slot's bytes are laid out.

In-memory checkpointing systems keep the latest state in host memory that
outlives the training process (another process, a peer's RAM, a node-local
daemon), so recovering from a process crash needs no storage read, and write
to slow storage only now and then, for failures that take the memory too.

Here the RAM tier is a directory on ``/dev/shm`` (tmpfs: files in RAM) that the
*supervisor* creates before the first worker starts and deletes when the run
ends; the worker finds it through the ``GOODPUTLAB_MEMORY_TIER`` environment
variable. A SIGKILL of the worker does not touch it, so the next worker restores
from RAM. It holds two *slots*, each one full state:

* ``slot-<i>.data``: every tensor's bytes back to back (64-byte aligned),
  memory-mapped by the worker and reused by every save;
* ``slot-<i>.meta``: ``torch.save`` of the tensor-free skeleton, the tensor
  index (name, offset, dtype, shape) and the CRC-32 of every 4 MiB chunk of the data;
* ``current.json``: which slot holds the newest *complete* snapshot, with the
  sha256 of its meta file. Replaced atomically (write, then ``os.replace``).

Ownership: the supervisor holds an exclusive ``flock`` on the tier's ``owner.lock``
for as long as it lives. A new run sweeps away only tiers whose lock it can take:
their owner is gone, however it died. Liveness is never judged by process id,
which means nothing across PID namespaces (containers).

Reading and writing the slots (:class:`~goodputlab.checkpoints.ram_tier.MemoryTier`) is
:mod:`goodputlab.checkpoints.ram_tier`. Pure: no torch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import zlib
from pathlib import Path
from typing import Any

from ..safe_io import hold_new_lock, try_lock_existing

MEMORY_TIER_ENV = "GOODPUTLAB_MEMORY_TIER"
_PREFIX = "goodputlab-mem-"
_ALIGN = 64  # bytes; keeps every tensor's offset aligned for any dtype and for vectorised copies
CRC_CHUNK_BYTES = 4 << 20  # the slot's bytes are checksummed in chunks of this size (see MemoryTier.load)
CURRENT = "current.json"
OWNER_LOCK = "owner.lock"  # flock-ed by the supervisor that owns the tier, for as long as it lives
_owned_locks: dict[str, int] = {}  # tier path -> descriptor holding its owner lock (this process's tiers)


# --- the directory's lifetime (owned by the supervisor) --------------------------------------
#: where RAM tiers go instead of /dev/shm (another tmpfs, say); the tests point it at a small one
SHM_DIR_ENV = "GOODPUTLAB_SHM_DIR"
_TIER_HEADROOM_BYTES = 8 << 20  # meta files, current.json, the lock, alignment


def memory_root() -> Path:
    """Where RAM tiers live: ``$GOODPUTLAB_SHM_DIR``, else ``/dev/shm`` when it exists (tmpfs), else
    the temporary directory."""
    configured = os.environ.get(SHM_DIR_ENV)
    if configured:
        return Path(configured)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def tier_bytes(state_bytes: int) -> int:
    """Bytes a RAM tier takes for a state of ``state_bytes``: two full slots and their files."""
    return 2 * (state_bytes + state_bytes // 50) + _TIER_HEADROOM_BYTES  # 2% for alignment and skeletons


def free_bytes(root: Path) -> int:
    """Free bytes in the file system of ``root`` (0 when it cannot be read)."""
    try:
        return shutil.disk_usage(root).free
    except OSError:
        return 0


def choose_memory_root(need_bytes: int, fallbacks: tuple[Path, ...] = ()) -> tuple[Path, str | None]:
    """A directory with room for a tier of ``need_bytes``: :func:`memory_root` when it has the room,
    else the first of ``fallbacks`` and the temporary directory that does. Returns ``(root, note)``,
    ``note`` saying why the tier is not in the preferred place (``None`` when it is).

    Containers give ``/dev/shm`` 64 MB by default (Docker, Binder): a tier that does not fit there
    would die with SIGBUS at its first save. A tier on disk still outlives a killed worker, and its
    pages stay in the page cache while memory allows; it is slower only under memory pressure.
    Raises ``OSError`` when no candidate has the room.
    """
    preferred = memory_root()
    have = free_bytes(preferred) if preferred.is_dir() and os.access(preferred, os.W_OK) else 0
    if have >= need_bytes:
        return preferred, None
    tried = [f"{preferred} ({have / 2**20:.0f} MiB free)"]
    for root in (*fallbacks, Path(tempfile.gettempdir())):
        root_free = free_bytes(root) if root.is_dir() and os.access(root, os.W_OK) else 0
        if root_free >= need_bytes:
            note = (
                f"the RAM tier needs {need_bytes / 2**20:.0f} MiB and {preferred} has {have / 2**20:.0f} MiB free "
                f"(containers give /dev/shm 64 MB unless started with --shm-size); it is in {root} instead"
            )
            return root, note
        tried.append(f"{root} ({root_free / 2**20:.0f} MiB free)")
    raise OSError(
        f"the RAM tier needs {need_bytes / 2**20:.0f} MiB and no directory has the room: {', '.join(tried)}; "
        "free some space, start the container with a larger --shm-size, or use --ckpt async"
    )


def create_memory_tier_dir(root: Path | None = None) -> Path:
    """A fresh, empty RAM-tier directory, owned (locked) by this process until :func:`remove_memory_tier_dir`.

    Stale tiers (whose owner's lock is free) are swept first.
    """
    root = root or memory_root()
    sweep_stale_memory_tiers(root)
    path = root / f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o700)
    try:
        _owned_locks[str(path)] = hold_new_lock(path, OWNER_LOCK)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def remove_memory_tier_dir(path: Path | str) -> None:
    """Delete a RAM tier and everything in it (its memory returns to the system), then drop its lock."""
    shutil.rmtree(path, ignore_errors=True)
    fd = _owned_locks.pop(str(path), None)
    if fd is not None:
        os.close(fd)


def sweep_stale_memory_tiers(root: Path | None = None) -> list[Path]:
    """Remove RAM tiers whose owner is gone: those whose ``owner.lock`` nobody holds.

    A tier whose lock is held belongs to a live supervisor, whatever its process id
    (another PID namespace may reuse it or hide it), and stays. A tier without a lock
    file is left alone too: it is being created, or nothing proves its owner dead.
    """
    root = root or memory_root()
    removed = []
    for p in root.glob(f"{_PREFIX}*"):
        if str(p) in _owned_locks or p.is_symlink() or not p.is_dir():
            continue
        fd = try_lock_existing(p / OWNER_LOCK)
        if fd is None:
            continue
        try:
            shutil.rmtree(p, ignore_errors=True)  # while holding the dead owner's lock
        finally:
            os.close(fd)
        removed.append(p)
    return removed


# --- the two slots -----------------------------------------------------------------------------
def aligned(n: int) -> int:
    """``n`` bytes rounded up to the slot's alignment (64 bytes)."""
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def slot_layout(tensors) -> tuple[list[dict[str, Any]], int]:
    """Offsets of every tensor in a slot: ``([{"name", "offset", "nbytes", "dtype", "shape", "device"}], total_bytes)``.

    ``device`` is the type of the device the tensor lived on (``cuda``, ``cpu``): a
    restore puts it back there straight from the slot (:meth:`MemoryTier.load`).
    """
    index, offset = [], 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        index.append(
            {
                "name": name,
                "offset": offset,
                "nbytes": nbytes,
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "device": t.device.type,
            }
        )
        offset += aligned(nbytes)
    return index, offset


def chunk_crcs(buf, nbytes: int, first: int = 0, last: int | None = None) -> list[int]:
    """CRC-32 of each :data:`CRC_CHUNK_BYTES` chunk of ``buf[:nbytes]``, chunks ``first`` to ``last - 1``."""
    n_chunks = (nbytes + CRC_CHUNK_BYTES - 1) // CRC_CHUNK_BYTES
    last = n_chunks if last is None else last
    with memoryview(buf) as mv:
        return [
            zlib.crc32(mv[i * CRC_CHUNK_BYTES : min(nbytes, (i + 1) * CRC_CHUNK_BYTES)])  # releases the GIL
            for i in range(first, last)
        ]
