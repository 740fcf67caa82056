"""``--fault-tolerance torchft --resume`` against damaged and crafted checkpoints: real runs, real files.

* A 2 GiB sparse ``state.pt`` (a few kB on disk) listed in the newest checkpoint's manifest: each replica read it
  whole (2.34 GB, capped only at half the RAM) and refused it on its hash afterwards. Now every reader of a run's
  checkpoints caps a file at the one-process engine's size for the model (``state_file_cap``): the file is refused
  from its manifest, unread, and the peak memory of the whole run (``wait4``) stays that of a genuine resume.
* A poisoned newest checkpoint (a pickle that would run code, with valid hashes): the replicas skipped it and
  restored the one before, but the summary said ``resumed_from_step`` of the poisoned one, and nothing was said.
  Now the summary gives what the replicas restored, and each skipped checkpoint is one warning line.
* Every checkpoint damaged: the run trained from step 0 without a word. Now it says so.

Needs torchft (the ``ft`` extra); skipped, with the reason, without it.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_untrusted_checkpoints import RunsCode, torch_archive

pytest.importorskip("torchft", reason="the ft extra: pip install 'goodputlab[ft]'")

GOODPUTLAB = [sys.executable, "-m", "goodputlab.cli"]
FLAGS = ["--nproc", "2", "--fault-tolerance", "torchft", "--threads", "1", "--model", "tiny", "--device", "cpu"]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """A torchft run of 30 steps whose checkpoints are at steps 10 and 20 (none after the last step)."""
    out = tmp_path_factory.mktemp("torchft") / "base"
    done = subprocess.run([*GOODPUTLAB, "run", *FLAGS, "--steps", "30", "--ckpt-every", "10", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (out / "ckpt").iterdir()) == ["step-00000010", "step-00000020"]
    return out


def replace_state(ckpt: Path, size: int | None = None, data: bytes | None = None) -> None:
    """``ckpt``'s ``state.pt`` replaced, its manifest entry rewritten as an attacker can: a sparse file of ``size``
    bytes listed with its size (and the genuine file's hash: the old reader found out only after reading it), or
    ``data`` listed with its true size and hash."""
    state, manifest_path = ckpt / "state.pt", ckpt / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    state.unlink()
    if data is None:
        with open(state, "wb") as f:
            f.truncate(size)
        manifest["files"]["state.pt"]["bytes"] = size
    else:
        state.write_bytes(data)
        manifest["files"]["state.pt"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    manifest_path.write_text(json.dumps(manifest))


def resume(out: Path) -> tuple[dict, list[str], int]:
    """``run --resume out --steps 40``: its summary, its stderr lines, and the peak RSS (bytes) of the largest
    process of the run (the supervisor, a replica, the lighthouse), from ``wait4``."""
    proc = subprocess.Popen([*GOODPUTLAB, "run", "--resume", str(out), "--steps", "40", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads((out / "summary.json").read_text()), stderr.splitlines(), usage.ru_maxrss * 1024


def copy(stopped: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copytree(stopped, out)
    return out


def test_a_sparse_2_gib_state_pt_is_refused_unread_and_the_resume_restores_the_one_before(stopped, tmp_path):
    genuine = copy(stopped, tmp_path, "genuine")
    bomb = copy(stopped, tmp_path, "bomb")
    replace_state(bomb / "ckpt" / "step-00000020", size=2 << 30)
    assert os.stat(bomb / "ckpt" / "step-00000020" / "state.pt").st_blocks * 512 < 1 << 20  # sparse: nothing on disk
    base, _, base_rss = resume(genuine)
    summary, lines, rss = resume(bomb)
    assert base["resumed_from_step"] == 20 and base["completed"]
    assert summary["completed"] and summary["resumed_from_step"] == 10
    assert rss < base_rss + (256 << 20), f"peak RSS {rss >> 20} MiB against {base_rss >> 20} MiB for the genuine resume"
    # each replica refused it from its manifest, unread, said once, and restored step 10
    events = [json.loads(line) for line in (bomb / "events.jsonl").read_text().splitlines()]
    assert {e["ckpt_step"] for e in events if e["kind"] == "restored" and e.get("source") == "disk"} == {10}
    warned = [line for line in lines if "skipped damaged checkpoint of step 20" in line]
    assert len(warned) == 1 and f"state.pt {2 << 30} bytes, more than the" in warned[0], lines
    assert not [line for line in lines if "Traceback" in line]


def test_a_poisoned_newest_checkpoint_is_said_and_the_summary_names_the_step_the_replicas_restored(stopped, tmp_path):
    out = copy(stopped, tmp_path, "poisoned")
    marker = tmp_path / "ran"
    replace_state(out / "ckpt" / "step-00000020", data=torch_archive(RunsCode(marker)))
    summary, lines, _ = resume(out)
    assert not marker.exists()
    assert summary["completed"] and summary["resumed_from_step"] == 10, summary["resumed_from_step"]
    warned = [line for line in lines if "skipped damaged checkpoint of step 20" in line]
    assert len(warned) == 1 and "restore falls back to an older one" in warned[0], lines


def test_a_resume_whose_every_checkpoint_is_damaged_says_it_trains_from_step_0(stopped, tmp_path):
    poisoned, broken = copy(stopped, tmp_path, "every-poisoned"), copy(stopped, tmp_path, "every-broken")
    for step in ("step-00000010", "step-00000020"):
        replace_state(poisoned / "ckpt" / step, data=torch_archive(RunsCode(tmp_path / "ran")))
        (broken / "ckpt" / step / "state.pt").write_bytes(b"cut short")  # fails its hash
    summary, lines, _ = resume(poisoned)
    assert summary["completed"] and summary["resumed_from_step"] == 0
    assert len([line for line in lines if "skipped damaged checkpoint" in line]) == 2, lines
    assert len([line for line in lines if "no replica could restore a checkpoint" in line and "from step 0" in line]) == 1
    summary, lines, _ = resume(broken)
    assert summary["completed"] and summary["resumed_from_step"] == 0
    assert len([line for line in lines if "no checkpoint in" in line and "verifies" in line and "from step 0" in line]) == 1


# --- torchft's transport: what a heal loads ------------------------------------------------------------------------
PEER = textwrap.dedent("""
    # a peer's checkpoint server (HTTP, as torchft's), answering every fetch with a state that runs code when unpickled
    import http.server, os, sys
    from torchft.checkpointing._serialization import _streaming_save

    class RunsCode:
        def __reduce__(self):
            return (os.system, (f"touch {sys.argv[1]}",))

    class Peer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            _streaming_save({"model": RunsCode()}, self.wfile)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Peer)
    print(server.server_address[1], flush=True)
    server.serve_forever()
