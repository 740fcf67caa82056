"""A batch-size sweep's configuration: :class:`SweepConfig` (every field a ``goodputlab batch-sweep`` flag).

Pure: checked on construction, each error naming the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import ConfigError, check
from ..training.workload import PRESETS, MarkovSource, uniform_loss
from .noise import LR_RULES, lr_factor

DEFAULT_BATCH_SIZES = (8, 16, 32, 64, 128, 256)
#: Held-out loss (nats per token) the sweep trains to: between the loss of a model that has
#: learnt which tokens may follow which (about 1.38 on this source) and the source's entropy
#: (about 0.99), where the noise scale of the lab's small GPT sits inside the default sweep.
DEFAULT_TARGET_LOSS = 1.33


# ---------------------------------------------------------------------------------------
# the sweep: configuration


MAX_SEED = 2**64 - 1  # torch.manual_seed takes 64 bits
MAX_THREADS = 256  # as goodputlab run's: very large counts crash OpenMP's thread pool (a segfault)

@dataclass(frozen=True)
class SweepConfig:
    """One batch-size sweep. Every field is a ``goodputlab batch-sweep`` flag (``max_steps`` is ``--max-steps``).

    Each batch size trains a fresh copy of the same seeded model on the same stream of
    sequences until the held-out loss reaches ``target_loss`` or ``max_steps`` steps
    have run; throughput is timed separately on the plain training step.
    """

    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    """Sequences per step, each even (every step's gradient is taken as two halves); sorted ascending."""
    target_loss: float = DEFAULT_TARGET_LOSS
    """Held-out cross-entropy to reach, nats per token: between the source's entropy and ln(vocab)."""
    lr_rule: str = "sqrt"
    """How the learning rate grows with the batch: one of :data:`LR_RULES`."""
    lr: float = 2e-3
    """AdamW's learning rate at the smallest batch size (constant: no schedule, no warm-up)."""
    max_steps: int = 1500
    """Step budget of each batch size; one that has not reached the target by then is reported as missed."""
    model: str = "tiny"
    """Model size preset, one of :data:`goodputlab.training.workload.PRESETS` (dropout is switched off)."""
    seed: int = 0
    """Seeds the model's initialisation, the data and its order."""
    threads: int = 1
    """torch threads for the whole sweep (throughput and training)."""
    timed_steps: int = 6
    """Training steps timed per batch size and round to measure throughput."""
    warmup_steps: int = 2
    """Untimed steps before each round's timed ones."""
    rounds: int = 10
    """Rounds over all batch sizes: short and interleaved, so a busy patch of a shared machine slows all alike."""
    eval_sequences: int = 256
    """Held-out sequences the loss is measured on (the same for every batch size)."""
    eval_growth: float = 1.05
    """The held-out loss is measured at steps growing by this factor (every step for the first ones)."""
    noise_window: float = 2000.0
    """Samples over which the noise-scale estimate is averaged."""
    pool_sequences: int = 65536
    """Training sequences generated (visited in a seeded order, again after the first pass)."""

    def __post_init__(self):
        sizes = self.batch_sizes
        check(isinstance(sizes, (tuple, list)) and len(sizes) >= 2, "batch_sizes", sizes, "at least two batch sizes")
        for m in sizes:
            check(
                isinstance(m, (int, np.integer)) and not isinstance(m, bool) and m >= 2 and m % 2 == 0,
                "batch_sizes", _sizes_text(sizes), "even whole numbers >= 2 (each step splits its batch in two halves)",
            )
        check(len(set(sizes)) == len(sizes), "batch_sizes", _sizes_text(sizes), "distinct batch sizes")
        object.__setattr__(self, "batch_sizes", tuple(sorted(int(m) for m in sizes)))
        check(self.model in PRESETS, "model", self.model, ", ".join(PRESETS))
        check(_whole(self.seed) and 0 <= self.seed <= MAX_SEED, "seed", self.seed,
              f"a whole number between 0 and 2**64-1 ({MAX_SEED})")
        check(self.lr_rule in LR_RULES, "lr_rule", self.lr_rule, ", ".join(LR_RULES))
        check(_number(self.lr) and 0 < self.lr <= 1, "lr", self.lr, "a learning rate > 0 and <= 1")
        check(_whole(self.max_steps) and self.max_steps >= 1, "max_steps", self.max_steps, "a whole number of steps >= 1")
        check(_whole(self.threads) and 1 <= self.threads <= MAX_THREADS, "threads", self.threads,
              f"a whole number between 1 and {MAX_THREADS}")
        check(_whole(self.timed_steps) and self.timed_steps >= 1, "timed_steps", self.timed_steps, "a whole number >= 1")
        check(_whole(self.warmup_steps) and self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "a whole number >= 0")
        check(_whole(self.rounds) and self.rounds >= 1, "rounds", self.rounds, "a whole number >= 1")
        check(_whole(self.eval_sequences) and self.eval_sequences >= 16, "eval_sequences", self.eval_sequences, "a whole number >= 16")
        check(_number(self.eval_growth) and 1 < self.eval_growth <= 2, "eval_growth", self.eval_growth, "a factor > 1 and <= 2")
        check(_number(self.noise_window) and self.noise_window > 0, "noise_window", self.noise_window, "a number of samples > 0")
        check(
            _whole(self.pool_sequences) and self.pool_sequences >= self.batch_sizes[-1],
            "pool_sequences", self.pool_sequences, f"a whole number >= the largest batch size ({self.batch_sizes[-1]})",
        )
        low, high = self.source_entropy, uniform_loss(PRESETS[self.model].vocab)
        check(
            _number(self.target_loss) and low < self.target_loss < high,
            "target_loss", self.target_loss,
            f"a loss between the source's entropy {low:.3f} (the best any model can do) and ln(vocab) {high:.3f} nats",
        )

    @property
    def base_batch(self) -> int:
        """The smallest batch size: the learning rate is tuned there, efficiency is measured against it."""
        return self.batch_sizes[0]

    @property
    def source_entropy(self) -> float:
        """Entropy of this seed's Markov source, nats per token: the lowest reachable loss."""
        return _entropy(self.seed, PRESETS[self.model].vocab)

    def lr_at(self, batch_size: int, noise_scale: float = float("inf")) -> float:
        """Learning rate of ``batch_size`` under this sweep's rule (``noise_scale`` for ``adascale``)."""
        return self.lr * lr_factor(self.lr_rule, batch_size, self.base_batch, noise_scale)

    def replace(self, **changes: Any) -> SweepConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["batch_sizes"] = list(self.batch_sizes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepConfig:
        d = dict(d)
        d["batch_sizes"] = tuple(d["batch_sizes"])
        return cls(**d)


def _whole(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def _sizes_text(sizes) -> str:
    try:
        return ",".join(str(m) for m in sizes)
    except TypeError:
        return str(sizes)


_ENTROPY: dict[tuple[int, int], float] = {}


def _entropy(seed: int, vocab: int) -> float:
    if (seed, vocab) not in _ENTROPY:
        _ENTROPY[(seed, vocab)] = MarkovSource.make(seed, vocab).entropy_nats
    return _ENTROPY[(seed, vocab)]


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> ``(8, 16, 32)``; :class:`ConfigError` (field ``batch_sizes``) on anything else."""
    allowed = "comma-separated even whole numbers >= 2, e.g. 8,16,32,64"
    try:
        sizes = tuple(int(s) for s in str(text).split(",") if s.strip())
    except ValueError:
        raise ConfigError("batch_sizes", text, allowed) from None
    check(len(sizes) >= 2, "batch_sizes", text, "at least two " + allowed)
    check(all(m >= 2 and m % 2 == 0 for m in sizes), "batch_sizes", text, allowed)
    check(len(set(sizes)) == len(sizes), "batch_sizes", text, "distinct batch sizes")
    return sizes
