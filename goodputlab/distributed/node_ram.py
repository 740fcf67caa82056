"""The RAM tier of a job of many ranks (``--ckpt memory`` under torchrun and on emulated nodes): each node's
RAM holds its own ranks' snapshots and a copy of its neighbour's, as Gemini (SOSP'23) places them.

**Where.** The supervisor makes one RAM tier for the run (the memory strategy's ``prepare_run``: a folder
on ``/dev/shm``, or a fallback with room) and in it one folder per node, ``node<i>/`` (the namespace's
index on emulated nodes; ``node0`` for a job on this machine alone). A rank finds its node's folder in
``GOODPUTLAB_NODE_RAM`` and its neighbour's (the next node of the job, in a ring) in
``GOODPUTLAB_PEER_RAM`` (empty: no neighbour). In its node's folder rank *R* keeps ``rank<R>/`` and in
the neighbour's ``held-rank<R>/``, each a :class:`~goodputlab.checkpoints.ram_tier.MemoryTier` (two slots,
a checksum for every chunk, ``current.json`` switched atomically).

**What a node loss takes.** The emulated nodes share the machine's one file system, so a node's RAM is
emulated truthfully by its folder: a whole-node kill deletes ``node<i>/`` (the supervisor does, once
every process of the node is dead), as losing the machine loses its memory, with the copies it held for
its neighbour. A process kill leaves the folder. The copy to the neighbour is a write into the
neighbour's folder, standing in for the network send a real cluster does (docs/DISTRIBUTED.md).

**Save** (every ``--ckpt-every``): the rank's whole state (DDP: every rank holds all of it; the RNG states
are its own) into its own tier, then into the neighbour's; every ``--memory-disk-every``-th save, and the
final state, also to disk as a sharded checkpoint (:mod:`goodputlab.distributed.sharded`).

**Restore.** Each rank finds the newest snapshot of rank *R* it can verify: its node's ``rank<R>``
first, then any node's ``held-rank<R>`` (the peer's copy), then any other ``rank<R>`` (a rank that moved).
The ranks agree: when every rank found the same step, newer than the disk's newest checkpoint, they all
restore it (``source``: ``memory`` when from the rank's own node, ``peer`` when from a neighbour's copy);
otherwise every rank restores from disk.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

NODE_RAM_ENV = "GOODPUTLAB_NODE_RAM"
PEER_RAM_ENV = "GOODPUTLAB_PEER_RAM"
MEMORY_SUPPORTED = ("ddp",)  # FSDP ranks hold shards: a rank's snapshot is not the whole state


def node_folder(root: Path | str, node: int) -> Path:
    """Node ``node``'s folder in the run's RAM tier ``root``."""
    return Path(root) / f"node{node}"


def node_env(root: Path | str, node: int, peer: int | None) -> dict[str, str]:
    """The environment of the ranks of node ``node`` (its folder made here): where its RAM and its neighbour's are."""
    own = node_folder(root, node)
    own.mkdir(mode=0o700, exist_ok=True)
    return {NODE_RAM_ENV: str(own), PEER_RAM_ENV: str(node_folder(root, peer)) if peer is not None else ""}


def lose_node(root: Path | str, node: int) -> int:
    """Node ``node``'s RAM lost with the machine: its folder deleted (its own snapshots and those it held for its
    neighbour); returns the bytes it held. Call once every process of the node is dead."""
    folder = node_folder(root, node)
    held = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) if folder.is_dir() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return held


def prepare_job_tier(config, ranks: int, copies: int, fallbacks: tuple = ()):
    """The run's RAM tier for ``ranks`` ranks keeping ``copies`` snapshots each (2: own and the neighbour's):
    ``(folder, RunResource)`` (the resource's ``env`` is empty: each node's is :func:`node_env`).

    On ``/dev/shm`` when it has the room, else in a fallback with a warning (a container's 64 MB ``/dev/shm``),
    else ``OSError`` in one line."""
    from ..checkpoints.strategies.memory import tier_resource

    path, resource = tier_resource(config, fallbacks, snapshots=ranks * copies)
    resource.events[0][1]["copies"] = copies
    return path, resource


