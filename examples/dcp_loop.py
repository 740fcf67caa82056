"""A PyTorch training loop checkpointed with torch.distributed.checkpoint (DCP), recorded with gl.Recorder.

    python examples/dcp_loop.py --run-dir runs/dcp [--steps 200] [--ckpt-every 25]

DCP is PyTorch's format for sharded checkpoints (each rank writes its shards, one
``.metadata`` indexes them). Here it runs in one process (``no_dist=True``), so no
process group is needed; under ``torchrun`` the same calls save and load each
rank's shards, and the recorder writes one event log per rank
(``events-rank{R}.jsonl``) that ``goodputlab report`` merges.

Each save goes to ``step-NNNNNN.tmp/`` and is renamed when complete, so a kill
mid-save leaves the previous checkpoint as the newest.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

import goodputlab as gl

warnings.filterwarnings("ignore", message="torch.distributed is disabled")  # one process on purpose


def batches(seed: int, start: int, batch_size: int = 64):
    """Batch ``s`` is a pure function of (seed, s), so a resumed run sees the same data."""
    w_true = torch.randn(256, 16, generator=torch.Generator().manual_seed(seed))
    step = start
    while True:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        x = torch.randn(batch_size, 256, generator=g)
        yield x, torch.tanh(x @ w_true)
        step += 1


def newest_checkpoint(folder: Path) -> Path | None:
    done = sorted(p for p in folder.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp"))
    return done[-1] if done else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-dir", type=Path, required=True, help="folder for the recording and the checkpoints")
    p.add_argument("--steps", type=int, default=200, help="training steps in all (default 200)")
    p.add_argument("--ckpt-every", type=int, default=25, help="save a checkpoint every N steps (default 25)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ckpt_dir = args.run_dir / "dcp"
    ckpt_dir.mkdir(parents=True, exist_ok=True)

    with gl.Recorder(args.run_dir, total_steps=args.steps) as rec:
        with rec.checkpoint_restore():
            step0 = 0
            newest = newest_checkpoint(ckpt_dir)
            if newest is not None:
                model_sd, optim_sd = get_state_dict(model, optimizer)
                state = {"model": model_sd, "optimizer": optim_sd, "step": 0}
                dcp.load(state, checkpoint_id=newest, no_dist=True)  # in place
                set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
                step0 = state["step"]
        data = batches(args.seed, step0)
        for step in range(step0, args.steps):
            with rec.data_wait():
                x, y = next(data)
            with rec.step(step) as s:
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                s.loss = loss.item()
            if (step + 1) % args.ckpt_every == 0:
                with rec.checkpoint_save(step):
                    model_sd, optim_sd = get_state_dict(model, optimizer)
                    tmp = ckpt_dir / f"step-{step + 1:06d}.tmp"
                    state = {"model": model_sd, "optimizer": optim_sd, "step": step + 1}
                    dcp.save(state, checkpoint_id=tmp, no_dist=True)
                    os.replace(tmp, ckpt_dir / f"step-{step + 1:06d}")
    print(f"trained {args.steps} steps; final loss {loss.item():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
