"""The RAM tier on emulated nodes: a process kill (the node's RAM survives) against a node kill (it is lost), side by side.

    sudo python benchmarks/ram_tier_nodes.py                                   # 2 nodes x 1 rank, 16 steps
    sudo python benchmarks/ram_tier_nodes.py --record book/data/emulated_ram_tier_run.json

Needs root (network namespaces: ``--emulate-nodes``, docs/DISTRIBUTED.md). Two runs, one right after the
other, so machine load hits both (:func:`goodputlab.experiments.emulated_nodes.ram_tier_kills`): ``--ckpt
memory`` (a save every 2 steps into each node's RAM and a copy on its neighbour; no disk copy before the end)
and ``--ckpt sync`` (every save to disk), each with one rank's process killed after step 7 and one node killed
whole after step 11. Printed per failure (:func:`~goodputlab.experiments.emulated_nodes.failure_costs`): where
each rank restored from, the steps and seconds of work lost, and the restore's seconds; then the ratios and
whether the final states are the same.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

from goodputlab.experiments import emulated_nodes as en


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--process-kill", type=int, default=7)
    parser.add_argument("--node-kill", type=int, default=11)
    parser.add_argument("--record", help="also write the book's recording to this file")
    args = parser.parse_args(argv)
    ok, why = en.can_emulate()
    if not ok:
        raise SystemExit(f"needs root and iproute2 (emulated nodes are network namespaces): {why}")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ram-tier-nodes-") as tmp:
        results = en.ram_tier_kills(args.steps, args.process_kill, args.node_kill, tmp)
        machine = f"{os.cpu_count()} cores, load average {load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
        recording = en.record_ram_tier(results, machine)
    for s, r in recording["runs"].items():
        for f in r["failures"]:
            print(json.dumps({"ckpt": s, **f}), flush=True)
    facts = en.ram_tier_facts(recording)
    mp, mn, sp, sn = (facts[k] for k in ("memory_process", "memory_node", "sync_process", "sync_node"))
    print(f"memory: process kill restored from {sorted(set(mp['sources'].values()))}, node kill from "
          f"{sorted(set(mn['sources'].values()))}")
    print(f"restore s: memory process {mp['restore_s']:.3f}, memory node {mn['restore_s']:.3f}, "
          f"sync process {sp['restore_s']:.3f}, sync node {sn['restore_s']:.3f}")
    print(f"restore, node kill / process kill (memory): {mn['restore_s'] / mp['restore_s']:.2f}; "
          f"sync / memory (process kill): {sp['restore_s'] / mp['restore_s']:.2f}")
    print(f"lost steps: memory {mp['lost_steps']} and {mn['lost_steps']}, sync {sp['lost_steps']} and {sn['lost_steps']}")
    print(f"same final state in both runs: {facts['bit_exact']}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{machine}; CPU seconds of the runs: {children.ru_utime + children.ru_stime:.1f}")
    if args.record:
        en.save_recording(recording, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
