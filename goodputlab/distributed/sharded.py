"""Sharded checkpoints: every rank writes its part with ``torch.distributed.checkpoint``; the job commits once.

**What a checkpoint holds** (layout ``dcp_sharded``, one folder ``step-NNNNNNNN/``):

* ``__R_0.distcp``: rank *R*'s tensors, written by DCP. Model and optimizer state are
  taken with :func:`~torch.distributed.checkpoint.state_dict.get_state_dict` (names
  without DDP's ``module.`` prefix, optimizer state keyed by parameter name), so the
  checkpoint does not depend on how the model was wrapped. With DDP every rank holds the
  same tensors and DCP's planner splits them between the ranks (each writes about ``1/N`` of
  the state); with FSDP each rank writes its own shards.
* ``.metadata``: DCP's index of every tensor's chunks, written by rank 0 once every rank's
  part is written.
* ``skeleton.pt`` (rank 0): everything that is not a tensor (the optimizer's hyper-parameters,
  the LR schedule, the data position, the step), the name, shape and dtype of every tensor, and
  the world size.
* ``rank-RRRRR.pt`` (every rank): that rank's RNG states (each rank draws its own dropout masks).
* ``manifest.json``: every file above with its size and sha256.

**Commit, for the whole job.** All ranks write into one temporary folder
(``.tmp-step-NNNNNNNN-aA``, the same name on every rank: step and attempt). Each rank fsyncs its
own files and hashes them; the hashes are gathered on rank 0, which checks that every rank's
part and the metadata are there, writes the manifest and renames the folder into place
(:meth:`~goodputlab.checkpoints.store.CheckpointStore.seal`). A job killed at any moment before that
rename leaves only the temporary folder, which no reader lists: a checkpoint is valid only
when every rank's part and the metadata are there.

**Sync and async.** ``sync``: ``dcp.save`` and the commit run while training waits.
``async``: training waits only for the previous save and for ``dcp.async_save``'s staging
(a copy of the tensors into host memory); DCP's thread writes the files and our writer thread
commits. Both run their collectives on the checkpoint process group (gloo), never on the
group the gradient all-reduce uses.

**Restore, onto any number of ranks.** The ranks agree on one checkpoint: rank 0 lists them,
every rank checks a share of the files' hashes and the safety of what it will read, and a
checkpoint is taken only when every rank found its share sound. DCP then reads, on each rank,
the chunks of the tensors that rank holds now, whatever the number of ranks that wrote them
(2 ranks to 1, 1 to 2, DDP to FSDP). The RNG states come back when the number of ranks is the
same; otherwise each rank's generators restart from ``(seed, rank, step)``. A one-process
checkpoint (``torch_save`` or ``dcp`` layout) restores onto every rank, and
:func:`~goodputlab.checkpoints.dcp_sharded_layout.load_unsharded` reads a sharded one in one process
without a process group.

Nothing read can run code: ``.metadata`` goes through
:func:`~goodputlab.checkpoints.dcp_layout.read_dcp_metadata` (an explicit allow-list, every read inside
a listed shard file), every tensor record of the shards through the torch-archive allow-list,
and ``skeleton.pt`` and the rank files through :func:`~goodputlab.checkpoints.safe_unpickle.safe_torch_load`.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..checkpoints.background import BackgroundWriter
from ..checkpoints.dcp_sharded_layout import FORMAT, METADATA_FILE, SHARD_FILE, SKELETON_FILE, rank_file, read_sharded_parts
from ..checkpoints.safe_unpickle import safe_torch_load
from ..checkpoints.snapshot import flatten, unflatten
from ..checkpoints.state import capture_rng, check_training_state, restore_rng
from ..checkpoints.store import (
    LAYOUT_DCP,
    LAYOUT_DCP_SHARDED,
    LAYOUT_TORCH,
    Checkpoint,
    CheckpointStore,
    CheckpointWarning,
)
from ..recovery.omit import omitted_parts
from ..safe_io import create_new




def _dcp():
    import torch.distributed.checkpoint as dcp

    return dcp


def seed_rank_rng(seed: int, rank: int, step: int) -> None:
    """Seed python, numpy and torch for ``rank`` from ``(seed, rank, step)``: a fresh job's (step 0) or
    one restored onto a different number of ranks."""
    s = int(np.random.SeedSequence([seed, rank, step, 0x4A4B]).generate_state(1, dtype=np.uint64)[0])
    random.seed(s)
    np.random.seed(s % 2**32)
    torch.manual_seed(s)


def job_state_dict(model, optimizer) -> dict[str, Any]:
    """``{"model", "optimizer"}`` as DCP saves them: names without wrapper prefixes, optimizer by name."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    return {"model": msd, "optimizer": osd}


