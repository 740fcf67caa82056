"""One replica group of an in-job recovery run (``--fault-tolerance torchft``), read top to bottom.

The supervisor (:mod:`goodputlab.engine.torchft_supervision`) starts ``python -m
goodputlab.distributed.ft_worker`` once per replica group, as a job of one rank, or with
``--group-size R`` of 2 or more as a torchrun job of ``R`` ranks, against a lighthouse it runs
itself. Each replica group:

1. binds its own TCPStore on loopback or its node's address (the socket handed over, as :func:`ranks.job_store` does; in a
   group of several ranks, its rank 0's, which its other ranks join with a gloo process group of the
   group's own), builds the same model from the same seed, and joins the job through one
   ``torchft.Manager`` per rank (``rank``/``world_size`` inside the group, as torchft's HSDP examples
   do: rank ``k`` of every group all-reduce together, and the group's manager server, on its rank 0,
   commits a step only when all its ranks do), its manager server and checkpoint servers bound to
   loopback, or on an emulated node to the node's address (:func:`bind_torchft`);
2. trains on its slice of every step's global batch (rank ``k`` of replica ``r``, groups of ``R``
   ranks, reads slice ``r * R + k`` of ``G * R``); :func:`group_gradient` averages the gradient inside
   the group (a plain all-reduce, as DDP's), :func:`average_gradients` over the groups in the step's
   quorum, and ``torchft.Optimizer`` steps only when the group's ``should_commit`` vote says yes (every rank
   of this group had a clean step and enough groups took part: a vote within the group, not across
   groups; a group that did not commit a step the others did is behind in step count and heals);
3. when relaunched after a failure, heals in its first quorum: fetches the live state from a
   healthy peer and continues from the peer's step (booked as its restore).

Events go to ``ranks/events-replica{R}.jsonl`` (attempt = this replica's launch count; a group's
other ranks write ``events-replica{R}-rank{k}.jsonl``, read for their final weights only: the group's
ranks step together); the job's ledger is made from them by :mod:`goodputlab.distributed.replica_ledger`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

from ..measure import events as E
from ..engine.config import RunConfig
from ..measure.events import EventWriter
from .joblog import RANKS_DIR

REPLICA_LOG = "events-replica{replica}.jsonl"
#: the events of rank ``k`` > 0 of a replica group of several ranks (its rank 0 writes :data:`REPLICA_LOG`, the group's)
GROUP_RANK_LOG = "events-replica{replica}-rank{rank}.jsonl"
LOOPBACK = "127.0.0.1"
#: torchft's timeout for collectives, commits and checkpoint fetches (seconds): a dead peer's
#: gloo connection resets at once, so this only bounds a peer that hangs.
FT_TIMEOUT_S = 30.0


#: The address this replica group's torchft sockets bind to (set by the supervisor): on one machine
#: loopback, on an emulated node (``--emulate-nodes``) its namespace's address, which peer nodes reach.
BIND_ADDRESS_ENV = "GOODPUTLAB_FT_BIND"
#: the checkpoint address (a peer's transport) the last heal of this process fetched its state from
HEALED_FROM: list[str] = []


def bind_address() -> str:
    """The address of :data:`BIND_ADDRESS_ENV`, loopback when it is not set."""
    return os.environ.get(BIND_ADDRESS_ENV) or LOOPBACK


def bind_torchft(host: str) -> None:
    """Make torchft 0.2.0 listen on ``host`` only (one IPv4 address), in this process.

    ``Manager`` binds its manager server to ``[::]:port`` (no argument for it) and
    ``HTTPTransport`` its checkpoint server to ``("", 0)`` over IPv6, advertising
    ``socket.gethostname()``: every interface of the machine. Both are rebound here to ``host``
    (127.0.0.1 for a run on one machine, a node's own address on an emulated node): the manager
    server's ``bind`` argument is rewritten, and the checkpoint server's class is replaced by one
    bound to ``host`` (and the address it advertises by ``host``). A heal's fetch records the peer's
    checkpoint address in :data:`HEALED_FROM`, and loads what it fetched with ``weights_only=True``
    (torchft asks for ``False``: a pickle that runs code). See docs/IN_JOB_RECOVERY.md for what a run exposes.
    """
    from http.server import ThreadingHTTPServer

    import torchft.checkpointing.http_transport as http_transport
    import torchft.manager as manager_module

    class BoundHTTPServer(ThreadingHTTPServer):
        address_family = socket.AF_INET
        request_queue_size = 1024

        def __init__(self, server_address, handler):
            super().__init__((host, server_address[1]), handler)

    server_class = manager_module.ManagerServer
    recv = http_transport.HTTPTransport.recv_checkpoint

    def bound_manager_server(*args, bind: str, **kwargs):
        port = bind.rsplit(":", 1)[-1]
        return server_class(*args, bind=f"{host}:{port}", **kwargs)

    def address(self) -> str:
        return f"http://{host}:{self._server.socket.getsockname()[1]}/checkpoint/"

    def recv_checkpoint(self, src_rank, metadata, step, timeout):
        HEALED_FROM.append(str(metadata))
        return recv(self, src_rank, metadata, step, timeout)

    def load_weights_only(f, *args, weights_only: bool = True, **kwargs):
        # torchft asks for weights_only=False ("non-tensor states like lr_scheduler"): whoever answers at a peer's
        # checkpoint address could then run code here. The state healed is tensors and plain data: torch's
        # restricted unpickler reads it, and refuses a global it does not allow.
        return streaming_load(f, *args, weights_only=True, **kwargs)

    streaming_load = http_transport._streaming_load
    if getattr(streaming_load, "__name__", "") != "load_weights_only":
        http_transport._streaming_load = load_weights_only
    http_transport._IPv6HTTPServer = BoundHTTPServer
    http_transport.HTTPTransport.address = address
    http_transport.HTTPTransport.recv_checkpoint = recv_checkpoint
    manager_module.ManagerServer = bound_manager_server


class Replica:
    """What a replica group sets up before it joins the job: the model, optimizer and schedule (from the
    run's seed, the same in every replica) and the data set. A hot spare builds it while it waits."""

    def __init__(self, config: RunConfig, run_dir: Path):
        import torch

        from ..pipeline.loader import SlowStorageDataset, data_file
        from ..training.eager import skip_compiler_import
        from ..training.objects import build_training, make_deterministic
        from ..training.workload import PRESETS

        import torchft  # noqa: F401  (imported now: a spare pays for it before it is needed)

        skip_compiler_import()  # a replica never compiles: its AdamW need not import TorchDynamo (about 1.5 CPU-s)

        self.preset = PRESETS[config.model]
        if config.threads:
            torch.set_num_threads(config.threads)
        self.device = torch.device("cpu")
        make_deterministic(config.seed, self.device)  # the same initial model in every replica
        self.model, self.optimizer, self.scheduler = build_training(config, self.device)
        self.dataset = SlowStorageDataset(data_file(run_dir / "data", self.preset, config.seed), config.seed,
                                          io_latency_s=config.io_latency_ms / 1000, io_jitter=config.io_jitter,
                                          transform_s=config.transform_ms / 1000)


def train(config: RunConfig, run_dir: Path, events: EventWriter, replica: int, replicas: int,
          ready: Replica | None = None, resume: bool = False) -> dict:
    """Train to ``config.steps`` with the other replica groups; returns what this replica ended with.
    ``ready``: what a hot spare set up before it was activated (else set up now); ``resume``: this first
    launch of a ``--resume`` starts from the newest valid checkpoint (:mod:`~goodputlab.distributed.ft_checkpoint`)."""
    import torch.distributed as dist

    from ..training.model import state_sha256
    from . import ft_checkpoint
    from .sharding import ShardedStepSampler

    built = ready if ready is not None else Replica(config, run_dir)
    size = config.group_size
    manager, optimizer, store, rank = _join(config, events, built, replica, replicas)
    sampler = ShardedStepSampler(len(built.dataset), config.resolved_batch_size(), config.seed, 0, config.steps,
                                 replica * size + rank, replicas * size)
    if events.attempt == 0:  # the first launch: every replica up before the first quorum
        _wait_for_replicas(run_dir / RANKS_DIR, replica, replicas)
        if resume:  # every group from the same checkpoint: the first quorum finds them at one step, nobody heals
            start = ft_checkpoint.restore(run_dir, config, events, built)
            manager.load_state_dict({"step": start, "batches_committed": start * replicas * size})
    loss_value = _loop(config, run_dir, events, built, manager, optimizer, sampler, rank)
    final = {"final_state_sha256": state_sha256(built.model), "final_loss": loss_value}
    events.emit(E.M_FINISH, step=config.steps, **final)
    events.emit(E.W_EXIT)
    if size > 1:
        # The group's rank 0 hosts its ManagerServer, and shutting it down aborts the server at once: a rank
        # whose answer to the last should_commit was not yet sent got "transport error" instead (seen under
        # load). Every rank has its answer once every rank is past the loop.
        dist.barrier()
    manager.shutdown(wait=False)
    del store
    return final


def _join(config: RunConfig, events: EventWriter, built: Replica, replica: int, replicas: int):
    """This replica group's store and torchft's Manager around its optimizer: ``(manager, optimizer, store, rank)``;
    the rank's ``worker_info`` written."""
    import torch
    import torch.distributed as dist
    from torchft import Manager, Optimizer, ProcessGroupGloo

    from ..training.model import count_params
    from .binding import listening_socket

    model, inner_optimizer, scheduler = built.model, built.optimizer, built.scheduler
    size, host = config.group_size, bind_address()
    if size > 1:  # a rank of a torchrun job: the group's store (its rank 0's, on loopback) and process group
        store, rank, port = group_store()
    else:
        sock = listening_socket(host, 0)  # this replica group's own store, on its address only
        port, rank = sock.getsockname()[1], 0
        store = dist.TCPStore(host, port, 1, True, timedelta(seconds=FT_TIMEOUT_S), master_listen_fd=sock.detach())
        os.environ.update(MASTER_ADDR=host, MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")

    def state_dict() -> dict:
        return {"model": model.state_dict(), "optim": inner_optimizer.state_dict(), "sched": scheduler.state_dict()}

    def load_state_dict(sd: dict) -> None:
        model.load_state_dict(sd["model"])
        inner_optimizer.load_state_dict(sd["optim"])
        scheduler.load_state_dict(sd["sched"])

    bind_torchft(host)
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=FT_TIMEOUT_S)), min_replica_size=1,
        load_state_dict=load_state_dict, state_dict=state_dict, use_async_quorum=False, init_sync=False,
        replica_id=f"goodputlab_replica_{replica}", hostname=host, store_addr=host, store_port=port,
        rank=rank, world_size=size,
        timeout=timedelta(seconds=FT_TIMEOUT_S), quorum_timeout=timedelta(seconds=120),
    )
    events.emit(E.M_WORKER_INFO, device=str(built.device), params=count_params(model), state_bytes=built.preset.state_bytes,
                torch=torch.__version__, pid=os.getpid(), rank=rank, world_size=size, replica=replica,
                replicas=replicas, backend="gloo", parallelism="torchft")
    return manager, Optimizer(manager, inner_optimizer), store, rank


