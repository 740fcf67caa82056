"""What do the safer checkpoint readers cost a restore? The checked readers against plain ones, side by side.

    python benchmarks/unpickler_cost.py [--model tiny] [--rounds 15]

Three measurements on one real checkpoint of ``--model`` (written once, in a temporary folder),
each the median over ``--rounds`` rounds that alternate the two readers, so both see the same
machine drift:

* DCP's ``.metadata``: ``DataUnpickler`` (pure-Python, every opcode checked, then the expansion
  budget) against the C unpickler with a names-only ``find_class`` (the reader before this change);
* a torch archive (``state.pt``): ``safe_torch_load`` (zip sizes, static globals, ``weights_only``,
  expansion budget) against ``torch.load(weights_only=True)`` alone;
* a whole dcp-layout restore (``CheckpointStore.load``), whose ``.metadata`` read is the first
  bullet, against the same restore with the old metadata reader put back.
"""

from __future__ import annotations

import argparse
import io
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from goodputlab.checkpoints import dcp_layout  # noqa: E402
from goodputlab.checkpoints.safe_unpickle import data_loads, dcp_metadata_allow_list, safe_torch_load  # noqa: E402
from goodputlab.checkpoints.state import capture_state  # noqa: E402
from goodputlab.checkpoints.store import CheckpointStore  # noqa: E402
from goodputlab.checkpoints.strategies import make_checkpointer  # noqa: E402
from goodputlab.engine.config import RunConfig  # noqa: E402
from goodputlab.training.objects import build_training  # noqa: E402


class NamesOnly(pickle.Unpickler):
    """The reader before this change: globals from a map, every other opcode as Python runs it."""

    def __init__(self, data: bytes, names):
        super().__init__(io.BytesIO(data))
        self.names = names

    def find_class(self, module, name):
        return self.names[(module, name)]


def timed(fn, rounds: int, other) -> tuple[float, float]:
    """Medians (seconds) of ``fn`` and ``other``, alternated ``rounds`` times."""
    a, b = [], []
    for _ in range(rounds):
        for f, into in ((fn, a), (other, b)):
            t = time.perf_counter()
            f()
            into.append(time.perf_counter() - t)
    return statistics.median(a), statistics.median(b)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    torch.manual_seed(0)
    objs = build_training(RunConfig(steps=20, seed=0, model=args.model), torch.device("cpu"))
    state = capture_state(*objs, 10, {"step": 10, "samples_consumed": 160, "batch_size": 16})
    root = Path(tempfile.mkdtemp(prefix="goodputlab-bench-"))
    stores = {}
    for strategy in ("dcp", "sync"):
        stores[strategy] = CheckpointStore(root / strategy, keep=2)
        ck = make_checkpointer(strategy, stores[strategy], lambda s, **i: None)
        ck.save(state, 10)
        ck.finalize()
        ck.close()
    metadata = (stores["dcp"].path_for(10) / ".metadata").read_bytes()
    archive = (stores["sync"].path_for(10) / "state.pt").read_bytes()
    allow = dcp_metadata_allow_list()
    names = dict(allow.names)
    rows = []
    new, old = timed(lambda: data_loads(metadata, allow, "m"), args.rounds, lambda: NamesOnly(metadata, names).load())
    rows.append((f".metadata ({len(metadata)} bytes)", new, old))
    new, old = timed(lambda: safe_torch_load(archive, "state.pt"), args.rounds,
                     lambda: torch.load(io.BytesIO(archive), map_location="cpu", weights_only=True))
    rows.append((f"state.pt ({len(archive)} bytes)", new, old))
    path = stores["dcp"].path_for(10)
    checked = dcp_layout.data_loads

    def old_restore():
        dcp_layout.data_loads = lambda data, allowed, what: NamesOnly(data, names).load()
        try:
            stores["dcp"].load(path)
        finally:
            dcp_layout.data_loads = checked

    new, old = timed(lambda: stores["dcp"].load(path), args.rounds, old_restore)
    rows.append(("dcp restore (CheckpointStore.load)", new, old))
    print(f"model {args.model}, medians of {args.rounds} alternated rounds")
    print(f"{'what':<40} {'checked ms':>11} {'before ms':>10} {'ratio':>7}")
    for what, new, old in rows:
        print(f"{what:<40} {new * 1e3:>11.3f} {old * 1e3:>10.3f} {new / old:>7.2f}")


if __name__ == "__main__":
    main()
