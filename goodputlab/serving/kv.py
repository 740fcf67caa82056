"""The lab's GPT served with a KV cache: prefill, batched decode, and the full-recompute reference.

The model is :class:`goodputlab.training.model.GPT`, unchanged; these functions run its layers in a
different order. Training recomputes attention over the whole sequence at every position;
generation keeps each layer's keys and values (the *KV cache*) so a new token costs one
position's work:

* :func:`prefill` runs a prompt through the model in one pass (every position at once, causal
  attention, like training), writes its keys and values into a row of the cache, and returns
  the logits of the last position: the first output token.
* :func:`decode` advances every running sequence by one token in one batched pass: each new
  token attends to its own row of the cache up to its own length (a mask hides the rest, so
  sequences of different lengths share the batch).
* :func:`generate_reference` regenerates greedily by recomputing the full sequence for every
  token (``GPT.forward``, no cache): what :func:`prefill` plus :func:`decode` must agree with.

The cache is one tensor ``(n_layer, 2, rows, n_head, context, head_dim)``: keys at ``[:, 0]``,
values at ``[:, 1]``; row ``r`` holds one sequence. Running sequences occupy rows ``0..B-1``
(the engine keeps them dense), so a decode step reads the cache as views, without gathering.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..training.model import GPT
from ..training.workload import ModelPreset


def build_model(preset: ModelPreset, seed: int = 0) -> GPT:
    """The seeded model in inference mode: every process that builds it with ``seed`` gets the same weights."""
    torch.manual_seed(seed)
    model = GPT(preset)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def cache_shape(preset: ModelPreset, rows: int) -> tuple[int, ...]:
    """Shape of a cache for ``rows`` sequences: (n_layer, 2, rows, n_head, context, head_dim)."""
    return (preset.n_layer, 2, rows, preset.n_head, preset.context, preset.d_model // preset.n_head)


def new_cache(preset: ModelPreset, rows: int) -> torch.Tensor:
    """A zeroed cache for ``rows`` sequences.

    Zeroed, not empty: a masked position still takes part in the attention's matrix products
    with weight 0, and 0 x NaN from uninitialised memory would poison the row.
    """
    return torch.zeros(cache_shape(preset, rows))


def cache_nbytes(preset: ModelPreset, tokens: int) -> int:
    """Bytes of keys and values that ``tokens`` positions hold (fp32, every layer)."""
    return 4 * 2 * preset.n_layer * preset.d_model * tokens


def _heads(attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values of ``x`` (B, T, C), each (B, n_head, T, head_dim)."""
    B, T, C = x.shape
    q, k, v = attn.qkv(x).split(C, dim=2)
    return tuple(t.view(B, T, attn.n_head, C // attn.n_head).transpose(1, 2) for t in (q, k, v))


@torch.no_grad()
def prefill(model: GPT, prompt: torch.Tensor, cache: torch.Tensor, row: int) -> torch.Tensor:
    """Run ``prompt`` (T token ids) through ``model``, keep its keys and values in ``cache[:, :, row]``.

    Returns the logits (vocab,) of the last position. The arithmetic is ``GPT.forward``'s.
    """
    T = prompt.shape[0]
    x = model.tok(prompt[None]) + model.pos(torch.arange(T))
    for layer, block in enumerate(model.blocks):
        q, k, v = _heads(block.attn, block.ln1(x))
        cache[layer, 0, row, :, :T] = k[0]
        cache[layer, 1, row, :, :T] = v[0]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + block.attn.proj(y.transpose(1, 2).contiguous().view(1, T, -1))
        x = x + block.mlp(block.ln2(x))
    return model.head(model.ln_f(x[0, -1]))


@torch.no_grad()
def decode(model: GPT, cache: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """One decode step for the sequences in rows ``0..B-1``: logits (B, vocab) of the next token.

    ``tokens`` (B,) are each sequence's newest token, not yet in the cache; ``lengths`` (B,) how
    many positions its row holds. The new token goes to position ``lengths[b]``; afterwards the
    caller adds 1 to each length.
    """
    B = tokens.shape[0]
    rows = torch.arange(B)
    span = int(lengths.max()) + 1
    visible = (torch.arange(span)[None, :] <= lengths[:, None])[:, None, None, :]  # (B, 1, 1, span)
    x = (model.tok(tokens) + model.pos(lengths))[:, None, :]  # (B, 1, C)
    for layer, block in enumerate(model.blocks):
        q, k, v = _heads(block.attn, block.ln1(x))
        keys, values = cache[layer, 0, :B], cache[layer, 1, :B]  # views (B, H, context, hd)
        keys[rows, :, lengths] = k[:, :, 0]
        values[rows, :, lengths] = v[:, :, 0]
        y = F.scaled_dot_product_attention(q, keys[:, :, :span], values[:, :, :span], attn_mask=visible)
        x = x + block.attn.proj(y.transpose(1, 2).reshape(B, 1, -1))
        x = x + block.mlp(block.ln2(x))
    return model.head(model.ln_f(x[:, 0]))


def copy_row(src: torch.Tensor, src_row: int, dst: torch.Tensor, dst_row: int, length: int) -> None:
    """Copy the first ``length`` positions of one sequence's keys and values between caches (or rows)."""
    dst[:, :, dst_row, :, :length] = src[:, :, src_row, :, :length]


@torch.no_grad()
def generate_reference(model: GPT, prompt: torch.Tensor, n: int) -> list[int]:
    """``n`` greedy tokens after ``prompt``, recomputing the whole sequence for each (no cache)."""
    seq = prompt.clone()
    out: list[int] = []
    for _ in range(n):
        logits, _ = model(seq[None])
        token = int(logits[0, -1].argmax())
        out.append(token)
        seq = torch.cat([seq, torch.tensor([token])])
    return out
