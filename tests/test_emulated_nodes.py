"""An emulated cluster (``--emulate-nodes``): real network namespaces, real torchrun agents, real kills.

Needs root (network namespaces); skipped, with the reason, elsewhere. Every test compares what the
machine holds before and after (``ip netns list``, the links, the processes): nothing a run made may
outlive it, on success, after a whole-node kill and after SIGTERM. The whole-node kill is bit-exact
against its failure-free twin; a random node failure (``--node-mtbf``) strikes when the failure clock's
seeded draw says so.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from goodputlab.distributed import netns

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None,
    reason="emulated nodes need root (network namespaces) and iproute2; CI runs as root",
)

HANG_TIMEOUT_S = 4  # well above a tiny step or save on a loaded 2-core machine (tenths of a second)
TINY = ["--model", "tiny", "--steps", "8", "--ckpt-every", "2", "--device", "cpu", "--json", "--quiet"]
GOODPUTLAB = [sys.executable, "-m", "goodputlab.cli"]


def machine_state(folder: Path) -> tuple[list[str], list[str], set[int]]:
    """The namespaces and links of the emulated clusters on this machine (any run's), and the torchrun
    agents and ranks of the runs in ``folder`` (other jobs on the machine are not this test's)."""
    ours = [ns for ns in netns.namespaces() if ns.startswith(netns.PREFIX + "-")]
    links = [link for link in netns.links() if link.startswith(netns.PREFIX)]
    procs = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if str(folder).encode() in cmd and (b"torch.distributed.run" in cmd or b"goodputlab.distributed.worker" in cmd
                                                or b"goodputlab.distributed.warm_agent" in cmd
                                                or b"goodputlab.distributed.node_agent" in cmd):
                procs.add(int(p.name))
    return sorted(ours), sorted(links), procs


def listeners(ns: str) -> list[tuple[str, int]]:
    """The TCP sockets listening in namespace ``ns``: ``(address, port)`` (from its own /proc/net/tcp{,6})."""
    import ipaddress

    found = []
    for table in ("tcp", "tcp6"):
        text = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/proc/net/{table}"], capture_output=True,
                              text=True, check=True).stdout
        for line in text.splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state != "0A":  # LISTEN
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # each 32-bit word is little-endian
            address = ipaddress.ip_address(raw)
            if address.version == 6 and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            found.append((str(address), int(hex_port, 16)))
    return found


def run(out: Path, *flags: str) -> dict:
    proc = subprocess.run([*GOODPUTLAB, "run", *flags, *TINY, "--out", str(out)], capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def twin_runs(tmp_path_factory):
    """A 2-node run (1 rank each, a spare node) with a partition after step 2 caught by --hang-timeout and
    a whole-node kill after step 5, and its failure-free twin (no spare)."""
    root = tmp_path_factory.mktemp("emulated")
    before = machine_state(root)
    # A failure "after step K" strikes when the supervisor has read step K, which a loaded machine delays: in
    # one busy run a kill after step 3 of 8 tiny 20 ms steps landed after step 8, and the node kill planned
    # after step 5 never came. Sleeping storage (no CPU; the data, so the weights, are the same) makes a step
    # 250 ms, so each failure has steps to land in.
    slow = ("--io-latency-ms", "250")
    killed = run(root / "killed", "--emulate-nodes", "2", "--nproc", "1", "--spare-nodes", "1", "--kill-node-at-steps", "5",
                 "--partition-at-steps", "2", "--partition-s", "120", "--hang-timeout", str(HANG_TIMEOUT_S), *slow)
    after_kill = machine_state(root)
    twin = run(root / "twin", "--emulate-nodes", "2", "--nproc", "1")
    # the RAM tier: a process kill after step 3 (its node's RAM survives), a node kill after step 5 (its RAM goes)
    memory = run(root / "memory", "--emulate-nodes", "2", "--nproc", "1", "--ckpt", "memory", "--memory-disk-every", "100",
                 "--kill-at-steps", "3", "--kill-node-at-steps", "5", *slow)
    return {"root": root, "killed": killed, "twin": twin, "memory": memory, "before": before, "after_kill": after_kill,
            "after": machine_state(root)}


def test_a_partition_and_a_whole_node_kill_are_booked_and_bit_exact_against_the_failure_free_twin(twin_runs):
    killed, twin = twin_runs["killed"], twin_runs["twin"]
    assert killed["completed"] and twin["completed"]
    assert killed["failures"] == 2 and twin["failures"] == 0
    assert killed["world_size"] == twin["world_size"] == 2 and killed["emulated_nodes"] == 2
    assert killed["final_state_sha256"] == twin["final_state_sha256"]
    events = [json.loads(line) for line in (twin_runs["root"] / "killed" / "events.jsonl").read_text().splitlines()]
    failure = [e for e in events if e["kind"] == "failure"]
    assert [e["cause"] for e in failure] == ["hang", "node_kill_at_step 5"] and failure[1]["node"] in (0, 1)
    # the spare (namespace 2) took the dead node's place; every relaunch was handed to warm agents
    assert failure[1]["spare"] == 2 and killed["spare_nodes"] == 1
    assert killed["node_replacements"] == [{"attempt": 1, "node": failure[1]["node"], "spare": 2,
                                            "position": killed["node_replacements"][0]["position"]}]
    logs = {p.name for p in (twin_runs["root"] / "killed" / "logs").iterdir()}
    assert "node2-attempt002.log" in logs and f"node{failure[1]['node']}-attempt002.log" not in logs
    # the node kill's relaunch resumed from the step-4 checkpoint (the hang's may start from scratch: the
    # step-2 save needs the gather the partition cut)
    assert 2 in {e["attempt"] for e in events if e["kind"] == "restored"}
    assert max(e["attempt"] for e in events) == 2
    # the partition: its link down and up, the silence until the verdict booked as a hang of its own
    (partition,) = killed["partitions"]
    assert partition["at_step"] == 2 and partition["t_up"] > partition["t_down"]
    assert partition["detected_s"] >= HANG_TIMEOUT_S
    assert killed["recovery"]["hang_detection_s"] and killed["recovery"]["hang_detection_s"][0] >= HANG_TIMEOUT_S
    hang = next(e for e in events if e["kind"] == "hang")
    assert failure[0]["t"] - hang["t"] >= HANG_TIMEOUT_S
    assert [e["kind"] for e in events if e["kind"] in ("partition", "partition_end")] == ["partition", "partition_end"]
    assert killed["buckets"]["restart"] > 0 and killed["stop_reason"] == "completed"


def test_the_ram_tier_survives_a_process_kill_and_a_node_kill_restores_from_the_peer_copy_bit_exactly(twin_runs):
    """--ckpt memory on 2 nodes, no disk save before the end: the process kill's relaunch restores both ranks
    from their own node's RAM; the node kill deletes that node's RAM, and its rank restores from the copy
    its neighbour held (Gemini's placement); the run ends bit-exact with its failure-free twin."""
    memory, twin = twin_runs["memory"], twin_runs["twin"]
    assert memory["completed"] and memory["failures"] == 2
    assert memory["final_state_sha256"] == twin["final_state_sha256"]
    events = [json.loads(line) for line in (twin_runs["root"] / "memory" / "events.jsonl").read_text().splitlines()]
    tier = next(e for e in events if e["kind"] == "memory_tier")
    assert tier["copies"] == 2 and not Path(tier["path"]).exists()  # removed at the end
    process, node = [e for e in events if e["kind"] == "failure"]
    assert process["cause"] == "kill_at_step 3" and process["rank"] in (0, 1) and "ram_lost" not in process
    assert node["cause"] == "node_kill_at_step 5" and node["ram_lost"] is True
    restored = {(e["attempt"], e["rank"]): e for e in events if e["kind"] == "restored"}

    # a kill "after step K" lands when the supervisor reads K done: on a busy machine a step or a save later,
    # so the restored steps are held to the order of the kills, not to fixed numbers
    first = {k: (e["source"], e["ckpt_step"]) for k, e in restored.items() if k[0] == 1}
    assert set(first) == {(1, 0), (1, 1)} and len(set(first.values())) == 1
    (source, first_step), = set(first.values())
    assert source == "memory" and first_step >= 2
    (lost,) = [e for (a, _), e in restored.items() if a == 2 and e["node"] == f"node{node['node']}"]
    (kept,) = [e for (a, _), e in restored.items() if a == 2 and e["node"] != f"node{node['node']}"]
    # no earlier than the first relaunch's restore: when the process kill lands late and the node kill
    # early, no snapshot comes between them, and both relaunches restore the same step (4 and 4 in a run
    # of make test with nothing else on the machine)
    assert lost["source"] == "peer" and lost["ckpt_step"] >= first_step and lost["ckpt_step"] >= 4
    assert lost["path"] == f"node{1 - node['node']}/held-rank{lost['rank']}"  # the copy on the surviving node
    assert kept["source"] == "memory" and kept["ckpt_step"] == lost["ckpt_step"]
    assert not [e for e in events if e["kind"] == "ckpt_commit" and e.get("tier") != "memory" and e["ckpt_step"] < 8]
    assert memory["buckets"]["checkpoint_restore"] > 0 and memory["buckets"]["lost_work"] > 0


def test_a_run_leaves_no_namespace_link_or_process(twin_runs):
    assert twin_runs["after_kill"] == twin_runs["before"]
    assert twin_runs["after"] == twin_runs["before"]


def relaunched_after_a_node_failure(out: Path) -> bool:
    """Has the supervisor booked a failure, and a rank of the next attempt written its first event?"""
    try:
        sup = [json.loads(line) for line in (out / "ranks" / "supervisor.jsonl").read_text().splitlines()]
        failed = [e["attempt"] for e in sup if e["kind"] == "failure"]
        ranks = [(out / "ranks" / f"events-rank{r}.jsonl").read_text() for r in (0, 1)]
    except (OSError, json.JSONDecodeError):  # not written yet, or a line half written
        return False
    return bool(failed) and any(f'"attempt":{failed[0] + 1},' in text for text in ranks)


def test_a_random_node_failure_then_sigterm_stops_every_node_and_removes_the_cluster(tmp_path):
    """--node-mtbf 20 with seed 1: the job's clock (MTBF 20 / 2 nodes, from the first step) draws 0.85 s, so a
    node dies soon after training starts; once the job is relaunched, SIGTERM stops it and the cluster goes,
    with its RAM tier (--ckpt memory)."""
    from goodputlab.recovery.modes import FailureClock

    before = machine_state(tmp_path)
    out = tmp_path / "r"
    proc = subprocess.Popen([*GOODPUTLAB, "run", "--emulate-nodes", "2", "--nproc", "1", "--model", "tiny",
                             "--steps", "100000", "--device", "cpu", "--seed", "1", "--node-mtbf", "20", "--ckpt", "memory",
                             "--quiet", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not relaunched_after_a_node_failure(out) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    during = machine_state(tmp_path)
    assert len(during[0]) == len(before[0]) + 2 and len(during[2]) > len(before[2])  # the cluster was up
    run_id = proc.pid
    for node, ns in enumerate((f"gpl-{run_id}-n0", f"gpl-{run_id}-n1")):
        # every listening socket of a node binds its own address: the ranks' store, gloo, and on node 0 torch's
        # rendezvous store (bound by goodputlab.distributed.node_agent; torch alone binds every interface)
        own = f"10.200.0.{node + 1}"
        for address, port in listeners(ns):
            assert address == own, (ns, address, port)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert machine_state(tmp_path) == before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted by SIGTERM" and summary["failures"] >= 1
    # the node failure: drawn on the one failure clock (its first exposure, from the attempt's first step),
    # struck no earlier than the draw, booked with its node; the relaunch is restart time
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    exposed = next(e for e in events if e["kind"] == "exposed")
    failure = next(e for e in events if e["kind"] == "failure")
    draw = FailureClock(1, 20 / 2).expose(0.0)
    assert exposed["attempt"] == 0 and exposed["clock"] == "train"
    assert failure["cause"] == "node_mtbf" and failure["node"] in (0, 1) and failure["ram_lost"] is True
    tier = next(e for e in events if e["kind"] == "memory_tier")
    assert not Path(tier["path"]).exists()  # the RAM tier (--ckpt memory) went with the cluster at SIGTERM
    assert draw <= failure["t"] - exposed["t"] < draw + 10
    assert summary["buckets"]["restart"] > 0


def test_leftovers_of_a_dead_run_are_removed_with_their_processes():
    """A real supervisor makes a cluster, starts a process in node 1 and is SIGKILLed before its teardown: while
    it lives, its cluster is not swept (its lock is held); once it is dead, everything it made goes."""
    code = ("import subprocess, time; from goodputlab.distributed import netns; c = netns.EmulatedCluster(2).setup(); "
            "p = subprocess.Popen(c.wrap(1, ['sleep', '300'])); print(c.run, p.pid, flush=True); time.sleep(300)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        run, sleeper = map(int, owner.stdout.readline().split())
        cluster = netns.EmulatedCluster(2, run=run)  # names only: this process made nothing
        deadline = time.monotonic() + 10  # `ip netns exec` enters the namespace a moment after it starts
        while cluster.pids(1) != [sleeper] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cluster.pids(1) == [sleeper]
        assert run not in netns.remove_leftovers() and cluster.pids(1) == [sleeper]  # alive: left alone
    finally:
        owner.kill()
        owner.wait()
    assert run in netns.remove_leftovers()
    deadline = time.monotonic() + 10
    while _running(sleeper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _running(sleeper)
    assert not [ns for ns in netns.namespaces() if ns.startswith(f"gpl-{run}-")]
    assert not [link for link in netns.links() if link.startswith(f"gpl{run}")]
    assert not list(netns.ETC_NETNS.glob(f"gpl-{run}-*")) and not (netns.LOCKS / f"{run}.lock").exists()


def _running(pid: int) -> bool:
    """Is ``pid`` a live process (not gone, not a zombie waiting for its new parent to reap it)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_without_the_privilege_one_line_and_exit_2(tmp_path):
    # a user namespace without a mapping: this process is nobody there, with no capability
    proc = subprocess.run(["unshare", "--user", *GOODPUTLAB, "run", "--emulate-nodes", "2", *TINY,
                           "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--emulate-nodes 2 is invalid" in proc.stderr
    assert "--nproc N without --emulate-nodes" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_torchft_across_emulated_nodes_heals_a_killed_node_from_its_peer_and_leaves_nothing(tmp_path):
    """``--fault-tolerance torchft --emulate-nodes 2``: a replica group per node, the lighthouse on a node of
    its own; node 0 or 1 is killed whole after step 5, relaunches in its namespace and heals from the other
    node's checkpoint transport (the heal names that node's address). Every socket of a node listens on its
    address, none on loopback nor on every interface; the ledger closes and nothing is left."""
    pytest.importorskip("torchft", reason="the ft extra: pip install 'goodputlab[ft]'")
    import goodputlab as gl

    out = tmp_path / "ft"
    proc = subprocess.Popen([*GOODPUTLAB, "run", "--fault-tolerance", "torchft", "--emulate-nodes", "2", "--nproc", "2",
                             "--kill-node-at-steps", "5", "--io-latency-ms", "500", "--model", "tiny", "--steps", "40", "--ckpt-every", "0",
                             "--threads", "1", "--device", "cpu", "--json", "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spaces = [f"{netns.PREFIX}-{proc.pid}-n{i}" for i in range(3)]  # node 0, node 1, the lighthouse's node
    seen, pids, lighthouses = {ns: set() for ns in spaces}, set(), set()
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        for ns in set(spaces) & set(netns.namespaces()):
            try:
                seen[ns] |= set(listeners(ns))
            except subprocess.CalledProcessError:
                continue  # torn down meanwhile
            found = {int(p) for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()}
            pids |= found
            lighthouses |= found if ns == spaces[2] else set()
        time.sleep(0.3)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-3000:]
    s = json.loads(stdout)
    assert s["completed"] and s["failures"] == 1 and s["heals"] == 1 and s["emulated_nodes"] == 2, s
    assert s["final_state_sha256"] is not None  # both groups ended with the same weights
    assert abs(sum(s["buckets"].values()) - s["wall_s"]) <= 0.01 * s["wall_s"]
    for r in ("0", "1"):
        assert sum(s["replicas"][r].values()) == pytest.approx(s["wall_s"], rel=1e-9)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    killed = next(e["replica"] for e in events if e["kind"] == "failure")
    heal = next(e for e in events if e["kind"] == "restored" and e["attempt"] > 0)
    assert heal["replica"] == killed and heal["peer"].startswith(f"http://{netns.SUBNET}.{2 - killed}:"), heal
    # each node's sockets on its own address: its store, manager server, checkpoint transport, gloo; the lighthouse's
    addresses = {ns: {a for a, _ in found} for ns, found in seen.items()}
    assert addresses == {spaces[i]: {f"{netns.SUBNET}.{i + 1}"} for i in range(3)}, seen
    assert (f"{netns.SUBNET}.3", 29510) in seen[spaces[2]]
    ledger = gl.load_run(out).ledger  # the job's timeline, as for any torchft run
    assert ledger.completed and len(ledger.failure_times) == 1 and ledger.buckets == pytest.approx(s["buckets"], abs=1e-9)
    ours, links, _ = machine_state(out)
    assert not [ns for ns in ours if ns in spaces] and not [link for link in links if str(proc.pid) in link]
    assert pids and not [p for p in pids if _ours(p, out, lighthouses)], "a process of a node outlived the run"


def _ours(pid: int, out: Path, lighthouses: set[int]) -> bool:
    """Is ``pid`` alive and one of the run's: a replica group's (its command names the run's folder) or the lighthouse?"""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()  # gone: OSError
    except OSError:
        return False
    return pid in lighthouses or str(out).encode() in cmd
