"""An emulated cluster on one machine: one Linux network namespace per "node", joined by a bridge.

``goodputlab run --emulate-nodes N`` (docs/DISTRIBUTED.md) gives every node a namespace of its own
(``gpl-<run>-n<i>``), whose only interfaces are its loopback and one end of a veth pair
(``eth0``, address ``10.200.0.<i+1>/24``); the other end sits on a bridge (``gpl<run>br``) in the
machine's own namespace. The bridge has no address, IPv4 or IPv6: IPv6 is off on the bridge, on
the veths' host ends and in every node (``disable_ipv6``, ``addrgenmode none``: no ``fe80::``
link-local address, which the kernel would otherwise give each of them), and :meth:`EmulatedCluster.setup`
checks that none is left. So the machine itself has no route into the emulated cluster, and nothing
the nodes send leaves it: their traffic stays between the namespaces this run made. A process
started through :meth:`EmulatedCluster.wrap` (``ip netns exec``) sees only its node's network, so
"every interface" of a listener there is its node's address and loopback.

``<run>`` is a number this run claims (the supervisor's process id unless another cluster or a
leftover holds a name with it) by creating ``/run/goodputlab-netns/<run>.lock`` and holding an
``flock`` on it for the cluster's whole life. :func:`remove_leftovers` removes the namespaces,
veths, bridges and name files of a run whose lock is free (its supervisor is gone, killed with
SIGKILL, say) with their processes. A lock is seen from every PID namespace, where a process id
would name another process or none, so a live run in a PID namespace of its own is never swept.
:meth:`EmulatedCluster.teardown` is idempotent: it kills every process in each namespace
(``ip netns pids``), deletes the namespaces (which deletes their veth ends and, with them, the
peers on the bridge), their name files under ``/etc/netns``, the bridge and the lock. It deletes
only what this cluster made.

Privileges: creating a namespace that ``ip netns exec`` can enter needs root (``CAP_NET_ADMIN`` and
``CAP_SYS_ADMIN`` for the bind mount under ``/run/netns``). :func:`check_privilege` says in one line
when they are missing.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

from ..errors import ConfigError
from ..safe_io import hold_new_lock, try_lock_existing

PREFIX = "gpl"
SUBNET = "10.200.0"  # a private range: 10.200.0.1 is node 0, 10.200.0.2 node 1, ...
NODE_IFNAME = "eth0"
ETC_NETNS = Path("/etc/netns")  # ip netns exec mounts /etc/netns/<ns>/* over /etc/*
LOCKS = Path("/run/goodputlab-netns")  # <run>.lock: flock-ed by the supervisor of live cluster <run>
IPV6_SYSCTL = Path("/proc/sys/net/ipv6/conf")  # absent where the kernel has no IPv6
_CAP_NET_ADMIN, _CAP_SYS_ADMIN = 12, 21
_NS_NAME = re.compile(rf"^{PREFIX}-(\d+)-n(\d+)$")
_LINK_NAME = re.compile(rf"^{PREFIX}(\d+)(?:br|v\d+|p\d+)$")
_LOCK_NAME = re.compile(r"^(\d+)\.lock$")
_MAX_RUN = 10**10 - 1  # "gpl" + run + "v7" fits an interface name (15 characters)
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


def _remove(names_ns: list[str], names_links: list[str], name_files: list[str] = ()) -> None:
    for ns in names_ns:
        _kill_namespace_processes(ns)
        _ip("netns", "delete", ns, check=False)  # its eth0 goes with it, and the veth peer on the bridge
    for ns in {*names_ns, *name_files}:
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    for link in names_links:
        _ip("link", "delete", link, check=False)


def _name_files(ns: str, own_address: str, nodes: int) -> None:
    """``/etc/netns/<ns>/``: the ``hosts`` and ``resolv.conf`` that ``ip netns exec`` mounts over the machine's.

    Without them a node asks the machine's name server (which it cannot reach) for the name of every
    peer that connects, and torch's stores wait seconds for each answer; with them, the machine's name
    is the node's own address and the nodes' addresses have names (``node0``, ...) in a file."""
    folder = ETC_NETNS / ns
    folder.mkdir(parents=True)  # a folder already there is not this run's: the claim saw none
    names = [f"127.0.0.1 localhost", f"{own_address} {socket.gethostname()}"]
    names += [f"{SUBNET}.{i + 1} node{i}" for i in range(nodes)]
    (folder / "hosts").write_text("\n".join(names) + "\n")
    (folder / "resolv.conf").write_text("# no name server: an emulated node resolves from its hosts file only\n")


def _lock_dir() -> Path:
    """:data:`LOCKS`, made if missing: a real folder of this user that nobody else can write."""
    LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(LOCKS)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise ConfigError("emulate_nodes", "-", f"a {LOCKS} that is a folder of this user, writable by nobody else "
                          "(it holds the locks that tell live emulated clusters from leftovers)")
    return LOCKS


def _names() -> dict[int, dict[str, list[str]]]:
    """Every run number on the machine: its namespaces, links, name files and lock (any run's)."""
    found: dict[int, dict[str, list[str]]] = {}

    def add(run: str, kind: str, name: str) -> None:
        found.setdefault(int(run), {"ns": [], "links": [], "files": [], "lock": []})[kind].append(name)

    files = [p.name for p in ETC_NETNS.glob(f"{PREFIX}-*")] if ETC_NETNS.is_dir() else []
    for ns in namespaces():
        if m := _NS_NAME.match(ns):
            add(m[1], "ns", ns)
    for name in files:
        if m := _NS_NAME.match(name):
            add(m[1], "files", name)
    for link in links():
        if m := _LINK_NAME.match(link):
            add(m[1], "links", link)
    for lock in (os.listdir(LOCKS) if LOCKS.is_dir() else []):
        if m := _LOCK_NAME.match(lock):
            add(m[1], "lock", lock)
    return found


def remove_leftovers() -> list[int]:
    """Remove what runs whose supervisor is gone left behind (namespaces, veths, bridges, name files, their
    processes); returns those runs' numbers.

    A run is gone when its lock (:data:`LOCKS`) can be taken: its holder died, however it died, in whatever
    PID namespace. A cluster with no lock file was made before the locks existed; it is judged by its
    supervisor's process id, as then."""
    gone = []
    for run, names in sorted(_names().items()):
        held = None
        if names["lock"]:
            held = try_lock_existing(LOCKS / names["lock"][0])
            if held is None:  # a live supervisor holds it (or it is no regular file): not ours to judge
                continue
        elif _alive(run):
            continue
        try:
            _remove(names["ns"], names["links"], names["files"])
            if held is not None:
                os.unlink(LOCKS / names["lock"][0])
        finally:
            if held is not None:
                os.close(held)
        gone.append(run)
    return gone


def _claim(preferred: int) -> tuple[int, int]:
    """A run number whose names nobody uses, and the descriptor of its lock, held: ``preferred`` if free,
    else a random one (a name some other cluster or tool uses is left alone, never reused or removed)."""
    folder = _lock_dir()
    rng = random.Random()
    for candidate in [preferred, *(rng.randrange(10**8, _MAX_RUN) for _ in range(20))]:
        if candidate in _names():
            continue
        try:
            fd = hold_new_lock(folder, f"{candidate}.lock", replace=False)
        except FileExistsError:
            continue
        made = _names().get(candidate, {})
        if not (made.get("ns") or made.get("links") or made.get("files")):
            return candidate, fd
        os.unlink(folder / f"{candidate}.lock")  # a name appeared meanwhile (a tool that takes no lock)
        os.close(fd)
    raise ConfigError("emulate_nodes", "-", f"0 here: no free run number for the namespaces (21 tried; {LOCKS})")


def _device_without_ipv6(device: str) -> None:
    """No IPv6 on ``device`` of the machine's namespace: no link-local address is generated for it
    (``addrgenmode none``) and its IPv6 is off (``disable_ipv6``)."""
    if IPV6_SYSCTL.is_dir():  # absent: the kernel has no IPv6 at all
        _ip("link", "set", "dev", device, "addrgenmode", "none")
        (IPV6_SYSCTL / device / "disable_ipv6").write_text("1\n")


def _namespace_without_ipv6(ns: str) -> None:
    """No IPv6 in namespace ``ns``: off for ``all`` its interfaces and by ``default`` for those moved in
    later (the loopback gets no ``::1``, the node's ``eth0`` no link-local address)."""
    if IPV6_SYSCTL.is_dir():
        _ip("netns", "exec", ns, "sh", "-c",
            f"for c in all default; do echo 1 > {IPV6_SYSCTL}/$c/disable_ipv6 || exit 1; done")


def _ipv6_addresses(ns: str | None, devices: list[str] | None = None) -> list[str]:
    """The IPv6 addresses in namespace ``ns`` (else the machine's), on ``devices`` only when given."""
    out = _ip(*(["-n", ns] if ns else []), "-6", "-o", "addr", "show", check=False).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and (devices is None or parts[1] in devices):
            found.append(f"{parts[1]} {parts[3]}")
    return found


def _why(e: subprocess.CalledProcessError) -> str:
    """One line on a failed ``ip`` command: what it said, and privileges only when it said they were missing."""
    said = (e.stderr or "").strip().replace("\n", "; ") or f"exit {e.returncode}"
    need = f"; emulated nodes need {NO_PRIVILEGE}" if "not permitted" in said or "Permission denied" in said else ""
    return f"0 here: '{' '.join(e.cmd)}' failed ({said}){need}"


class EmulatedCluster:
    """``nodes`` network namespaces on one bridge, named after run ``run`` (preferred: this process id;
    another number when that one is in use, see :func:`_claim`).

    Use as a context manager, or call :meth:`setup` and then :meth:`teardown` (idempotent) in a ``finally``."""

    def __init__(self, nodes: int, run: int | None = None):
        self.nodes = nodes
        self.run = os.getpid() if run is None else run
        self.lock_fd: int | None = None
        self.made_ns: list[str] = []
        self.made_links: list[str] = []

    @property
    def bridge(self) -> str:
        """The bridge's name in the machine's namespace."""
        return f"{PREFIX}{self.run}br"

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
        """Claim a run number, make the bridge and the namespaces, with no IPv6 anywhere; on any error
        remove what was made and raise. Only names of the claimed number are made or removed: no other
        cluster or tool uses them (:func:`_claim`)."""
        try:
            self.run, self.lock_fd = _claim(self.run)  # from here every name of this number is this cluster's
            self.made_links.append(self.bridge)  # before it is made: a Ctrl-C during `ip` still has it removed
            _ip("link", "add", self.bridge, "type", "bridge")
            _device_without_ipv6(self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(self.nodes):
                ns, host, peer = self.namespace(i), self.host_link(i), f"{PREFIX}{self.run}p{i}"
                self.made_ns.append(ns)
                _ip("netns", "add", ns)
                _name_files(ns, self.address(i), self.nodes)
                _namespace_without_ipv6(ns)
                self.made_links.append(host)
                _ip("link", "add", host, "type", "veth", "peer", "name", peer)
                _device_without_ipv6(host)
                _ip("link", "set", peer, "netns", ns)
                _ip("-n", ns, "link", "set", peer, "name", NODE_IFNAME)
                if IPV6_SYSCTL.is_dir():
                    _ip("-n", ns, "link", "set", "dev", NODE_IFNAME, "addrgenmode", "none")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", NODE_IFNAME)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", NODE_IFNAME, "up")
                _ip("link", "set", host, "master", self.bridge)
                _ip("link", "set", host, "up")
            left = _ipv6_addresses(None, self.made_links) + [a for ns in self.made_ns for a in _ipv6_addresses(ns)]
            if left:
                raise ConfigError("emulate_nodes", self.nodes, f"0 here: IPv6 addresses stayed on the cluster ({', '.join(left)}), "
                                  "which would make its nodes reachable from this machine's namespace")
        except subprocess.CalledProcessError as e:
            self.teardown()
            raise ConfigError("emulate_nodes", self.nodes, _why(e)) from None
        except BaseException:
            self.teardown()
            raise
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
        """Remove every process, namespace, veth and the bridge this cluster made, then its lock; safe to call again."""
        _remove(self.made_ns, self.made_links)
        self.made_ns, self.made_links = [], []
        if self.lock_fd is not None:
            try:
                os.unlink(LOCKS / f"{self.run}.lock")
            except FileNotFoundError:
                pass
            os.close(self.lock_fd)
            self.lock_fd = None

    def __enter__(self) -> EmulatedCluster:
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()
