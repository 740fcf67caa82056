"""Write ``book/data/checkpoint_stall.json``: the checkpoint-stall benchmark's figures that chapter 4 states.

    python tools/stall_figures.py            # write the file
    python tools/stall_figures.py --check    # exit 1 if the file differs from what RESULTS.md gives

The figures are the benchmark's own printout (``benchmarks/checkpoint_stall.py``, its state tables),
kept in ``benchmarks/RESULTS.md``: the quiet 2-core CPU rerun and the H200 run of the GPU suite. This
reads those printouts back into the structure the benchmark's ``--json`` writes (``machine``, and per
state its ``floor`` and ``rows``; times in seconds, sizes in bytes), so the chapter renders its
sentences from a file and never from numbers typed into its text. A later run of the benchmark with
``--json`` can replace an entry directly.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
OUT = ROOT / "book" / "data" / "checkpoint_stall.json"
MB = 1e6  # as the benchmark prints them


def _s(ms: str) -> float:
    """Milliseconds as printed, in seconds (rounded past the printout's precision, so no float noise)."""
    return round(float(ms) / 1000, 7)

#: entry -> (the RESULTS.md heading its printout follows, what it is)
SOURCES = {
    "cpu": ("### Quiet machine rerun (Sun Nov 29 21:14 UTC 2026)",
            "a quiet 2-core CPU machine without a GPU"),
    "h200": ("**Call 1**, `python3 benchmarks/gpu_suite.py --budget-s 380",
             "one NVIDIA H200 GPU"),
}

HEADER = re.compile(r"checkpoint stall benchmark: (\w+), (\d+) cores, GPU (.+?), torch (\S+), (\d+) torch thread\(s\), (.+)$")
STATE = re.compile(r"state: (\w+) preset, ([\d.]+) MB in (\d+) tensors; memcpy floor ([\d.]+) ms")
ROW = re.compile(r"(sync|async|dcp|memory)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+(-|[\d.]+)\s+(-|[\d.]+x)$")
STORAGE = re.compile(r"storage: the checkpoint files read back at ([\d.]+) GB/s")


def printout(results: str, heading: str) -> list[str]:
    """The lines of the first fenced block after ``heading`` in ``results``."""
    start = results.index(heading)
    block = results[start:].split("```", 2)[1]
    return block.splitlines()


def parse(lines: list[str]) -> dict:
    """The benchmark's printed state tables, as its ``--json`` holds them (ms and MB back to s and bytes)."""
    out: dict = {"machine": {}, "states": {}}
    state = None
    for line in lines:
        line = line.strip()
        if m := HEADER.match(line):
            out["machine"] = {"device": m[1], "cores": int(m[2]), "gpu": m[3], "torch": m[4], "threads": int(m[5]),
                              "date": m[6]}
        elif m := STATE.match(line):
            state = {"floor": {"memcpy_floor_s": _s(m[4]), "state_bytes": round(float(m[2]) * MB),
                               "tensors": int(m[3])}, "rows": []}
            out["states"][m[1]] = state
        elif state is not None and (m := ROW.match(line)):
            row = {"strategy": m[1], "blocking_s": _s(m[2]), "blocking_over_floor": float(m[3]),
                   "first_blocking_s": _s(m[4]), "durable_s": _s(m[5]),
                   "peak_extra_bytes": round(float(m[6]) * MB), "restore_s": _s(m[7]),
                   "restore_cold_s": _s(m[8])}
            if m[9] != "-":
                row["gil_hold_max_s"] = _s(m[9])
            if m[10] != "-":
                row["step_slowdown"] = float(m[10][:-1])
            state["rows"].append(row)
        elif state is not None and (m := STORAGE.match(line)):
            for row in state["rows"]:
                if row["strategy"] == "sync":
                    row["storage_read_bytes_per_s"] = float(m[1]) * 1e9
        elif line.startswith(("100 consecutive", "30 consecutive", "aims")):
            state = None
    if not out["states"] or any(len(s["rows"]) != 4 for s in out["states"].values()):
        raise ValueError("the printout has no state table with the four strategies")
    return out


def figures(results: str) -> dict:
    """Every entry of :data:`SOURCES`, parsed from the text of RESULTS.md."""
    return {name: {"source": f"benchmarks/RESULTS.md, the printout after {heading!r}", "what": what,
                   **parse(printout(results, heading))}
            for name, (heading, what) in SOURCES.items()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = p.parse_args(argv)
    text = json.dumps(figures(RESULTS.read_text()), indent=1) + "\n"
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'differs from RESULTS.md; run tools/stall_figures.py'}")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
