"""The training objects: model, optimizer and LR schedule from a run's configuration; the device; seeding.

Everything here is what a run trains, built the same way in every attempt, so a
resumed run continues bit-exactly (the seed, deterministic kernels, a schedule that
checkpoints). The step itself is :func:`goodputlab.training.step.train_step`.
"""

from __future__ import annotations

import math

from ..engine.config import RunConfig


class WarmupCosine:
    """LR multiplier: linear warm-up, then cosine decay to 10%. A class (not a lambda) so it checkpoints."""

    def __init__(self, warmup_steps: int, total_steps: int):
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def resolve_device(name: str):
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    return torch.device(name)


def make_deterministic(seed: int, device) -> None:
    """Seed every RNG and ask torch for deterministic kernels (bit-exact resume depends on it)."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if device.type == "cuda":
        # CPU kernels used here are deterministic already; this call costs ~1 s, so only on CUDA.
        # Strict, not warn_only: with warn_only=True some kernels only warn and stay
        # non-deterministic (the memory-efficient attention backward that fp32 SDPA uses
        # on CUDA), and resumed runs then drift apart from the failure-free run.
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def build_training(config: RunConfig, device):
    """Model, optimizer and LR schedule for ``config``, freshly initialised from its seed."""
    import torch

    from .model import GPT
    from .workload import PRESETS

    preset = PRESETS[config.model]
    model = GPT(preset).to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.resolved_lr(), betas=(0.9, 0.95), weight_decay=0.1
    )
    warmup = max(1, min(100, config.steps // 10))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup, config.steps))
    return model, optimizer, scheduler


def cuda_available() -> bool:
    """Whether torch sees a CUDA device here (imports torch)."""
    import torch

    return torch.cuda.is_available()


def cuda_device_count() -> int:
    """How many CUDA devices torch sees here (0 without CUDA; imports torch)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
