"""A Hugging Face Trainer job measured with goodputlab's callback: a tiny GPT-2 built from its config.

    python examples/hf_trainer.py --run-dir runs/hf [--steps 60] [--save-every 20]

Kill it at any moment (``kill -9``) and run it again: the Trainer resumes from its newest
``checkpoint-N`` and the callback books the restart, the restore, the steps trained twice and the
rest. ``goodputlab report runs/hf`` prints where the time went. Nothing is downloaded: the model is
built from a config, the data are seeded random tokens. ``--kill-at N`` SIGKILLs the job itself when
step N begins (what the test does).
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from goodputlab.integrations.huggingface import GoodputCallback


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", type=Path, required=True, help="the recording's folder (checkpoints in its ckpt/)")
    p.add_argument("--steps", type=int, default=60, help="optimizer steps in all")
    p.add_argument("--save-every", type=int, default=20, help="steps between checkpoints")
    p.add_argument("--eval-every", type=int, default=0, help="steps between evaluations (0: none)")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--kill-at", type=int, default=-1, help="SIGKILL this process when this step begins")
    args = p.parse_args()

    callback = GoodputCallback(args.run_dir)  # first: building the model is start-up, and is booked

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    class Tokens(torch.utils.data.Dataset):
        """Seeded random sequences of 32 tokens (item ``i`` is a pure function of ``i``)."""

        def __len__(self):
            return 4096

        def __getitem__(self, i):
            ids = torch.randint(0, 64, (32,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    class KillAt(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            if state.global_step == args.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2))
    out = args.run_dir / "ckpt"
    training = TrainingArguments(
        output_dir=str(out), max_steps=args.steps, per_device_train_batch_size=8, learning_rate=1e-3,
        gradient_accumulation_steps=args.accumulate, save_strategy="steps", save_steps=args.save_every,
        eval_strategy="steps" if args.eval_every else "no", eval_steps=args.eval_every or None,
        per_device_eval_batch_size=8, logging_steps=10, report_to="none", use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True, seed=0,
    )  # fmt: skip
    eval_data = torch.utils.data.Subset(Tokens(), range(64)) if args.eval_every else None
    trainer = Trainer(model=model, args=training, train_dataset=Tokens(), eval_dataset=eval_data,
                      callbacks=[callback, KillAt()])  # fmt: skip
    resume = get_last_checkpoint(str(out)) if out.is_dir() else None
    trainer.train(resume_from_checkpoint=resume)


if __name__ == "__main__":
    main()
