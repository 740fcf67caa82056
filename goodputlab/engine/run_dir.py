"""The run folder (``--out``): which folders a run may use, the lock that makes it one run's, and cleanup.

A run writes ``config.json``, ``events.jsonl``, ``summary.json``, ``ckpt/`` and
``logs/`` (and, with several ranks, ``ranks/``) (and keeps the generated data in ``data/``). Rules, so that a run
never deletes what it did not create:

* a new or empty folder is used as it is;
* a folder of an earlier goodputlab run (its :data:`MARKER` carries the run id the
  run wrote there, or, from before run ids or the marker existed, it holds the run's
  ``config.json`` and ``events.jsonl``) is reused: that run's own files are replaced,
  anything else in it is left alone; an empty marker anyone could create proves nothing;
* ``/``, the home folder and the goodputlab repository are refused, even with ``overwrite``;
* any other non-empty folder is refused, unless ``overwrite`` is set: then the
  run's own names listed above are replaced there (and nothing else is touched);
* a folder another live run holds is refused: every run holds an exclusive
  ``flock`` on :data:`MARKER` for as long as it lives (the kernel releases it
  when the process dies, however it dies).

Inside the folder nothing is written through a link (:mod:`goodputlab.safe_io`):
a link planted at one of the run's names is removed, never its target.

A full disk must not cost the summary: :meth:`RunDir.reserve` sets
:data:`RESERVE_BYTES` aside in :data:`RESERVE`, and the end of the run frees it
before writing the last events, the worker's log and ``summary.json``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from pathlib import Path

from ..checkpoints.ownership import MARKER  # marks a run folder; flock-ed by the run using it
from ..errors import ConfigError
from ..recovery.disk_full import BALLAST  # what --failure-mode disk-full fills the disk with
from ..safe_io import FileLock, LockHeld, UnsafeFileError, is_link, open_regular, remove_entry, reserve_space

RESERVE = ".goodputlab-reserve"  # disk space set aside for the end of the run
RESERVE_BYTES = 1 << 20  # the last events, the worker's log tail and summary.json: a few kB
RUN_ARTIFACTS = ("ckpt", "logs", "ranks", "events.jsonl", "summary.json", "config.json", RESERVE, BALLAST)
#: What a run replaces in its folder and adds to, as its messages say it (from RUN_ARTIFACTS: they cannot drift)
REPLACED = ", ".join(f"{name}/" if "." not in name else name for name in RUN_ARTIFACTS if not name.startswith("."))
REPLACED += " and .goodputlab-* files"
#: What a resumed run keeps of the session before: its checkpoints, and its event log and logs, which it appends to.
RESUME_KEEPS = ("ckpt", "logs", "events.jsonl")
_DATA_TEMPORARY = re.compile(r"^tokens-.*\.tmp\d+$")  # goodputlab.pipeline.loader.data_file's temporary names


def _is_earlier_run(path: Path) -> bool:
    """A run folder from before :data:`MARKER` existed: its ``config.json`` is a valid run
    configuration and its ``events.jsonl`` starts with the supervisor's ``start`` event.
    (Files that merely have those names are the user's, not a run's.)"""
    from .config import RunConfig
    from ..measure.events import SUP_START, parse_event
    from ..safe_io import read_regular

    try:
        RunConfig.from_dict(json.loads(read_regular(path / "config.json", 1 << 20)))
        fd, _ = open_regular(path / "events.jsonl", 1 << 62)
        with os.fdopen(fd, "rb") as f:
            first = f.readline(1 << 16)
        return parse_event(first.rstrip(b"\n"))["kind"] == SUP_START
    except (OSError, ValueError, TypeError):
        return False


_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


def marker_run_id(path: Path) -> str | None:
    """The run id in ``path``'s :data:`MARKER` (a regular file holding ``{"run_id": <32 hex digits>, ...}``), or ``None``.

    A marker without one (an empty file anyone could ``touch``, or a marker written before run ids existed) is not
    proof of a run folder by itself (:func:`folder_kind`)."""
    from ..safe_io import read_regular

    try:
        owner = json.loads(read_regular(path / MARKER, 4096))
    except (OSError, ValueError, UnsafeFileError):
        return None
    run_id = owner.get("run_id") if isinstance(owner, dict) else None
    return run_id if isinstance(run_id, str) and _RUN_ID.match(run_id) else None


def folder_kind(path: Path) -> str:
    """``"empty"``, ``"run"`` (a goodputlab run folder) or ``"other"`` (holds something else).

    A run folder is one whose marker carries a run id, or (a run from before run ids, or before the
    marker) one holding that run's own files: a valid ``config.json`` and an ``events.jsonl`` that
    starts as a run's. A marker that is a link counts as one, to be refused by name when it is locked.
    """
    entries = list(path.iterdir())
    if not entries:
        return "empty"
    if is_link(path / MARKER) or marker_run_id(path) is not None or _is_earlier_run(path):
        return "run"
    return "other"


def _never_a_run_folder(path: Path) -> str | None:
    """Why ``path`` (resolved) may never be a run folder, even with ``overwrite``: a run replaces files
    named ``config.json``, ``logs/``, ``ckpt/``... there."""
    repository = Path(__file__).resolve().parents[2]
    for place, what in ((Path("/"), "the root folder /"), (Path.home().resolve(), "your home folder"),
                        (repository, "the goodputlab repository")):
        if path == place:
            return what
    return None


class RunDir:
    """A run folder claimed by this process (see :func:`claim_run_dir`); :meth:`release` gives it up."""

    def __init__(self, path: Path, lock: FileLock):
        self.path = path
        self._lock = lock

    def prepare(self, keep_checkpoints: bool = False, resume: bool = False) -> None:
        """Remove the files of an earlier run (``ckpt/`` too unless ``keep_checkpoints``; with
        ``resume``, everything but :data:`RESUME_KEEPS`: the run goes on in them).

        Links at those names are unlinked, never followed; ``data/`` is kept (a pure
        function of the seed) unless it is a link.
        """
        for name in RUN_ARTIFACTS:
            if (keep_checkpoints and name == "ckpt") or (resume and name in RESUME_KEEPS and not is_link(self.path / name)):
                continue
            remove_entry(self.path / name)
        if is_link(self.path / "data"):
            remove_entry(self.path / "data")

    def reserve(self) -> None:
        """Set :data:`RESERVE_BYTES` of disk aside for the end of the run. ``OSError`` when the disk is full."""
        reserve_space(self.path / RESERVE, RESERVE_BYTES)

    def release_reserve(self) -> None:
        """Free the space set aside (before writing the end of the run)."""
        try:
            os.unlink(self.path / RESERVE)
        except FileNotFoundError:
            pass

    def remove_temporaries(self) -> list[str]:
        """Delete what interrupted writes left (``ckpt/.tmp-*``, ``ckpt/.trash-*``, half-written data
        files and summaries). Only when no worker is alive. Returns the names removed."""
        removed = []
        ckpt = self.path / "ckpt"
        if ckpt.is_dir() and not ckpt.is_symlink():
            for p in ckpt.iterdir():
                if p.name.startswith((".tmp-", ".trash-")):
                    remove_entry(p)
                    removed.append(f"ckpt/{p.name}")
        data = self.path / "data"
        if data.is_dir() and not data.is_symlink():
            for p in data.iterdir():
                if _DATA_TEMPORARY.match(p.name):
                    remove_entry(p)
                    removed.append(f"data/{p.name}")
        for p in self.path.iterdir():
            if p.name.startswith((".summary.json.", ".config.json.")) and p.name.endswith(".tmp"):
                remove_entry(p)
                removed.append(p.name)
        return removed

    def release(self) -> None:
        """Give the folder up (drop the lock); the marker stays and marks it as a run folder."""
        self._lock.release()


def claim_run_dir(out: str | Path, overwrite: bool = False, resume: bool = False) -> RunDir:
    """Check ``out`` against the rules above, create it if needed and lock it for this run.

    Raises :class:`~goodputlab.errors.ConfigError` (field ``out``) for an empty path, a
    folder that cannot be created or written, a non-empty folder that is not a goodputlab
    run (without ``overwrite``), a folder another run is using, and, with ``resume``, a
    folder that holds no run or whose ``ckpt`` is a link.
    """
    shown = str(out)
    if isinstance(out, str) and out.strip() == "":
        raise ConfigError("out", repr(out), "a folder path (an empty one would mean the current folder)")
    if str(out).startswith("-"):
        raise ConfigError("out", shown, f"a folder path (one that starts with '-' reads as a flag: write ./{out})")
    path = Path(out).expanduser()
    forbidden = _never_a_run_folder(path.resolve())
    if forbidden is not None:
        raise ConfigError("out", shown, f"a folder of the run's own, not {forbidden} (a run replaces {REPLACED} "
                          "there and adds its data set to data/), even with --overwrite")
    if resume and not path.is_dir():
        raise ConfigError("out", shown, "with --resume, the folder of an earlier goodputlab run")
    if os.path.lexists(path) and not path.is_dir():
        raise ConfigError("out", shown, "a folder (this is a file)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise NotADirectoryError(20, "not a directory")
        path = path.resolve()
        kind = folder_kind(path)
    except OSError as e:
        raise ConfigError("out", shown, f"a folder that can be created and written ({e.strerror or e})") from None
    if resume:
        if kind != "run":
            raise ConfigError("out", shown, "with --resume, the folder of an earlier goodputlab run")
        if is_link(path / "ckpt"):
            raise ConfigError("out", shown, "with --resume, a run folder whose ckpt is a folder, not a symbolic link")
    elif kind == "other" and not overwrite:
        raise ConfigError(
            "out",
            shown,
            "a new or empty folder, or the folder of an earlier goodputlab run; this one holds other files "
            f"(--overwrite replaces goodputlab's own files there, {REPLACED}, and adds its data set to data/)",
        )
    try:
        lock = FileLock(path / MARKER)
    except LockHeld as e:
        pid = e.owner.get("pid", "?")
        raise ConfigError("out", shown, f"a folder no other run is using (goodputlab pid {pid} is running in it)") from None
    except (UnsafeFileError, OSError) as e:
        why = str(e) if isinstance(e, UnsafeFileError) else (e.strerror or str(e))
        raise ConfigError("out", shown, f"a folder that can be created and written ({why})") from None
    try:  # the run id stays the folder's for as long as runs reuse it; the job id is this start's alone
        run_id = marker_run_id(path) or uuid.uuid4().hex
        lock.write_owner(run_id=run_id, job_id=uuid.uuid4().hex, resume=resume, pid=os.getpid(), host=socket.gethostname(),
                         started_unix=time.time())
    except OSError as e:
        lock.release()
        raise ConfigError("out", shown, f"a folder that can be created and written ({e.strerror or e})") from None
    return RunDir(path, lock)

