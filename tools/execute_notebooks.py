"""Execute notebooks in place in SMOKE mode, so the committed outputs are the ones nbval checks.

    python tools/execute_notebooks.py book/01_what_is_goodput.ipynb [more.ipynb ...]

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


def execute(path: Path) -> float:
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
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:  # execution metadata changes on every run; keep diffs small
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    return elapsed


def main(paths: list[str]) -> int:
    os.environ["GOODPUTLAB_SMOKE"] = "1"
    for p in paths:
        print(f"{p}: {execute(Path(p)):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
