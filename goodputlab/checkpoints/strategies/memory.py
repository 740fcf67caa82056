"""memory: the newest snapshot in a RAM tier outside the worker, a disk copy every k-th save.

In-memory checkpointing systems keep the latest state in host memory that
outlives the training process, so recovering from a process crash needs no
storage read, and write to slow storage only now and then, for failures that
take the memory too. Here the memory is the RAM tier of
:mod:`goodputlab.checkpoints.ram_tier`: a directory on ``/dev/shm`` that the
*supervisor* creates before the first worker starts (:func:`prepare_run`) and
deletes when the run ends; each worker opens it (:func:`open_tier`) and restores
from it before the disk. Every ``disk_every``-th save (``--memory-disk-every``),
and the final state of the run, is also written to the disk store from the slot,
in the background.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from ...measure.events import M_MEMORY_TIER
from ..background import BackgroundCheckpointer
from ..ram_tier import (
    MEMORY_TIER_ENV,
    MemoryTier,
    choose_memory_root,
    create_memory_tier_dir,
    free_bytes,
    remove_memory_tier_dir,
    tier_bytes,
)
from ..store import CheckpointStore
from ..registry import RunResource


class MemoryCheckpointer(BackgroundCheckpointer):
    """Saves to the RAM tier; every ``disk_every``-th save, and the final state, also to disk.

    ``on_commit(step, tier=...)`` is called from the background writer when a
    save is complete: ``tier="memory"`` when it is in RAM, ``"memory+disk"``
    when it is also durable on disk, and ``"disk"`` when :meth:`finalize`
    writes the final state to disk.
    """

    name = "memory"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None], tier: MemoryTier, disk_every: int = 4):
        if disk_every < 1:
            raise ValueError(f"disk_every must be >= 1, got {disk_every}")
        super().__init__(store, on_commit, "goodputlab-memory-ckpt")
        self.tier = tier
        self.disk_every = disk_every
        cur = tier.current() or {}
        # continue the previous worker's count, so restarts do not postpone the disk tier
        self.saves_since_disk = int(cur.get("saves_since_disk", 0))
        self._newest: tuple[int, int, Any, dict] | None = None  # (step, slot, skeleton, views)
        self._newest_on_disk = True

    def save(self, state: dict[str, Any], step: int) -> None:
        from ..snapshot import flatten

        t = time.perf_counter()
        self.last_wait_s = self.writer.wait()
        skeleton, tensors = flatten(state)
        slot = self.tier.free_slot()
        views = self.tier.copy_in(slot, tensors)
        self.last_snapshot_s = time.perf_counter() - t - self.last_wait_s
        self.saves_since_disk += 1
        to_disk = self.saves_since_disk >= self.disk_every
        if to_disk:
            self.saves_since_disk = 0
        self._newest = (step, slot, skeleton, views)
        self._newest_on_disk = to_disk
        since_disk = self.saves_since_disk
        self.writer.submit(lambda: self._publish(slot, step, skeleton, views, to_disk, since_disk))
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1

    def _publish(self, slot: int, step: int, skeleton: Any, views: dict, to_disk: bool, since_disk: int) -> None:
        from ..snapshot import unflatten

        t = time.perf_counter()
        self.tier.publish(slot, step, skeleton, saves_since_disk=since_disk)
        if to_disk:
            self.store.save(unflatten(skeleton, views), step)
        self.last_persist_s = time.perf_counter() - t
        self.on_commit(step, tier="memory+disk" if to_disk else "memory")

    def finalize(self) -> None:
        """Wait for the save in flight, then make sure the newest state is on disk too."""
        from ..snapshot import unflatten

        self.writer.wait()
        if self._newest is not None and not self._newest_on_disk:
            step, _, skeleton, views = self._newest
            self.store.save(unflatten(skeleton, views), step)
            self._newest_on_disk = True
            self.on_commit(step, tier="disk")

    def close(self) -> None:
        super().close()
        self._newest = None
        self.tier.close()


def make(store: CheckpointStore, on_commit: Callable[..., None], tier: MemoryTier | None = None, disk_every: int = 4):
    """The memory checkpointer over ``tier`` (the run's RAM tier, :func:`open_tier`)."""
    if tier is None:
        raise ValueError("the memory strategy needs a MemoryTier (the supervisor's RAM directory)")
    return MemoryCheckpointer(store, on_commit, tier, disk_every=disk_every)


def options(config) -> dict[str, Any]:
    """This strategy's settings in a run's configuration: every ``memory_disk_every``-th save also to disk."""
    return {"disk_every": config.memory_disk_every}


def prepare_run(config, fallbacks: tuple = ()) -> RunResource:
    """The supervisor's part: a RAM tier for the whole run (it outlives every killed worker), removed at the end.

    The tier goes where its two slots fit (:func:`~goodputlab.checkpoints.ram_tier.choose_memory_root`):
    ``/dev/shm``, or a directory with room when a container's 64 MB ``/dev/shm`` is too small; the
    run's event log records where (a ``memory_tier`` marker) and a warning says so.
    """
    path, resource = tier_resource(config, fallbacks)
    resource.env = {MEMORY_TIER_ENV: str(path)}
    return resource


def tier_resource(config, fallbacks: tuple = (), snapshots: int = 1) -> tuple[Path, RunResource]:
    """A folder for ``snapshots`` RAM tiers of ``config.model``'s state (the run's one, or a job's per rank and
    copy: :func:`goodputlab.distributed.node_ram.prepare_job_tier`), where they fit, and the resource that
    removes it and marks where it went (a warning when not in ``/dev/shm``); no environment set."""
    import warnings

    from ...training.workload import PRESETS

    need = tier_bytes(PRESETS[config.model].state_bytes) * snapshots
    root, note = choose_memory_root(need, fallbacks)
    path = create_memory_tier_dir(root)
    if note:
        warnings.warn(note, MemoryTierWarning, stacklevel=3)
    marker = {"path": str(path), "needed_bytes": need, "free_bytes": free_bytes(root), "fallback": note or ""}
    return path, RunResource(cleanup=lambda: remove_memory_tier_dir(path), events=[(M_MEMORY_TIER, marker)])


class MemoryTierWarning(UserWarning):
    """The RAM tier is not in /dev/shm (too little room there); the message says where and why."""


def open_tier(config, max_file_bytes: int | None = None, env: Mapping[str, str] = os.environ) -> MemoryTier:
    """The worker's part: the RAM tier the supervisor made (named by ``GOODPUTLAB_MEMORY_TIER`` in ``env``)."""
    path = env.get(MEMORY_TIER_ENV)
    if not path:
        raise RuntimeError(
            "--ckpt memory needs the RAM tier that the supervisor creates "
            f"({MEMORY_TIER_ENV} is not set; run through goodputlab.run or the CLI)"
        )
    return MemoryTier(path, max_file_bytes)
