"""The input pipeline's loader: a data set behind emulated slow storage, fed by a DataLoader.

The data position is the step: the batch for step ``s`` is a pure function of
``(seed, s)``, so a worker that resumes at step ``s`` reads exactly the next
samples, none repeated and none skipped, however deep the pipeline was when the
previous worker died.

Storage is emulated per batch: a read latency (``time.sleep``, so it costs no CPU,
like waiting on a disk or a network file system) with seeded log-normal jitter,
then a transform that burns real CPU for a given time (like decoding and
augmenting). The tokens themselves live in a ``.npy`` file that every process
memory-maps.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np

from ..procs import die_with_parent
from ..theory.data_stall import DEFAULT_PREFETCH, read_latency_s  # the storage latency law, shared with the model
from ..training.workload import MarkovSource, ModelPreset


class BatchRequest(NamedTuple):
    """What the sampler hands the data set: the step and the sample indices of its batch."""

    step: int
    indices: list[int]


class StepSampler:
    """Yields the batch of every step from ``start_step`` to ``end_step - 1``.

    Epoch ``e`` visits the samples in a seeded permutation; step ``s`` takes
    slice ``s % steps_per_epoch`` of epoch ``s // steps_per_epoch``. Nothing in
    here depends on the past, so resuming is just a different ``start_step``.
    """

    def __init__(self, n_samples: int, batch_size: int, seed: int, start_step: int, end_step: int):
        if batch_size > n_samples:
            raise ValueError(f"batch_size {batch_size} exceeds the data set ({n_samples} samples)")
        self.n_samples = n_samples
        self.batch_size = batch_size
        self.seed = seed
        self.start_step = start_step
        self.end_step = end_step
        self.steps_per_epoch = n_samples // batch_size

    def permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch, 0x0D3E]).permutation(self.n_samples)

    def indices_for(self, step: int) -> list[int]:
        epoch, j = divmod(step, self.steps_per_epoch)
        b = self.batch_size
        return self.permutation(epoch)[j * b : (j + 1) * b].tolist()

    def __iter__(self) -> Iterator[BatchRequest]:
        perm_epoch, perm = -1, None
        b = self.batch_size
        for step in range(self.start_step, self.end_step):
            epoch, j = divmod(step, self.steps_per_epoch)
            if epoch != perm_epoch:
                perm_epoch, perm = epoch, self.permutation(epoch)
            yield BatchRequest(step, perm[j * b : (j + 1) * b].tolist())

    def __len__(self) -> int:
        return max(0, self.end_step - self.start_step)


def data_file(directory: Path, preset: ModelPreset, seed: int) -> Path:
    """Generate (once) and return the token file for this preset and seed.

    Written to a temporary name and renamed, so a worker killed mid-write never
    leaves a half file under the real name; a write that fails (a full disk) removes
    its temporary file. An existing file is used only when it is a regular file (not
    a link) holding a token array of the right shape; anything else is replaced.
    """
    from ..safe_io import create_new, remove_entry

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"tokens-{preset.name}-v{preset.vocab}-n{preset.n_samples}-c{preset.context}-s{seed}.npy"
    if _is_token_file(path, (preset.n_samples, preset.context + 1)):
        return path
    source = MarkovSource.make(seed, preset.vocab)
    tokens = source.sample(preset.n_samples, preset.context + 1, seed)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    remove_entry(tmp)  # left by an earlier process with this pid
    try:
        with os.fdopen(create_new(tmp), "wb") as f:
            np.save(f, tokens)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # replaces a link planted at ``path``, never writes through it
    except BaseException:
        remove_entry(tmp)
        raise
    return path


def _is_token_file(path: Path, shape: tuple[int, int]) -> bool:
    """A regular file (not a link) holding a uint8 array of ``shape``; reads only its header."""
    import stat

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        tokens = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return False
    return tokens.shape == shape and tokens.dtype == np.uint8


def burn_cpu(seconds: float) -> None:
    """Do ``seconds`` of CPU work in this thread (an emulated transform).

    Counted in the thread's CPU time, not wall time: like a real decode, it takes
    longer on the wall clock when other processes compete for the cores.
    """
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1  # pure-Python work: holds this process's GIL, like a real decode would


class SlowStorageDataset:
    """Token sequences behind emulated storage latency and transform cost.

    Implements ``__getitems__`` so the DataLoader fetches a whole batch in one
    call: latency and transform cost are per batch, as for a sharded store.
    Returns ``{"step", "x", "y", "idx"}`` with ``x``/``y`` int64 (B, context).
    """

    def __init__(
        self,
        path: Path,
        seed: int,
        io_latency_s: float = 0.0,
        io_jitter: float = 0.0,
        transform_s: float = 0.0,
    ):
        self.path = Path(path)
        self.seed = seed
        self.io_latency_s = io_latency_s
        self.io_jitter = io_jitter
        self.transform_s = transform_s
        self._tokens: np.ndarray | None = None  # opened lazily in each process
        self.n_samples = int(np.load(self.path, mmap_mode="r").shape[0])

    def __len__(self) -> int:
        return self.n_samples

    def __getstate__(self):  # DataLoader workers reopen the memory map themselves
        d = dict(self.__dict__)
        d["_tokens"] = None
        return d

    def read_latency(self, step: int) -> float:
        """Seconds the emulated read of ``step``'s batch takes: seeded, mean ``io_latency_s``."""
        return read_latency_s(self.io_latency_s, self.io_jitter, self.seed, step)

    def __getitems__(self, request: BatchRequest) -> dict:
        import torch

        if self._tokens is None:
            self._tokens = np.load(self.path, mmap_mode="r")
        step, indices = request
        delay = self.read_latency(step)
        if delay > 0:
            time.sleep(delay)
        read = np.asarray(self._tokens[np.sort(indices)], dtype=np.int64)
        # restore the sampler's order (the sort only makes the read sequential)
        order = np.argsort(np.argsort(indices))
        # One storage for the whole batch (rows, then indices), so it leaves a DataLoader
        # worker as one array (see _ByValue).
        b, width = read.shape
        packed = torch.empty(b * width + b, dtype=torch.int64)
        rows = packed[: b * width].view(b, width)
        rows.copy_(torch.from_numpy(read[order]))
        idx = packed[b * width :]
        idx.copy_(torch.as_tensor(indices, dtype=torch.int64))
        if self.transform_s > 0:
            burn_cpu(self.transform_s)
        return {"step": step, "x": rows[:, :-1], "y": rows[:, 1:], "idx": idx}

    def __getitem__(self, i: int):  # pragma: no cover - the loader always asks for batches
        raise TypeError("SlowStorageDataset serves whole batches: use a StepSampler as batch_sampler")


