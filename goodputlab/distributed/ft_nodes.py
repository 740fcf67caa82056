"""Where an in-job recovery run's processes live and listen (``--fault-tolerance torchft``).

:class:`OneMachine`: the lighthouse and every replica group on this machine's loopback (127.0.0.1),
the lighthouse on a free port. :class:`FtNodes` (``--emulate-nodes N``): replica group ``r`` runs
inside emulated node ``r``'s network namespace (:mod:`goodputlab.distributed.netns`), started through
``ip netns exec``, and binds every torchft socket (its store, its manager server, its checkpoint
transport, :func:`~goodputlab.distributed.ft_worker.bind_torchft`) to the node's address, which the
peer nodes reach over the bridge: a relaunched group heals by fetching the state from a peer node's
checkpoint transport. The lighthouse runs on a node of its own (namespace ``N``, address
``10.200.0.<N+1>``, port :data:`LIGHTHOUSE_PORT`), as a cluster runs it on a machine apart, so no
replica group's node failure takes it down. A node kill SIGKILLs every process in the node's
namespace at once (its replica group); the group relaunches cold in the same namespace.

The supervisor (:mod:`goodputlab.engine.torchft_supervision`) asks either the same things: the
lighthouse's command and URL, each group's command prefix and environment, a node kill, the teardown.
"""

from __future__ import annotations

from .binding import LOOPBACK, listening_socket
from .ft_worker import BIND_ADDRESS_ENV

#: The lighthouse's port on its node's address (nothing else listens in that namespace).
LIGHTHOUSE_PORT = 29510


class OneMachine:
    """Every process of the run on this machine, every socket on loopback."""

    nodes = 0

    def setup(self) -> None:
        with listening_socket(LOOPBACK, 0) as sock:
            self.lighthouse_bind = f"{LOOPBACK}:{sock.getsockname()[1]}"

    def lighthouse(self, cmd: list[str]) -> list[str]:
        return cmd

    def address(self, group: int) -> str:
        return LOOPBACK

    def wrap(self, group: int, cmd: list[str]) -> list[str]:
        return cmd

    def env(self, group: int) -> dict:
        """Group ``group``'s lighthouse, bind address and gloo interface."""
        return {"TORCHFT_LIGHTHOUSE": f"http://{self.lighthouse_bind}", BIND_ADDRESS_ENV: self.address(group),
                "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": self.address(group)}

    def kill_node(self, group: int) -> None:
        pass  # one machine: the supervisor kills the group's session

    def teardown(self) -> None:
        pass

    def summary(self) -> dict:
        return {}


class FtNodes(OneMachine):
    """``nodes`` emulated nodes, replica group ``r`` on node ``r``, the lighthouse on a node of its own."""

    def __init__(self, nodes: int):
        from .netns import EmulatedCluster, remove_leftovers

        remove_leftovers()  # a previous run killed before its teardown
        self.nodes = nodes
        self.cluster = EmulatedCluster(nodes + 1)  # the last namespace: the lighthouse's node
        # known before set-up (the addresses are fixed): a run stopped while the namespaces are made still sums up
        self.lighthouse_bind = f"{self.cluster.address(self.nodes)}:{LIGHTHOUSE_PORT}"

    def setup(self) -> None:
        self.cluster.setup()

    def lighthouse(self, cmd: list[str]) -> list[str]:
        return self.cluster.wrap(self.nodes, cmd)

    def address(self, group: int) -> str:
        return self.cluster.address(group)

    def wrap(self, group: int, cmd: list[str]) -> list[str]:
        return self.cluster.wrap(group, cmd)

    def env(self, group: int) -> dict:
        from .netns import NODE_IFNAME

        return {**super().env(group), "GLOO_SOCKET_IFNAME": NODE_IFNAME}

    def kill_node(self, group: int) -> None:
        """Every process of group ``group``'s node at once, as a machine that loses power."""
        self.cluster.kill_node(group)

    def teardown(self) -> None:
        """Every process, namespace, veth and the bridge; safe to call again."""
        self.cluster.teardown()

    def summary(self) -> dict:
        return {"emulated_nodes": self.nodes, "lighthouse": self.lighthouse_bind,
                "node_addresses": [self.address(g) for g in range(self.nodes)]}


def placement(config) -> OneMachine:
    """:class:`FtNodes` for ``--emulate-nodes N``, else :class:`OneMachine`."""
    return FtNodes(config.emulate_nodes) if config.emulate_nodes >= 2 else OneMachine()
