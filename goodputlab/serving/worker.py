"""A serving worker process: ``python -m goodputlab.serving.worker`` (started by :mod:`goodputlab.serving.cluster`).

It builds the model, warms up, says ``ready`` and then serves one measurement per ``run``
message on its connection to the parent, until ``stop``. A disaggregated pair also shares a
connection to each other (hand-over messages) and a transfer buffer: a memory file
(``memfd``) that both map, holding the keys and values in flight from prefill to decode.

It never outlives the parent: it ignores Ctrl-C (the parent handles it and kills the
workers) and asks the kernel for SIGKILL when the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection

from ..procs import die_with_parent


def map_transfer(fd: int, shape: tuple[int, ...]):
    """The transfer buffer: a float32 tensor of ``shape`` over the shared memory file ``fd``."""
    import torch

    nbytes = 4
    for n in shape:
        nbytes *= n
    buf = mmap.mmap(fd, nbytes)
    return torch.frombuffer(buf, dtype=torch.float32).view(*shape)


def serve(role: str, name: str, conn: Connection, peer: Connection | None, transfer_fd: int | None, config) -> None:
    import torch

    from . import engine as E
    from .config import WORKERS
    from .kv import build_model, cache_shape

    torch.set_num_threads(config.threads)
    started = time.monotonic()
    preset = config.preset
    model = build_model(preset, config.seed)
    transfer = map_transfer(transfer_fd, cache_shape(preset, config.transfer_rows)) if transfer_fd is not None else None
    if role == "colocated":
        worker = E.ColocatedEngine(model, preset, config.max_batch // WORKERS, config.prefill_budget, name)
        E.warm_up(model, worker.batch)
    elif role == "prefill":
        worker = E.PrefillEngine(model, transfer, name)
        E.warm_up(model, E.Batch(model, preset, 1), steps=1)
    else:
        worker = E.DecodeEngine(model, preset, transfer, config.max_batch, name)
        E.warm_up(model, worker.batch)
    conn.send(("ready", {"name": name, "pid": os.getpid(), "threads": torch.get_num_threads(),
                         "params": sum(p.numel() for p in model.parameters()), "start_s": time.monotonic() - started}))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        _, probe, t0, horizon, work = msg
        if role == "colocated":
            records, spans = worker.run(E.jobs_from(work, t0), t0, horizon)
        elif role == "prefill":
            records, spans = worker.run(E.jobs_from(work, t0), t0, horizon, peer, probe)
        else:
            records, spans = worker.run(work, t0, horizon, peer, probe)
        extra = {"handoffs": worker.handoffs, "handoff_bytes": worker.handoff_bytes} if role == "decode" else {}
        conn.send(("done", probe, records, spans, extra))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goodputlab.serving.worker", description=__doc__)
    p.add_argument("--role", choices=("colocated", "prefill", "decode"), required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--conn-fd", type=int, required=True, help="socket to the parent")
    p.add_argument("--peer-fd", type=int, default=None, help="socket to the other worker (disaggregated)")
    p.add_argument("--transfer-fd", type=int, default=None, help="memfd of the KV transfer buffer (disaggregated)")
    p.add_argument("--parent", type=int, required=True, help="the parent's pid")
    p.add_argument("--config", required=True, help="ServerConfig as JSON")
    args = p.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops us
    die_with_parent(args.parent)
    from .config import ServerConfig

    conn = Connection(args.conn_fd)
    peer = Connection(args.peer_fd) if args.peer_fd is not None else None
    try:
        serve(args.role, args.name, conn, peer, args.transfer_fd, ServerConfig(**json.loads(args.config)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return 0  # the parent is gone
    except BaseException:
        try:
            conn.send(("error", f"{args.name}: {traceback.format_exc()}"))
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