""")

HEAL = textwrap.dedent("""
    # a replica's heal: torchft's HTTPTransport fetches the peer's state (bind_torchft applied when asked)
    import sys
    from datetime import timedelta
    from torchft.checkpointing.http_transport import HTTPTransport
    if sys.argv[2] == "goodputlab":
        from goodputlab.distributed.ft_worker import bind_torchft
        bind_torchft("127.0.0.1")
    try:
        transport = HTTPTransport.__new__(HTTPTransport)  # the receiving side only: no server of its own
        transport._num_chunks = 0  # torchft's default: the state in one piece
        transport.recv_checkpoint(0, f"http://127.0.0.1:{sys.argv[1]}/checkpoint/", 1, timedelta(seconds=30))
        print("loaded")
    except Exception as e:
        print("refused:", type(e).__name__, str(e).splitlines()[0][:200])
""")


@pytest.mark.parametrize("reader", ["torchft", "goodputlab"])
def test_a_heal_from_a_peer_that_serves_a_code_running_pickle_runs_nothing(reader, tmp_path):
    """torchft loads a healed state with ``torch.load(weights_only=False)``: whoever answers at a quorum member's
    checkpoint address runs code in the healing replica (the control: torchft as it ships). goodputlab's replicas
    load it with ``weights_only=True``: refused, nothing runs. (Joining a quorum is open to any loopback client:
    docs/SECURITY.md.)"""
    marker = tmp_path / "ran"
    peer = subprocess.Popen([sys.executable, "-c", PEER, str(marker)], stdout=subprocess.PIPE, text=True)
    try:
        port = peer.stdout.readline().strip()
        heal = subprocess.run([sys.executable, "-c", HEAL, port, reader], capture_output=True, text=True, timeout=120)
    finally:
        peer.kill()
        peer.wait()
    assert heal.returncode == 0, heal.stderr[-2000:]
    if reader == "torchft":
        assert marker.exists() and "loaded" in heal.stdout, heal.stdout  # the attack works against torchft alone
    else:
        assert not marker.exists() and "refused: UnpicklingError" in heal.stdout, heal.stdout
