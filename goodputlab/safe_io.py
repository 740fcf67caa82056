"""File primitives for everything a run folder holds: no links followed, no odd files read.

A run folder is input like any other: whoever can write it can plant a symbolic
link where the run will create a file (its target would be overwritten), or put
a FIFO or a link to ``/dev/zero`` where a reader expects a checkpoint (the read
would hang or eat memory). Every reader and writer of a run folder goes
through these functions instead of ``open`` and ``Path.write_text``:

* :func:`create_new` creates a file that did not exist, without following a
  link (``O_CREAT | O_EXCL | O_NOFOLLOW``); :func:`write_atomic` writes a whole
  file under a fresh temporary name created that way and renames it into place
  (``rename`` replaces a link planted at the final name, it never writes through it);
* :func:`open_regular` / :func:`read_regular` open a file only when it is a
  regular file (not a link, FIFO, socket, device or directory) of at most
  ``max_bytes``, and never block on open;
* :func:`write_all` writes every byte or raises (a short write to a regular file
  means the disk is full);
* :func:`remove_entry` deletes a file or a folder tree; a link is unlinked,
  its target is never touched;
* :class:`FileLock` is an exclusive ``flock`` held for as long as an object
  lives (the kernel drops it when the process dies, however it dies);
* :func:`reserve_space` sets disk space aside (a real allocation) so that a run
  can still write its summary when the disk fills up.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def default_max_file_bytes() -> int:
    """The largest checkpoint file a reader accepts unless told otherwise: half the machine's RAM."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return 64 << 30


class UnsafeFileError(ValueError):
    """A file a reader refuses: a link, not a regular file, or larger than allowed."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path | str, max_bytes: int) -> tuple[int, int]:
    """``(fd, size)`` of ``path`` opened read-only, when it is a regular file of at most ``max_bytes``.

    Raises :class:`UnsafeFileError` for a symbolic link (never followed), a FIFO,
    a device, a socket or a directory, and for a file larger than ``max_bytes``;
    ``FileNotFoundError`` when it does not exist. The open never blocks (``O_NONBLOCK``).
    """
    name = Path(path).name
    try:
        fd = os.open(path, _READ)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFileError(f"{name} is a symbolic link (never followed)") from None
        if e.errno == errno.ENXIO:  # a FIFO or socket nobody writes to
            raise UnsafeFileError(f"{name} is not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(f"{name} is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise UnsafeFileError(f"{name} has {st.st_size} bytes, more than the {max_bytes} a reader accepts")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_regular(path: Path | str, max_bytes: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes`` (see :func:`open_regular`)."""
    fd, size = open_regular(path, max_bytes)
    with os.fdopen(fd, "rb") as f:
        data = f.read(size + 1)
    if len(data) > size:
        raise UnsafeFileError(f"{Path(path).name} grew while it was read")
    return data


def create_new(path: Path | str, mode: int = 0o644) -> int:
    """A write-only descriptor of a file created now: fails if anything (a link included) is at ``path``."""
    return os.open(path, _CREATE, mode)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``; a write that makes no progress raises ``ENOSPC``."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def write_atomic(path: Path | str, data: bytes, fsync: bool = True, mode: int = 0o644) -> None:
    """Replace ``path`` with a file holding ``data``: all of it or, on any error, the old one.

    Written under a fresh temporary name in the same folder (created with
    ``O_EXCL | O_NOFOLLOW``), fsynced, then renamed over ``path``. On an error the
    temporary file is removed, so a full disk leaves nothing behind.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = create_new(tmp, mode)
    try:
        try:
            write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def is_temporary_name(name: str, final: str) -> bool:
    """Whether ``name`` is one of :func:`write_atomic`'s temporary names for a file called ``final``."""
    return name.startswith(f".{final}.") and name.endswith(".tmp")


def remove_entry(path: Path | str) -> None:
    """Delete ``path``: a folder with everything in it, a file, or a link (never the link's target)."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # never follows links inside (it unlinks them)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def is_link(path: Path | str) -> bool:
    """Whether ``path`` itself is a symbolic link (``lstat``; dangling links included)."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


