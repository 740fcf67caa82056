"""Restart after a whole-node loss on an emulated cluster, with and without a spare node, side by side.

    sudo python benchmarks/spare_nodes.py                  # 2 nodes x 1 rank, a node killed after step 12, 2 rounds
    sudo python benchmarks/spare_nodes.py --rounds 3 --json out.json

Needs root (network namespaces: ``--emulate-nodes``, docs/DISTRIBUTED.md). Each round runs the same
job twice, one right after the other, so machine load hits both: ``--spare-nodes 0`` (the relaunch
starts every node's torchrun agent cold, in the same namespaces) and ``--spare-nodes 1`` (a spare
namespace whose warm agent takes the dead node's place; the surviving node's next agent is warm too).
Printed per run, from its event log (seconds on the run's clock):

* ``agents_s``: from the kill to the next attempt's first rank event (agents up, rendezvous, ranks spawned);
* ``ready_s``: from the kill to the next attempt's first step (ranks' start-up, process group, restore);
* ``restart_s``: the ledger's ``restart`` bucket; and ``final_state_sha256`` (the same in every run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = ["--emulate-nodes", "2", "--nproc", "1", "--model", "tiny", "--steps", "30", "--ckpt-every", "5",
       "--device", "cpu", "--kill-node-at-steps", "12", "--quiet"]


def run_once(spares: int, out: Path) -> dict:
    """One run with ``spares`` spare nodes; its restart figures."""
    cmd = [sys.executable, "-m", "goodputlab.cli", "run", *JOB, "--spare-nodes", str(spares), "--out", str(out),
           "--overwrite"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"--spare-nodes {spares}: exit {done.returncode}\n{done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    kill = next(e for e in events if e["kind"] == "failure")
    after = [e for e in events if e["attempt"] == kill["attempt"] + 1]
    first = min(e["t"] for e in after if e["kind"] in ("restart_delay", "init"))  # a rank of the next attempt is up
    stepped = min(e["t"] for e in after if e["kind"] == "compute")
    return {"spare_nodes": spares, "agents_s": round(first - kill["t"], 3), "ready_s": round(stepped - kill["t"], 3),
            "restart_s": round(summary["buckets"]["restart"], 3), "wall_s": round(summary["wall_s"], 3),
            "replaced_by_spare": bool(summary.get("node_replacements")), "sha": summary["final_state_sha256"][:16]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("needs root: emulated nodes are network namespaces (docs/DISTRIBUTED.md)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="spare-nodes-") as tmp:
        for r in range(args.rounds):
            for spares in (0, 1):
                row = run_once(spares, Path(tmp) / f"r{r}-s{spares}")
                row["round"] = r
                rows.append(row)
                print(json.dumps(row), flush=True)
    for spares in (0, 1):
        mine = [row for row in rows if row["spare_nodes"] == spares]
        print(f"--spare-nodes {spares}: " + ", ".join(
            f"{k} median {statistics.median(row[k] for row in mine):.2f} s" for k in ("agents_s", "ready_s", "restart_s")))
    cold, warm = ([row["ready_s"] for row in rows if row["spare_nodes"] == s] for s in (0, 1))
    print(f"kill to first step with a spare / without: {statistics.median(warm) / statistics.median(cold):.2f}")
    print(f"same final state in every run: {len({row['sha'] for row in rows}) == 1}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
