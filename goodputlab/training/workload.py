"""The workload: what is trained, on what data.

A small GPT (``goodputlab.training.model``) learns to predict the next token of text drawn
from a seeded random Markov source. The source is generated here, so nothing is
downloaded; its entropy is known, so the reader can see how close the model gets
to the best possible loss. This module imports only numpy: the worker and the CLI
can read presets before paying for ``import torch``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


#: resident memory of a training worker that has imported torch, plus its supervisor (bytes)
RUN_BASE_BYTES = 450 << 20
#: a run's peak memory per byte of checkpoint state (see :attr:`ModelPreset.run_memory_bytes`)
RUN_STATE_MULTIPLE = 7


@dataclass(frozen=True)
class ModelPreset:
    """A model size and the training settings that go with it."""

    name: str
    n_layer: int
    n_head: int
    d_model: int
    context: int  # tokens per training sequence
    batch_size: int  # sequences per step
    lr: float  # peak learning rate (AdamW)
    dropout: float  # > 0 keeps the RNG state load-bearing for bit-exact resume
    n_samples: int  # sequences in the generated data set
    vocab: int = 64
    note: str = ""

    @property
    def n_params(self) -> int:
        """Parameters of :class:`goodputlab.training.model.GPT` at this size (weights tied)."""
        d, v, c, L = self.d_model, self.vocab, self.context, self.n_layer
        per_layer = 12 * d * d + 13 * d  # attention 4d^2+4d, MLP 8d^2+5d, two LayerNorms 4d
        return v * d + c * d + L * per_layer + 2 * d

    @property
    def state_bytes(self) -> int:
        """Bytes of a checkpoint: fp32 weights plus AdamW's two moments."""
        return 12 * self.n_params

    @property
    def run_memory_bytes(self) -> int:
        """Estimated peak memory of a CPU run of this preset (bytes): a worker that has imported torch
        and the supervisor (450 MiB), plus seven times the state: weights, gradients and AdamW's
        moments, a step's activations and the checkpoint copies (the RAM tier's two slots, a
        background save's snapshot). Measured peaks of a worker with ``--ckpt memory``
        (benchmarks/RESULTS.md): tiny 0.35 GB, small 0.63 GB, medium 3.5 GB."""
        return RUN_BASE_BYTES + RUN_STATE_MULTIPLE * self.state_bytes


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset("tiny", 2, 4, 64, 32, 16, 3e-3, 0.1, 8192, note="CPU and CI: a few ms a step"),
        ModelPreset("small", 4, 4, 256, 64, 16, 1e-3, 0.1, 8192, note="CPU demos: ~3M params, ~40 MB state"),
        ModelPreset("medium", 8, 8, 640, 128, 16, 6e-4, 0.1, 8192, note="~40M params, ~470 MB state"),
        ModelPreset("large", 12, 16, 1024, 256, 32, 3e-4, 0.0, 16384, note="GPU: ~150M params, ~1.8 GB state"),
    )
}


@dataclass(frozen=True)
class MarkovSource:
    """An order-2 Markov source over ``vocab`` tokens.

    The previous token decides which ``branching`` tokens may come next; the
    token before it decides their probabilities (Dirichlet-distributed). A model
    learns the first part quickly (the loss falls from ln(vocab) within a
    hundred steps) and the second part slowly, with attention.
    ``entropy_nats`` is the expected cross-entropy of the true distribution:
    the best loss any model can reach on this data.
    """

    vocab: int
    successors: np.ndarray  # (vocab, vocab, branching) next-token ids
    cumprobs: np.ndarray  # (vocab, vocab, branching) cumulative probabilities

    @classmethod
    def make(cls, seed: int, vocab: int = 64, branching: int = 4) -> MarkovSource:
        import numpy as np  # when asked: reading a run's config (its presets) needs no numpy

        rng = np.random.default_rng([seed, 0x5EED])
        by_previous = np.stack([rng.choice(vocab, size=branching, replace=False) for _ in range(vocab)])
        successors = np.broadcast_to(by_previous[None, :, :], (vocab, vocab, branching)).copy()
        probs = rng.dirichlet(np.full(branching, 0.7), size=(vocab, vocab))
        cumprobs = np.cumsum(probs, axis=-1)
        cumprobs[..., -1] = 1.0
        return cls(vocab, successors, cumprobs)

    @property
    def entropy_nats(self) -> float:
        import numpy as np  # when asked: reading a run's config (its presets) needs no numpy

        probs = np.diff(self.cumprobs, axis=-1, prepend=0.0)
        h = -(probs * np.log(np.clip(probs, 1e-12, None))).sum(-1)  # per context
        return float(h.mean())  # contexts are close to uniformly visited

    def sample(self, n_sequences: int, length: int, seed: int) -> np.ndarray:
        """``n_sequences`` token sequences of ``length``, as uint8, deterministic in ``seed``.

        Sequences are generated in parallel: one vectorised draw per position.
        """
        import numpy as np

        rng = np.random.default_rng([seed, 0xDA7A])
        out = np.empty((n_sequences, length), dtype=np.uint8)
        out[:, :2] = rng.integers(0, self.vocab, size=(n_sequences, 2))
        rows = np.arange(n_sequences)
        for t in range(2, length):
            u = rng.random(n_sequences)
            cum = self.cumprobs[out[:, t - 2], out[:, t - 1]]  # (n, branching)
            choice = (u[:, None] > cum).sum(-1)
            out[:, t] = self.successors[out[:, t - 2], out[:, t - 1]][rows, choice]
        return out


def uniform_loss(vocab: int = 64) -> float:
    """Cross-entropy of a model that knows nothing: ln(vocab) nats."""
    return math.log(vocab)
