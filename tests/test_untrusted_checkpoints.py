"""A checkpoint folder is input: whoever can write it can rewrite its manifest too. No file in it may run code.

Every test plants a payload that *would* run code (it creates a marker file), proves
that the payload is live (an unguarded reader runs it: the control), then restores
through the readers the worker uses (``load_newest`` with the worker's state check)
and asserts that the payload never ran, that restore fell back to the previous valid
checkpoint, and that a :class:`CheckpointWarning` said so. The manifest is always
rewritten to match the planted bytes, as an attacker would: the checksums do not
save us, the readers do. The CLI's side (the warning on the user's terminal) is in
``tests/test_run_safety.py``.
"""

import hashlib
import io
import json
import os
import pickle
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from goodputlab.checkpoints.store import CheckpointStore, CheckpointWarning
from goodputlab.checkpoints.restore import load_newest
from goodputlab.checkpoints.state import capture_state, check_training_state
from goodputlab.checkpoints.strategies import make_checkpointer
from goodputlab.engine.config import RunConfig
from goodputlab.errors import RunFileError
from goodputlab.checkpoints.ram_tier import MemoryTier, create_memory_tier_dir, remove_memory_tier_dir
from goodputlab.checkpoints.safe_unpickle import UnsafePickleError, check_pickle_globals, TORCH_ARCHIVE_GLOBALS
from goodputlab.training.objects import build_training


