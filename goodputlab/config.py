"""The run configuration: one validated dataclass shared by the CLI, the API and the worker.

Every field mirrors a CLI flag (``ckpt_every`` is ``--ckpt-every``), so a
:class:`~goodputlab.errors.ConfigError` naming a field also names the flag.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError, check
from .workload import PRESETS

DEVICES = ("auto", "cpu", "cuda")
CHECKPOINT_STRATEGIES = ("sync", "async", "dcp", "memory")
AUTO = "auto"  # ckpt_every="auto": the interval from Daly's formula, measured as the run goes (goodputlab.adaptive)

# Limits checked before a run starts: beyond them the worker would crash (or the kernel would), not train.
MAX_SEED = 2**64 - 1  # torch.manual_seed takes 64 bits
MAX_THREADS = 256  # far past any gain; very large counts crash OpenMP's thread pool (a segfault, no log)
MAX_WORKERS = 64  # DataLoader processes, each a fork of the training process
MAX_PREFETCH = 256  # batches each worker loads ahead
MAX_DELAY_S = 86_400.0  # a day; time.sleep overflows near 2**63 ns
MAX_PER_BATCH_MS = 60_000.0  # a minute of emulated latency or transform per batch


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one experiment.

    Times are in seconds unless the name says otherwise; intervals in steps.
    """

    steps: int = 400
    """Training steps to complete (the final model has seen exactly this many batches)."""
    model: str = "tiny"
    """Model size preset, one of :data:`goodputlab.workload.PRESETS`."""
    batch_size: int | None = None
    """Sequences per batch; ``None`` takes the preset's."""
    lr: float | None = None
    """Peak learning rate; ``None`` takes the preset's."""
    device: str = "auto"
    """``auto`` picks CUDA when present, else CPU."""
    seed: int = 0
    """Seeds the model, the data, its order and the failure times."""

    ckpt_every: int | str = 50
    """Checkpoint every this many steps (0: only the final save), or ``"auto"``: Daly's
    interval from the measured save cost and failure rate (:mod:`goodputlab.adaptive`)."""
    ckpt_every_s: float | None = None
    """Also checkpoint when this many seconds passed since the last save."""
    ckpt: str = "sync"
    """Checkpoint strategy: ``sync``, ``async`` (background persist), ``dcp``
    (torch.distributed.checkpoint async_save) or ``memory`` (RAM tier + disk every k-th save)."""
    keep: int = 3
    """Keep the newest this many checkpoints on disk."""
    memory_disk_every: int = 4
    """With ``ckpt="memory"``: also write every this-many-th save to disk."""

    mtbf: float = 0.0
    """Mean time between failures, seconds of wall time (0: no random failures)."""
    kill_at_steps: tuple[int, ...] = ()
    """Deterministic failures: kill the worker once it has completed each of these steps."""
    restart_delay: float = 0.5
    """Seconds between a failure and the new worker's launch (emulated rescheduling)."""
    max_failures: int = 50
    """Failures the run may absorb; the next one stops it."""

    workers: int = 0
    """DataLoader worker processes (0: load in the training process)."""
    prefetch: int | None = None
    """Batches each worker loads ahead; needs ``workers > 0``; ``None`` is PyTorch's default (2)."""
    io_latency_ms: float = 0.0
    """Emulated storage read latency per batch, milliseconds."""
    io_jitter: float = 0.0
    """Coefficient of variation of that latency (0: constant; 1: as variable as an exponential)."""
    transform_ms: float = 0.0
    """CPU transform cost per batch, milliseconds (real CPU work, not a sleep)."""
    pin_memory: bool = False
    """Pin host batches (speeds host-to-device copies on CUDA; no effect on CPU)."""
    persistent_workers: bool = False
    """Keep DataLoader workers alive between epochs."""
    device_prefetch: bool = False
    """Copy batch N+1 to the device on a side CUDA stream while step N computes (a pass-through on CPU)."""

    threads: int | None = None
    """Torch intra-op threads in the worker; ``None`` keeps PyTorch's default."""

    nproc: int = 1
    """Ranks on this machine: 1 trains in one worker process; more runs the worker on that many
    ranks under ``torchrun`` (data parallel, :mod:`goodputlab.distributed`)."""
    launcher: str = "auto"
    """``auto``: ``torchrun`` when the job has more than one rank, else one worker process;
    ``torchrun``: always (a job of one rank too, e.g. on a machine with one GPU)."""
    nnodes: int = 1
    """Machines in a distributed job (each runs ``nproc`` ranks)."""
    node_rank: int | None = None
    """This machine's fixed number in a job of several machines (``None``: the rendezvous numbers them)."""
    rdzv_endpoint: str | None = None
    """``HOST:PORT`` of the rendezvous of a job of several machines (needed with ``nnodes`` > 1)."""
    straggler_prob: float = 0.0
    """The share of steps a straggler slows (each step drawn from the seed and the step: the same
    steps in every attempt); 0: no straggler."""
    straggler_factor: float = 2.0
    """A slowed step takes this many times as long (its forward and backward, in a distributed job)."""
    straggler_rank: int | None = None
    """In a distributed job: the rank that straggles (``None``: every rank, each on draws of its own)."""

    overwrite: bool = False
    """Use an output folder that holds files of something other than a goodputlab run, replacing
    goodputlab's own files there (``ckpt/``, ``logs/``, ``config.json``, ``events.jsonl``,
    ``summary.json``); without it such a folder is refused (:mod:`goodputlab.run_dir`)."""

    extra: dict[str, Any] = field(default_factory=dict)
    """Reserved for experiment-specific settings; recorded, not interpreted."""

    def __post_init__(self) -> None:
        _int(self.steps, "steps", 1, "a whole number of steps >= 1")
        check(self.model in PRESETS, "model", self.model, f"one of {', '.join(PRESETS)}")
        if self.batch_size is not None:
            n_samples = PRESETS[self.model].n_samples
            allowed = f"a whole number between 1 and {n_samples} (the {self.model} data set's sequences)"
            _int(self.batch_size, "batch_size", 1, allowed)
            check(self.batch_size <= n_samples, "batch_size", self.batch_size, allowed)
        if self.lr is not None:
            _num(self.lr, "lr", "a learning rate > 0", lambda v: v > 0)
        check(self.device in DEVICES, "device", self.device, f"one of {', '.join(DEVICES)}")
        _int(self.seed, "seed", 0, f"a whole number between 0 and 2**64-1 ({MAX_SEED})")
        check(self.seed <= MAX_SEED, "seed", self.seed, f"a whole number between 0 and 2**64-1 ({MAX_SEED})")

        if self.ckpt_every != AUTO:
            _int(self.ckpt_every, "ckpt_every", 0, "a whole number of steps >= 0 (0: final save only) or auto")
        if self.ckpt_every_s is not None:
            _num(self.ckpt_every_s, "ckpt_every_s", "seconds > 0", lambda v: v > 0)
        check(
            self.ckpt in CHECKPOINT_STRATEGIES,
            "ckpt",
            self.ckpt,
            f"one of {', '.join(CHECKPOINT_STRATEGIES)}",
        )
        _int(self.keep, "keep", 1, "a whole number >= 1")
        _int(self.memory_disk_every, "memory_disk_every", 1, "a whole number of saves >= 1 (1: every save)")

        _num(self.mtbf, "mtbf", "seconds >= 0 (0: no random failures)", lambda v: v >= 0)
        check(isinstance(self.kill_at_steps, tuple), "kill_at_steps", self.kill_at_steps, "a tuple of steps")
        for s in self.kill_at_steps:
            _int(s, "kill_at_steps", 1, f"steps between 1 and steps-1 ({self.steps - 1})")
            check(s < self.steps, "kill_at_steps", s, f"steps between 1 and steps-1 ({self.steps - 1})")
        _num(self.restart_delay, "restart_delay", f"seconds between 0 and {MAX_DELAY_S:.0f}", lambda v: 0 <= v <= MAX_DELAY_S)
        _int(self.max_failures, "max_failures", 0, "a whole number >= 0")

        _int(self.workers, "workers", 0, f"a whole number between 0 and {MAX_WORKERS}")
        check(self.workers <= MAX_WORKERS, "workers", self.workers, f"a whole number between 0 and {MAX_WORKERS}")
        if self.prefetch is not None:
            _int(self.prefetch, "prefetch", 1, f"a whole number between 1 and {MAX_PREFETCH}")
            check(self.prefetch <= MAX_PREFETCH, "prefetch", self.prefetch, f"a whole number between 1 and {MAX_PREFETCH}")
            check(
                self.workers > 0,
                "prefetch",
                self.prefetch,
                "only with --workers >= 1 (with 0 workers batches load in the training process, nothing ahead)",
            )
        _num(
            self.io_latency_ms,
            "io_latency_ms",
            f"milliseconds between 0 and {MAX_PER_BATCH_MS:.0f}",
            lambda v: 0 <= v <= MAX_PER_BATCH_MS,
        )
        _num(self.io_jitter, "io_jitter", "a coefficient of variation between 0 and 3", lambda v: 0 <= v <= 3)
        _num(
            self.transform_ms,
            "transform_ms",
            f"milliseconds between 0 and {MAX_PER_BATCH_MS:.0f}",
            lambda v: 0 <= v <= MAX_PER_BATCH_MS,
        )
        check(isinstance(self.pin_memory, bool), "pin_memory", self.pin_memory, "true or false")
        check(
            isinstance(self.persistent_workers, bool),
            "persistent_workers",
            self.persistent_workers,
            "true or false",
        )
        check(
            not self.persistent_workers or self.workers > 0,
            "persistent_workers",
            self.persistent_workers,
            "only with --workers >= 1",
        )
        check(isinstance(self.device_prefetch, bool), "device_prefetch", self.device_prefetch, "true or false")
        if self.threads is not None:
            _int(self.threads, "threads", 1, f"a whole number between 1 and {MAX_THREADS}")
            check(self.threads <= MAX_THREADS, "threads", self.threads, f"a whole number between 1 and {MAX_THREADS}")
        check(isinstance(self.overwrite, bool), "overwrite", self.overwrite, "true or false")
        from .distributed.launch import check_scale_out

        check_scale_out(self)
        check(isinstance(self.extra, dict), "extra", self.extra, "a dict of experiment-specific settings")

    # --- derived values -------------------------------------------------
    @property
    def pipeline_depth(self) -> int:
        """Batches that can be loaded ahead of the training loop (workers x prefetch)."""
        if self.workers == 0:
            return 0
        return self.workers * (self.prefetch if self.prefetch is not None else 2)

    def resolved_batch_size(self) -> int:
        return self.batch_size if self.batch_size is not None else PRESETS[self.model].batch_size

    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else PRESETS[self.model].lr

    # --- (de)serialisation ------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kill_at_steps"] = list(self.kill_at_steps)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(unknown[0], d[unknown[0]], f"a known setting ({', '.join(sorted(names))})")
        d = dict(d)
        if "kill_at_steps" in d:
            d["kill_at_steps"] = tuple(d["kill_at_steps"])
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)


def _int(value: Any, name: str, minimum: int, allowed: str) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    check(ok, name, value, allowed)


def _num(value: Any, name: str, allowed: str, ok) -> None:
    is_num = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    check(is_num and ok(value), name, value, allowed)
