"""The ``torchrun`` command line of a distributed run (pure: no torch).

``torchrun`` (``python -m torch.distributed.run``, PyTorch's elastic launcher) starts
``nproc`` copies of the training worker on this machine, gives each its ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE`` and a rendezvous to meet the others at, watches them
every ``monitor_interval`` seconds, and when one dies stops the others and starts the
whole group again, up to ``max_restarts`` times (each new group sees
``TORCHELASTIC_RESTART_COUNT`` = its attempt number).

* One machine (``nnodes`` 1): a private rendezvous with no port at all, torchrun's c10d
  rendezvous over a :class:`torch.distributed.FileStore` in a file only this user can read
  and write; the ranks' own sockets listen on loopback (:mod:`~goodputlab.distributed.binding`).
* Several machines: every machine runs the same command with ``--nnodes N
  --rdzv-endpoint HOST:PORT`` (the machine that hosts the rendezvous, reachable by all);
  the c10d rendezvous numbers the machines. With ``--node-rank R`` the numbering is
  fixed instead (torchrun's static rendezvous, where ``HOST:PORT`` is node 0's). Its ports
  authenticate nobody: they must be reachable only from the job's own machines
  (:func:`~goodputlab.distributed.binding.exposure_warning`, ``docs/SECURITY.md``).

Either way the rendezvous must complete within ``rdzv_timeout_s`` (torchrun's own join and
read timeouts, and the supervisor's deadline for the first rank to start,
:class:`~goodputlab.distributed.launcher.TorchrunJob`).
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass

from ..errors import ConfigError, check
from ..validate import is_number, is_whole
from .binding import bind_address, is_bindable_address

#: The job attempts before this torchrun started (set by the supervisor of an emulated cluster, which
#: relaunches every node's torchrun itself): a rank's attempt is this plus torchrun's restart count.
ATTEMPT_BASE_ENV = "GOODPUTLAB_ATTEMPT_BASE"
#: torchrun, with the c10d rendezvous store bound to the hosting node's address (an emulated node 0)
NODE_AGENT_MODULE = "goodputlab.distributed.node_agent"
MAX_NPROC = 1024  # ranks on one machine; far past any machine's accelerators or cores
MAX_NNODES = 100_000
MAX_EMULATED_NODES = 8  # network namespaces on one machine (--emulate-nodes): each runs --nproc ranks
MAX_PARTITION_S = 600.0
MAX_STRAGGLER_FACTOR = 100.0  # a step 100 times slower is a hang, not a straggler
DEFAULT_MONITOR_INTERVAL_S = 0.05  # torchrun's default is 0.1 s; a failure is noticed within this
ENDPOINT_ALLOWED = (
    "HOST:PORT, e.g. node0:29500 or [fd00::1]:29500 (a port between 1 and 65535; a host the machines can reach, "
    "not 0.0.0.0 or [::])"
)
DEFAULT_RDZV_TIMEOUT_S = 60.0  # from launch to the first rank started: torch's own join timeout is 600 s
MAX_RDZV_TIMEOUT_S = 86_400.0

_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")


def endpoint_parses(text) -> bool:
    """Does ``text`` parse as a rendezvous endpoint (:func:`parse_rdzv_endpoint`)?"""
    try:
        parse_rdzv_endpoint(text)
    except ConfigError:
        return False
    return True


def parse_rdzv_endpoint(text: str) -> tuple[str, int]:
    """``(host, port)`` of a rendezvous endpoint ``HOST:PORT`` (an IPv6 host in brackets).

    Raises :class:`~goodputlab.errors.ConfigError` (field ``rdzv_endpoint``) for anything
    else: no port, a port outside 1-65535, an empty or malformed host.
    """
    if not isinstance(text, str):
        raise ConfigError("rdzv_endpoint", text, ENDPOINT_ALLOWED)
    s = text.strip()
    if s.startswith("["):
        host, sep, rest = s[1:].partition("]")
        ok = sep and rest.startswith(":") and _IPV6.match(host) is not None and ":" in host
        port_text = rest[1:] if ok else ""
    else:
        host, sep, port_text = s.rpartition(":")
        ok = bool(sep) and ":" not in host and _HOST.match(host) is not None
    if not ok or not port_text.isdigit() or not 1 <= int(port_text) <= 65535 or _unspecified(host):
        raise ConfigError("rdzv_endpoint", text, ENDPOINT_ALLOWED)
    return host, int(port_text)


def _unspecified(host: str) -> bool:
    """``0.0.0.0`` or ``::``: every interface of a listener, not an address to meet at."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


