"""The first half of every cheap save: a snapshot of the training state in host memory.

A save has two parts. The *snapshot* copies every tensor of the state to memory
that training will not touch again (device-to-host on a GPU, a memcpy on a CPU);
training must wait for it, or the copy would mix two steps. The *persist*
serialises the snapshot, writes it, fsyncs it and commits it; training need not
wait for that. The sync strategy does both while training waits; the async,
dcp and memory strategies wait only for the snapshot.

This module holds the pieces the strategies share:

* :func:`flatten` / :func:`unflatten`: split a nested training state (model,
  optimizer, scheduler, data position, RNGs) into a flat ``{name: tensor}`` map
  and a tensor-free *skeleton* that records where each tensor goes. The
  skeleton holds only plain containers and numbers, so it round-trips through
  ``torch.load(weights_only=True)``.
* :class:`HostBuffers`: host tensors allocated on the first snapshot and reused
  by every later one (pinned on CUDA, so device-to-host copies run
  ``non_blocking`` at full bus speed), so a save allocates nothing and its
  memory stays flat however many saves a run makes.
"""

from __future__ import annotations

from typing import Any

import torch

TENSOR_KEY = "__tensor__"  # a skeleton leaf {"__tensor__": name} stands for one tensor
_SCALARS = frozenset({int, float, bool, str, type(None)})


def flatten(state: Any, prefix: str = "") -> tuple[Any, dict[str, torch.Tensor]]:
    """``(skeleton, tensors)``: ``state`` with every tensor replaced by ``{"__tensor__": name}``.

    Names are the path of keys and indices joined by ``/`` (``model/blocks.0.attn.qkv.weight``,
    ``optimizer/state/3/exp_avg``). Dicts, lists and tuples are walked; anything
    else is kept in the skeleton as it is.
    """
    tensors: dict[str, torch.Tensor] = {}

    def walk(obj: Any, path: str) -> Any:
        if isinstance(obj, torch.Tensor):
            tensors[path] = obj
            return {TENSOR_KEY: path}
        if isinstance(obj, dict):
            return {k: walk(v, f"{path}/{k}" if path else str(k)) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            if all(type(v) in _SCALARS for v in obj):  # e.g. Python's RNG state: 625 ints, no need to walk them
                return list(obj) if isinstance(obj, list) else tuple(obj)
            items = [walk(v, f"{path}/{i}" if path else str(i)) for i, v in enumerate(obj)]
            return items if isinstance(obj, list) else tuple(items)
        return obj

    return walk(state, prefix), tensors


def unflatten(skeleton: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of :func:`flatten`: put ``tensors`` back where the skeleton names them."""
    if isinstance(skeleton, dict):
        if len(skeleton) == 1 and TENSOR_KEY in skeleton:
            return tensors[skeleton[TENSOR_KEY]]
        return {k: unflatten(v, tensors) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [unflatten(v, tensors) for v in skeleton]
    if isinstance(skeleton, tuple):
        return tuple(unflatten(v, tensors) for v in skeleton)
    return skeleton


def tensor_bytes(tensors: dict[str, torch.Tensor]) -> int:
    """Total bytes of the tensors' elements."""
    return sum(t.numel() * t.element_size() for t in tensors.values())


class HostBuffers:
    """Reusable host copies of a flat ``{name: tensor}`` state.

    :meth:`copy_in` copies every tensor into its buffer and returns the buffers.
    Buffers are allocated on first use (pinned when the source lives on CUDA
    and ``pin`` is true) and reused as long as the name, shape and dtype match,
    so repeated snapshots allocate nothing. The caller must not call
    :meth:`copy_in` again while the previous buffers are still being written out.
    """

    def __init__(self, pin: bool = True):
        self.pin = pin
        self.buffers: dict[str, torch.Tensor] = {}
        self.allocations = 0  # how many buffers were ever allocated (flat after the first snapshot)

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffers."""
        return tensor_bytes(self.buffers)

    def _buffer_for(self, name: str, src: torch.Tensor) -> torch.Tensor:
        buf = self.buffers.get(name)
        if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
            pin = self.pin and src.device.type == "cuda"
            buf = torch.empty(src.shape, dtype=src.dtype, device="cpu", pin_memory=pin)
            self.buffers[name] = buf
            self.allocations += 1
        return buf

    def copy_in(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Copy ``tensors`` into the host buffers; returns ``{name: buffer}`` once every copy has landed."""
        out: dict[str, torch.Tensor] = {}
        on_cuda = False
        with torch.no_grad():
            for name, t in tensors.items():
                buf = self._buffer_for(name, t)
                if t.device.type == "cuda":
                    on_cuda = True
                    buf.copy_(t.detach(), non_blocking=buf.is_pinned())
                else:
                    buf.copy_(t.detach())
                out[name] = buf
        for stale in set(self.buffers) - set(tensors):  # a tensor that no longer exists
            del self.buffers[stale]
        if on_cuda:
            # Training may overwrite the parameters as soon as we return; the copies must have landed.
            torch.cuda.synchronize()
        return out

    def release(self) -> None:
        """Drop the buffers (the memory returns to the allocator)."""
        self.buffers.clear()
