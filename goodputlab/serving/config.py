"""How a server is built: :class:`ServerConfig` and the worker roles (pure: no torch, no processes).

The cluster (:mod:`goodputlab.serving.cluster`) launches the workers it describes; each
worker process (:mod:`goodputlab.serving.worker`) reads it back from its command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import check
from .workload import SERVING_PRESETS, LengthMix

MODES = ("colocated", "disaggregated")
WORKERS = 2  # worker processes in either mode


MAX_SEED = 2**64 - 1  # torch.manual_seed takes 64 bits
MAX_BATCH = 4096  # sequences in the KV cache at once; more only exhausts memory
MAX_THREADS = 256  # as goodputlab run's: very large counts crash OpenMP's thread pool

@dataclass(frozen=True)
class ServerConfig:
    """How the server is built. Field names are the command line's flags (``max_batch`` is ``--max-batch``)."""

    mode: str = "colocated"
    model: str = "serve"  # a key of goodputlab.serving.workload.SERVING_PRESETS
    seed: int = 0  # the model's weights (every worker builds the same)
    max_batch: int = 32  # sequences decoding at once across the server (its KV capacity)
    prefill_budget: int = 512  # colocated: prompt tokens prefilled between two decode steps, at most
    transfer_rows: int = 8  # disaggregated: prompts prefilled and waiting for the decode worker, at most
    threads: int = 1  # torch threads per worker

    def __post_init__(self):
        check(self.mode in MODES, "mode", self.mode, " or ".join(MODES))
        check(self.model in SERVING_PRESETS, "model", self.model, ", ".join(SERVING_PRESETS))
        for name, low, high in (("seed", 0, MAX_SEED), ("max_batch", WORKERS, MAX_BATCH), ("prefill_budget", 1, None),
                                ("transfer_rows", 1, None), ("threads", 1, MAX_THREADS)):
            value = getattr(self, name)
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)
            check(ok, name, value, f"a whole number >= {low}" if high is None else f"a whole number between {low} and {high}")

    @property
    def preset(self):
        return SERVING_PRESETS[self.model]

    def worker_roles(self) -> list[tuple[str, str]]:
        """(role, name) of each worker process."""
        if self.mode == "colocated":
            return [("colocated", f"colocated-{i}") for i in range(WORKERS)]
        return [("prefill", "prefill"), ("decode", "decode")]

    def check_mix(self, mix: LengthMix) -> None:
        """The longest request of ``mix`` must fit the model's context."""
        ctx = self.preset.context
        check(mix.max_tokens <= ctx, "mix", mix.name, f"prompt plus output of at most {ctx} tokens (the model's context); this mix reaches {mix.max_tokens}")