class RunsCode:
    """Pickles to ``os.system("touch <marker>")``: unpickling it with an unguarded reader runs a shell."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def torch_archive(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def dotted_dcp_payload(marker: Path, genuine: bytes = b"") -> bytes:
    """The published attack on DCP's ``.metadata``: a protocol-4 STACK_GLOBAL of
    ``torch.distributed.checkpoint.filesystem`` / ``os.system`` (that module imports ``os``;
    a reader that allows "any name of this module" follows the dots). With ``genuine``, the
    real metadata follows the call, so an unguarded restore succeeds silently."""

    def text(s: str) -> bytes:
        b = s.encode()
        return b"\x8c" + bytes([len(b)]) + b  # SHORT_BINUNICODE

    call = text("torch.distributed.checkpoint.filesystem") + text("os.system") + b"\x93"  # STACK_GLOBAL
    call += text(f"touch {marker}") + b"\x85" + b"R" + b"0"  # TUPLE1, REDUCE, POP
    return b"\x80\x04" + call + (genuine[2:] if genuine else b"N.")  # genuine minus its PROTO, or None + STOP


# --- a real training state and real checkpoints ------------------------------------------------
@pytest.fixture(scope="module")
def objs():
    torch.manual_seed(0)
    return build_training(RunConfig(steps=20, seed=0), torch.device("cpu"))


def state(objs, step):
    return capture_state(*objs, step, {"step": step, "samples_consumed": step * 16, "batch_size": 16})


def saved(tmp_path, objs, strategy="sync", steps=(5, 10), tier=None, **kw):
    store = CheckpointStore(tmp_path / "ckpt", keep=5)
    ckpt = make_checkpointer(strategy, store, lambda s, **i: None, tier=tier, **kw)
    for s in steps:
        ckpt.save(state(objs, s), s)
    ckpt.finalize()
    ckpt.close()
    return store


def rewrite(store, step, name, data: bytes) -> None:
    """Replace one file of a checkpoint and fix its manifest entry, as an attacker can."""
    path = store.path_for(step)
    (path / name).write_bytes(data)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (path / "manifest.json").write_text(json.dumps(manifest))


def restore(store, objs, tier=None, match=None):
    """What the worker does: the newest valid state, damaged ones skipped with a warning."""
    skipped = []
    with pytest.warns(CheckpointWarning, match=match) as caught:
        found = load_newest(
            store,
            tier,
            on_invalid=lambda c, why: skipped.append((c.step, c.tier, why)),
            accept=lambda c, s: check_training_state(s, c.step, objs[0], objs[1]),
        )
    return found, skipped, [str(w.message) for w in caught]


@contextmanager
def deadline(seconds=30):
    """Fail instead of hanging forever (a FIFO read blocks until a writer appears)."""

    def expired(*_):
        raise TimeoutError(f"still reading after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --- state.pt (sync, async, the memory strategy's disk tier) ------------------------------------
def test_state_pt_payload_never_runs(tmp_path, objs):
    store = saved(tmp_path, objs)
    marker, control = tmp_path / "ran", tmp_path / "control-ran"
    torch.load(io.BytesIO(torch_archive({"model": RunsCode(control)})), weights_only=False)
    assert control.exists()  # the payload is live
    rewrite(store, 10, "state.pt", torch_archive({**state(objs, 10), "model": RunsCode(marker)}))
    found, skipped, messages = restore(store, objs, match="step-00000010")
    assert found[0].step == 5 and not marker.exists()
    assert skipped[0][0] == 10 and "posix.system is not allowed" in skipped[0][2]


def test_dotted_and_opcode_tricks_in_a_torch_archive_are_refused():
    allowed = TORCH_ARCHIVE_GLOBALS
    dotted = b"\x80\x02ctorch.serialization\nos.system\nq\x00."  # GLOBAL with a dotted name
    with pytest.raises(UnsafePickleError, match="dotted"):
        check_pickle_globals(dotted, allowed, "state.pt")
    stack_global = dotted_dcp_payload(Path("/nonexistent"))
    with pytest.raises(UnsafePickleError, match="STACK_GLOBAL"):
        check_pickle_globals(stack_global, allowed, "state.pt")
    with pytest.raises(UnsafePickleError, match="unreadable"):
        check_pickle_globals(b"\x80\x02\xff", allowed, "state.pt")


def test_a_verified_state_of_another_model_is_skipped(tmp_path, objs):
    store = saved(tmp_path, objs)
    alien = state(objs, 10)
    alien["model"] = {"w": torch.zeros(3)}  # loads fine, but applying it would crash the worker
    rewrite(store, 10, "state.pt", torch_archive(alien))
    found, skipped, _ = restore(store, objs)
    assert found[0].step == 5 and "other parameters" in skipped[0][2]


# --- dcp: .metadata, shards, skeleton -------------------------------------------------------------
@pytest.mark.parametrize("variant", ["payload", "payload then the genuine metadata"])
def test_dcp_metadata_with_a_dotted_global_never_runs(tmp_path, objs, variant):
    store = saved(tmp_path, objs, "dcp")
    genuine = (store.path_for(10) / ".metadata").read_bytes()
    payload = dotted_dcp_payload(tmp_path / "ran", genuine if "genuine" in variant else b"")
    control = dotted_dcp_payload(tmp_path / "control-ran", genuine if "genuine" in variant else b"")
    result = pickle.loads(control)  # an unguarded reader: the shell runs, and the genuine variant even restores
    assert (tmp_path / "control-ran").exists()
    assert ("genuine" in variant) == (type(result).__name__ == "Metadata")
    rewrite(store, 10, ".metadata", payload)
    found, skipped, messages = restore(store, objs, match="step-00000010")
    assert found[0].step == 5 and not (tmp_path / "ran").exists()
    assert "torch.distributed.checkpoint.filesystem.os.system is not allowed in DCP metadata (a dotted name)" in skipped[0][2]


def _shard(store, step):
    return next(p for p in store.path_for(step).iterdir() if p.name.endswith(".distcp"))


def test_dcp_shard_read_as_bytes_never_runs(tmp_path, objs):
    """Stock DCP loads a "bytes" entry with torch.load(weights_only=False): metadata that calls a
    tensor "bytes" turns a shard into code. Our reader refuses such metadata, and its planner refuses bytes."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, MetadataIndex

    store = saved(tmp_path, objs, "dcp")
    path, shard = store.path_for(10), _shard(store, 10)

    def plant(marker):
        md = pickle.loads((path / ".metadata").read_bytes())  # genuine: only DCP's own classes
        payload = pickle.dumps(RunsCode(marker))
        data = shard.read_bytes()
        fqn = "model/tok.weight"
        md.state_dict_metadata[fqn] = BytesStorageMetadata()
        for k in [k for k in md.storage_data if k.fqn == fqn]:
            del md.storage_data[k]
        md.storage_data[MetadataIndex(fqn)] = _StorageInfo(relative_path=shard.name, offset=len(data), length=len(payload))
        rewrite(store, 10, shard.name, data + payload)
        rewrite(store, 10, ".metadata", pickle.dumps(md))
        return fqn

    fqn = plant(tmp_path / "control-ran")
    with pytest.raises(BaseException):  # stock DCP: the shell runs, then the load fails
        dcp.load({fqn: torch.empty(64, 64)}, storage_reader=dcp.FileSystemReader(str(path)), no_dist=True)
    assert (tmp_path / "control-ran").exists()

    store = saved(tmp_path / "again", objs, "dcp")
    path, shard = store.path_for(10), _shard(store, 10)
    plant(tmp_path / "ran")
    found, skipped, _ = restore(store, objs)
    assert found[0].step == 5 and not (tmp_path / "ran").exists()
    assert "BytesStorageMetadata is not allowed" in skipped[0][2]


