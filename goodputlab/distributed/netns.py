"""An emulated cluster on one machine: one Linux network namespace per "node", joined by a bridge.

``goodputlab run --emulate-nodes N`` (docs/DISTRIBUTED.md) gives every node a namespace of its own
(``gpl-<run>-n<i>``), whose only interfaces are its loopback and one end of a veth pair
(``eth0``, address ``10.200.0.<i+1>/24``); the other end sits on a bridge (``gpl<run>br``) in the
machine's own namespace. The bridge has no address, so the machine itself has no route into the
emulated cluster, and nothing the nodes send leaves it: their traffic stays between the namespaces
this run made. A process started through :meth:`EmulatedCluster.wrap` (``ip netns exec``) sees
only its node's network, so "every interface" of a listener there is its node's address and
loopback.

``<run>`` is the supervisor's process id: :func:`remove_leftovers` finds the namespaces, veths and
bridges of a run whose supervisor is gone (killed with SIGKILL, say) by that prefix and removes
them with their processes. :meth:`EmulatedCluster.teardown` is idempotent: it kills every process
in each namespace (``ip netns pids``), deletes the namespaces (which deletes their veth ends and,
with them, the peers on the bridge), their name files under ``/etc/netns`` and the bridge.

Privileges: creating a namespace that ``ip netns exec`` can enter needs root (``CAP_NET_ADMIN`` and
``CAP_SYS_ADMIN`` for the bind mount under ``/run/netns``). :func:`check_privilege` says in one line
when they are missing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..errors import ConfigError

PREFIX = "gpl"
SUBNET = "10.200.0"  # a private range: 10.200.0.1 is node 0, 10.200.0.2 node 1, ...
NODE_IFNAME = "eth0"
ETC_NETNS = Path("/etc/netns")  # ip netns exec mounts /etc/netns/<ns>/* over /etc/*
_CAP_NET_ADMIN, _CAP_SYS_ADMIN = 12, 21
_NS_NAME = re.compile(rf"^{PREFIX}-(\d+)-n(\d+)$")
_LINK_NAME = re.compile(rf"^{PREFIX}(\d+)(?:br|v\d+)$")
NO_PRIVILEGE = (
    "root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces, which this process lacks; "
    "emulate ranks on one machine instead: --nproc N without --emulate-nodes"
)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _capabilities() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def check_privilege(nodes: int) -> None:
    """``ConfigError`` (one line, exit 2) unless this process may create network namespaces and ``ip`` exists."""
    caps = _capabilities()
    if shutil.which("ip") is None:
        raise ConfigError("emulate_nodes", nodes, "0 here: the 'ip' command (iproute2) is not installed")
    if not (caps >> _CAP_NET_ADMIN & 1 and caps >> _CAP_SYS_ADMIN & 1):
        raise ConfigError("emulate_nodes", nodes, f"0 here: emulated nodes need {NO_PRIVILEGE}")


def namespaces() -> list[str]:
    """The names of the network namespaces ``ip netns`` knows (every run's, not only this one's)."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links() -> list[str]:
    """The names of the network interfaces of the machine's own namespace."""
    out = _ip("-o", "link", "show", check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace_processes(ns: str, keep: frozenset[int] = frozenset()) -> None:
    """SIGKILL every process in namespace ``ns`` but those in ``keep``, until none is left (a dying agent
    may have just forked)."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit() and int(p) not in keep]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def _remove(names_ns: list[str], names_links: list[str]) -> None:
    for ns in names_ns:
        _kill_namespace_processes(ns)
        _ip("netns", "delete", ns, check=False)  # its eth0 goes with it, and the veth peer on the bridge
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    for link in names_links:
        _ip("link", "delete", link, check=False)


def _name_files(ns: str, own_address: str, nodes: int) -> None:
    """``/etc/netns/<ns>/``: the ``hosts`` and ``resolv.conf`` that ``ip netns exec`` mounts over the machine's.

    Without them a node asks the machine's name server (which it cannot reach) for the name of every
    peer that connects, and torch's stores wait seconds for each answer; with them, the machine's name
    is the node's own address and the nodes' addresses have names (``node0``, ...) in a file."""
    folder = ETC_NETNS / ns
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"127.0.0.1 localhost", f"{own_address} {socket.gethostname()}"]
    names += [f"{SUBNET}.{i + 1} node{i}" for i in range(nodes)]
    (folder / "hosts").write_text("\n".join(names) + "\n")
    (folder / "resolv.conf").write_text("# no name server: an emulated node resolves from its hosts file only\n")


def remove_leftovers() -> list[int]:
    """Remove what runs whose supervisor is gone left behind (namespaces, veths, bridges, their
    processes); returns those runs' ids."""
    dead_ns: dict[int, list[str]] = {}
    leftover_files = [p.name for p in ETC_NETNS.glob(f"{PREFIX}-*")] if ETC_NETNS.is_dir() else []
    for ns in sorted(set(namespaces()) | set(leftover_files)):
        m = _NS_NAME.match(ns)
        if m and not _alive(int(m[1])):
            dead_ns.setdefault(int(m[1]), []).append(ns)
    dead_links: dict[int, list[str]] = {}
    for link in links():
        m = _LINK_NAME.match(link)
        if m and not _alive(int(m[1])):
            dead_links.setdefault(int(m[1]), []).append(link)
    runs = sorted(set(dead_ns) | set(dead_links))
    for run in runs:
        _remove(dead_ns.get(run, []), dead_links.get(run, []))
    return runs


class EmulatedCluster:
    """``nodes`` network namespaces on one bridge, named after run ``run`` (default: this process id).

    Use as a context manager, or call :meth:`setup` and then :meth:`teardown` (idempotent) in a ``finally``."""

    def __init__(self, nodes: int, run: int | None = None):
        self.nodes = nodes
        self.run = os.getpid() if run is None else run
        self.bridge = f"{PREFIX}{self.run}br"
        self.made_ns: list[str] = []
        self.made_links: list[str] = []

    def namespace(self, node: int) -> str:
        """The name of node ``node``'s network namespace."""
        return f"{PREFIX}-{self.run}-n{node}"

    def address(self, node: int) -> str:
        """Node ``node``'s address (IPv4, on the bridge's private /24)."""
        return f"{SUBNET}.{node + 1}"

    def host_link(self, node: int) -> str:
        """The bridge's end of node ``node``'s veth pair (down: the node is cut off)."""
        return f"{PREFIX}{self.run}v{node}"

    def setup(self) -> EmulatedCluster:
        """Make the bridge and the namespaces; on any error remove what was made and raise."""
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self.made_links.append(self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(self.nodes):
                ns, host, peer = self.namespace(i), self.host_link(i), f"{PREFIX}{self.run}p{i}"
                self.made_ns.append(ns)
                _name_files(ns, self.address(i), self.nodes)
                _ip("netns", "add", ns)
                _ip("link", "add", host, "type", "veth", "peer", "name", peer)
                self.made_links.append(host)
                _ip("link", "set", peer, "netns", ns)
                _ip("-n", ns, "link", "set", peer, "name", NODE_IFNAME)
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", NODE_IFNAME)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", NODE_IFNAME, "up")
                _ip("link", "set", host, "master", self.bridge)
                _ip("link", "set", host, "up")
        except subprocess.CalledProcessError as e:
            self.teardown()
            raise ConfigError("emulate_nodes", self.nodes,
                              f"0 here: {' '.join(e.cmd)} failed ({(e.stderr or '').strip() or e.returncode}); "
                              f"emulated nodes need {NO_PRIVILEGE}") from None
        return self

    def wrap(self, node: int, cmd: list[str]) -> list[str]:
        """``cmd`` run inside node ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node), *cmd]

    def pids(self, node: int) -> list[int]:
        """Every process in node ``node``'s namespace."""
        return [int(p) for p in _ip("netns", "pids", self.namespace(node), check=False).stdout.split() if p.isdigit()]

    def kill_node(self, node: int) -> int:
        """SIGKILL every process of node ``node`` at once, as a machine that loses power; returns how many."""
        pids = self.pids(node)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def set_link(self, node: int, up: bool) -> None:
        """Take node ``node``'s link to the bridge down (a partition) or bring it back up."""
        _ip("link", "set", self.host_link(node), "up" if up else "down")

    def kill_all(self, keep: frozenset[int] = frozenset()) -> None:
        """SIGKILL every process in every namespace of the cluster but those in ``keep`` (warm agents)."""
        for ns in self.made_ns:
            _kill_namespace_processes(ns, keep)

    def teardown(self) -> None:
        """Remove every process, namespace, veth and the bridge this cluster made; safe to call again."""
        _remove(self.made_ns, self.made_links)
        self.made_ns, self.made_links = [], []

    def __enter__(self) -> EmulatedCluster:
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()
