"""Unit tests of the cheap strategies (async, dcp, memory) and of the auto interval, in one process.

Real files, real threads, real forked processes killed with SIGKILL; no mocks.
The end-to-end runs (supervisor, kills, bit-exact resume) are in test_strategies.py.
"""

import json
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from goodputlab.measure import events as E
from goodputlab.checkpoints.strategies.async_ import AsyncCheckpointer
from goodputlab.checkpoints.store import CheckpointStore, CheckpointWarning
from goodputlab.checkpoints.restore import load_newest
from goodputlab.checkpoints.state import apply_state, capture_state
from goodputlab.checkpoints.strategies import make_checkpointer
from goodputlab.engine.config import RunConfig
from goodputlab.checkpoints.strategies.dcp import DcpCheckpointer
from goodputlab.checkpoints.dcp_layout import load_dcp_checkpoint
from goodputlab.measure.events import EventWriter, read_events
from goodputlab.measure.ledger import build_ledger
from goodputlab.checkpoints.strategies.memory import MemoryCheckpointer
from goodputlab.checkpoints.ram_tier import MemoryTier, create_memory_tier_dir, remove_memory_tier_dir, sweep_stale_memory_tiers
from goodputlab.training.model import state_sha256
from goodputlab.checkpoints.snapshot import flatten, unflatten
from goodputlab.training.objects import build_training


# --- helpers ----------------------------------------------------------------------------------
def training(seed=3):
    torch.manual_seed(seed)
    return build_training(RunConfig(steps=6, seed=seed), torch.device("cpu"))


DATA = torch.randint(0, 64, (6, 16, 33), generator=torch.Generator().manual_seed(0))


def train_steps(model, opt, sched, steps):
    for i in steps:
        _, loss = model(DATA[i, :, :-1], DATA[i, :, 1:])  # dropout draws from the torch RNG
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def state_after(objs, step):
    return capture_state(*objs, step, {"step": step, "batch_size": 16})


def straight_sha():
    objs = training()
    train_steps(*objs, range(6))
    return state_sha256(objs[0])


def resume_sha(load):
    """Train 3 steps, save through the caller, rebuild from a different RNG, load, train 3 more."""
    torch.manual_seed(12345)
    objs = training(seed=3)
    torch.manual_seed(12345)  # a new process would start from other RNG states
    assert apply_state(load(), *objs) == 3
    train_steps(*objs, range(3, 6))
    return state_sha256(objs[0])


def big_state(mb: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    n = mb * (1 << 20) // 4 // 8
    return {"step": seed, "w": [torch.randn(n, generator=g) for _ in range(8)], "meta": {"lr": 0.1, "betas": (0.9, 0.95)}}


def commits_collector():
    seen = []
    return seen, lambda step, **info: seen.append((step, info.get("tier")))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- flatten / unflatten -----------------------------------------------------------------------
def test_flatten_round_trips_a_training_state():
    objs = training()
    train_steps(*objs, range(2))
    state = state_after(objs, 2)
    skeleton, tensors = flatten(state)
    assert "model/tok.weight" in tensors and any(k.startswith("optimizer/state/") for k in tensors)
    assert not any(isinstance(v, torch.Tensor) for v in _leaves(skeleton))
    back = unflatten(skeleton, tensors)
    assert back["rng"]["python"] == state["rng"]["python"] and back["data"] == state["data"]
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])