def _tensor_index(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Name -> global shape and dtype (a sharded tensor's shape is the whole tensor's)."""
    return {n: {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")} for n, t in tensors.items()}


def _write_torch(path: Path, obj: Any) -> dict[str, Any]:
    """``torch.save`` ``obj`` to a new file, fsynced; returns its manifest entry (sha256 and bytes)."""
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    fd = create_new(path)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(28, os.strerror(28))
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _hash_file(path: Path) -> dict[str, Any]:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            sha.update(chunk)
        os.fsync(f.fileno())
    return {"sha256": sha.hexdigest(), "bytes": path.stat().st_size}


# --- saving ----------------------------------------------------------------------------------------
class ShardedCheckpointer:
    """Saves the job's state as a sharded checkpoint; ``asynchronous`` for ``dcp.async_save``.

    Every rank calls :meth:`save` at the same step (it is a collective). ``on_commit(step,
    **info)`` is called on rank 0 once the checkpoint is committed; ``on_part(step, **info)`` on
    every rank once its own part is written and hashed. Timings of the latest save (seconds):
    ``last_wait_s`` (the previous save still in flight), ``last_blocking_s`` (what training
    waited in all), ``last_persist_s`` (writing and committing, in the background when async)
    and ``last_bytes`` (this rank's bytes).
    """

    def __init__(
        self,
        store: CheckpointStore,
        rank,
        on_commit: Callable[..., None],
        asynchronous: bool = False,
        attempt: int = 0,
        parallelism: str = "ddp",
        on_part: Callable[..., None] | None = None,
    ):
        _dcp()  # import DCP now (about a second), not inside the first save's blocking time
        self.store = store
        self.rank = rank
        self.on_commit = on_commit
        self.on_part = on_part or (lambda step, **info: None)
        self.asynchronous = asynchronous
        self.attempt = attempt
        self.parallelism = parallelism
        self.name = "dcp_sharded_async" if asynchronous else "dcp_sharded_sync"
        self.writer = BackgroundWriter("goodputlab-sharded-ckpt") if asynchronous else None
        self.saves = 0
        self.last_wait_s = self.last_blocking_s = self.last_persist_s = 0.0
        self.last_bytes = 0

    @property
    def in_flight(self) -> bool:
        return self.writer is not None and self.writer.busy

    def save(self, model, optimizer, scheduler, step: int, data_position: dict[str, Any]) -> None:
        """Save the state after ``step`` steps (returns when training may go on)."""
        t = time.perf_counter()
        self.last_wait_s = self.writer.wait() if self.writer is not None else 0.0
        job = job_state_dict(model, optimizer)
        skeleton, tensors = flatten(job)
        tmp = self.store.root / f".tmp-step-{step:08d}-a{self.attempt}"
        tmp.mkdir(exist_ok=True)  # every rank: the same folder
        mine = {
            rank_file(self.rank.rank): _write_torch(
                tmp / rank_file(self.rank.rank),
                {"format": FORMAT, "rank": self.rank.rank, "world_size": self.rank.world_size,
                 "step": step, "rng": capture_rng()},
            )
        }
        if self.rank.is_coordinator:
            common = {
                "format": FORMAT,
                "step": step,
                "world_size": self.rank.world_size,
                "parallelism": self.parallelism,
                "skeleton": skeleton,
                "tensors": _tensor_index(tensors),
                "scheduler": scheduler.state_dict(),
                "data": data_position,
            }
            mine[SKELETON_FILE] = _write_torch(tmp / SKELETON_FILE, common)
        writer = _dcp().FileSystemWriter(str(tmp), single_file_per_rank=True, sync_files=True)
        started = time.monotonic()
        if self.writer is None:
            # a rank saving alone (distributed/jit.py: SoloRank) takes no collective with the others
            group = {"process_group": self.rank.ckpt_group} if self.rank.ckpt_group is not None else {"no_dist": True}
            _dcp().save(tensors, storage_writer=writer, **group)
            self._commit(None, tmp, step, mine, started)
        else:
            # returns once the tensors are staged in host memory; DCP's thread writes the files
            upload = _dcp().async_save(tensors, storage_writer=writer, process_group=self.rank.ckpt_group)
            self.writer.submit(lambda: self._commit(upload, tmp, step, mine, started))
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1

    def _commit(self, upload, tmp: Path, step: int, mine: dict[str, Any], started: float) -> None:
        """Wait for this rank's files, hash them, and (rank 0) seal the folder once every part is there."""
        if upload is not None:
            upload.result()
        me = self.rank.rank
        for p in sorted(tmp.iterdir()):
            m = SHARD_FILE.match(p.name)
            if (m and int(m.group(1)) == me) or (self.rank.is_coordinator and p.name == METADATA_FILE):
                mine[p.name] = _hash_file(p)
        self.last_bytes = sum(e["bytes"] for e in mine.values())
        parts = self.rank.gather(mine)
        self.last_persist_s = time.monotonic() - started
        self.on_part(step, bytes=self.last_bytes, persist_s=self.last_persist_s)
        if not self.rank.is_coordinator:
            return
        files: dict[str, Any] = {}
        for part in parts:
            files.update(part)
        missing = [rank_file(r) for r in range(self.rank.world_size) if rank_file(r) not in files]
        missing += [n for n in (METADATA_FILE, SKELETON_FILE) if n not in files]
        if missing:
            raise RuntimeError(f"checkpoint of step {step}: {', '.join(missing)} missing; not committed")
        # emulated storage (--ckpt-storage-mbps): the job's checkpoint, every rank's part, takes its bytes over the bandwidth
        self.store.pace(sum(int(e["bytes"]) for e in files.values()), started)
        self.store.seal(tmp, step, files, LAYOUT_DCP_SHARDED)
        self.on_commit(step, tier="disk", layout=LAYOUT_DCP_SHARDED, world_size=self.rank.world_size,
                       bytes=sum(e["bytes"] for e in files.values()))

    def finalize(self) -> None:
        """Wait until the newest save is committed (rank 0) or this rank's part is written (others)."""
        if self.writer is not None:
            self.writer.wait()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


# --- reading -----------------------------------------------------------------------------------------
@dataclass
class _Plan:
    """A checkpoint this rank checked and can load."""

    checkpoint: Checkpoint
    layout: str
    manifest: dict[str, Any]
    world_size: int  # ranks that wrote it
    common: dict[str, Any] | None = None  # skeleton.pt (sharded)
    metadata: Any = None  # DCP's checked metadata (sharded)
    rng: dict[str, Any] | None = None  # this rank's RNG states, when the world size matches
    state: dict[str, Any] | None = None  # a one-process checkpoint, loaded


def _check(store: CheckpointStore, c: Checkpoint, rank, unwrapped_model, optimizer) -> _Plan:
    """This rank's checks of ``c``: ``ValueError`` (or ``OSError``) naming the first problem."""
    manifest = store.manifest(c.path)
    layout = manifest["layout"]
    if layout == LAYOUT_DCP_SHARDED:
        names = sorted(manifest["files"])
        store.verify(c.path, names=names[rank.rank :: rank.world_size])  # each rank hashes a share
        common, metadata = read_sharded_parts(c.path, c.step, manifest["files"], store.max_file_bytes)
        plan = _Plan(c, layout, manifest, common["world_size"], common=common, metadata=metadata)
        if plan.world_size == rank.world_size:
            mine = safe_torch_load(store.read_listed(c.path, rank_file(rank.rank), manifest), rank_file(rank.rank))
            if not isinstance(mine, dict) or mine.get("rank") != rank.rank or not isinstance(mine.get("rng"), dict):
                raise ValueError(f"{rank_file(rank.rank)} is not rank {rank.rank}'s state")
            plan.rng = mine["rng"]
        return plan
    if layout in (LAYOUT_TORCH, LAYOUT_DCP):  # written by one process: every rank loads all of it
        state = store.load(c.path)
        check_training_state(state, c.step, unwrapped_model, optimizer)
        left_out = omitted_parts(state)
        if left_out:  # a one-process run's --ckpt-omit: the ranks restore only complete states
            raise ValueError(f"it leaves out {', '.join(left_out)} (--ckpt-omit); a job under torchrun restores "
                             "only a complete checkpoint")
        return _Plan(c, layout, manifest, 1, state=state)
    raise ValueError(f"layout {layout!r} cannot be restored by a distributed job")


@dataclass
class Restored:
    """What :func:`restore_newest` restored."""

    checkpoint: Checkpoint
    step: int
    layout: str
    world_size: int  # ranks that wrote the checkpoint
    rng: str  # "restored" (same number of ranks) or "reseeded"
    data: dict[str, Any]  # the data position saved with it


def restore_newest(
    store: CheckpointStore,
    rank,
    model,
    optimizer,
    scheduler,
    *,
    seed: int,
    on_invalid: Callable[[Checkpoint, str], None] | None = None,
) -> Restored | None:
    """Load the newest checkpoint every rank finds sound into the live objects; ``None`` when there is none.

    A collective: every rank calls it. Rank 0 first removes the temporary folders that
    interrupted saves left. A checkpoint one rank finds damaged is skipped by all (reported
    through ``on_invalid`` and a :class:`~goodputlab.checkpoints.store.CheckpointWarning`), and
    so is one whose collective load fails; the live objects change only once a load has
    succeeded.
    """
    from .parallel import unwrap

    if rank.is_coordinator:
        store.remove_temporaries()
    steps = rank.broadcast([c.step for c in store.list()] if rank.is_coordinator else None)
    for step in steps:
        c = Checkpoint(step, store.path_for(step))
        plan, why = None, ""
        started = time.monotonic()
        try:
            plan = _check(store, c, rank, unwrap(model), optimizer)
        except (ValueError, OSError) as e:
            why = str(e) or type(e).__name__
        if not rank.agree(plan is not None):
            _skip(c, why or "another rank found it damaged", on_invalid)
            continue
        try:
            _apply(plan, rank, model, optimizer, scheduler, seed)
            ok = True
        except Exception as e:  # DCP's CheckpointException included
            ok, why = False, str(e).splitlines()[0] if str(e) else type(e).__name__
        if not rank.agree(ok):
            _skip(c, why or "another rank could not load it", on_invalid)
            continue
        store.pace(sum(int(f["bytes"]) for f in plan.manifest["files"].values()), started)  # emulated storage
        data = plan.common["data"] if plan.common else plan.state["data"]
        rng = "restored" if plan.world_size == rank.world_size else "reseeded"
        return Restored(c, step, plan.layout, plan.world_size, rng, data)
    return None


def _skip(c: Checkpoint, why: str, on_invalid) -> None:
    warnings.warn(f"skipping damaged checkpoint {c.path.name}: {why}", CheckpointWarning, stacklevel=3)
    if on_invalid is not None:
        on_invalid(c, why)


def _apply(plan: _Plan, rank, model, optimizer, scheduler, seed: int) -> None:
    """Put ``plan``'s state into the live objects (after a collective load, for a sharded one)."""
    from torch.distributed.checkpoint.state_dict import set_state_dict

    from ..checkpoints.dcp_layout import _safe_reader, _tensors_only_planner

    from .parallel import unwrap

    step = plan.checkpoint.step
    if plan.layout == LAYOUT_DCP_SHARDED:
        had_state = bool(optimizer.state)
        templates = job_state_dict(model, optimizer)  # this job's names, shapes and shards
        try:
            _, wanted = flatten(templates)
            index = plan.common["tensors"]
            if set(wanted) != set(index):
                raise ValueError("the checkpoint holds other tensors than this model and optimizer")
            for name, t in wanted.items():
                if list(t.shape) != index[name]["shape"] or str(t.dtype).removeprefix("torch.") != index[name]["dtype"]:
                    raise ValueError(f"{name} has another shape or dtype in the checkpoint")
            fresh = {name: torch.empty_like(t) for name, t in wanted.items()}  # the live state stays untouched
            _dcp().load(
                fresh,
                storage_reader=_safe_reader(plan.checkpoint.path, plan.metadata),
                planner=_tensors_only_planner(),
                process_group=rank.ckpt_group,
            )
        except BaseException:
            if not had_state:
                optimizer.state.clear()  # get_state_dict initialised it; a fresh optimizer has none
            raise
        state = unflatten(plan.common["skeleton"], fresh)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
        scheduler.load_state_dict(plan.common["scheduler"])
    else:
        unwrap(model).load_state_dict(plan.state["model"])
        optimizer.load_state_dict(plan.state["optimizer"])
        scheduler.load_state_dict(plan.state["scheduler"])
    if plan.world_size == rank.world_size:
        restore_rng(plan.rng if plan.rng is not None else plan.state["rng"])
    else:
        seed_rank_rng(seed, rank.rank, step)
