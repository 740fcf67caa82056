"""Supervision of a job on an emulated cluster (``--emulate-nodes N``): one ``torchrun`` agent per node,
each in a network namespace of its own (:mod:`goodputlab.distributed.netns`, docs/DISTRIBUTED.md).

Every node runs the real multi-node command: ``--nnodes N``, the c10d rendezvous on node 0's
namespace address (node 0's agent hosts its store), the ranks' store and gloo bound to the node's
own address. A whole-node failure (``--kill-node-at-steps``) SIGKILLs every process in one node's
namespace at once, agent, ranks and loaders; the supervisor then stops the other nodes and
relaunches all of them as the job's next attempt, as a cluster scheduler requeues a job that lost a
machine (``GOODPUTLAB_ATTEMPT_BASE`` numbers the attempts on). Random whole-node failures
(``--node-mtbf``, each node's MTBF) are drawn on the process-level failure clock
(:class:`goodputlab.recovery.modes.FailureClock`, ``--failure-clock``) with the job's MTBF
``node_mtbf / nodes``; that clock also plans the kills at steps. A partition
(``--partition-at-steps``) takes one node's link down for ``--partition-s`` seconds; with
``--hang-timeout`` the supervisor declares the job hung after that many seconds without a step and
restarts it, booking the silence as a hang. The job's books are made as a torchrun job's are.

Spare nodes (``--spare-nodes M``): M more namespaces, and in every namespace a warm agent
(:mod:`goodputlab.distributed.warm_agent`) waits for the next attempt, so a relaunch starts no agent.
A node that dies takes its warm agent with it; a spare, whose agent is warm, takes its place in the
job (its address, its rendezvous role when it was node 0's), and the dead node, repaired, becomes a
spare. Without spares every relaunch starts its agents cold, in the same namespaces.
"""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np

from ..measure import events as E
from ..recovery.booking import M_EXPOSED, M_PARTITION, M_PARTITION_END, SUP_HANG
from ..recovery.modes import FailureClock
from ..procs import dies_with_this_process
from ..recovery.standby import to_normal_priority
from .launch import WorkerCrashed, WorkerLog, worker_env
from .supervision import POLL_S
from .torchrun_supervision import TorchrunSupervision

RDZV_PORT = 29500  # on node 0's namespace address: no other process listens in that namespace