def _loop(config: RunConfig, run_dir: Path, events: EventWriter, built: Replica, manager, optimizer, sampler,
          rank: int) -> float:
    """The training loop under torchft's quorum, to ``config.steps``; returns the last committed loss."""
    from ..pipeline.loader import BatchRequest
    from . import ft_checkpoint

    model, scheduler, dataset, size = built.model, built.scheduler, built.dataset, config.group_size
    batch_size = config.resolved_batch_size()
    loss_value, first = float("nan"), True
    kept = None  # (step, loss, this replica's gradient, samples) of a try whose all-reduce failed: not computed again
    model.train()
    while (step := manager.current_step()) < config.steps:
        # the quorum: a relaunched replica heals here (its restore); the others wait for the quorum
        events.emit(E.W_RESTORE if first and events.attempt > 0 else E.W_SYNC_WAIT, step=step)
        optimizer.zero_grad(set_to_none=True)
        if manager.current_step() != step:
            step = manager.current_step()
            events.emit(E.M_RESTORED, step=step, ckpt_step=step, source="peer", peer=HEALED_FROM[-1] if HEALED_FROM else None)
            kept = None  # new weights: a gradient of the old ones is no use
        first = False
        if step >= config.steps:
            break
        if kept is not None and kept[0] == step:
            # the last try computed this step's gradient on these same weights (it was not committed, so
            # nothing changed them) and only its all-reduce failed: reduce it again over the new quorum,
            # booked as a step's all-reduce and commit are (in its compute), without computing again
            _, loss, local, samples = kept
            events.emit(E.W_COMPUTE, step=step, participants=manager.num_participants(), reused=True)
        else:
            events.emit(E.W_DATA_WAIT, step=step)
            batch = dataset.__getitems__(BatchRequest(step, sampler.indices_for(step)))
            events.emit(E.W_COMPUTE, step=step, participants=manager.num_participants())
            _, loss = model(batch["x"], batch["y"])
            loss.backward()
            local, samples = group_gradient(model, size), batch["idx"].tolist()
        grad_ready = events.now()
        average_gradients(manager, model, local)  # over the quorum's replicas
        optimizer.step()  # only when this group's should_commit vote says yes (its ranks' errors and the quorum's size)
        committed = manager.current_step() > step
        # --ft-failed-step reuse (this loop's): keep the gradient of a try that was not committed, for the retry;
        # recompute (torchft's OptimizerWrapper): the retry computes the step again
        keep = not committed and config.ft_failed_step == "reuse"
        kept = (step, loss, local, samples) if keep else None
        if committed:
            scheduler.step()
            loss_value = loss.item()
            if ft_checkpoint.is_due(config, step + 1) and rank == 0 and manager.participating_rank() == 0:
                ft_checkpoint.save(run_dir, config, events, built, step + 1, batch_size)  # one group saves
        else:  # from the gradient on, this try waited on a failed all-reduce: the failure's cost, not compute
            events.emit(E.W_SYNC_WAIT, step=step, t=grad_ready, failed=True)
        events.emit(E.W_STEP_END, step=step, loss=loss.item(), committed=committed, grad_kept=keep,
                    participants=manager.num_participants(), samples=samples)
    return loss_value


