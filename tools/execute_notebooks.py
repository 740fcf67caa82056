"""Execute notebooks in place in SMOKE mode, so the committed outputs are the ones nbval checks.

    python tools/execute_notebooks.py book/01_what_is_goodput.ipynb [more.ipynb ...]
    python tools/execute_notebooks.py --time-only book/*.ipynb labs/*.ipynb   # time them, write nothing

No parameters are injected (the ``parameters`` cell reads GOODPUTLAB_SMOKE), so the
stored notebook keeps its own cells exactly. Fails on any cell error.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, write: bool = True) -> float:
    nb = nbformat.read(path, as_version=4)
    t = time.monotonic()
    NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,  # the offline chart widgets carry ~1 MB of JavaScript each
    ).execute()
    elapsed = time.monotonic() - t
    if not write:
        return elapsed
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:  # execution metadata changes on every run; keep diffs small
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    return elapsed


BUDGET_S = 60.0  # each notebook in SMOKE mode (the developers' brief)


def main(args: list[str]) -> int:
    write = "--time-only" not in args
    paths = [a for a in args if a != "--time-only"]
    os.environ["GOODPUTLAB_SMOKE"] = "1"
    over = 0
    for p in paths:
        elapsed = execute(Path(p), write=write)
        over += elapsed > BUDGET_S
        note = f"  OVER the {BUDGET_S:.0f} s budget" if elapsed > BUDGET_S else ""
        print(f"{p}: {elapsed:.1f} s{note}", flush=True)
    if not write:
        print(f"{len(paths) - over} of {len(paths)} within the {BUDGET_S:.0f} s SMOKE budget (kernel start included)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
