"""A warm torchrun agent: the interpreter started and ``torch.distributed.run`` imported before it is needed.

An emulated cluster with spare nodes (``--spare-nodes``, docs/DISTRIBUTED.md) keeps one of these waiting
in every node's network namespace: in the job's nodes for the next attempt, and in each spare node. It
starts at idle priority (:func:`goodputlab.recovery.standby.enter_idle_priority`), so its start-up takes
spare CPU only, imports torchrun's launcher (which imports torch), and blocks on its standard input.
At a relaunch the supervisor writes one JSON line, ``{"args": [...], "env": {...}}``: torchrun's arguments
(what follows ``python -m torch.distributed.run``) and the environment of the job's agent. The agent
returns to normal priority, takes that environment, and runs torchrun's ``main`` as
``python -m goodputlab.distributed.node_agent`` would: the node joins the rendezvous without an interpreter to start.
End of input without a line (the supervisor is gone or let it go): it exits 0.

    python -m goodputlab.distributed.warm_agent --for RUN_DIR   (RUN_DIR: only to name the run it serves)
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    """Wait warm for torchrun's arguments on stdin, then run torchrun with them; its exit status."""
    from ..recovery.standby import enter_idle_priority, leave_idle_priority

    idle = enter_idle_priority()
    started = time.monotonic()
    import torch.distributed.run  # noqa: F401  the cold part of an agent's start, paid while it waits
    from .node_agent import run

    print(f"goodputlab warm agent: torchrun's launcher imported in {time.monotonic() - started:.2f} s", flush=True)

    line = sys.stdin.readline()
    if not line.strip():
        return 0
    order = json.loads(line)
    if idle:
        leave_idle_priority()
    os.environ.clear()
    os.environ.update(order["env"])
    sys.argv = ["torchrun", *order["args"]]
    run(order["args"])  # node 0's agent binds its rendezvous store to the node's address first
    return 0


if __name__ == "__main__":
    sys.exit(main())
