"""A plain PyTorch training loop, checkpointed with torch.save and recorded with gl.Recorder.

    python examples/plain_loop.py --run-dir runs/plain [--steps 200] [--ckpt-every 25]

Kill it at any moment (``kill -9``) and run it again: it resumes from its newest
checkpoint, and the recorder books the restart, the steps executed twice and the
rest. Then ``goodputlab report runs/plain`` prints where the time went.

The six ``rec.`` lines are all the recorder needs; the rest is an ordinary loop.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

import goodputlab as gl


def batches(seed: int, start: int, batch_size: int = 64):
    """Batch ``s`` is a pure function of (seed, s), so a resumed run sees the same data."""
    w_true = torch.randn(256, 16, generator=torch.Generator().manual_seed(seed))
    step = start
    while True:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        x = torch.randn(batch_size, 256, generator=g)
        yield x, torch.tanh(x @ w_true)
        step += 1


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
    ckpt = args.run_dir / "ckpt.pt"

    with gl.Recorder(args.run_dir, total_steps=args.steps) as rec:  # a new attempt if the folder has one
        with rec.checkpoint_restore():
            step0 = 0
            if ckpt.exists():
                state = torch.load(ckpt, weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
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
                    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}
                    torch.save(state, ckpt.with_suffix(".tmp"))
                    os.replace(ckpt.with_suffix(".tmp"), ckpt)  # atomic: a kill never leaves half a file
    print(f"trained {args.steps} steps; final loss {loss.item():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