def group_store():
    """A rank of a replica group of several ranks (under torchrun): ``(store, rank, port)``, the group's
    store at ``MASTER_ADDR:MASTER_PORT`` (its rank 0 listens on loopback, :func:`~goodputlab.distributed.ranks.job_store`)
    and the group's own gloo process group joined over it (the default group: :func:`group_gradient`'s)."""
    import torch.distributed as dist

    from .ranks import RankEnv, job_store

    env = RankEnv.from_environ()
    timeout = timedelta(seconds=FT_TIMEOUT_S)
    store = job_store(env, LOOPBACK, timeout)
    dist.init_process_group("gloo", store=dist.PrefixStore("goodputlab_group", store), rank=env.rank,
                            world_size=env.world_size, timeout=timeout)
    return store, env.rank, int(os.environ["MASTER_PORT"])


def group_gradient(model, group_size: int):
    """:func:`local_gradient`, averaged over the ranks of this replica group (a plain all-reduce inside the
    group, as DDP's) when it has several: the group's gradient, which :func:`average_gradients` then averages
    over the groups of the step's quorum. Equal slices make the mean of means the mean over every rank."""
    local = local_gradient(model)
    if group_size > 1:
        import torch.distributed as dist

        dist.all_reduce(local)
        local /= group_size
    return local