@dataclass(frozen=True)
class TorchrunLaunch:
    """How ``torchrun`` starts the ranks; validated on construction.

    ``nproc``: ranks on this machine; ``nnodes``: machines in the job; ``node_rank``: this
    machine's fixed number (``None``: the rendezvous numbers them); ``rdzv_endpoint``:
    ``HOST:PORT`` of the rendezvous (needed with more than one machine); ``rdzv_id``: the
    job's name at the rendezvous (the same on every machine); ``max_restarts``: group
    restarts before torchrun gives up; ``monitor_interval_s``: how often torchrun looks at
    its ranks; ``log_dir``: where torchrun keeps every rank's output, per attempt;
    ``rdzv_timeout_s``: seconds the rendezvous may take before the launch gives up;
    ``bind_host``: the numeric address this machine's listening sockets of the job bind to
    (``None``: loopback on one machine, every interface on several; see
    :func:`~goodputlab.distributed.binding.bind_address`); ``rdzv_is_host``: whether this machine
    hosts the c10d rendezvous store (``None``: torch decides by the endpoint's host name, which
    fails for a node in a network namespace of its own).
    """

    nproc: int
    nnodes: int = 1
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str = "goodputlab"
    max_restarts: int = 0
    monitor_interval_s: float = DEFAULT_MONITOR_INTERVAL_S
    log_dir: str | None = None
    rdzv_timeout_s: float = DEFAULT_RDZV_TIMEOUT_S
    bind_host: str | None = None
    rdzv_is_host: bool | None = None

    def __post_init__(self) -> None:
        check(is_whole(self.nproc) and 1 <= self.nproc <= MAX_NPROC, "nproc", self.nproc,
              f"a whole number of ranks between 1 and {MAX_NPROC}")
        check(is_whole(self.nnodes) and 1 <= self.nnodes <= MAX_NNODES, "nnodes", self.nnodes,
              f"a whole number of machines between 1 and {MAX_NNODES}")
        if self.node_rank is not None:
            check(is_whole(self.node_rank) and 0 <= self.node_rank < self.nnodes, "node_rank", self.node_rank,
                  f"a machine number between 0 and {self.nnodes - 1} (--nnodes {self.nnodes}, numbered from 0)")
        if self.rdzv_endpoint is not None:
            parse_rdzv_endpoint(self.rdzv_endpoint)
        check(self.nnodes == 1 or self.rdzv_endpoint is not None, "rdzv_endpoint", self.rdzv_endpoint,
              f"{ENDPOINT_ALLOWED}: a job on {self.nnodes} machines needs a rendezvous every machine can reach")
        check(self.nnodes > 1 or self.rdzv_endpoint is None, "rdzv_endpoint", self.rdzv_endpoint,
              "only with --nnodes > 1 (a run on one machine meets at a private file of its own, with no port)")
        check(is_rdzv_timeout(self.rdzv_timeout_s), "rdzv_timeout", self.rdzv_timeout_s, RDZV_TIMEOUT_ALLOWED)
        if self.bind_host is not None:
            check(is_bindable_address(self.bind_host), "bind_host", self.bind_host,
                  "a numeric IP address of this machine (not 0.0.0.0 or ::)")
            check(self.node_rank is None, "bind_host", self.bind_host,
                  "an address with the c10d rendezvous (no --node-rank): the static one's store binds every interface")
        check(isinstance(self.rdzv_id, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", self.rdzv_id) is not None,
              "rdzv_id", self.rdzv_id, "1 to 64 letters, digits, '.', '_' or '-'")
        check(is_whole(self.max_restarts) and self.max_restarts >= 0, "max_restarts", self.max_restarts,
              "a whole number >= 0")

    @property
    def world_size(self) -> int:
        """Ranks in the whole job (every machine runs ``nproc``)."""
        return self.nproc * self.nnodes

    def command(self, python: str, module: str, module_args: list[str], rdzv_file: str | None = None) -> list[str]:
        """The argument vector that starts ``python -m torch.distributed.run`` for ``python -m module``
        (:data:`NODE_AGENT_MODULE` instead for the machine that hosts the rendezvous at its ``bind_host``).

        ``rdzv_file``: on one machine, the private file that holds the rendezvous (created by
        the caller, mode ``0o600``; :class:`~goodputlab.distributed.launcher.TorchrunJob` does).
        """
        # the agent that hosts the rendezvous at a node's own address binds its store there first (node_agent)
        agent = NODE_AGENT_MODULE if self.rdzv_is_host and self.bind_host is not None else "torch.distributed.run"
        cmd = [python, "-m", agent]
        seconds = str(max(1, math.ceil(self.rdzv_timeout_s)))  # torchrun reads whole seconds
        if self.nnodes == 1:
            if rdzv_file is None:
                raise ValueError("a run on one machine needs rdzv_file: the file of its private rendezvous")
            cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_file, "--rdzv-id", self.rdzv_id,
                    "--rdzv-conf", f"store_type=file,join_timeout={seconds}"]
        elif self.node_rank is not None:
            cmd += ["--rdzv-backend", "static", "--rdzv-endpoint", self.rdzv_endpoint, "--node-rank", str(self.node_rank),
                    "--rdzv-conf", f"timeout={seconds}"]
        else:
            cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", self.rdzv_endpoint, "--rdzv-id", self.rdzv_id,
                    "--rdzv-conf", f"join_timeout={seconds},read_timeout={seconds}" + (
                        "" if self.rdzv_is_host is None else f",is_host={str(self.rdzv_is_host).lower()}")]
        address = bind_address(self)
        if address is not None:  # MASTER_ADDR of the ranks' store: the address it listens on
            cmd += ["--local-addr", address]
        cmd += [
            "--nnodes", str(self.nnodes),
            "--nproc-per-node", str(self.nproc),
            "--max-restarts", str(self.max_restarts),
            "--monitor-interval", repr(float(self.monitor_interval_s)),
        ]
        if self.log_dir is not None:
            # every rank's output in its own file (per attempt), and on torchrun's output with a [rank] prefix
            cmd += ["--log-dir", self.log_dir, "--redirects", "3", "--tee", "3"]
        return cmd + ["-m", module, *module_args]


