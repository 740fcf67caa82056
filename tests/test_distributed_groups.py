"""Real process groups: 2 gloo ranks (and 1) spawned here, training the tiny preset with DDP.

One module-scoped sequence of three sessions (tests/distributed_sessions.py), a few seconds each; 1 and 3
run in the same two spawned ranks, which wait while 2 runs (three launches of torch, not five):

1. two ranks train 4 steps with rank 1 a straggler, save a sync sharded checkpoint at step 2 and
   an async one at step 4, then try a commit in which rank 1's part is missing;
2. one rank restores the step-4 checkpoint (2 ranks -> 1), trains a step and saves step 5;
3. a one-process checkpoint of the same state is added as step 6 (torch_save layout); two ranks restore it
   (1 process -> 2 ranks), then, as each newest checkpoint is damaged, step 5 (1 rank -> 2) and step 4.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from goodputlab.checkpoints.state import apply_state, check_training_state
from goodputlab.checkpoints.store import LAYOUT_DCP_SHARDED, CheckpointStore

sys.path.insert(0, str(Path(__file__).parent))
import distributed_sessions as S  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, world: int, out: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(fn, args=(world, free_port(), str(out)), nprocs=world, join=True)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Sessions a and c in the same two ranks (spawned once), session b in one rank spawned between them."""
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("groups")
    pair = mp.spawn(S.two_ranks_train_and_save_then_restore, args=(2, free_port(), str(out)), nprocs=2, join=False)
    try:
        while not all((out / f"session-a-rank{r}.json").exists() for r in (0, 1)):
            assert not pair.join(timeout=0.1), "the two ranks ended before session c"  # raises if one failed
        listed_after_a = sorted(p.name for p in (out / "ckpt").iterdir())
        spawn(S.one_rank_restores_then_saves, 1, out)
        one_process = CheckpointStore(out / "ckpt", keep=5)
        state = one_process.load(one_process.path_for(5))  # read whole, as a one-process run resumes it
        state["step"], state["data"]["step"] = 6, 6
        one_process.save(state, 6)  # the same state as step 5, written as one process writes it
        (out / "go-c").touch()
        while not pair.join(timeout=1):
            pass
    finally:
        (out / "stop").touch()  # a failure above: the two ranks stop waiting
        for p in pair.processes:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    read = lambda name: json.loads((out / name).read_text())  # noqa: E731
    return {
        "out": out,
        "listed_after_a": listed_after_a,
        "a": [read(f"session-a-rank{r}.json") for r in (0, 1)],
        "ref2": [read(f"ref-2-rank{r}.json") for r in (0, 1)],
        "ref4": [read(f"ref-4-rank{r}.json") for r in (0, 1)],
        "b": read("session-b.json"),
        "c": [read(f"session-c-rank{r}.json") for r in (0, 1)],
    }


def test_ddp_keeps_the_ranks_identical(sessions):
    assert sessions["ref2"][0] == sessions["ref2"][1]
    assert sessions["ref4"][0] == sessions["ref4"][1]
    assert sessions["ref2"][0]["model"] != sessions["ref4"][0]["model"]


def test_the_sync_clock_measures_the_wait_for_the_straggler(sessions):
    fast, slow = (sessions["a"][r]["timings"] for r in (0, 1))
    for f, s in zip(fast, slow):
        assert f["delayed"] == 0.0 and s["delayed"] > 0.0
        # the straggler slept 3x its own forward and backward before joining the all-reduce
        assert s["delayed"] == pytest.approx(3.0 * s["own"]) and s["ready"] - s["started"] >= s["own"] + s["delayed"]
        # nobody leaves the all-reduce before the slowest rank has joined it: the fast rank waited for it
        assert f["synced"] >= s["ready"] and f["ready"] <= f["synced"]


def test_every_rank_writes_a_part_and_the_job_commits_once(sessions):
    listed = sessions["listed_after_a"]
    assert "step-00000002" in listed and "step-00000004" in listed
    commits = sessions["a"][0]["commits"]
    assert [c[0] for c in commits] == [2, 4] and all(c[1]["world_size"] == 2 for c in commits)
    assert sessions["a"][1]["commits"] == []  # rank 0 commits for the job
    # both ranks wrote a share of the state (DCP splits the replicated tensors between them)
    assert all(r["bytes"]["sync"] > 0 and r["bytes"]["async"] > 0 for r in sessions["a"])
    store = CheckpointStore(sessions["out"] / "ckpt")
    manifest = store.verify(store.path_for(4))
    assert manifest["layout"] == LAYOUT_DCP_SHARDED
    assert {"__0_0.distcp", "__1_0.distcp", ".metadata", "skeleton.pt", "rank-00000.pt", "rank-00001.pt"} <= set(manifest["files"])