def local_gradient(model):
    """This replica's gradient as one flat tensor (a copy: the all-reduce works on another)."""
    import torch

    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def average_gradients(manager, model, local) -> None:
    """Average ``local`` (:func:`local_gradient`) over the step's quorum in one fault-tolerant all-reduce,
    into the parameters' ``.grad``; ``local`` itself is left as it was, for a retry of the step.

    Not ``torchft.DistributedDataParallel``: in torchft 0.2.0 its communication hook fails an
    assertion when a peer dies during the all-reduce (the failed work has no future), where
    ``Manager.allreduce`` reports the error and the step is then not committed, as intended.
    """
    flat = local.clone()
    manager.allreduce(flat).wait()  # an error is reported to the manager: should_commit() says False
    offset = 0
    for p in model.parameters():
        p.grad = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()


def _wait_for_replicas(folder: Path, replica: int, replicas: int, timeout_s: float = 300.0) -> None:
    """A barrier of files: this replica is ready; wait until every replica of the first launch is."""
    (folder / f"ready-replica{replica}").touch()
    deadline = time.monotonic() + timeout_s
    while not all((folder / f"ready-replica{r}").exists() for r in range(replicas)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"replica {replica}: the other replica groups did not start within {timeout_s:.0f} s")
        time.sleep(0.01)


