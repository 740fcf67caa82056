"""The run configuration: one validated dataclass, the single source of truth for a run's settings.

Each field is declared once, with its default, its rule (:mod:`goodputlab.validate`),
its help text, its group and the unit a reader types: the API (``gl.run(steps=...)``),
the command line (``goodputlab run --steps``: the flags are generated from these
fields, :mod:`goodputlab.cli.run`), ``--help`` and the field table in
``RunConfig``'s docstring all come from here. A
:class:`~goodputlab.errors.ConfigError` names the field, and so the flag
(``ckpt_every`` is ``--ckpt-every``).
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import validate
from ..checkpoints import registry
from ..distributed import launch
from ..errors import ConfigError, check
from ..recovery.modes import FAILURE_CLOCKS, FAILURE_MODES, KILL, LOADER_DEATH, TRAIN_CLOCK, describe_modes
from ..recovery.omit import OmitRule
from ..training.workload import PRESETS

DEVICES = ("auto", "cpu", "cuda")
AUTO = "auto"  # ckpt_every="auto": the interval from Daly's formula, measured as the run goes (goodputlab.checkpoints.interval)

# Limits checked before a run starts: beyond them the worker would crash (or the kernel would), not train.
MAX_SEED = 2**64 - 1  # torch.manual_seed takes 64 bits
MAX_THREADS = 256  # far past any gain; very large counts crash OpenMP's thread pool (a segfault, no log)
MAX_WORKERS = 64  # DataLoader processes, each a fork of the training process
MAX_PREFETCH = 256  # batches each worker loads ahead
MAX_DELAY_S = 86_400.0  # a day; time.sleep overflows near 2**63 ns
MAX_STORAGE_MBPS = 1e6  # a terabyte a second: far past any disk, which then sets the pace itself
MAX_PER_BATCH_MS = 60_000.0  # a minute of emulated latency or transform per batch
MAX_STRAGGLER_FACTOR = launch.MAX_STRAGGLER_FACTOR  # a step 100 times its time; more is a hang, not a straggler
DEFAULT_HANG_TIMEOUT_S = 5.0  # the watchdog's timeout when --failure-mode hang gives none
#: --ft-failed-step: a survivor of a failed all-reduce reduces its kept gradient again (``reuse``), or computes
#: the step again as torchft's own OptimizerWrapper makes a loop do (``recompute``; docs/IN_JOB_RECOVERY.md)
FT_FAILED_STEP = ("reuse", "recompute")

#: The groups of ``goodputlab run --help``, in order.
GROUPS = ("training", "checkpoints", "failures", "distributed", "input pipeline", "output")


def pytorch_prefetch() -> int:
    """PyTorch's default prefetch per worker (:data:`goodputlab.theory.data_stall.DEFAULT_PREFETCH`), imported
    when asked: reading a run's configuration (``goodputlab report``) does not load the theory."""
    from ..theory.data_stall import DEFAULT_PREFETCH

    return DEFAULT_PREFETCH


