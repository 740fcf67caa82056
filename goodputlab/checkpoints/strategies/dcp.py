"""dcp: ``torch.distributed.checkpoint``'s async_save, sealed in the store's integrity envelope.

``torch.distributed.checkpoint`` (DCP) is PyTorch's checkpoint format for
sharded training: every rank writes its shards (``__<rank>_<n>.distcp``) and
the coordinator writes a ``.metadata`` index. Here it runs in one process
without a process group (``no_dist=True``: DCP's single-process mode, which
torch 2.13 supports for both ``async_save`` and ``load``), so no port or
rendezvous is needed.

What training waits for (the ``ckpt_save`` phase): the previous save, if it is
still being written (at most one in flight), and ``async_save``'s staging, a
copy of every tensor into freshly allocated CPU memory. DCP then writes the
files in its own thread; our background writer waits for that, adds
``skeleton.pt`` and seals the directory with :meth:`CheckpointStore.commit_files`
(every file fsynced and listed with its sha256 in ``manifest.json``, then an
atomic rename), and emits ``ckpt_commit``. Keep-newest-k and skipping damaged
checkpoints come from the store, as for every strategy.

Only tensors go through DCP. The rest of the state (data position, RNG states,
scheduler, optimizer hyper-parameters) is a tensor-free skeleton saved with
``torch.save`` and loaded with ``weights_only=True``. Reading it back, without
running any code, is :mod:`goodputlab.checkpoints.dcp_layout`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import torch

from ..background import BackgroundCheckpointer
from ..dcp_layout import SKELETON_FILE, dcp
from ..snapshot import flatten
from ..store import LAYOUT_DCP, CheckpointStore
from ...safe_io import create_new


class DcpCheckpointer(BackgroundCheckpointer):
    """Saves with ``dcp.async_save`` (thread-based upload), sealed by the store's manifest.

    ``on_commit(step, tier="disk")`` is called from the background writer once
    the checkpoint is durable and listed in its manifest; ``last_snapshot_s`` is
    DCP's staging and planning.
    """

    name = "dcp"

    def __init__(self, store: CheckpointStore, on_commit: Callable[..., None]):
        dcp()  # import DCP now (about a second), not inside the first save's blocking time
        super().__init__(store, on_commit, "goodputlab-dcp-ckpt")

    def save(self, state: dict[str, Any], step: int) -> None:
        t = time.perf_counter()
        self.last_wait_s = self.writer.wait()
        skeleton, tensors = flatten(state)
        index = {name: {"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")} for name, x in tensors.items()}
        tmp = self.store.begin(step)
        writer = dcp().FileSystemWriter(str(tmp), single_file_per_rank=True, sync_files=True)
        # Returns once the tensors are staged (copied to CPU); the files are written by DCP's thread.
        try:
            upload = dcp().async_save(tensors, storage_writer=writer, no_dist=True)
        except BaseException:
            self.store.discard(tmp)
            raise
        self.last_snapshot_s = time.perf_counter() - t - self.last_wait_s
        started = time.perf_counter()
        self.writer.submit(lambda: self._seal(upload, tmp, step, skeleton, index, started))
        self.last_blocking_s = time.perf_counter() - t
        self.saves += 1

    def _seal(self, upload, tmp: Path, step: int, skeleton: Any, index: dict, started: float) -> None:
        try:
            upload.result()  # DCP's files are written (and fsynced: sync_files=True)
            with os.fdopen(create_new(tmp / SKELETON_FILE), "wb") as f:
                torch.save({"skeleton": skeleton, "tensors": index}, f)
                f.flush()
                os.fsync(f.fileno())
            self.store.commit_files(tmp, step, LAYOUT_DCP)
        except BaseException:
            self.store.discard(tmp)  # a full disk leaves no temporary behind
            raise
        self.last_persist_s = time.perf_counter() - started
        self.on_commit(step, tier="disk")


def make(store: CheckpointStore, on_commit: Callable[..., None], tier=None) -> DcpCheckpointer:
    """The dcp checkpointer (it has no tier and no options)."""
    return DcpCheckpointer(store, on_commit)