def check_batch_split(batch_size: int, nproc: int, nnodes: int = 1) -> None:
    """Refuse ``nproc`` ranks per machine (``nproc x nnodes`` in all) that cannot split
    ``batch_size`` sequences into equal shards (field ``nproc``).

    Equal shards keep data parallelism exact: the mean of the ranks' mean losses is the
    mean loss of the whole batch, so the averaged gradient is the one-process gradient.
    """
    if batch_size % (nproc * nnodes) == 0:
        return
    fits = [d for d in range(1, batch_size + 1) if batch_size % (d * nnodes) == 0]
    shown = ", ".join(map(str, fits[:12])) + (", ..." if len(fits) > 12 else "") if fits else "none"
    machines = f" on each of {nnodes} machines" if nnodes > 1 else ""
    raise ConfigError(
        "nproc",
        nproc,
        f"a number of ranks{machines} that splits the batch of {batch_size} sequences evenly ({shown})",
    )


LAUNCHERS = ("auto", "torchrun")
#: --fault-tolerance: none (torchrun restarts the whole group) or torchft (in-job recovery, docs/IN_JOB_RECOVERY.md)
FAULT_TOLERANCE = ("none", "torchft")


def uses_torchrun(config) -> bool:
    """Does this run configuration start its worker under ``torchrun``? (More than one rank, or ``launcher="torchrun"``.)"""
    return config.launcher == "torchrun" or config.nproc * config.nnodes > 1 or config.emulate_nodes >= 2