def test_dcp_shard_tensor_record_payload_never_runs(tmp_path, objs):
    store = saved(tmp_path, objs, "dcp")
    path, shard = store.path_for(10), _shard(store, 10)
    record = torch_archive({"t": RunsCode(tmp_path / "ran")})
    torch.load(io.BytesIO(torch_archive({"t": RunsCode(tmp_path / "control-ran")})), weights_only=False)
    assert (tmp_path / "control-ran").exists()
    md = pickle.loads((path / ".metadata").read_bytes())
    data = shard.read_bytes()
    key = next(k for k in md.storage_data if k.fqn == "model/tok.weight")
    info = md.storage_data[key]
    md.storage_data[key] = type(info)(relative_path=shard.name, offset=len(data), length=len(record))
    rewrite(store, 10, shard.name, data + record)
    rewrite(store, 10, ".metadata", pickle.dumps(md))
    found, skipped, _ = restore(store, objs)
    assert found[0].step == 5 and not (tmp_path / "ran").exists()
    assert "posix.system is not allowed" in skipped[0][2]


def test_dcp_metadata_that_reads_outside_the_checkpoint_is_refused(tmp_path, objs):
    store = saved(tmp_path, objs, "dcp")
    path = store.path_for(10)
    md = pickle.loads((path / ".metadata").read_bytes())
    key = next(iter(md.storage_data))
    info = md.storage_data[key]
    md.storage_data[key] = type(info)(relative_path="../../../../dev/zero", offset=0, length=1 << 40)
    rewrite(store, 10, ".metadata", pickle.dumps(md))
    found, skipped, _ = restore(store, objs)
    assert found[0].step == 5 and "does not list" in skipped[0][2]


def test_skeleton_payload_never_runs(tmp_path, objs):
    store = saved(tmp_path, objs, "dcp")
    skeleton = torch.load(store.path_for(10) / "skeleton.pt", weights_only=True)
    rewrite(store, 10, "skeleton.pt", torch_archive({"skeleton": RunsCode(tmp_path / "ran"), "tensors": skeleton["tensors"]}))
    found, skipped, _ = restore(store, objs)
    assert found[0].step == 5 and not (tmp_path / "ran").exists()
    assert "skeleton.pt: posix.system is not allowed" in skipped[0][2]


# --- the RAM tier ---------------------------------------------------------------------------------
@pytest.fixture
def tier_dir():
    path = create_memory_tier_dir()
    yield path
    remove_memory_tier_dir(path)


def _ram_and_disk(tmp_path, objs, tier_dir):
    """Step 5 in RAM and on disk, step 10 in RAM only: a restore takes step 10 from RAM."""
    tier = MemoryTier(tier_dir)
    store = saved(tmp_path, objs, "memory", steps=(5,), tier=tier, disk_every=1)
    ckpt = make_checkpointer("memory", store, lambda s, **i: None, tier=MemoryTier(tier_dir), disk_every=10)
    ckpt.save(state(objs, 10), 10)
    ckpt.close()  # not finalize(): the final disk write would put step 10 on disk too
    return store, MemoryTier(tier_dir)


def test_ram_tier_meta_payload_never_runs(tmp_path, objs, tier_dir):
    store, tier = _ram_and_disk(tmp_path, objs, tier_dir)
    cur = tier.current()
    assert cur["step"] == 10 and [c.step for c in store.list()] == [5]
    payload = torch_archive({"step": 10, "skeleton": RunsCode(tmp_path / "ran"), "index": [], "data_bytes": 0, "chunk_crc32": []})
    (tier_dir / f"slot-{cur['slot']}.meta").write_bytes(payload)
    (tier_dir / "current.json").write_text(json.dumps({**cur, "meta_sha256": hashlib.sha256(payload).hexdigest()}))
    found, skipped, messages = restore(store, objs, tier, match="RAM snapshot")
    assert found[0].step == 5 and found[0].tier == "disk" and not (tmp_path / "ran").exists()
    assert skipped[0][1] == "memory" and "posix.system is not allowed" in skipped[0][2]


@pytest.mark.parametrize("how", ["a pickle", "a list", "a link", "a FIFO"])
def test_ram_tier_current_json_that_is_not_json_falls_back(tmp_path, objs, tier_dir, how):
    store, tier = _ram_and_disk(tmp_path, objs, tier_dir)
    current = tier_dir / "current.json"
    current.unlink()
    if how == "a pickle":
        current.write_bytes(pickle.dumps(RunsCode(tmp_path / "ran")))
    elif how == "a list":
        current.write_text("[1, 2]")
    elif how == "a link":
        current.symlink_to(tmp_path / "elsewhere.json")
        (tmp_path / "elsewhere.json").write_text(json.dumps({"slot": 0, "step": 10}))
    else:
        os.mkfifo(current)
    with deadline():
        found, skipped, _ = restore(store, objs, tier)
    assert found[0].step == 5 and not (tmp_path / "ran").exists() and skipped[0][1] == "memory"