def setting(
    default: Any,
    help: str,
    rule: validate.Rule | None,
    group: str,
    metavar: str | None = None,
    *,
    flag: bool = True,
    default_text: str | Callable[[], str] | None = None,
) -> Any:
    """A :class:`RunConfig` field: its default, what it means (``help``, as ``--help`` shows it), its
    ``rule``, its ``group`` in ``--help`` and the ``metavar`` a reader types (the unit: N, SECONDS, MS).

    ``default_text`` is how ``--help`` shows the default (``the preset's`` for ``None``; a function: its
    text, asked for when the help is written); ``flag=False``
    keeps a field off the command line. A bool field is a switch (``--pin-memory``).
    """
    meta = {"help": help, "rule": rule, "group": group, "metavar": metavar, "flag": flag, "default_text": default_text}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one experiment; validated on construction.

    Times are in seconds unless the name says otherwise (``_ms``: milliseconds); intervals in steps.
    Every field, its default and what it allows: see the table below (also ``goodputlab run --help``).
    """

    # --- training
    steps: int = setting(400, "training steps to complete", validate.Whole(1, unit="steps"), "training", "N")
    model: str = setting(
        "tiny", f"size preset: {', '.join(PRESETS)}", validate.Choice(tuple(PRESETS)), "training", "NAME"
    )
    batch_size: int | None = setting(
        None, "sequences per step", validate.Optional(validate.Whole()), "training", "N", default_text="the preset's"
    )
    lr: float | None = setting(
        None,
        "peak learning rate (AdamW, warm-up then cosine decay)",
        validate.Optional(validate.Number(0, low_open=True, text="a learning rate > 0")),
        "training",
        "RATE",
        default_text="the preset's",
    )
    device: str = setting("auto", "auto, cpu or cuda", validate.Choice(DEVICES), "training", "DEVICE",
                          default_text="auto: CUDA when present")
    seed: int = setting(
        0,
        "seeds model, data, order and failure times",
        validate.Whole(0, MAX_SEED, text=f"a whole number between 0 and 2**64-1 ({MAX_SEED})"),
        "training",
        "N",
    )
    threads: int | None = setting(
        None, "torch threads in each worker", validate.Optional(validate.Whole(1, MAX_THREADS)), "training", "N",
        default_text="1 for the tiny and small models, else the cores free",
    )

    # --- checkpoints
    ckpt_every: int | str = setting(
        50,
        "save every N steps; 0: final save only; auto: Daly's interval from measured save cost and failures",
        validate.Either(
            validate.Whole(0), validate.Choice((AUTO,)), text="a whole number of steps >= 0 (0: final save only) or auto"
        ),
        "checkpoints",
        "N|auto",
    )
    ckpt_every_s: float | None = setting(
        None, "also save every S seconds", validate.Optional(validate.Number(0, low_open=True, text="seconds > 0")),
        "checkpoints", "SECONDS", default_text="",
    )
    ckpt: str = setting(
        registry.BASELINE,
        f"checkpoint strategy: {registry.describe()}",
        validate.Choice(registry.names()),
        "checkpoints",
        "STRATEGY",
    )
    memory_disk_every: int = setting(
        4, "with --ckpt memory: also write every K-th save to disk",
        validate.Whole(1, unit="saves", note="1: every save"), "checkpoints", "K",
    )
    keep: int = setting(3, "checkpoints kept on disk", validate.Whole(1), "checkpoints", "N")
    ckpt_storage_mbps: float = setting(
        0.0, "emulate checkpoint storage of this bandwidth, MB/s: a save's files take at least their size over it "
        "to write, and a restore's to read (the bytes are real); 0: the disk as it is",
        validate.Number(0, MAX_STORAGE_MBPS, text=f"MB/s between 0 and {MAX_STORAGE_MBPS:.0f} (0: the disk as it is)"),
        "checkpoints", "MB/S", default_text="0: the disk as it is",
    )
    ckpt_omit: tuple[str, ...] = setting(
        (), "leave these parts out of every checkpoint, to see what goes wrong: optimizer, data, rng (comma-separated)",
        OmitRule(), "checkpoints", "PARTS", default_text="",
    )

    # --- failures
    ckpt_jit: bool = setting(
        False, "just-in-time checkpoints: when a rank of a job under torchrun sees a failure, a healthy rank saves "
        "the state it holds before the group restarts (DDP; not when the failure takes the machine's memory)",
        validate.Boolean(), "checkpoints",
    )
    mtbf: float = setting(
        0.0, "mean seconds between failures; 0: none", validate.Number(0, text="seconds >= 0 (0: no random failures)"),
        "failures", "SECONDS",
    )
    failure_clock: str = setting(
        TRAIN_CLOCK, "when a worker's failure clock runs: train (from its first step: the MTBF counts training time, "
        "so a slow start cannot use it up) or wall (from its launch: start-up and restore are exposed too)",
        validate.Choice(FAILURE_CLOCKS), "failures", "CLOCK",
    )
    kill_at_steps: tuple[int, ...] = setting(
        (), "also kill after these steps, e.g. 30,80 (with --emulate-nodes: one rank's process, its node lives on)",
        validate.WholeList(validate.Whole(), text="comma-separated step numbers, e.g. 30,80"), "failures", "STEPS",
        default_text="",
    )
    restart_delay: float = setting(
        0.5, "seconds before relaunch",
        validate.Number(0, MAX_DELAY_S, text=f"seconds between 0 and {MAX_DELAY_S:.0f}"), "failures", "SECONDS",
    )
    max_failures: int = setting(50, "failures absorbed before giving up", validate.Whole(0), "failures", "N")
    failure_mode: str = setting(
        KILL, f"what a failure does: {describe_modes()}", validate.Choice(FAILURE_MODES), "failures", "MODE",
    )
    hang_timeout: float | None = setting(
        None, "seconds without progress before the watchdog declares a worker hung and kills it",
        validate.Optional(validate.Number(0, MAX_DELAY_S, low_open=True, text=f"seconds > 0 and <= {MAX_DELAY_S:.0f}")),
        "failures", "SECONDS", default_text=f"{DEFAULT_HANG_TIMEOUT_S:g} with --failure-mode hang, else none",
    )
    straggler_prob: float = setting(
        0.0, "share of steps a straggler slows (the same steps in every attempt); 0: none",
        validate.Number(0, 1, text="a share of steps between 0 and 1 (0: no straggler, 1: every step)"),
        "failures", "SHARE",
    )
    straggler_factor: float = setting(
        2.0, "a slowed step takes this many times as long (its forward and backward)",
        validate.Number(1, MAX_STRAGGLER_FACTOR, text=f"a number between 1 and {MAX_STRAGGLER_FACTOR:g} (1: not slowed)"),
        "failures", "FACTOR",
    )
    hot_spare: bool = setting(
        False, "keep a started worker waiting: at a failure it takes over, no new process to start",
        validate.Boolean(), "failures",
    )

    # --- distributed (goodputlab.distributed; the rules between them: launch.check_scale_out)
    nproc: int = setting(
        1, "ranks on this machine: more than 1 trains data-parallel under torchrun (gloo on CPU, NCCL on CUDA); "
        "--mtbf is then each rank's", validate.Whole(1, launch.MAX_NPROC, unit="ranks"), "distributed", "N",
    )
    nnodes: int = setting(
        1, "machines in the job (each runs --nproc ranks and this command)",
        validate.Whole(1, launch.MAX_NNODES, unit="machines"), "distributed", "N",
    )
    node_rank: int | None = setting(
        None, "this machine's fixed number in a job of several (torchrun's static rendezvous)",
        validate.Optional(validate.Whole(0)), "distributed", "N", default_text="numbered by the rendezvous",
    )
    rdzv_endpoint: str | None = setting(
        None, "HOST:PORT of the rendezvous every machine can reach (needed with --nnodes > 1)",
        validate.Optional(validate.Satisfies(launch.endpoint_parses, launch.ENDPOINT_ALLOWED)), "distributed",
        "HOST:PORT", default_text="a private one on this machine",
    )
    rdzv_timeout: float = setting(
        launch.DEFAULT_RDZV_TIMEOUT_S, "seconds from launch until the ranks have met; then the run stops (exit 2)",
        validate.Number(0, launch.MAX_RDZV_TIMEOUT_S, low_open=True, text=launch.RDZV_TIMEOUT_ALLOWED),
        "distributed", "SECONDS",
    )
    launcher: str = setting(
        "auto", "auto: torchrun from 2 ranks on, else one worker process; torchrun: always (one rank too)",
        validate.Choice(launch.LAUNCHERS), "distributed", "NAME",
    )
    fault_tolerance: str = setting(
        "none", "none: a failure restarts the whole group (torchrun); torchft: --nproc replica groups, the others "
        "train on while a failed one relaunches and heals from a peer (pip install 'goodputlab[ft]')",
        validate.Choice(launch.FAULT_TOLERANCE), "distributed", "MODE",
    )
    group_size: int = setting(
        1, "with --fault-tolerance torchft: ranks in each replica group; more than 1 makes each group a torchrun job of "
        "this many ranks, data-parallel inside the group and joined across groups by torchft",
        validate.Whole(1, launch.MAX_NPROC, unit="ranks"), "distributed", "R",
    )
    ft_failed_step: str = setting(
        "reuse", "with --fault-tolerance torchft: what a survivor does with a step whose all-reduce failed (a peer died): "
        "reuse (reduce the gradient it kept again over the next quorum: this lab's loop) or recompute (skip the step "
        "and compute it again: torchft's OptimizerWrapper)",
        validate.Choice(FT_FAILED_STEP), "distributed", "MODE",
    )
    emulate_nodes: int = setting(
        0, "emulate this many machines on this one, each in a network namespace of its own on a private bridge, "
        "--nproc ranks each (with --fault-tolerance torchft: one replica group each, --nproc N; "
        "needs root or CAP_NET_ADMIN; docs/DISTRIBUTED.md)",
        validate.Whole(0, launch.MAX_EMULATED_NODES, unit="nodes"), "distributed", "N", default_text="0: off",
    )
    kill_node_at_steps: tuple[int, ...] = setting(
        (), "with --emulate-nodes: kill every process of one node at once after these steps, e.g. 30,80",
        validate.WholeList(validate.Whole(), text="comma-separated step numbers, e.g. 30,80"), "distributed", "STEPS",
        default_text="",
    )
    node_mtbf: float = setting(
        0.0, "with --emulate-nodes: each node's mean seconds between whole-node failures (a seeded Poisson process "
        "on the --failure-clock, the job's MTBF is node-mtbf / nodes); 0: none",
        validate.Number(0, text="seconds >= 0 (0: no random node failures)"), "distributed", "SECONDS",
    )
    partition_at_steps: tuple[int, ...] = setting(
        (), "with --emulate-nodes: take one node's link down after these steps for --partition-s seconds",
        validate.WholeList(validate.Whole(), text="comma-separated step numbers, e.g. 30,80"), "distributed", "STEPS",
        default_text="",
    )
    partition_s: float = setting(
        5.0, "seconds a partition keeps the node's link down",
        validate.Number(0, launch.MAX_PARTITION_S, low_open=True, text=f"seconds > 0 and <= {launch.MAX_PARTITION_S:.0f}"),
        "distributed", "SECONDS",
    )
    spare_nodes: int = setting(
        0, "with --emulate-nodes: spare nodes, each a namespace with a warm torchrun agent; a node that dies is "
        "replaced by a spare, and every relaunch hands its command to warm agents instead of starting new ones",
        validate.Whole(0, launch.MAX_EMULATED_NODES, unit="nodes"), "distributed", "M", default_text="0: none",
    )
    oversubscribe: bool = setting(
        False, "start more ranks than this machine's cores and free memory hold (2 a core; the model's run memory "
        "each): you know better", validate.Boolean(), "distributed",
    )
    straggler_rank: int | None = setting(
        None, "the rank that straggles (--straggler-prob and --straggler-factor say how)",
        validate.Optional(validate.Whole(0)), "distributed", "RANK",
        default_text="every rank, each on draws of its own",
    )

    # --- input pipeline
    workers: int = setting(0, "DataLoader worker processes", validate.Whole(0, MAX_WORKERS), "input pipeline", "N")
    prefetch: int | None = setting(
        None, "batches per worker loaded ahead (needs --workers)",
        validate.Optional(validate.Whole(1, MAX_PREFETCH)), "input pipeline", "N",
        default_text=lambda: f"PyTorch's {pytorch_prefetch()}",
    )
    io_latency_ms: float = setting(
        0.0, "emulated storage latency per batch, ms",
        validate.Number(0, MAX_PER_BATCH_MS, text=f"milliseconds between 0 and {MAX_PER_BATCH_MS:.0f}"),
        "input pipeline", "MS",
    )
    io_jitter: float = setting(
        0.0, "coefficient of variation of that latency",
        validate.Number(0, 3, text="a coefficient of variation between 0 and 3"), "input pipeline", "CV",
    )
    transform_ms: float = setting(
        0.0, "CPU transform cost per batch, ms",
        validate.Number(0, MAX_PER_BATCH_MS, text=f"milliseconds between 0 and {MAX_PER_BATCH_MS:.0f}"),
        "input pipeline", "MS",
    )
    pin_memory: bool = setting(False, "pin host batches (CUDA only)", validate.Boolean(), "input pipeline")
    persistent_workers: bool = setting(
        False, "keep DataLoader workers between epochs", validate.Boolean(), "input pipeline"
    )
    device_prefetch: bool = setting(
        False, "copy the next batch to the GPU while a step runs (CUDA only)", validate.Boolean(), "input pipeline"
    )

    # --- output
    overwrite: bool = setting(
        False,
        "use an --out folder that holds other files, replacing goodputlab's own files there",
        validate.Boolean(),
        "output",
    )
    extra: dict[str, Any] = setting(
        {}, "experiment-specific settings: recorded, not interpreted",
        validate.Satisfies(lambda v: isinstance(v, dict), "a dict of experiment-specific settings"), "output", flag=False,
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata["rule"] is not None:
                f.metadata["rule"](f.name, value)
            if f.name in _RULES_BETWEEN_FIELDS:
                _RULES_BETWEEN_FIELDS[f.name](self)
            if isinstance(value, numbers.Number) and type(value) not in (int, float, bool):
                object.__setattr__(self, f.name, int(value) if isinstance(value, numbers.Integral) else float(value))

    # --- derived values -------------------------------------------------
    @property
    def pipeline_depth(self) -> int:
        """Batches that can be loaded ahead of the training loop (workers x prefetch)."""
        if self.workers == 0:
            return 0
        return self.workers * (self.prefetch if self.prefetch is not None else pytorch_prefetch())

    def resolved_batch_size(self) -> int:
        return self.batch_size if self.batch_size is not None else PRESETS[self.model].batch_size

    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else PRESETS[self.model].lr

    def storage_bps(self) -> float:
        """The emulated checkpoint storage's bandwidth in bytes per second (0: none)."""
        return self.ckpt_storage_mbps * 1e6

    def resolved_hang_timeout(self) -> float | None:
        """The watchdog's timeout: ``hang_timeout``, or :data:`DEFAULT_HANG_TIMEOUT_S` for ``--failure-mode hang``."""
        if self.hang_timeout is not None:
            return self.hang_timeout
        return DEFAULT_HANG_TIMEOUT_S if self.failure_mode == "hang" else None

    # --- (de)serialisation ------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kill_at_steps"] = list(self.kill_at_steps)
        d["kill_node_at_steps"] = list(self.kill_node_at_steps)
        d["partition_at_steps"] = list(self.partition_at_steps)
        d["ckpt_omit"] = list(self.ckpt_omit)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(unknown[0], d[unknown[0]], f"a known setting ({', '.join(sorted(names))})")
        d = dict(d)
        for name in ("kill_at_steps", "kill_node_at_steps", "partition_at_steps", "ckpt_omit"):
            if isinstance(d.get(name), list):
                d[name] = tuple(d[name])
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)