def machines(config) -> int:
    """Machines in the job: ``nnodes``, or the emulated nodes of ``--emulate-nodes`` (under torchft each
    node is one of the ``--nproc`` replica groups: ``nproc`` counts the job's groups, not a node's ranks)."""
    return config.emulate_nodes if config.emulate_nodes >= 2 and config.fault_tolerance == "none" else config.nnodes


#: Settings of the one-process engine (``goodputlab.recovery``) that a job under torchrun does not support,
#: with the value it needs and what to say (``kill`` is ``goodputlab.recovery.modes.KILL``).
_NOT_UNDER_TORCHRUN = (
    ("hot_spare", False, "off under torchrun: torchrun restarts the whole group of ranks; there is no standby "
                         "rank to hand over to (a spare replica group: with --fault-tolerance torchft)"),
    ("failure_mode", "kill", "kill under torchrun: a failure kills one rank (hang, exception, loader-death and "
                             "disk-full are one-process modes)"),
    ("ckpt_omit", (), "nothing under torchrun: a sharded checkpoint always holds the whole state"),
    ("hang_timeout", None, "none under torchrun (the heartbeat watchdog watches one worker process)"),
)


def _recovery_settings_under_torchrun(config) -> None:
    for name, needed, allowed in _NOT_UNDER_TORCHRUN:
        if name == "hang_timeout" and config.emulate_nodes >= 2 and config.fault_tolerance == "none":
            continue  # the emulated cluster's supervisor watches the job's steps (a partition's hang)
        if name == "hot_spare" and config.fault_tolerance == "torchft":
            continue  # a standby replica group takes over a killed one (engine/torchft_supervision.py)
        value = getattr(config, name)
        check(value == needed, name, value, allowed)


RDZV_TIMEOUT_ALLOWED = f"seconds > 0 and <= {MAX_RDZV_TIMEOUT_S:.0f}"


def is_rdzv_timeout(value) -> bool:
    """Is ``value`` a rendezvous timeout in seconds (> 0, at most a day)?"""
    return is_number(value) and 0 < value <= MAX_RDZV_TIMEOUT_S  # nan fails both comparisons


def launch_of(config, max_restarts: int = 0, log_dir: str | None = None, rdzv_id: str = "goodputlab",
              bind_host: str | None = None) -> TorchrunLaunch:
    """The :class:`TorchrunLaunch` of a run configuration (its ``nproc``, ``nnodes``, ``node_rank``,
    ``rdzv_endpoint``, ``rdzv_timeout``); ``bind_host``: see :class:`TorchrunLaunch`."""
    return TorchrunLaunch(
        nproc=config.nproc,
        nnodes=config.nnodes,
        node_rank=config.node_rank,
        rdzv_endpoint=config.rdzv_endpoint,
        rdzv_id=rdzv_id,
        max_restarts=max_restarts,
        log_dir=log_dir,
        rdzv_timeout_s=config.rdzv_timeout,
        bind_host=bind_host,
    )


