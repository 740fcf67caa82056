"""A small GPT, readable top to bottom (after nanoGPT's layout)."""

from __future__ import annotations

import hashlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from .workload import ModelPreset


class CausalSelfAttention(nn.Module):
    def __init__(self, p: ModelPreset):
        super().__init__()
        self.n_head = p.n_head
        self.qkv = nn.Linear(p.d_model, 3 * p.d_model)
        self.proj = nn.Linear(p.d_model, p.d_model)
        self.dropout = p.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, p: ModelPreset):
        super().__init__()
        self.ln1 = nn.LayerNorm(p.d_model)
        self.attn = CausalSelfAttention(p)
        self.ln2 = nn.LayerNorm(p.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(p.d_model, 4 * p.d_model),
            nn.GELU(),
            nn.Linear(4 * p.d_model, p.d_model),
            nn.Dropout(p.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, ``n_layer`` blocks, a head tied to the token embedding."""

    def __init__(self, p: ModelPreset):
        super().__init__()
        self.preset = p
        self.tok = nn.Embedding(p.vocab, p.d_model)
        self.pos = nn.Embedding(p.context, p.d_model)
        self.drop = nn.Dropout(p.dropout)
        self.blocks = nn.ModuleList(Block(p) for _ in range(p.n_layer))
        self.ln_f = nn.LayerNorm(p.d_model)
        self.head = nn.Linear(p.d_model, p.vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def count_params(model: nn.Module) -> int:
    """Distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def state_sha256(model: nn.Module) -> str:
    """sha256 over every tensor of ``model.state_dict()``: names, dtypes, shapes and bytes.

    Two models hash equal exactly when every parameter and buffer is bit-identical.
    """
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
