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
import time
from pathlib import Path

import nbformat
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
    NotebookClient(nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   store_widget_state=False).execute()
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
    total = 0
    for path in args.notebooks:
        t = time.monotonic()
        files = figures_of(path, args.out, args.full)
        charts = len([f for f in files if f.suffix == ".svg"])
        total += charts
        print(f"{path}: {charts} charts ({time.monotonic() - t:.0f} s)", flush=True)
    print(f"{total} charts as SVG and PNG in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