def check_scale_out(config) -> None:
    """The rules between a run configuration's distributed fields and the rest; ``ConfigError`` naming the field.

    * the launch itself (:class:`TorchrunLaunch`: ``nproc``, ``nnodes``, ``node_rank``, ``rdzv_endpoint``);
    * the batch splits evenly over the ranks (:func:`check_batch_split`);
    * ``--ckpt memory`` under torchrun only with DDP (each rank's RAM snapshot is the whole state;
      :mod:`goodputlab.distributed.node_ram`), not with FSDP or torchft;
    * a straggler rank is a rank of a job of two or more ranks and comes with ``straggler_prob`` > 0;
      a straggler of one process slows its own steps (``goodputlab.recovery``), one rank under torchrun cannot;
    * the one-process engine's recovery settings (hot spare, failure modes other than ``kill``,
      ``ckpt_omit``, ``hang_timeout``) are refused under torchrun.
    """
    check(config.launcher in LAUNCHERS, "launcher", config.launcher, f"one of {', '.join(LAUNCHERS)}")
    launch = launch_of(config)
    world = config.nproc * machines(config)
    check_batch_split(config.resolved_batch_size(), config.nproc, machines(config))
    _emulated_nodes_settings(config)
    if uses_torchrun(config) and config.ckpt == "memory":  # each rank's RAM snapshot is the whole state (DDP)
        check(not (config.model == "large" and config.device == "cuda"), "ckpt", config.ckpt,
              "sync, async or dcp with FSDP (--model large on CUDA): a rank's RAM snapshot would hold only its shards")
        check(config.fault_tolerance == "none", "ckpt", config.ckpt,
              "sync, async or dcp with --fault-tolerance torchft (the replicas hold the live state)")
    check(is_number(config.straggler_prob) and 0.0 <= config.straggler_prob <= 1.0,
          "straggler_prob", config.straggler_prob, "a share of steps between 0 and 1 (0: no straggler, 1: every step)")
    check(is_number(config.straggler_factor) and 1.0 <= config.straggler_factor <= MAX_STRAGGLER_FACTOR,
          "straggler_factor", config.straggler_factor,
          f"a number between 1 and {MAX_STRAGGLER_FACTOR:g} (1: not slowed)")
    if config.straggler_rank is not None:
        check(is_whole(config.straggler_rank) and 0 <= config.straggler_rank < world and world > 1,
              "straggler_rank", config.straggler_rank,
              f"a rank between 0 and {world - 1} of a job of 2 or more ranks (--nproc)" if world > 1
              else "a rank of a job of 2 or more ranks (--nproc 2 or more): one rank has nobody to hold back")
        check(config.straggler_prob > 0, "straggler_rank", config.straggler_rank,
              "a rank with --straggler-prob > 0 (the share of its steps that are slowed)")
    if config.straggler_prob > 0 and uses_torchrun(config):  # one process slows its own steps (goodputlab.recovery)
        check(world > 1, "straggler_prob", config.straggler_prob,
              "0 with one rank under torchrun (it has nobody to hold back); a straggler needs --nproc 2 or more")
    if uses_torchrun(config):
        _recovery_settings_under_torchrun(config)
    if config.fault_tolerance == "torchft":
        _torchft_settings(config)
    else:
        check(config.group_size == 1, "group_size", config.group_size,
              "1 without --fault-tolerance torchft (replica groups are torchft's; torchrun's --nproc ranks are one group)")
    if config.ckpt_jit:  # a healthy rank saves the whole state alone: DDP replicas, a peer to survive
        check(world > 1 and config.fault_tolerance == "none", "ckpt_jit", True,
              "only for a job of 2 or more ranks under torchrun with --fault-tolerance none (a healthy rank saves "
              "the state before the group restarts)")
        check(not (config.model == "large" and config.device == "cuda"), "ckpt_jit", True,
              "not with FSDP (--model large on CUDA): a rank alone does not hold the whole state")


RANKS_PER_CORE = 2  # a data-parallel rank on a CPU core, and one more waiting on its collectives or its storage


def ranks_here(config) -> int:
    """The training processes a run starts on this machine: ``nproc``, times the emulated nodes or the ranks of
    each torchft replica group, and a torchft hot spare's standby."""
    if config.fault_tolerance == "torchft":
        return config.nproc * config.group_size + int(config.hot_spare)
    return config.nproc * max(1, config.emulate_nodes)