class EmulatedNodesSupervision(TorchrunSupervision):
    """A run of ``emulate_nodes`` x ``nproc`` ranks, one ``torchrun`` per emulated node."""

    def __init__(self, config, run_dir, progress, resume: bool, python: str, announce=None):
        from ..distributed.netns import EmulatedCluster, check_privilege, remove_leftovers

        check_privilege(config.emulate_nodes)  # before the folder is touched: one line, exit 2
        remove_leftovers()  # a previous run killed before its teardown
        super().__init__(config, run_dir, progress, resume, python, announce)
        self.nodes = config.emulate_nodes
        self.world = config.nproc * self.nodes
        self.cluster = EmulatedCluster(self.nodes + config.spare_nodes)
        self.roster = list(range(self.nodes))  # the namespace of each of the job's node positions
        self.spare_pool = list(range(self.nodes, self.nodes + config.spare_nodes))
        self.warm: dict[int, tuple[subprocess.Popen, WorkerLog]] = {}  # namespace -> its waiting warm agent
        self.replacements: list[dict] = []
        self.node_rng = np.random.default_rng([config.seed, 0x4E4F])  # which node a node failure strikes
        # the nodes fail independently, each with MTBF node_mtbf: the job loses a node every node_mtbf / nodes
        self.node_clock = FailureClock(config.seed, config.node_mtbf / self.nodes, config.kill_node_at_steps,
                                       clock=config.failure_clock)
        self.pending_partitions = sorted(config.partition_at_steps)
        self.jobs: list = []
        self.logs: list[WorkerLog] = []
        self.tails: dict = {}
        self.partition: tuple[int, float] | None = None  # (node, monotonic time its link comes back)
        self.partitions: list[dict] = []
        self.lost_ram: list[int] = []  # nodes killed whole whose RAM folder goes once their processes are dead
        self.partitioned = -1  # the newest attempt a partition struck
        self.last_step_t = time.monotonic()

    def run(self) -> dict:
        try:
            self.ev.emit(E.SUP_START)
            self.open_ram(copies=2)  # each node's RAM: its ranks' snapshots and a copy of its neighbour's
            self.cluster.setup()
            while True:
                self.launch_nodes()
                cause = self.watch_nodes()
                if cause is None:
                    break
                if not self.fail_node(cause):
                    break
        except BaseException as exc:  # Ctrl-C, SIGTERM, a crash: no process, namespace or link left
            self.stop(exc)
            raise
        finally:
            self.end_nodes()
            self.cluster.teardown()  # the warm agents too
            self.reap_warm()
            self.ram.cleanup()
        summary = self.finish()
        self.tell(steps_done=summary["steps_completed"], phase="done" if self.completed else "stopped")
        return summary

    def launch_nodes(self) -> None:
        """Start one torchrun agent in every node's namespace, as attempt ``self.attempt``."""
        from ..distributed.binding import BIND_ENV
        from ..distributed.launch import TorchrunLaunch
        from ..distributed.launcher import TorchrunJob
        from ..distributed.netns import NODE_IFNAME
        from ..distributed.launch import ATTEMPT_BASE_ENV

        config, cluster = self.config, self.cluster
        self.ev.attempt = self.attempt
        self.ev.emit(E.SUP_SPAWN)
        env = {**worker_env(config), ATTEMPT_BASE_ENV: str(self.attempt)}
        self.jobs = []
        for position, node in enumerate(self.roster):
            launch = TorchrunLaunch(
                nproc=config.nproc, nnodes=self.nodes, rdzv_endpoint=f"{cluster.address(self.roster[0])}:{RDZV_PORT}",
                rdzv_id=f"goodputlab-{os.getpid()}-{self.attempt}", max_restarts=0, rdzv_timeout_s=config.rdzv_timeout,
                log_dir=str(self.out / "logs" / "torchrun" / f"node{node}-attempt{self.attempt:03d}"),
                bind_host=cluster.address(node), rdzv_is_host=position == 0,
            )
            name = self.out / "logs" / f"node{node}-attempt{self.attempt:03d}.log"
            listen = {BIND_ENV: cluster.address(node), "GLOO_SOCKET_IFNAME": NODE_IFNAME,
                      "NCCL_SOCKET_IFNAME": "=" + NODE_IFNAME}
            if self.ram_root is not None:  # this node's RAM, and its neighbour's (the next node of the job)
                from ..distributed.node_ram import node_env

                listen.update(node_env(self.ram_root, node, self.roster[(position + 1) % self.nodes]))
            agent, log = self.warm.pop(node, (None, None))
            if agent is not None and agent.poll() is None:  # a warm agent: handed the command, nothing to start
                to_normal_priority(agent.pid)  # it may still be importing at idle priority: finish at full speed
                log.rename(name)
                self.jobs.append(TorchrunJob(launch, self.out, self.t0, self.python, -1, env, listen=listen, agent=agent))
                continue
            log = WorkerLog(name)
            self.logs.append(log)
            try:
                self.jobs.append(TorchrunJob(launch, self.out, self.t0, self.python, log.write_fd, env,
                                             wrap=lambda cmd, n=node: cluster.wrap(n, cmd), listen=listen))
            finally:
                log.start()
        if config.spare_nodes:
            self.warm_up()
        self.deadline_rdzv = time.monotonic() + config.rdzv_timeout
        self.attempt_started = self.stepped = False
        self.last_step_t = time.monotonic()
        started = self.node_clock.launched(self.last_step_t)  # the wall clock runs from the launch
        if started is not None:
            self.ev.emit(M_EXPOSED, t=started - self.t0, clock=self.node_clock.clock)
        self.tell(attempt=self.attempt, phase="startup" if self.attempt == 0 else "restart")

    def warm_up(self) -> None:
        """A warm agent (at idle priority, beside the job) in every namespace, job's and spare, that lacks one."""
        from ..distributed import warm_agent

        for node in self.roster + self.spare_pool:
            if node in self.warm:
                continue
            log = WorkerLog(self.out / "logs" / f"node{node}-warm-{self.attempt:03d}.log")
            self.logs.append(log)
            try:
                cmd = [self.python, "-m", warm_agent.__name__, "--for", str(self.out)]
                proc = subprocess.Popen(self.cluster.wrap(node, cmd), stdin=subprocess.PIPE, stdout=log.write_fd,
                                        stderr=subprocess.STDOUT, env=worker_env(self.config), start_new_session=True,
                                        preexec_fn=dies_with_this_process())  # no agent outlives the supervisor
            finally:
                log.start()
            self.warm[node] = (proc, log)

    def poll_ranks(self) -> list[dict]:
        """The ranks' new events (their logs are files on the machine's one filesystem, shared by the nodes)."""
        from ..distributed.joblog import RANKS_DIR
        from ..measure.events import EventTail

        new = []
        for p in (self.out / RANKS_DIR).glob("events-rank*.jsonl"):
            r = p.name[len("events-rank"): -len(".jsonl")]
            if not r.isdigit():
                continue
            tail = self.tails.get(p) or self.tails.setdefault(p, EventTail(p))
            for e in tail.poll():
                e["rank"] = int(r)
                new.append(e)
        return new

    def watch_nodes(self) -> str | None:
        """Follow the attempt until every agent exits (None: completed) or a node fault is due (its cause)."""
        while True:
            time.sleep(POLL_S)
            self.restore_partition()
            cause = self.follow_nodes(self.poll_ranks())
            codes = [job.returncode() for job in self.jobs]
            if cause is None and self.node_clock.due_now(time.monotonic()):
                cause = "node_mtbf"
            if cause is not None:
                return cause
            if all(c == 0 for c in codes):
                self.completed, self.reason = True, "completed"
                return None
            if any(c not in (None, 0) for c in codes) and self.partitioned == self.attempt:
                return "collective_timeout"  # the partition outlasted gloo's timeout: the ranks gave up
            if any(c not in (None, 0) for c in codes):  # a node failed that no injected fault struck
                self.end_nodes()
                log = self.logs[-self.nodes + next(i for i, c in enumerate(codes) if c not in (None, 0))]
                log.drain()
                raise WorkerCrashed(next(c for c in codes if c not in (None, 0)), log.path, log.tail_text())
            if not self.attempt_started and time.monotonic() >= self.deadline_rdzv:
                self.end_nodes()
                raise self.jobs[0]._timed_out()
            timeout = self.config.hang_timeout
            if timeout is not None and self.stepped and time.monotonic() - self.last_step_t >= timeout:
                return "hang"

    def follow_nodes(self, new_events: list[dict]) -> str | None:
        """The ranks' new events: progress (the hang watchdog's), a node kill that is due (its cause), a partition."""
        cause = None
        for e in sorted(new_events, key=lambda e: e["t"]):
            if e["attempt"] != self.attempt:
                continue
            self.attempt_started = True
            if self.stepped:  # every event of a training attempt is a sign of progress (a save, a step's phases)
                self.last_step_t = time.monotonic()
            if e["kind"] == E.W_COMPUTE and self.node_clock.trained(self.t0 + e["t"]) is not None:
                self.ev.emit(M_EXPOSED, t=e["t"], clock=self.node_clock.clock)  # the train clock: the first step
            if e["kind"] in (E.M_FINISH, E.W_EXIT):
                self.stepped = False  # trained: the agents' own exit may take a while, which is no hang
            elif e["kind"] == E.W_STEP_END:  # the hang watchdog runs from the attempt's first step (not its start-up)
                self.last_step_t = time.monotonic()
                self.stepped = True
                if self.partitions and not {"next_step_s", "detected_s"} & set(self.partitions[-1]) and self.partition is None \
                        and e["t"] > self.partitions[-1]["t_down"]:  # the job trained on after the link came back
                    self.partitions[-1]["next_step_s"] = round(e["t"] - self.partitions[-1]["t_down"], 6)
            if e["kind"] == E.W_STEP_END and e["rank"] == 0:
                done = e["step"] + 1
                due = self.node_clock.due_at_step(done) if cause is None else None
                if due is not None:
                    cause = f"node_kill_at_step {due}"
                elif cause is None and self.pending_kills and done >= self.pending_kills[0]:
                    cause = f"kill_at_step {self.pending_kills.pop(0)}"  # one rank's process, not its node
                if self.pending_partitions and done >= self.pending_partitions[0] and self.partition is None:
                    self.start_partition(self.pending_partitions.pop(0))
                self.tell(steps_done=done, phase="training")
            elif e["kind"] == E.M_RESTORED and e["rank"] == 0:
                self.tell(steps_done=e["ckpt_step"], phase="restored")
        return cause

    def start_partition(self, step: int) -> None:
        """Take one node's link down (chosen at random, seeded) after step ``step``, for ``--partition-s`` seconds."""
        node = int(self.node_rng.integers(self.nodes))
        self.cluster.set_link(node, up=False)
        now = time.monotonic()
        self.partition = (node, now + self.config.partition_s)
        self.partitioned = self.attempt
        self.ev.emit(M_PARTITION, node=node, at_step=step, seconds=self.config.partition_s)
        self.partitions.append({"node": node, "at_step": step, "t_down": round(now - self.t0, 6)})

    def restore_partition(self, force: bool = False) -> None:
        """Bring the cut link back up once its seconds are over (``force``: now)."""
        if self.partition is not None and (force or time.monotonic() >= self.partition[1]):
            self.cluster.set_link(self.partition[0], up=True)
            self.ev.emit(M_PARTITION_END, node=self.partition[0])
            self.partitions[-1]["t_up"] = round(time.monotonic() - self.t0, 6)
            self.partition = None

    def fail_node(self, cause: str) -> bool:
        """Kill one node whole (or, on a hang, the silent job), stop the others, and relaunch all; False when
        the failure budget is spent."""
        if cause in ("hang", "collective_timeout"):  # the silence since the last step is the hang's cost
            silent = time.monotonic() - self.last_step_t
            self.ev.emit(SUP_HANG, t=self.last_step_t - self.t0)
            self.ev.emit(E.SUP_FAILURE, cause=cause, silent_s=round(silent, 6))
            if self.partitioned == self.attempt and "detected_s" not in self.partitions[-1]:
                self.partitions[-1]["detected_s"] = round(time.monotonic() - self.t0 - self.partitions[-1]["t_down"], 6)
        elif cause.startswith("kill_at_step"):  # one rank's process dies; its node, and the node's RAM, live on
            finder = self.jobs[0]  # the ranks' logs name their processes (one host: every node's ranks are known)
            finder.poll()
            live = finder.live_ranks(self.attempt)
            rank = live[int(self.rank_rng.integers(len(live)))] if live else None
            self.ev.emit(E.SUP_FAILURE, cause=cause, rank=rank)
            if rank is not None:
                finder.kill_rank(self.attempt, rank)
        else:
            position = int(self.node_rng.integers(self.nodes))
            node = self.roster[position]
            spare = self.spare_pool.pop(0) if self.spare_pool else None
            self.ev.emit(E.SUP_FAILURE, cause=cause, node=node, spare=spare,
                         **({"ram_lost": True} if self.ram_root is not None else {}))
            self.cluster.kill_node(node)  # every process of the node at once: a machine that loses power
            dead = self.warm.pop(node, None)  # its warm agent died with it
            if dead is not None:
                dead[0].wait()
            self.lost_ram.append(node)
            if spare is not None:  # the spare takes the dead node's place; the dead one, repaired, waits as a spare
                self.roster[position] = spare
                self.spare_pool.append(node)
                self.replacements.append({"attempt": self.attempt, "node": node, "spare": spare, "position": position})
        self.node_clock.cover()  # no node is exposed until the next attempt is launched (or trains)
        self.end_nodes()
        if self.ram_root is not None:  # the dead node's memory is gone with it (its processes are gone now)
            from ..distributed.node_ram import lose_node

            for node in self.lost_ram:
                lose_node(self.ram_root, node)
        self.lost_ram = []
        self.restore_partition(force=True)
        self.failures += 1
        self.tell(failures=self.failures, phase="failed")
        if self.failures > self.config.max_failures:
            from .supervision import budget_reason

            self.reason = budget_reason(self.failures, self.config.max_failures, resumed=False)
            return False
        self.attempt += 1  # the new ranks sleep --restart-delay themselves (emulated rescheduling), as under torchrun
        return True

    def end_nodes(self) -> None:
        """SIGKILL every process of the job in every namespace (not the warm agents) and reap the agents."""
        self.cluster.kill_all(keep=frozenset(proc.pid for proc, _ in self.warm.values()))
        for job in self.jobs:
            job.proc.wait()
            job._remove_rdzv_file()
        waiting = [log for _, log in self.warm.values()]
        for log in self.logs:
            if not any(log is w for w in waiting):
                log.drain()

    def reap_warm(self) -> None:
        """The warm agents, killed with their namespaces at the teardown, reaped; their logs drained."""
        for proc, log in self.warm.values():
            proc.wait()
            log.drain()
        self.warm = {}

    def stop(self, exc: BaseException) -> None:
        """The run stops early: no process, namespace or link left, and a summary that says why."""
        self.end_nodes()
        self.cluster.teardown()
        self.reap_warm()
        self.job = None
        super().stop(exc)

    def finish(self) -> dict:
        """The nodes' logs closed, then the job's files as a torchrun job's (:meth:`summary_extras` added)."""
        self.log = None
        for log in self.logs:
            log.close()
        return super().finish()

    def summary_extras(self) -> dict:
        """The nodes, and each partition: its node, step, link down/up times (s on the run's clock), the time
        from link down to the job's next step (``next_step_s``) or to the hang's verdict (``detected_s``)."""
        extras = {"launcher": "torchrun (emulated nodes)", "emulated_nodes": self.nodes}
        if self.config.spare_nodes:
            extras["spare_nodes"] = self.config.spare_nodes
            extras["node_replacements"] = self.replacements
        if self.partitions:
            extras["partitions"] = self.partitions
        return extras