def test_a_checkpoint_missing_a_ranks_part_is_never_committed(sessions):
    assert "rank-00001.pt missing; not committed" in sessions["a"][0]["refused"]
    assert "step-00000005" not in sessions["listed_after_a"]
    assert any(name.startswith(".tmp-step-00000005") for name in sessions["listed_after_a"])  # invisible leftovers


def test_two_ranks_checkpoint_restores_onto_one_rank(sessions):
    b = sessions["b"]
    assert b["restored"] == {"step": 4, "written_by": 2, "rng": "reseeded", "layout": LAYOUT_DCP_SHARDED}
    assert b["state"] == sessions["ref4"][0]  # model, optimizer moments and step counts, LR schedule: equal
    assert not any("step-00000004" in w for w in b["warnings"])
    assert not any(p.name.startswith(".tmp-") for p in (sessions["out"] / "ckpt").iterdir())  # rank 0 cleaned up


def test_one_process_and_one_ranks_checkpoints_restore_onto_two_ranks(sessions):
    for c in sessions["c"]:
        six, five = c["found"][0], c["found"][1]
        assert (six["step"], six["written_by"], six["rng"], six["layout"]) == (6, 1, "reseeded", "torch_save")
        assert (five["step"], five["written_by"], five["rng"], five["layout"]) == (5, 1, "reseeded", LAYOUT_DCP_SHARDED)
        assert six["state"] == five["state"] == sessions["b"]["after"]


def test_a_damaged_file_makes_every_rank_fall_back_together(sessions):
    for c in sessions["c"]:
        four = c["found"][2]
        assert (four["step"], four["written_by"], four["rng"]) == (4, 2, "restored")
        assert four["state"] == sessions["ref4"][0]
        assert [s[0] for s in c["skipped"]] == [6, 6, 5]  # step 6 skipped twice: at the second and third restore


def test_one_process_reads_a_sharded_checkpoint_whole(sessions):
    """The one-process worker's path: CheckpointStore.load of a 2-rank checkpoint into a plain model."""
    import torch

    from goodputlab.engine.config import RunConfig
    from goodputlab.training.objects import build_training

    store = CheckpointStore(sessions["out"] / "ckpt")
    state = store.load(store.path_for(4))
    torch.manual_seed(0)
    model, optimizer, scheduler = build_training(RunConfig(steps=20, model="tiny", seed=S.SEED), torch.device("cpu"))
    check_training_state(state, 4, model, optimizer)
    assert apply_state(state, model, optimizer, scheduler) == 4
    assert state["data"] == {"step": 4, "batch_size": S.GLOBAL_BATCH}
    assert S.digest(model, optimizer, scheduler) == sessions["ref4"][0]


def test_a_one_process_checkpoint_that_leaves_parts_out_is_not_restored_by_ranks(tmp_path):
    """A one-process run's --ckpt-omit checkpoint is refused by a job's restore check (then skipped, not a crash)."""
    from types import SimpleNamespace

    import torch

    from goodputlab.checkpoints.state import capture_state
    from goodputlab.distributed import sharded
    from goodputlab.engine.config import RunConfig
    from goodputlab.recovery.omit import omit_from_state
    from goodputlab.training.objects import build_training

    model, optimizer, scheduler = build_training(RunConfig(steps=20, model="tiny", seed=S.SEED), torch.device("cpu"))
    store = CheckpointStore(tmp_path / "ckpt", keep=5)
    complete = capture_state(model, optimizer, scheduler, 3, {"step": 3, "batch_size": S.GLOBAL_BATCH})
    store.save(complete, 3)
    store.save(omit_from_state({**complete, "step": 4, "data": {"step": 4, "batch_size": S.GLOBAL_BATCH}}, ["optimizer"]), 4)
    three, four = sorted(store.list(), key=lambda c: c.step)
    rank = SimpleNamespace(rank=0, world_size=2)
    assert sharded._check(store, three, rank, model, optimizer).state["step"] == 3
    with pytest.raises(ValueError, match="leaves out optimizer"):
        sharded._check(store, four, rank, model, optimizer)