def test_ram_tier_data_that_is_a_fifo_falls_back(tmp_path, objs, tier_dir):
    store, tier = _ram_and_disk(tmp_path, objs, tier_dir)
    data = tier_dir / f"slot-{tier.current()['slot']}.data"
    data.unlink()
    os.mkfifo(data)
    with deadline():
        found, skipped, _ = restore(store, objs, tier)
    assert found[0].step == 5 and "FIFO" in skipped[0][2]


# --- manifests and odd files ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "how,reason",
    [
        ("a pickle", "manifest unreadable"),
        ("a null entry", "not an object"),
        ("a string entry", "not an object"),
        ("a directory", "not a regular file"),
        ("a link", "symbolic link"),
        ("a file outside", "outside the checkpoint"),
    ],
)
def test_manifest_damage_is_skipped_and_a_stopped_run_still_finds_its_step(tmp_path, objs, how, reason):
    store = saved(tmp_path, objs)
    m = store.path_for(10) / "manifest.json"
    manifest = json.loads(m.read_text())
    m.unlink()
    if how == "a pickle":
        m.write_bytes(pickle.dumps(RunsCode(tmp_path / "ran")))
    elif how == "a null entry":
        m.write_text(json.dumps({**manifest, "files": {"state.pt": None}}))
    elif how == "a string entry":
        m.write_text(json.dumps({**manifest, "files": {"state.pt": "x"}}))
    elif how == "a directory":
        m.mkdir()
    elif how == "a link":
        (tmp_path / "real.json").write_text(json.dumps(manifest))
        m.symlink_to(tmp_path / "real.json")
    else:
        m.write_text(json.dumps({**manifest, "files": {**manifest["files"], "../../x": manifest["files"]["state.pt"]}}))
    assert store.newest_valid_step() == 5  # what the supervisor asks at the end of a stopped run: no traceback
    found, skipped, _ = restore(store, objs)
    assert found[0].step == 5 and reason in skipped[0][2] and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("how", ["a FIFO", "a link to /dev/zero", "a sparse file past the limit"])
def test_state_pt_that_is_not_a_sane_regular_file_is_skipped_without_hanging(tmp_path, objs, how):
    store = saved(tmp_path, objs)
    store.max_file_bytes = 64 << 20
    f = store.path_for(10) / "state.pt"
    f.unlink()
    if how == "a FIFO":
        os.mkfifo(f)
    elif how == "a link to /dev/zero":
        f.symlink_to("/dev/zero")
    else:
        with open(f, "wb") as fh:
            fh.truncate(1 << 40)  # a terabyte of nothing, a few blocks on disk
        rewrite_size = {"sha256": "0" * 64, "bytes": 1 << 40}
        m = store.path_for(10) / "manifest.json"
        manifest = json.loads(m.read_text())
        manifest["files"]["state.pt"] = rewrite_size
        m.write_text(json.dumps(manifest))
    with deadline():
        found, skipped, _ = restore(store, objs)
        assert store.newest_valid_step() == 5
    assert found[0].step == 5 and skipped[0][0] == 10


def test_a_step_folder_that_is_a_link_is_neither_read_nor_deleted(tmp_path, objs):
    store = saved(tmp_path, objs, steps=(5,))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep me")
    (store.root / "step-00000099").symlink_to(elsewhere)
    assert [c.step for c in store.list()] == [5]
    store.keep = 1
    store.save(state(objs, 10), 10)  # prunes step 5, never the link
    assert (elsewhere / "precious.txt").read_text() == "keep me"


def test_a_checkpoint_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "ckpt").symlink_to(tmp_path / "real")
    with pytest.raises(ValueError, match="symbolic link"):
        CheckpointStore(tmp_path / "ckpt")


# --- JSON files of a run: never code, and a clear error ------------------------------------------
@pytest.mark.parametrize("name", ["summary.json", "events.jsonl"])
def test_json_run_files_carrying_a_pickle_are_refused_by_name(tmp_path, name):
    from goodputlab.engine.api import load_run

    (tmp_path / "summary.json").write_text(json.dumps({"goodput": 0.5, "wall_s": 1.0, "buckets": {}, "completed": True, "config": {"steps": 1},
                                                         "failures": 0, "checkpoints": 0, "steps_completed": 1, "steps_executed": 1}))
    (tmp_path / "events.jsonl").write_text('{"t":0,"attempt":0,"step":null,"kind":"start"}\n')
    payload = pickle.dumps(RunsCode(tmp_path / "ran"))
    with open(tmp_path / name, "ab" if name == "events.jsonl" else "wb") as f:
        f.write(payload + (b"\n" if name == "events.jsonl" else b""))
    with pytest.raises(RunFileError) as e:
        load_run(tmp_path)
    assert str(tmp_path / name) in str(e.value) and not (tmp_path / "ran").exists()
    if name == "events.jsonl":
        assert "line 2" in str(e.value)
