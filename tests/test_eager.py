"""A worker builds and steps its AdamW without importing torch's compiler (goodputlab/training/eager.py),
and trains the same bits as a process that imported it."""

import hashlib
import subprocess
import sys

from conftest import ROOT

#: three steps of the tiny preset's model, AdamW and schedule (the worker's own objects and step), a
#: round trip of the optimizer's state as a restore makes it; prints the weights' digest, and whether
#: the compiler was imported
TRAIN = """
import hashlib, sys
import torch
{skip}
from goodputlab.engine.config import RunConfig
from goodputlab.training.objects import build_training, make_deterministic
from goodputlab.training.step import train_step
torch.set_num_threads(1)
device = torch.device("cpu")
make_deterministic(5, device)
model, optimizer, scheduler = build_training(RunConfig(steps=20, seed=5), device)
g = torch.Generator().manual_seed(5)
for _ in range(3):
    x = torch.randint(0, 64, (4, 16), generator=g)
    train_step(model, optimizer, scheduler, {{"x": x, "y": x.roll(1, 1)}}, device)
optimizer.load_state_dict(optimizer.state_dict())
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(digest, "torch._dynamo" in sys.modules)
"""
SKIP = "from goodputlab.training.eager import skip_compiler_import; assert skip_compiler_import() >= 2"


def _train(skip: str) -> tuple[str, str]:
    r = subprocess.run([sys.executable, "-c", TRAIN.format(skip=skip)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    digest, compiler = r.stdout.split()
    return digest, compiler


def test_a_worker_trains_the_same_bits_without_importing_the_compiler():
    digest, compiler = _train(SKIP)
    assert compiler == "False", "the worker's optimizer imported torch._dynamo"
    # the same three steps with torch's own wrappers, the compiler imported first (as torch does)
    control, imported = _train("import torch._dynamo")
    assert imported == "True" and control == digest
    assert digest != hashlib.sha256(b"").hexdigest()  # a digest of weights, not of nothing