class LockHeld(OSError):
    """Another process holds the lock; ``owner`` is what it wrote into the lock file (may be empty)."""

    def __init__(self, path: Path, owner: dict[str, Any]):
        self.path = path
        self.owner = owner
        super().__init__(errno.EWOULDBLOCK, f"{path} is locked by another process", str(path))


def flock_within(fd: int, timeout_s: float, poll_s: float = 0.001) -> bool:
    """Take an exclusive ``flock`` on ``fd``, waiting at most ``timeout_s`` seconds; False when it could not be
    had (its holder is stopped, or the file takes no lock): the caller goes on without it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        except OSError:
            return False


@contextmanager
def directory_lock(path: Path | str, timeout_s: float = 60.0):
    """An exclusive ``flock`` on the folder ``path`` itself (no lock file) for the block, waited for at most
    ``timeout_s`` seconds (:func:`flock_within`: then the block runs without it).

    The checkpoint store holds it on its folder while it writes a checkpoint, and an injected full disk
    (:func:`goodputlab.recovery.disk_full.fill`) takes it before filling, so the fill never runs during a
    save: a save racing the fill could take the room left for the logs and still succeed.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flock_within(fd, timeout_s, poll_s=0.002)
        yield
    finally:
        os.close(fd)  # drops the lock


class FileLock:
    """An exclusive, non-blocking ``flock`` on ``path``, created if missing (a link is refused).

    Held until :meth:`release` or until the process dies, however it dies: the kernel
    drops the lock with the last descriptor, so a SIGKILLed owner never leaves a stale
    lock, in any PID namespace. The descriptor is close-on-exec: child processes do
    not inherit the lock. Raises :class:`LockHeld` when another process holds it,
    :class:`UnsafeFileError` when ``path`` is a link or not a regular file.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafeFileError(f"{self.path.name} is a symbolic link (never followed)") from None
            if e.errno == errno.ENXIO:
                raise UnsafeFileError(f"{self.path.name} is not a regular file") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeFileError(f"{self.path.name} is {_kind(st.st_mode)}, not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockHeld(self.path, _read_owner(fd)) from None
        except BaseException:
            os.close(fd)
            raise
        self.fd: int | None = fd

    def write_owner(self, **info: Any) -> None:
        """Record who holds the lock (shown to a process that finds it held)."""
        if self.fd is None:
            return
        data = json.dumps(info, sort_keys=True).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        owner = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def hold_new_lock(directory: Path | str, name: str, replace: bool = True) -> int:
    """Create ``directory/name`` already locked (``flock``) by this process; returns the descriptor.

    The file is created and locked under a temporary name, then put in place, so anyone
    who finds ``name`` finds it locked for as long as its creator lives. ``replace``:
    renamed over whatever holds the name; otherwise linked into place, and
    ``FileExistsError`` when the name is taken (a claim that two processes cannot both win).
    """
    directory = Path(directory)
    tmp = directory / f".{name}.{uuid.uuid4().hex[:12]}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if replace:
            os.rename(tmp, directory / name)
            return fd
        os.link(tmp, directory / name)  # fails if the name exists, never replaces it
    except BaseException:
        os.close(fd)
        _unlink_if_there(tmp)
        raise
    _unlink_if_there(tmp)  # the locked file lives on under ``name``
    return fd


def _unlink_if_there(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def try_lock_existing(path: Path | str) -> int | None:
    """Lock an existing lock file whose owner is gone: the descriptor (locked), or ``None``
    when the file is missing, a link, not a regular file, or held by a live process."""
    try:
        fd = os.open(path, _READ)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BlockingIOError
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, OSError):
        os.close(fd)
        return None
    return fd


def reserve_space(path: Path | str, nbytes: int) -> None:
    """Create ``path`` with ``nbytes`` of disk really allocated (``posix_fallocate``, or zeros
    where the file system cannot preallocate). Deleting it later frees that space for whatever
    must be written when the disk is otherwise full. Raises ``OSError`` (``ENOSPC``) when there
    is not that much free space; nothing is left behind then."""
    fd = create_new(path, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            write_all(fd, bytes(nbytes))
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
