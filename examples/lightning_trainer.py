"""A Lightning job measured with goodputlab's callback: a small MLP, checkpointed by ModelCheckpoint.

    python examples/lightning_trainer.py --run-dir runs/lightning [--steps 60] [--save-every 20]

Kill it at any moment (``kill -9``) and run it again: ``trainer.fit(..., ckpt_path="last")`` resumes from
the newest checkpoint, and the callback books the restart, the restore (timed around the real load), the
steps trained twice and the rest. ``goodputlab report runs/lightning`` prints where the time went.
Nothing is downloaded: the data are seeded random tensors. ``--kill-at N`` SIGKILLs the job itself when
step N begins (what the test does).
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from goodputlab.integrations.lightning import GoodputCallback


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", type=Path, required=True, help="the recording's folder (checkpoints in its ckpt/)")
    p.add_argument("--steps", type=int, default=60, help="optimizer steps in all")
    p.add_argument("--save-every", type=int, default=20, help="steps between checkpoints")
    p.add_argument("--eval-every", type=int, default=0, help="steps between validations (0: none)")
    p.add_argument("--kill-at", type=int, default=-1, help="SIGKILL this process when this step begins")
    args = p.parse_args()

    callback = GoodputCallback(args.run_dir)  # first: building the model is start-up, and is booked

    import lightning as L
    import torch
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint

    class Regression(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    class KillAt(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == args.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 64, generator=g)
    data = torch.utils.data.TensorDataset(x, x[:, :1] * 2 + 1)
    train = torch.utils.data.DataLoader(data, batch_size=32, shuffle=False)
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(data, range(256)), batch_size=64)
    torch.manual_seed(0)
    out = args.run_dir / "ckpt"
    saver = ModelCheckpoint(dirpath=out, every_n_train_steps=args.save_every, save_top_k=-1, save_last=True)
    trainer = L.Trainer(max_steps=args.steps, accelerator="cpu", devices=1, callbacks=[callback, saver, KillAt()],
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        val_check_interval=args.eval_every or None, limit_val_batches=4 if args.eval_every else 0,
                        num_sanity_val_steps=0)  # fmt: skip
    last = out / "last.ckpt"
    trainer.fit(Regression(), train, val if args.eval_every else None, ckpt_path=str(last) if last.exists() else None)


if __name__ == "__main__":
    main()