def serve_as_spare(config: RunConfig, run_dir: Path, t0: float, control) -> tuple[Replica, EventWriter, int]:
    """A hot spare replica group: set up (:class:`Replica`) at idle priority, writing nothing, then wait on
    ``control`` for the job (:mod:`goodputlab.recovery.standby`'s protocol; the supervisor names the
    replica group it takes over with a ``replica R`` line before its ``go A``). Returns what it set up, the
    replica's event log opened as attempt ``A`` (its ``activate`` written) and ``R``."""
    import select

    from ..recovery import standby
    from ..recovery.booking import W_ACTIVATE
    from ..recovery.control import replica_named

    idle = standby.enter_idle_priority()  # start-up on spare CPU only, when it can come back
    started = time.monotonic() - t0
    ready = Replica(config, run_dir)
    ready_t = time.monotonic() - t0
    early = bool(select.select([control.fd], [], [], 0)[0])  # the word came before it was ready
    attempt = control.wait_for_activation()
    if idle:
        standby.leave_idle_priority()
    replica = replica_named(control.requests())
    events = EventWriter(run_dir / RANKS_DIR / REPLICA_LOG.format(replica=replica), t0, attempt)
    if config.restart_delay > 0:
        events.emit(E.SUP_RESTART_DELAY)  # emulated detection and rescheduling: a spare saves what comes after
        time.sleep(config.restart_delay)
    events.emit(W_ACTIVATE, standby_startup_s=round(ready_t - started, 6),
                standby_waited_s=round(max(0.0, events.now() - ready_t), 6), standby_ready=not early, pid=os.getpid())
    return ready, events, replica


def main(argv: list[str] | None = None) -> int:
    from ..safe_io import read_regular
    from ..procs import die_with_parent

    p = argparse.ArgumentParser(prog="python -m goodputlab.distributed.ft_worker", description=__doc__)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--t0", type=float, required=True, help="the run's start on this machine's monotonic clock")
    p.add_argument("--replica", type=int, default=None, help="this replica group (not for --standby)")
    p.add_argument("--replicas", type=int, required=True)
    p.add_argument("--attempt", type=int, default=None, help="this replica's launch, from 0 (not for --standby)")
    p.add_argument("--standby", action="store_true", help="a hot spare: set up, then wait on --control-fd for a replica to take over")
    p.add_argument("--control-fd", type=int, default=None, help="the supervisor's control pipe (recovery.control)")
    p.add_argument("--resume", action="store_true", help="start from the run's newest valid checkpoint (a first launch)")
    args = p.parse_args(argv)
    die_with_parent(os.getppid())  # the kernel kills this replica if the supervisor (or its agent) dies
    config = RunConfig.from_dict(json.loads(read_regular(args.run_dir / "config.json", 1 << 20)))
    if args.standby:
        from ..recovery.control import ControlChannel, ControlClosed

        try:
            ready, events, replica = serve_as_spare(config, args.run_dir, args.t0, ControlChannel(args.control_fd))
        except ControlClosed:  # never needed: the run ended first
            os._exit(0)
        train(config, args.run_dir, events, replica, args.replicas, ready)
    else:
        rank = int(os.environ.get("RANK", "0")) if config.group_size > 1 else 0  # torchrun's, in a group of several
        log = REPLICA_LOG.format(replica=args.replica) if rank == 0 else GROUP_RANK_LOG.format(replica=args.replica, rank=rank)
        events = EventWriter(args.run_dir / RANKS_DIR / log, args.t0, args.attempt)
        if args.attempt > 0 and config.restart_delay > 0:
            events.emit(E.SUP_RESTART_DELAY)  # emulated rescheduling, before this launch starts
            time.sleep(config.restart_delay)
        events.emit(E.W_INIT, rank=args.replica, world_size=args.replicas, pid=os.getpid(), host=socket.gethostname())
        train(config, args.run_dir, events, args.replica, args.replicas, resume=args.resume and args.attempt == 0)
    events.close()
    sys.stdout.flush()
    os._exit(0)  # skip the interpreter's slow teardown of torch


if __name__ == "__main__":
    sys.exit(main())