def _unpack_batch(step: int, flat, n_rows: int) -> dict:
    """Rebuild a batch that left a DataLoader worker by value (the inverse of :class:`_ByValue`)."""
    import torch

    packed = torch.from_numpy(flat)
    width = (packed.numel() - n_rows) // n_rows
    rows = packed[: n_rows * width].view(n_rows, width)
    return {"step": step, "x": rows[:, :-1], "y": rows[:, 1:], "idx": packed[n_rows * width :]}


class _ByValue:
    """A batch on its way out of a DataLoader worker, pickled by value.

    By default PyTorch moves tensors between processes through shared memory: the
    training process collects each storage with a file-descriptor round trip to a
    thread of the worker process, a millisecond or more per batch here, and several
    when the cores are busy, because the round trip waits for that thread to be
    scheduled. This lab's batches are kilobytes, which the worker's pipe carries in
    microseconds with no round trip. (Batches of megabytes, such as images, are
    better off in shared memory.)
    """

    def __init__(self, batch: dict):
        self.batch = batch

    def __reduce__(self):
        import torch

        b = self.batch
        flat = torch.empty(0, dtype=torch.int64).set_(b["x"].untyped_storage())  # rows, then indices
        return (_unpack_batch, (b["step"], flat.numpy(), b["idx"].numel()))


def _pass_through(batch: dict):
    """collate_fn: ``__getitems__`` already returns a collated batch; a worker process sends it by value."""
    from torch.utils.data import get_worker_info

    return batch if get_worker_info() is None else _ByValue(batch)


def _die_with_training_process(training_pid: int, worker_id: int) -> None:
    """worker_init_fn: this DataLoader worker dies with the training process (:func:`goodputlab.procs.die_with_parent`)."""
    die_with_parent(training_pid)


def make_loader(
    dataset: SlowStorageDataset,
    sampler: StepSampler,
    workers: int,
    prefetch: int | None,
    pin_memory: bool = False,
    persistent_workers: bool = False,
    seed: int = 0,
):
    """A ``torch.utils.data.DataLoader`` over ``dataset`` in ``sampler``'s order.

    ``generator`` is a private one: creating the loader's iterator draws a seed
    from it, and drawing from the global torch RNG instead would change the
    model's dropout masks after a restart.
    """
    import functools

    import torch
    from torch.utils.data import DataLoader

    g = torch.Generator()
    g.manual_seed(seed)
    kwargs = {}
    if workers > 0:
        kwargs["prefetch_factor"] = prefetch if prefetch is not None else DEFAULT_PREFETCH
        kwargs["persistent_workers"] = persistent_workers
        kwargs["worker_init_fn"] = functools.partial(_die_with_training_process, os.getpid())
        if sys.platform.startswith("linux"):
            kwargs["multiprocessing_context"] = "fork"  # fastest start; workers never touch CUDA
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=workers,
        collate_fn=_pass_through,
        pin_memory=pin_memory,
        generator=g,
        **kwargs,
    )