class NodeRam:
    """Rank ``rank``'s snapshots in its node's RAM and its neighbour's (see the module's text)."""

    def __init__(self, rank: int, env=os.environ):
        from ..checkpoints.ram_tier import MemoryTier

        own = env.get(NODE_RAM_ENV)
        if not own:
            raise RuntimeError(f"--ckpt memory on many ranks needs {NODE_RAM_ENV} (the supervisor sets it)")
        self.rank, self.own_node = rank, Path(own)
        self.root = self.own_node.parent
        self.tiers = [self._tier(self.own_node / f"rank{rank}", MemoryTier)]
        peer = env.get(PEER_RAM_ENV)
        if peer and Path(peer) != self.own_node:
            self.tiers.append(self._tier(Path(peer) / f"held-rank{rank}", MemoryTier))
        self.saves_since_disk = 0

    @staticmethod
    def _tier(path: Path, cls):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        return cls(path)

    def candidates(self) -> list[tuple[Path, str]]:
        """The folders that may hold rank ``rank``'s snapshot, in the order they are tried, with their source."""
        mine = self.own_node / f"rank{self.rank}"
        found = [(mine, "memory")]
        found += [(p, "peer") for p in sorted(self.root.glob(f"node*/held-rank{self.rank}"))]
        found += [(p, "moved") for p in sorted(self.root.glob(f"node*/rank{self.rank}")) if p != mine]
        return found

    def offers(self) -> set[int]:
        """The steps of every snapshot of this rank that its folders name (current and previous slot; unverified)."""
        steps = set()
        for path, _ in self.candidates():
            for tier in (_tier_at(path, previous=False), _tier_at(path, previous=True)):
                cur = tier.current() if tier is not None else None
                if cur is not None and cur.get("slot") is not None:
                    steps.add(int(cur["step"]))
        return steps

    def load(self, step: int, model, optimizer, device) -> tuple[str, Path, dict[str, Any]] | None:
        """This rank's snapshot of ``step``, verified (CRC-32s, meta sha256) and fitting the model, from the first
        folder that has one: (source, folder, state), or ``None``."""
        from ..checkpoints.state import check_training_state

        for path, source in self.candidates():
            for previous in (False, True):
                tier = _tier_at(path, previous)
                cur = tier.current() if tier is not None else None
                if cur is None or cur.get("step") != step:
                    continue
                try:
                    got = tier.load(device)
                    tier.close()
                    if got is None:
                        continue
                    check_training_state(got[1], step, model, optimizer)
                except (OSError, ValueError) as e:  # lost with its node, damaged, half written
                    print(f"rank {self.rank}: RAM snapshot of step {step} in {path} skipped: {e}")
                    continue
                return source, path, got[1]
        return None

    def save(self, state: dict[str, Any], step: int, to_disk: bool) -> None:
        """``state`` (after ``step`` steps) into this rank's tier and then its neighbour's copy."""
        from ..checkpoints.snapshot import flatten

        skeleton, tensors = flatten(state)
        for tier in self.tiers:
            cur = tier.current()
            slot = tier.free_slot()
            tier.copy_in(slot, tensors)
            # the snapshot it replaces stays named: ranks killed between their saves agree on the older step
            previous = {k: cur[k] for k in ("slot", "step", "meta_sha256")} if cur and cur.get("slot") is not None else None
            tier.publish(slot, step, skeleton, previous=previous,
                         saves_since_disk=0 if to_disk else self.saves_since_disk)

    def close(self) -> None:
        for tier in self.tiers:
            tier.close()