def check_fits_machine(config, cores: int | None = None, free_bytes: int | None = None) -> None:
    """Refuse (field ``nproc``) a job of two or more ranks that this machine cannot hold: more than
    :data:`RANKS_PER_CORE` ranks a core, or more than its free memory holds at the model's run memory a rank
    (:attr:`~goodputlab.training.workload.ModelPreset.run_memory_bytes`). ``--oversubscribe`` starts it anyway.
    ``cores`` and ``free_bytes`` (bytes): this machine's now (:mod:`goodputlab.machine`) unless given.

    A launch past that is no experiment: 64 ranks in a 3 GB container hit the limit in 20 s, and the OOM
    killer took the supervisor, leaving its ranks behind."""
    from ..machine import available_memory_bytes, cores as machine_cores
    from ..training.workload import PRESETS

    ranks = ranks_here(config)
    if ranks < 2 or config.oversubscribe:
        return
    cores = machine_cores() if cores is None else cores
    free = available_memory_bytes() if free_bytes is None else free_bytes
    each = PRESETS[config.model].run_memory_bytes
    fit = max(1, min(RANKS_PER_CORE * cores, free // each))
    if ranks <= fit:
        return
    how = (f" (--emulate-nodes {config.emulate_nodes} x --nproc {config.nproc})" if ranks != config.nproc and config.emulate_nodes
           else f" (--nproc {config.nproc} x --group-size {config.group_size}{' + a hot spare' * config.hot_spare})"
           if ranks != config.nproc else "")
    raise ConfigError("nproc", config.nproc,
                      f"a job that fits this machine: at most {fit} rank{'s' * (fit != 1)} here ({RANKS_PER_CORE} a core of its {cores}, "
                      f"and {free / 1e9:.1f} GB of free memory at about {each / 1e9:.2f} GB a rank of the {config.model} "
                      f"model), not {ranks}{how}; --oversubscribe starts them anyway")


def _emulated_nodes_settings(config) -> None:
    """``--emulate-nodes``: 0 or 2 or more nodes, on this machine only, whole-group restarts; node faults need it
    (a process kill, ``--kill-at-steps``, is one rank's, as under torchrun)."""
    n = config.emulate_nodes
    check(n == 0 or n >= 2, "emulate_nodes", n, f"0 (off) or 2 to {MAX_EMULATED_NODES} nodes")
    for name in ("kill_node_at_steps", "partition_at_steps"):
        steps = getattr(config, name)
        check(not steps or n >= 2, name, ",".join(map(str, steps)), "only with --emulate-nodes 2 or more")
        for s in steps:
            check(1 <= s < config.steps, name, s, f"steps between 1 and steps-1 ({config.steps - 1})")
    check(config.spare_nodes == 0 or n >= 2, "spare_nodes", config.spare_nodes, "0 without --emulate-nodes (2 or more)")
    check(n + config.spare_nodes <= MAX_EMULATED_NODES, "spare_nodes", config.spare_nodes,
          f"at most {MAX_EMULATED_NODES - n} with --emulate-nodes {n} ({MAX_EMULATED_NODES} namespaces in all)")
    check(config.node_mtbf == 0 or n >= 2, "node_mtbf", config.node_mtbf, "0 without --emulate-nodes (whole-node failures need 2 or more emulated nodes)")
    if n == 0:
        return
    need = "with --emulate-nodes"
    check(config.nnodes == 1, "nnodes", config.nnodes, f"1 {need} (the emulated nodes are the machines)")
    check(config.rdzv_endpoint is None, "rdzv_endpoint", config.rdzv_endpoint,
          f"not given {need} (the rendezvous is on node 0's namespace address)")
    check(config.node_rank is None, "node_rank", config.node_rank, f"not given {need} (each node gets its own)")
    whole_nodes = ("its failures are whole nodes and links: --node-mtbf, --kill-node-at-steps, --partition-at-steps; "
                   "one process: --kill-at-steps")
    check(config.mtbf == 0, "mtbf", config.mtbf, f"0 {need} ({whole_nodes})")
    if config.fault_tolerance == "torchft":
        _torchft_nodes_settings(config)


def _torchft_nodes_settings(config) -> None:
    """``--fault-tolerance torchft --emulate-nodes N``: one replica group of one rank per node
    (:mod:`~goodputlab.distributed.ft_nodes`), whose node is killed whole by ``--kill-node-at-steps``."""
    n, need = config.emulate_nodes, f"with --fault-tolerance torchft --emulate-nodes {config.emulate_nodes}"
    check(config.nproc == n, "nproc", config.nproc, f"{n} {need} (one replica group per emulated node)")
    check(config.group_size == 1, "group_size", config.group_size, f"1 {need} (a replica group is one rank on its node)")
    check(n + 1 <= MAX_EMULATED_NODES, "emulate_nodes", n,
          f"2 to {MAX_EMULATED_NODES - 1} with --fault-tolerance torchft (the lighthouse takes a namespace of its own)")
    for name, value, allowed in (("spare_nodes", config.spare_nodes, 0), ("node_mtbf", config.node_mtbf, 0),
                                 ("hot_spare", config.hot_spare, False)):
        check(value == allowed, name, value, f"{'off' if allowed is False else allowed} {need} (a killed node's "
              "replica group relaunches cold in the same namespace; failures at --kill-node-at-steps)")
    check(not config.kill_at_steps, "kill_at_steps", ",".join(map(str, config.kill_at_steps)),
          f"nothing {need} (failures are whole nodes: --kill-node-at-steps)")
    check(not config.partition_at_steps, "partition_at_steps", ",".join(map(str, config.partition_at_steps)),
          f"nothing {need} (failures are whole nodes: --kill-node-at-steps)")


def _torchft_settings(config) -> None:
    """What an in-job recovery run (``--fault-tolerance torchft``) supports: ``nproc`` replica groups of
    ``group_size`` ranks (a group of 2 or more is a torchrun job of its own, started cold after a failure:
    a hot spare is one process) on this machine's CPU, the global batch split evenly over every rank,
    batches read in the training process, ``sync`` checkpoints every ``--ckpt-every`` steps (one group
    saves, :mod:`~goodputlab.distributed.ft_checkpoint`), no injected stragglers."""
    need = "with --fault-tolerance torchft"
    check(config.nproc >= 2, "nproc", config.nproc, f"2 or more replica groups {need}")
    check(config.nnodes == 1, "nnodes", config.nnodes, f"1 {need} (replica groups on this machine only)")
    check(config.launcher == "auto", "launcher", config.launcher,
          f"auto {need} (a group of one rank is one process, a group of --group-size 2 or more a torchrun job)")
    ranks = config.nproc * config.group_size
    batch = config.resolved_batch_size()
    fits = [r for r in range(1, batch // config.nproc + 1) if batch % (config.nproc * r) == 0]
    check(batch % ranks == 0, "group_size", config.group_size,
          f"ranks per group that split the batch of {batch} sequences evenly over {config.nproc} groups "
          f"({', '.join(map(str, fits[:12]))})")
    check(not (config.hot_spare and config.group_size > 1), "hot_spare", True,
          f"off with --group-size {config.group_size} (a standby is one process: a group of several ranks relaunches cold)")
    check(config.device in ("auto", "cpu"), "device", config.device, f"cpu or auto {need} (gloo on CPU)")
    check(config.ckpt_every != "auto", "ckpt_every", config.ckpt_every,
          f"a whole number of steps {need} (0: none; one replica group saves every N committed steps)")
    check(config.ckpt_every_s is None, "ckpt_every_s", config.ckpt_every_s, f"not given {need} (--ckpt-every N steps)")
    check(config.ckpt == "sync", "ckpt", config.ckpt,
          f"sync {need} (one replica group saves its whole state; the others wait in the next quorum)")
    check(config.workers == 0, "workers", config.workers, f"0 {need} (each replica builds its batch in its own process)")
    check(config.straggler_prob == 0, "straggler_prob", config.straggler_prob, f"0 {need}")
