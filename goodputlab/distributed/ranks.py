"""This process's rank: who it is, which device it drives and the process groups it talks through.

``torchrun`` tells every process who it is in its environment: ``RANK`` (0 to
``WORLD_SIZE - 1`` over the whole job), ``LOCAL_RANK`` (its number on this machine,
which picks its GPU), ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE`` and
``TORCHELASTIC_RESTART_COUNT`` (0 for the first group, then 1, 2, ... after each
restart: the job's attempt). :func:`setup` joins the job's process group:

* ``gloo`` on CPU, ``NCCL`` on CUDA (one GPU per local rank, ``cuda:LOCAL_RANK``);
* and always a second, ``gloo`` group for checkpoints: an asynchronous save runs its
  collectives (DCP's plan exchange, our commit) in a background thread, and collectives of
  two threads on one group could interleave differently on different ranks and hang.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.distributed as dist

from .launch import ATTEMPT_BASE_ENV

GROUP_TIMEOUT_S = 120.0  # a collective that waits this long for a rank that is gone raises


@dataclass(frozen=True)
class RankEnv:
    """What ``torchrun`` put in this process's environment."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    restart_count: int

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> RankEnv:
        """Read it; ``RuntimeError`` when this process was not started by ``torchrun`` (no ``RANK``)."""
        env = os.environ if env is None else env
        missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK") if k not in env]
        if missing:
            raise RuntimeError(f"not started by torchrun: {', '.join(missing)} not set")
        world = int(env["WORLD_SIZE"])
        return cls(
            rank=int(env["RANK"]),
            local_rank=int(env["LOCAL_RANK"]),
            world_size=world,
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", world)),
            # an emulated cluster's supervisor relaunches every node's torchrun itself: the job's attempt
            # is its count of relaunches plus torchrun's own restarts
            restart_count=int(env.get(ATTEMPT_BASE_ENV, "0")) + int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
        )


def device_for(name: str, local_rank: int) -> torch.device:
    """The device of local rank ``local_rank``: ``cuda:LOCAL_RANK`` for ``cuda`` (or ``auto`` with a GPU), else the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"local rank {local_rank} has no GPU: torch sees {torch.cuda.device_count()} on this machine"
            )
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def backend_for(device: torch.device) -> str:
    """``nccl`` for a CUDA device, ``gloo`` otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


@dataclass
class Rank:
    """A rank that has joined its job: identity, device and process groups."""

    env: RankEnv
    device: torch.device
    backend: str
    ckpt_group: Any  # the gloo group for checkpoints

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_coordinator(self) -> bool:
        """Rank 0: writes what the job writes once (the checkpoint's manifest, the common state)."""
        return self.env.rank == 0

    def agree(self, ok: bool) -> bool:
        """True on every rank when ``ok`` is true on every rank (a collective on the checkpoint group)."""
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.ckpt_group)
        return bool(flag.item())

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (a collective on the checkpoint group)."""
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.ckpt_group)
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on rank 0 (``None`` elsewhere)."""
        out = [None] * self.world_size if self.is_coordinator else None
        dist.gather_object(obj, out, dst=0, group=self.ckpt_group)
        return out


def job_store(env: RankEnv, bind_host: str, timeout: datetime.timedelta) -> dist.TCPStore:
    """The job's store, its server (on rank 0) listening on ``bind_host`` only; ``MASTER_PORT`` is set to its port.

    ``TCPStore`` binds its server to every interface whatever host it is given
    (``docs/SECURITY.md``), so rank 0 binds the socket itself and hands it over
    (``master_listen_fd``); the other ranks connect as torch's ``env://`` would. With a port file
    (:data:`~goodputlab.distributed.binding.PORT_FILE_ENV`: a job on one machine) rank 0 binds a free
    port and publishes it there, and the others wait for it: torchrun's ``MASTER_PORT`` was free
    when torchrun chose it, not reserved, and another process may hold it by now. Otherwise (a
    job across machines or emulated nodes) the store is at ``MASTER_ADDR:MASTER_PORT``.
    """
    from .binding import PORT_FILE_ENV, await_port, listening_socket, publish_port

    addr, port_file = os.environ["MASTER_ADDR"], os.environ.get(PORT_FILE_ENV)
    port = 0 if port_file else int(os.environ["MASTER_PORT"])
    if env.rank != 0:
        if port_file:
            port = await_port(port_file, env.restart_count, timeout.total_seconds())
            os.environ["MASTER_PORT"] = str(port)
        return dist.TCPStore(addr, port, env.world_size, False, timeout)
    sock = listening_socket(bind_host, port)
    try:
        port = sock.getsockname()[1]
        os.environ["MASTER_PORT"] = str(port)
        if port_file:  # before the store, which waits for the other ranks to connect (they queue on the socket)
            publish_port(port_file, env.restart_count, port)
        return dist.TCPStore(addr, port, env.world_size, True, timeout, master_listen_fd=sock.detach())
    finally:
        sock.close()


def setup(device_name: str = "auto", env: RankEnv | None = None, timeout_s: float = GROUP_TIMEOUT_S) -> Rank:
    """Join the job: the default process group (gloo or NCCL) and the checkpoint group (gloo).

    Rendezvous details (``MASTER_ADDR``, ``MASTER_PORT`` or torchrun's store) come from the
    environment, as ``torchrun`` sets them; with ``GOODPUTLAB_BIND_HOST`` set (the launcher's
    :func:`~goodputlab.distributed.binding.listen_env`) rank 0's store listens on that address only.
    """
    from .binding import BIND_ENV

    env = env or RankEnv.from_environ()
    device = device_for(device_name, env.local_rank)
    backend = backend_for(device)
    timeout = datetime.timedelta(seconds=timeout_s)
    bind_host = os.environ.get(BIND_ENV)
    joined = {"store": job_store(env, bind_host, timeout), "rank": env.rank, "world_size": env.world_size} if bind_host else {}
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group(backend, timeout=timeout, device_id=device, **joined)
    else:
        dist.init_process_group(backend, timeout=timeout, **joined)
    ckpt_group = dist.new_group(backend="gloo", timeout=timeout)
    return Rank(env, device, backend, ckpt_group)


def teardown() -> None:
    """Leave the job's process groups (safe to call when none was joined)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
