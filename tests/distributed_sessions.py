"""What the ranks of the real process groups in test_distributed_groups.py do (spawned processes import this).

Each spawned function ``fn(rank, world, port, out)`` runs in ``world`` spawned processes that meet at
``127.0.0.1:port`` (gloo); the two-rank one runs sessions a and c in the same processes. Results go to JSON files in ``out`` for the test to read.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path

SEED = 3
GLOBAL_BATCH = 8


def join(rank: int, world: int, port: int):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    import torch

    from goodputlab.distributed import ranks

    torch.set_num_threads(1)
    return ranks.setup("cpu", timeout_s=60)


def build(rank, straggler=None):
    """The tiny preset's model, optimizer and schedule, DDP-wrapped, as the distributed worker builds them."""
    import torch

    from goodputlab.engine.config import RunConfig
    from goodputlab.distributed import parallel, sharded
    from goodputlab.training.objects import build_training

    torch.manual_seed(SEED)
    model, optimizer, scheduler = build_training(RunConfig(steps=20, model="tiny", seed=SEED), torch.device("cpu"))
    clock = parallel.SyncClock(rank.rank, rank.device, straggler)
    ddp = parallel.wrap(model, rank.device, parallel.DDP, clock)
    sharded.seed_rank_rng(SEED, rank.rank, 0)
    return ddp, optimizer, scheduler, clock


def batch(step: int, rank):
    """This rank's shard of step ``step``'s global batch (a pure function of the step)."""
    import torch

    from goodputlab.distributed.sharding import shard_bounds

    g = torch.Generator().manual_seed(1000 + step)
    tokens = torch.randint(0, 64, (GLOBAL_BATCH, 33), generator=g)
    a, b = shard_bounds(GLOBAL_BATCH, rank.world_size, rank.rank)
    return tokens[a:b, :-1], tokens[a:b, 1:]


