"""The device-side prefetcher: copy batch N+1 to the accelerator while step N computes.

The DataLoader hides storage and transform time behind compute, but the last hop,
host memory to device memory, still happens in the training loop: ``batch.to(cuda)``
right before the forward pass, and the step waits for it. On CUDA,
:class:`DevicePrefetcher` issues that copy on a side stream one batch ahead, so it
runs while the previous step's kernels run; the compute stream waits only for the
copy of the batch it is about to use. The copy overlaps only when the host batch is
in pinned memory (``--pin-memory``): a copy from pageable memory blocks the host.

On a CPU there is no copy to overlap, so :func:`device_batches` hands the loader
through unchanged. The batches and their order are exactly the loader's either way,
which keeps resume bit-exact.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

#: The batch entries the model consumes on the device; the rest (step, sample ids) stay on the host.
DEVICE_KEYS = ("x", "y")


class DevicePrefetcher:
    """Iterates ``batches`` one ahead, with ``x`` and ``y`` already on ``device``.

    Each ``next()`` returns batch N (its copy finished, as far as the compute stream
    is concerned) and then takes batch N+1 from the loader and starts its copy. Any
    wait for batch N+1 on the host therefore happens inside the ``next()`` of step N,
    which the ledger books as data wait, as it should: the loop is blocked on input.

    Works on any device: on CUDA the copies go to a side stream; elsewhere the
    ``.to(device)`` is synchronous (and free when the device is the CPU).
    """

    def __init__(self, batches: Iterable[dict[str, Any]], device, keys: tuple[str, ...] = DEVICE_KEYS):
        import torch

        self.device = torch.device(device)
        self.keys = keys
        self._batches = iter(batches)
        self._stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self._staged: dict[str, Any] | None = None
        self._primed = False

    def _stage_next(self) -> None:
        """Take the next host batch and start copying it to the device (``None`` at the end)."""
        import torch

        try:
            host = next(self._batches)
        except StopIteration:
            self._staged = None
            return
        staged = dict(host)
        if self._stream is None:
            for k in self.keys:
                staged[k] = host[k].to(self.device)
        else:
            with torch.cuda.stream(self._stream):
                for k in self.keys:
                    staged[k] = host[k].to(self.device, non_blocking=True)
        self._staged = staged

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        import torch

        if not self._primed:
            self._primed = True
            self._stage_next()
        batch = self._staged
        if batch is None:
            raise StopIteration
        if self._stream is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(self._stream)  # step N's kernels start only after its copy landed
            for k in self.keys:
                # allocated on the side stream, used on the compute stream: tell the caching
                # allocator, or it could hand the memory to the next copy while step N reads it
                batch[k].record_stream(compute)
        self._stage_next()  # batch N+1's copy now overlaps step N
        return batch


def device_batches(batches: Iterable[dict[str, Any]], device, enabled: bool) -> Iterator[dict[str, Any]]:
    """The iterator the training loop should draw from.

    A :class:`DevicePrefetcher` when ``enabled`` and ``device`` is CUDA; otherwise
    ``iter(batches)`` itself (a pass-through: on a CPU there is no copy to overlap).
    """
    import torch

    if enabled and torch.device(device).type == "cuda":
        return DevicePrefetcher(batches, device)
    return iter(batches)