# --- rules between fields: checked right after the field they are named after ------------------------


def _batch_size_fits_the_data(c: RunConfig) -> None:
    if c.batch_size is not None:
        n_samples = PRESETS[c.model].n_samples
        allowed = f"a whole number between 1 and {n_samples} (the {c.model} data set's sequences)"
        check(1 <= c.batch_size <= n_samples, "batch_size", c.batch_size, allowed)


def _kills_inside_the_run(c: RunConfig) -> None:
    for s in c.kill_at_steps:
        check(1 <= s < c.steps, "kill_at_steps", s, f"steps between 1 and steps-1 ({c.steps - 1})")


def _prefetch_needs_workers(c: RunConfig) -> None:
    check(
        c.prefetch is None or c.workers > 0,
        "prefetch",
        c.prefetch,
        "only with --workers >= 1 (with 0 workers batches load in the training process, nothing ahead)",
    )


def _persistent_workers_need_workers(c: RunConfig) -> None:
    check(not c.persistent_workers or c.workers > 0, "persistent_workers", c.persistent_workers, "only with --workers >= 1")


def _loader_death_needs_workers(c: RunConfig) -> None:
    check(
        c.failure_mode != LOADER_DEATH or c.workers > 0,
        "failure_mode",
        c.failure_mode,
        "loader-death only with --workers >= 1 (with 0 workers there is no DataLoader worker process to kill)",
    )


