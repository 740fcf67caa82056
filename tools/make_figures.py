"""Write every chart of the given notebooks as SVG and PNG into one folder, for slides.

    python tools/make_figures.py --out figures book/*.ipynb          # small runs (GOODPUTLAB_SMOKE=1)
    python tools/make_figures.py --out figures --full book/*.ipynb   # the chapters' full-size runs

Each notebook is executed (not saved) with ``GOODPUTLAB_FIGURES`` set, so the package's chart
renderer writes every chart the notebook shows (``goodputlab/charts/figures.py``):
``<out>/<notebook>-NN.svg`` and ``.png``, numbered in the order they appear. ``make figures`` runs
this on every chapter.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient


def figures_of(path: Path, out: Path, full: bool) -> list[Path]:
    """Execute ``path`` with the figure writer on; the files it wrote."""
    stem = path.stem
    for old in out.glob(f"{stem}-[0-9][0-9].*"):  # a chapter re-run replaces its figures
        old.unlink()
    os.environ["GOODPUTLAB_FIGURES"] = str(out.resolve())
    os.environ["GOODPUTLAB_FIGURES_PREFIX"] = stem
    if full:
        os.environ.pop("GOODPUTLAB_SMOKE", None)
    else:
        os.environ["GOODPUTLAB_SMOKE"] = "1"
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="goodputlab-kernel-") as sockets:
        # the kernel talks over local sockets (IPC), not TCP: nothing listens on a port, and ipykernel
        # has no reason to warn that its TCP traffic is unencrypted
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        try:
            NotebookClient(nb, km=km, timeout=3600, resources={"metadata": {"path": str(path.parent)}},
                           store_widget_state=False).execute()
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=False)  # the client does not own a kernel it was given: stop it here
    return sorted(out.glob(f"{stem}-[0-9][0-9].*"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("figures"), help="the folder for the figures (default: figures)")
    parser.add_argument("--full", action="store_true", help="full-size runs (default: small, GOODPUTLAB_SMOKE=1)")
    args = parser.parse_args(argv)
    missing = [p for p in args.notebooks if not p.is_file()]
    if missing:
        print(f"make_figures: no notebook {missing[0]}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    # a kernel's debugger warns about Python 3.11's frozen modules on every start; nothing here debugs
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    size = "full-size runs" if args.full else "small runs (SMOKE); for slides, FULL=1 runs the chapters at full size"
    print(f"make figures: {len(args.notebooks)} notebook(s), {size}", flush=True)
    started = time.monotonic()
    total = 0
    for path in args.notebooks:
        t = time.monotonic()
        files = figures_of(path, args.out, args.full)
        charts = len([f for f in files if f.suffix == ".svg"])
        total += charts
        print(f"{path}: {charts} charts ({time.monotonic() - t:.0f} s)", flush=True)
    took = time.monotonic() - started
    print(f"{total} charts as SVG and PNG in {args.out}/ in {took // 60:.0f} min {took % 60:.0f} s"
          + ("" if args.full else " (small runs: `make figures FULL=1` draws them from the full-size runs, for slides)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