def train_step(ddp, optimizer, scheduler, clock, step, rank) -> dict:
    x, y = batch(step, rank)
    started = time.monotonic()
    clock.begin(step, started)
    _, loss = ddp(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    synced = time.monotonic()
    optimizer.step()
    scheduler.step()
    return {"started": started, "ready": clock.ready_at, "synced": synced, "delayed": clock.delayed_s, "own": clock.own_s}


def digest(ddp, optimizer, scheduler) -> dict:
    """The model's sha256 (as the worker reports it) and a sha256 of the optimizer's tensors and schedule."""
    import torch

    from goodputlab.distributed.parallel import unwrap
    from goodputlab.training.model import state_sha256

    h = hashlib.sha256()
    state = optimizer.state_dict()
    for k in sorted(state["state"]):
        for name, t in sorted(state["state"][k].items()):
            h.update(f"{k}/{name}".encode())
            h.update(t.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    h.update(json.dumps([g["lr"] for g in state["param_groups"]]).encode())
    sched = scheduler.state_dict()
    return {"model": state_sha256(unwrap(ddp)), "optimizer": h.hexdigest(), "last_epoch": sched["last_epoch"]}


def store(out: Path):
    from goodputlab.checkpoints.store import CheckpointStore

    return CheckpointStore(Path(out) / "ckpt", keep=5)


def dump(out: Path, name: str, obj) -> None:
    (Path(out) / name).write_text(json.dumps(obj))


# --- the sessions -----------------------------------------------------------------------------------
def two_ranks_train_and_save_then_restore(rank_id: int, world: int, port: int, out: str) -> None:
    """Sessions a and c in the same two processes (two fewer launches of torch): session a, then, once the
    test has run session b and added step 6 (it creates the file ``go-c``), session c."""
    from goodputlab.distributed import ranks

    out = Path(out)
    rank = join(rank_id, world, port)
    two_ranks_train_and_save(rank, out)
    deadline = time.monotonic() + 600
    while not (out / "go-c").exists():
        if (out / "stop").exists() or time.monotonic() > deadline:
            raise SystemExit("session c was not asked for")
        time.sleep(0.05)
    two_ranks_restore_one_ranks_checkpoint(rank, out)
    ranks.teardown()


def two_ranks_train_and_save(rank, out: Path) -> None:
    """2 ranks, rank 1 a straggler (factor 4): 4 steps, a sync save at step 2, an async one at 4, and a
    commit that must not happen because rank 1's part is missing."""
    from goodputlab.distributed import sharded
    from goodputlab.distributed.straggler import Straggler

    ddp, optimizer, scheduler, clock = build(rank, Straggler(rank=1, factor=4.0, prob=1.0))
    commits = []
    sync = sharded.ShardedCheckpointer(store(out), rank, lambda s, **i: commits.append((s, i)), asynchronous=False)
    asyn = sharded.ShardedCheckpointer(store(out), rank, lambda s, **i: commits.append((s, i)), asynchronous=True)
    timings = []
    for step in range(4):
        timings.append(train_step(ddp, optimizer, scheduler, clock, step, rank))
        done = step + 1
        if done == 2:
            sync.save(ddp, optimizer, scheduler, done, {"step": done, "batch_size": GLOBAL_BATCH})
            dump(out, f"ref-2-rank{rank.rank}.json", digest(ddp, optimizer, scheduler))
        if done == 4:
            asyn.save(ddp, optimizer, scheduler, done, {"step": done, "batch_size": GLOBAL_BATCH})
            dump(out, f"ref-4-rank{rank.rank}.json", digest(ddp, optimizer, scheduler))
    asyn.finalize()
    asyn.close()

    class LosesRankOnesPart(sharded.ShardedCheckpointer):
        def _commit(self, upload, tmp, step, mine, started):
            if self.rank.rank == 1:
                mine = {k: v for k, v in mine.items() if not k.startswith("rank-")}
            return super()._commit(upload, tmp, step, mine, started)

    refused = ""
    try:
        LosesRankOnesPart(store(out), rank, lambda s, **i: commits.append((s, i))).save(
            ddp, optimizer, scheduler, 5, {"step": 5, "batch_size": GLOBAL_BATCH})
    except RuntimeError as e:
        refused = str(e)
    rank.agree(True)  # both ranks are done with the checkpoints before either says so
    dump(out, f"session-a-rank{rank.rank}.json", {
        "timings": timings, "commits": [[s, i] for s, i in commits], "refused": refused,
        "bytes": {"sync": sync.last_bytes, "async": asyn.last_bytes},
    })


def one_rank_restores_then_saves(rank_id: int, world: int, port: int, out: str) -> None:
    """1 rank restores the 2 ranks' step-4 checkpoint, trains step 4, saves step 5 (written by 1 rank)."""
    from goodputlab.distributed import ranks, sharded

    out = Path(out)
    rank = join(rank_id, world, port)
    ddp, optimizer, scheduler, clock = build(rank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = sharded.restore_newest(store(out), rank, ddp, optimizer, scheduler, seed=SEED)
    restored = digest(ddp, optimizer, scheduler)
    train_step(ddp, optimizer, scheduler, clock, 4, rank)
    sharded.ShardedCheckpointer(store(out), rank, lambda s, **i: None).save(
        ddp, optimizer, scheduler, 5, {"step": 5, "batch_size": GLOBAL_BATCH})
    dump(out, "session-b.json", {
        "restored": {"step": found.step, "written_by": found.world_size, "rng": found.rng, "layout": found.layout},
        "state": restored, "after": digest(ddp, optimizer, scheduler),
        "warnings": [str(w.message) for w in caught],
    })
    ranks.teardown()


def two_ranks_restore_one_ranks_checkpoint(rank, out: Path) -> None:
    """2 ranks restore a one-process checkpoint (torch_save, step 6), then, as each newest one is damaged,
    the 1 rank's sharded step 5 and the 2 ranks' step 4."""
    from goodputlab.distributed import sharded

    ddp, optimizer, scheduler, clock = build(rank)
    found, skipped = [], []
    for damage in (None, "step-00000006/state.pt", "step-00000005/__0_0.distcp"):
        if damage is not None and rank.is_coordinator:
            f = out / "ckpt" / damage
            data = bytearray(f.read_bytes())
            data[len(data) // 2] ^= 0xFF
            f.write_bytes(bytes(data))
        rank.agree(True)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            r = sharded.restore_newest(store(out), rank, ddp, optimizer, scheduler, seed=SEED,
                                       on_invalid=lambda c, why: skipped.append([c.step, why]))
        found.append({"step": r.step, "written_by": r.world_size, "rng": r.rng, "layout": r.layout,
                      "state": digest(ddp, optimizer, scheduler)})
    dump(out, f"session-c-rank{rank.rank}.json", {"found": found, "skipped": skipped})