def _failed_step_is_torchfts(c: RunConfig) -> None:
    check(c.ft_failed_step == "reuse" or c.fault_tolerance == "torchft", "ft_failed_step", c.ft_failed_step,
          "reuse without --fault-tolerance torchft (a torchrun job restarts every rank: no survivor retries a step)")


_RULES_BETWEEN_FIELDS: dict[str, Callable[[RunConfig], None]] = {
    "batch_size": _batch_size_fits_the_data,
    "kill_at_steps": _kills_inside_the_run,
    "ft_failed_step": _failed_step_is_torchfts,
    "straggler_rank": launch.check_scale_out,  # the last distributed field: the launch, the batch split, ckpt
    "prefetch": _prefetch_needs_workers,
    "persistent_workers": _persistent_workers_need_workers,
    "workers": _loader_death_needs_workers,
}


def _field_table() -> str:
    """The fields as a table for the docstring: name, default, what it is, what is allowed."""
    rows = []
    for f in dataclasses.fields(RunConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        rule = f.metadata["rule"]
        rows.append(f"- ``{f.name}`` (default ``{default!r}``): {f.metadata['help']}; {rule.allowed if rule else ''}")
    return "\n".join(rows)


RunConfig.__doc__ = (RunConfig.__doc__ or "") + "\n    Fields:\n\n" + "\n".join("    " + r for r in _field_table().split("\n")) + "\n"