def _leaves(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


# --- async ---------------------------------------------------------------------------------
def test_async_resumes_bit_exactly(tmp_path):
    objs = training()
    train_steps(*objs, range(3))
    store = CheckpointStore(tmp_path)
    seen, on_commit = commits_collector()
    ckpt = AsyncCheckpointer(store, on_commit)
    ckpt.save(state_after(objs, 3), 3)
    train_steps(*objs, range(3, 4))  # training goes on and changes the parameters while the persist runs
    ckpt.finalize()
    ckpt.close()
    assert seen == [(3, "disk")]
    assert resume_sha(lambda: store.load_newest_valid()[1]) == straight_sha()


def test_async_has_at_most_one_save_in_flight_and_the_wait_blocks(tmp_path):
    """Hold the first save's commit open: the second save must wait for it, and say so."""
    store = CheckpointStore(tmp_path, keep=5)
    release = threading.Event()
    seen = []

    def on_commit(step, **info):
        seen.append(step)
        if step == 1:
            assert release.wait(30)

    ckpt = AsyncCheckpointer(store, on_commit)
    ckpt.save(big_state(1, seed=1), 1)
    assert ckpt.in_flight
    second = threading.Thread(target=ckpt.save, args=(big_state(1, seed=2), 2))
    second.start()
    time.sleep(0.4)
    assert second.is_alive(), "the second save returned while the first was still in flight"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []  # nothing of save 2 written yet
    release.set()
    second.join(30)
    assert not second.is_alive()
    assert ckpt.last_wait_s >= 0.3 and ckpt.last_blocking_s >= ckpt.last_wait_s
    ckpt.finalize()
    ckpt.close()
    assert seen == [1, 2]
    assert [c.step for c in store.list()] == [2, 1]
    assert torch.equal(store.load(store.path_for(2))["w"][3], big_state(1, seed=2)["w"][3])


def test_waiting_for_the_previous_save_is_booked_as_checkpoint_save(tmp_path):
    """The worker's pattern: ckpt_save phase, save(), next phase. The wait lands in checkpoint_save."""
    store = CheckpointStore(tmp_path / "ckpt")
    release = threading.Event()
    ckpt = AsyncCheckpointer(store, lambda step, **i: release.wait(30) if step == 1 else None)
    ev = EventWriter(tmp_path / "events.jsonl", time.monotonic(), attempt=0)
    ev.emit(E.SUP_START)
    ev.emit(E.W_CKPT_SAVE, step=0)
    ckpt.save(big_state(1, 1), 1)
    ev.emit(E.W_COMPUTE, step=1)
    threading.Timer(0.5, release.set).start()  # the first persist finishes 0.5 s from now
    ev.emit(E.W_CKPT_SAVE, step=1)
    ckpt.save(big_state(1, 2), 2)  # waits for it
    ev.emit(E.W_COMPUTE, step=2)
    ckpt.finalize()
    ev.emit(E.SUP_END, completed=True)
    ev.close()
    ckpt.close()
    ledger = build_ledger(read_events(tmp_path / "events.jsonl"))
    assert ledger.buckets["checkpoint_save"] >= 0.4
    assert ledger.buckets["checkpoint_save"] >= ckpt.last_wait_s


def test_async_saves_leak_no_memory_threads_or_descriptors(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    state = big_state(4)
    ckpt = AsyncCheckpointer(store, lambda step, **i: None)
    for step in range(1, 11):  # warm up: buffers allocated, allocator settled
        ckpt.save(state, step)
    ckpt.finalize()
    fds, rss, threads = open_fds(), rss_bytes(), threading.active_count()
    allocations = ckpt.buffers.allocations
    for step in range(11, 101):
        state["w"][0][0] = step  # a different state each time
        ckpt.save(state, step)
    ckpt.finalize()
    assert open_fds() == fds
    assert threading.active_count() == threads
    assert ckpt.buffers.allocations == allocations == 8  # one buffer per tensor, ever
    assert rss_bytes() - rss < 16 << 20, f"resident memory grew by {(rss_bytes() - rss) / 1e6:.1f} MB over 90 saves"
    assert [c.step for c in store.list()] == [100, 99]
    assert store.load(store.path_for(100))["w"][0][0] == 100
    ckpt.close()
    assert threading.active_count() == threads - 1  # the writer thread is gone


def test_a_failed_background_write_stops_the_next_save(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt")
    ckpt = AsyncCheckpointer(store, lambda step, **i: None)
    ckpt.save(big_state(1), 1)
    ckpt.finalize()
    shutil.rmtree(store.root)
    store.root.write_text("a file where the checkpoint directory was")  # the next persist cannot write
    ckpt.save(big_state(1), 2)  # the snapshot succeeds; the failure is in the background
    with pytest.raises(RuntimeError, match="background checkpoint write failed"):
        ckpt.finalize()
    ckpt.close()


# --- dcp -----------------------------------------------------------------------------------
def test_dcp_round_trip_is_bit_exact_and_every_file_is_checksummed(tmp_path):
    objs = training()
    train_steps(*objs, range(3))
    store = CheckpointStore(tmp_path)
    seen, on_commit = commits_collector()
    ckpt = DcpCheckpointer(store, on_commit)
    ckpt.save(state_after(objs, 3), 3)
    train_steps(*objs, range(3, 4))  # DCP staged a copy: later steps must not leak into the checkpoint
    ckpt.finalize()
    ckpt.close()
    assert seen == [(3, "disk")]
    path = store.path_for(3)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["layout"] == "dcp"
    on_disk = sorted(p.name for p in path.iterdir() if p.name != "manifest.json")
    assert sorted(manifest["files"]) == on_disk and ".metadata" in on_disk and "skeleton.pt" in on_disk
    assert any(n.endswith(".distcp") for n in on_disk)
    assert store.newest_valid_step() == 3
    assert resume_sha(lambda: store.load_newest_valid()[1]) == straight_sha()


def test_damaged_dcp_checkpoints_are_skipped(tmp_path):
    store = CheckpointStore(tmp_path, keep=5)
    ckpt = DcpCheckpointer(store, lambda step, **i: None)
    for step in (1, 2, 3):
        ckpt.save(big_state(1, seed=step), step)
    ckpt.finalize()
    ckpt.close()
    shard = next(p for p in store.path_for(3).iterdir() if p.name.endswith(".distcp"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    (store.path_for(2) / ".metadata").unlink()
    seen = []
    with pytest.warns(CheckpointWarning):
        found, state = store.load_newest_valid(on_invalid=lambda c, why: seen.append((c.step, why)))
    assert found.step == 1 and torch.equal(state["w"][5], big_state(1, seed=1)["w"][5])
    assert [s for s, _ in seen] == [3, 2]
    assert "sha256 mismatch" in seen[0][1] and ".metadata missing" in seen[1][1]


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_dcp_metadata_that_would_run_code_is_refused(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt", keep=5)
    ckpt = DcpCheckpointer(store, lambda step, **i: None)
    ckpt.save(big_state(1), 1)
    ckpt.finalize()
    ckpt.close()
    path = store.path_for(1)
    marker = tmp_path / "code-ran"
    (path / ".metadata").write_bytes(pickle.dumps(_RunsCode(marker)))
    with pytest.raises(ValueError, match="system is not allowed in DCP metadata"):
        load_dcp_checkpoint(path)  # the checksum layer is bypassed here on purpose: the unpickler alone refuses
    assert not marker.exists()


# --- memory tier ---------------------------------------------------------------------------
@pytest.fixture
def ram_dir():
    path = create_memory_tier_dir()
    yield path
    remove_memory_tier_dir(path)


def test_memory_round_trip_is_bit_exact(tmp_path, ram_dir):
    objs = training()
    train_steps(*objs, range(3))
    store = CheckpointStore(tmp_path)
    seen, on_commit = commits_collector()
    ckpt = MemoryCheckpointer(store, on_commit, MemoryTier(ram_dir), disk_every=4)
    ckpt.save(state_after(objs, 3), 3)
    train_steps(*objs, range(3, 4))
    ckpt.writer.wait()
    assert store.list() == []  # first save: RAM only
    tier = MemoryTier(ram_dir)  # what a new worker sees
    assert tier.checkpoint().step == 3
    assert resume_sha(lambda: load_newest(store, tier)[1]) == straight_sha()
    ckpt.finalize()  # the final state goes to disk too
    ckpt.close()
    assert seen == [(3, "memory"), (3, "disk")] and store.newest_valid_step() == 3
    assert resume_sha(lambda: store.load_newest_valid()[1]) == straight_sha()


def test_memory_writes_every_kth_save_to_disk(tmp_path, ram_dir):
    store = CheckpointStore(tmp_path, keep=10)
    seen, on_commit = commits_collector()
    ckpt = MemoryCheckpointer(store, on_commit, MemoryTier(ram_dir), disk_every=3)
    for step in range(1, 8):
        ckpt.save(big_state(1, seed=step), step)
    ckpt.finalize()
    ckpt.close()
    assert [c.step for c in store.list()] == [7, 6, 3]
    assert [t for _, t in seen] == ["memory", "memory", "memory+disk", "memory", "memory", "memory+disk", "memory", "disk"]
    slots = sorted(p.name for p in Path(ram_dir).iterdir())
    assert slots == ["current.json", "owner.lock", "slot-0.data", "slot-0.meta", "slot-1.data", "slot-1.meta"]


def _damage_ram(ram_dir: Path, how: str) -> None:
    cur = json.loads((ram_dir / "current.json").read_text())
    data, meta = ram_dir / f"slot-{cur['slot']}.data", ram_dir / f"slot-{cur['slot']}.meta"
    if how == "flip":
        with open(data, "r+b") as f:
            f.seek(1000)
            b = f.read(1)
            f.seek(1000)
            f.write(bytes([b[0] ^ 0x01]))
    elif how == "truncate":
        os.truncate(data, 100)
    elif how == "meta":
        meta.write_bytes(meta.read_bytes()[:-10] + b"0123456789")
    elif how == "current":
        (ram_dir / "current.json").write_text("{half")
    elif how == "no_data":
        data.unlink()


@pytest.mark.parametrize("how", ["flip", "truncate", "meta", "current", "no_data"])
def test_damaged_ram_snapshot_falls_back_to_disk(tmp_path, ram_dir, how):
    store = CheckpointStore(tmp_path, keep=5)
    ckpt = MemoryCheckpointer(store, lambda step, **i: None, MemoryTier(ram_dir), disk_every=2)
    for step in (1, 2, 3):  # RAM holds 3, disk holds 2
        ckpt.save(big_state(1, seed=step), step)
    ckpt.writer.wait()
    ckpt.close()
    tier = MemoryTier(ram_dir)
    assert tier.load()[0].step == 3
    _damage_ram(Path(ram_dir), how)
    seen = []
    with pytest.warns(CheckpointWarning, match="RAM snapshot"):
        found, state = load_newest(store, tier, on_invalid=lambda c, why: seen.append((c.tier, why)))
    assert found.tier == "disk" and found.step == 2
    assert torch.equal(state["w"][7], big_state(1, seed=2)["w"][7])
    assert seen and seen[0][0] == "memory"


_WRITER = """
import sys, torch
from goodputlab.checkpoints.ram_tier import MemoryTier
from goodputlab.checkpoints.snapshot import flatten
sys.path.insert(0, sys.argv[2])
from test_cheap_checkpoints import big_state
tier = MemoryTier(sys.argv[1])
skeleton, tensors = flatten(big_state(8, seed=1))
slot = tier.free_slot()
tier.copy_in(slot, tensors)
tier.publish(slot, 1, skeleton)
_, tensors = flatten(big_state(8, seed=2))
slot = tier.free_slot()
print("copying", flush=True)
while True:  # copy the second state again and again until the parent kills us mid-copy
    tier.copy_in(slot, tensors)
"""


def test_a_worker_killed_while_copying_leaves_the_previous_ram_snapshot_intact(ram_dir, cli_env):
    # a fresh interpreter, not a fork: a forked child of a process that ran OpenMP kernels can hang in torch
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(ram_dir), str(Path(__file__).parent)],
        stdout=subprocess.PIPE, text=True, env=cli_env,
    )
    try:
        assert proc.stdout.readline().strip() == "copying"
        time.sleep(0.3)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    ckpt, state = MemoryTier(ram_dir).load()
    assert ckpt.step == 1 and ckpt.tier == "memory"
    assert torch.equal(state["w"][4], big_state(8, seed=1)["w"][4])


def test_memory_saves_leak_nothing(tmp_path, ram_dir):
    store = CheckpointStore(tmp_path, keep=2)
    state = big_state(4)
    ckpt = MemoryCheckpointer(store, lambda step, **i: None, MemoryTier(ram_dir), disk_every=25)
    for step in range(1, 11):
        ckpt.save(state, step)
    ckpt.writer.wait()
    fds, rss, threads = open_fds(), rss_bytes(), threading.active_count()
    shm = MemoryTier(ram_dir).slot_bytes()
    for step in range(11, 101):
        state["w"][1][0] = step
        ckpt.save(state, step)
    ckpt.finalize()
    assert open_fds() == fds and threading.active_count() == threads
    assert MemoryTier(ram_dir).slot_bytes() == shm <= 2 * (4 << 20) + 4096  # two slots, nothing more
    assert rss_bytes() - rss < 16 << 20
    ckpt.close()
    _, loaded = MemoryTier(ram_dir).load()
    assert loaded["w"][1][0] == 100


def _tier_owned_by_child(root, name):
    """A RAM tier whose owner lock is held by a child process (as a supervisor holds it); returns (dir, child)."""
    d = root / name
    d.mkdir()
    (d / "slot-0.data").write_bytes(b"x" * 100)
    code = (
        "import sys, time; from goodputlab.safe_io import hold_new_lock; "
        "hold_new_lock(sys.argv[1], 'owner.lock'); print('locked', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(d)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return d, child


def test_stale_ram_tiers_are_swept_by_their_free_lock_never_by_pid(tmp_path):
    """Liveness is the owner's flock, not its pid: a pid means nothing across PID namespaces."""
    dead_dir, dead = _tier_owned_by_child(tmp_path, "goodputlab-mem-1-deadbeef")
    dead.kill()  # SIGKILL: no cleanup ran, the kernel dropped the lock
    dead.wait()
    # a live owner whose tier is named after a pid that does not exist here (another PID namespace)
    gone = mp.get_context("fork").Process(target=lambda: None)
    gone.start()
    gone.join()
    live_dir, live = _tier_owned_by_child(tmp_path, f"goodputlab-mem-{gone.pid}-cafe0000")
    creating = tmp_path / "goodputlab-mem-2-0000beef"  # no lock file yet: being created, left alone
    creating.mkdir()
    try:
        mine = create_memory_tier_dir(tmp_path)  # sweeps first
        assert not dead_dir.exists()
        assert live_dir.exists() and (live_dir / "slot-0.data").exists() and creating.exists() and mine.exists()
        assert sweep_stale_memory_tiers(tmp_path) == []  # this process's own tier is held too
        remove_memory_tier_dir(mine)
        assert not mine.exists()
    finally:
        live.kill()
        live.wait()
    assert sweep_stale_memory_tiers(tmp_path) == [live_dir]  # its owner is gone now
    creating.rmdir()
    assert list(tmp_path.iterdir()) == []


def test_make_checkpointer_knows_every_strategy(tmp_path, ram_dir):
    store = CheckpointStore(tmp_path)
    for name in ("sync", "async", "dcp", "memory"):
        c = make_checkpointer(name, store, lambda s, **i: None, tier=MemoryTier(ram_dir))
        assert c.name == name
        c.close()
    with pytest.raises(ValueError, match="lazy"):
        make_checkpointer("lazy", store, lambda s, **i: None)


def test_ram_restore_puts_each_tensor_back_on_the_device_type_it_was_saved_from(tmp_path, ram_dir):
    store = CheckpointStore(tmp_path, keep=2)
    state = big_state(2)
    ckpt = MemoryCheckpointer(store, lambda step, **i: None, MemoryTier(ram_dir), disk_every=25)
    ckpt.save(state, 1)
    ckpt.finalize()
    ckpt.close()
    tier = MemoryTier(ram_dir)
    meta = torch.load(ram_dir / f"slot-{tier.current()['slot']}.meta", weights_only=True)
    assert {e["device"] for e in meta["index"]} == {"cpu"}  # recorded at save time
    _, on_cpu = tier.load(device="cpu")
    assert all(t.device.type == "cpu" for t in on_cpu["w"])
    assert torch.equal(on_cpu["w"][1], state["w"][1])
    # asked for another device type, tensors saved from the CPU stay on the CPU (RNG states, step counters)
    _, elsewhere = tier.load(device="meta")
    assert all(t.device.type == "cpu" for t in elsewhere["w"])
    assert torch.equal(elsewhere["w"][0], state["w"][0])
    on_cpu["w"][0].zero_()  # private copies: the RAM tier is untouched
    assert torch.equal(tier.load()[1]["w"][0], state["w"][0])
