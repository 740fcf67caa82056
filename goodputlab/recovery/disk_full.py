"""A full disk during a save, for real: ``ENOSPC`` from the kernel, not an exception we raise.

``--failure-mode disk-full`` fills the file system that holds the checkpoints with a
*ballast* file (:func:`fill`), leaving room for the event log and the worker's log but
not for a checkpoint. The next save fails with ``ENOSPC`` from the kernel; the store
removes what it had written, the previous checkpoint stays the newest valid one, the
worker reports the failed save (a ``ckpt_failed`` event and its log) and trains on;
the supervisor then removes the ballast (:func:`release`, an operator freeing space)
and the next save succeeds.

Filling a real disk would hurt everything else on the machine, so :func:`fill` refuses
a file system larger than :data:`MAX_FILL_BYTES`: put the run's folder on a small one.
Where the machine allows it (root), :func:`small_filesystem` mounts a size-limited
tmpfs for that; elsewhere a user and mount namespace (``unshare --user --map-root-user
--mount``) gives the same inside it.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from contextlib import contextmanager, nullcontext
from pathlib import Path

from ..safe_io import directory_lock

BALLAST = ".goodputlab-ballast"  # the file that fills the disk, in the run folder
MAX_FILL_BYTES = 4 << 30  # never fill a file system larger than this (a real disk, not a test's)
_CHUNK = 1 << 20


class FillRefused(ValueError):
    """The file system is too large to be filled safely (or cannot be measured)."""


def free_bytes(path: Path | str) -> int:
    """Bytes an unprivileged writer can still write on the file system of ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def size_bytes(path: Path | str) -> int:
    """Total bytes of the file system of ``path``."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def leave_for(state_bytes: int) -> int:
    """How much room a fill leaves: enough for the logs of a few hundred steps, less than a checkpoint.

    A quarter of the state (a checkpoint needs all of it), between 64 KiB and 4 MiB.
    """
    return max(64 << 10, min(4 << 20, state_bytes // 4))


def fill(directory: Path | str, leave_bytes: int, max_fs_bytes: int = MAX_FILL_BYTES,
         between_saves_of: Path | str | None = None) -> tuple[Path, int]:
    """Fill the file system of ``directory`` until ``leave_bytes`` or fewer are free.

    Writes :data:`BALLAST` in ``directory`` (created new; an old one is replaced) and
    returns ``(path, bytes written)``. Raises :class:`FillRefused` for a file system
    larger than ``max_fs_bytes``. ``between_saves_of``: a checkpoint folder whose saves
    the fill waits for (:func:`~goodputlab.safe_io.directory_lock`). A save running during
    the fill could take the room left for the logs and still succeed: the disk would be
    left with nothing free, and the worker's next event would fail.
    """
    saves = between_saves_of is not None and Path(between_saves_of).is_dir()
    with directory_lock(between_saves_of) if saves else nullcontext():
        return _fill(Path(directory), leave_bytes, max_fs_bytes)


def _fill(directory: Path, leave_bytes: int, max_fs_bytes: int) -> tuple[Path, int]:
    total = size_bytes(directory)
    if total > max_fs_bytes:
        raise FillRefused(
            f"{directory} is on a file system of {total / 2**30:.1f} GiB; --failure-mode disk-full fills only "
            f"one of at most {max_fs_bytes / 2**30:.0f} GiB (put --out on a small one, e.g. a tmpfs "
            "mounted with size=64m)"
        )
    path = directory / BALLAST
    release(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    written = 0
    zeros = bytes(_CHUNK)
    try:
        while (room := free_bytes(directory) - leave_bytes) > 0:
            try:
                n = os.write(fd, zeros[: min(_CHUNK, room)])
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    break
                raise
            if n <= 0:
                break
            written += n
        os.fsync(fd)
    finally:
        os.close(fd)
    return path, written


def release(ballast: Path | str) -> int:
    """Remove a ballast file; returns the bytes it held (0 if there was none)."""
    ballast = Path(ballast)
    try:
        size = ballast.lstat().st_size
        ballast.unlink()
    except FileNotFoundError:
        return 0
    return size


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (root, with ``mount`` on the path)."""
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextmanager
def small_filesystem(where: Path | str, size_bytes: int):
    """Mount a tmpfs of ``size_bytes`` at ``where`` (created if needed) for the block; root only.

    Raises ``PermissionError`` where the machine does not allow it. Unmounted (lazily, so
    a process still inside cannot block it) when the block ends.
    """
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    if not can_mount():
        raise PermissionError("mounting a size-limited file system needs root (or a user namespace: unshare)")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={int(size_bytes)}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise PermissionError(f"mount -t tmpfs failed: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is ``ENOSPC``."""
    seen = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def check_fillable(out: Path | str, max_fs_bytes: int = MAX_FILL_BYTES) -> None:
    """Refuse (``ConfigError`` on ``failure_mode``) a run folder on a file system too large to fill safely.

    Checked before anything starts; ``out`` need not exist yet (its nearest existing parent is measured).
    """
    from ..errors import ConfigError

    where = Path(out).expanduser().absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        too_big = size_bytes(where) > max_fs_bytes
    except OSError:
        too_big = True
    if too_big:
        raise ConfigError(
            "failure_mode",
            "disk-full",
            f"only with --out on a file system of at most {max_fs_bytes >> 30} GiB, which it fills "
            "(a tmpfs mounted with size=64m, say); filling a real disk would hurt everything else on it",
        )