class RamCheckpointer:
    """The checkpointer of ``--ckpt memory`` on many ranks: every save to RAM (own node and neighbour), every
    ``disk_every``-th and the final one to disk through ``disk`` (a :class:`~goodputlab.distributed.sharded.ShardedCheckpointer`)."""

    def __init__(self, ram: NodeRam, disk, events, disk_every: int, start: int):
        self.ram, self.disk, self.events, self.disk_every = ram, disk, events, disk_every
        self.newest_on_disk = start  # a restored state is where it came from; nothing newer to keep
        self.newest = start

    def save(self, wrapped, optimizer, scheduler, step: int, data_position: dict[str, Any]) -> None:
        import time

        from ..checkpoints.state import capture_state
        from ..measure import events as E
        from .parallel import unwrap

        t = time.perf_counter()
        self.ram.saves_since_disk += 1
        to_disk = self.ram.saves_since_disk >= self.disk_every
        if to_disk:
            self.ram.saves_since_disk = 0
        self.ram.save(capture_state(unwrap(wrapped), optimizer, scheduler, step, data_position), step, to_disk)
        self.newest = step
        self.events.emit(E.M_CKPT_COMMIT, ckpt_step=step, tier="memory", copies=len(self.ram.tiers),
                         save_s=round(time.perf_counter() - t, 6))
        if to_disk:
            self.disk.save(wrapped, optimizer, scheduler, step, data_position)
            self.newest_on_disk = step

    def finalize(self, wrapped, optimizer, scheduler, step: int, data_position: dict[str, Any]) -> None:
        """The final state on disk too (a RAM copy dies with the run)."""
        if self.newest_on_disk < step:
            self.disk.save(wrapped, optimizer, scheduler, step, data_position)
            self.newest_on_disk = step
        self.disk.finalize()

    def close(self) -> None:
        self.ram.close()
        self.disk.close()


def restore(ram: NodeRam, rank, wrapped, optimizer, scheduler, device, disk_step: int,
            events) -> tuple[int, dict[str, Any]] | None:
    """Every rank restores the same RAM step, newer than the disk's ``disk_step``, or none does (``None``).

    The step is the newest that every rank's folders offer (a rank killed between two saves keeps the older
    one in its other slot); each rank verifies its snapshot before any rank applies one. Returns (step, data
    position); emits ``restored`` with its source (``memory``: the rank's own node, ``peer``: a neighbour's
    copy, ``moved``: another node's own copy) and the folder it read (``node<i>/rank<R>`` or ``node<i>/held-rank<R>``)."""
    from ..checkpoints.state import apply_state
    from ..measure import events as E
    from .parallel import unwrap

    offered = rank.gather(sorted(ram.offers()))
    common = set.intersection(*map(set, offered)) if offered is not None else set()
    agreed = rank.broadcast(max((s for s in common if s > disk_step), default=-1))
    if agreed < 0:
        return None
    found = ram.load(agreed, unwrap(wrapped), optimizer, device)
    if not rank.agree(found is not None):  # a snapshot failed its checks somewhere: all ranks use the disk
        return None
    source, path, state = found
    apply_state(state, unwrap(wrapped), optimizer, scheduler)
    ram.saves_since_disk = 0  # counted again from here: the disk copy is at most disk_every saves behind
    events.emit(E.M_RESTORED, ckpt_step=agreed, source=source, path=f"{path.parent.name}/{path.name}",
                node=ram.own_node.name)
    return agreed, state["data"]


def _tier_at(path: Path, previous: bool):
    """The RAM tier in ``path`` (its previous snapshot when ``previous``), or ``None`` when the folder is gone."""
    from ..checkpoints.ram_tier import MemoryTier

    class PreviousSnapshot(MemoryTier):
        """A tier whose "current" snapshot is the one its newest replaced (named in ``current.json``)."""

        def current(self):
            cur = super().current()
            prev = cur.get("previous") if cur else None
            ok = isinstance(prev, dict) and prev.get("slot") in (0, 1) and isinstance(prev.get("step"), int)
            return prev if ok else None

    try:
        return (PreviousSnapshot if previous else MemoryTier)(path)
    except (OSError, FileNotFoundError):
        return None
