"""Screenshots of every panel at its full-size default run, for the docs (docs/panels/).

    .venv/bin/python tools/panel_shots.py                    # every chapter and lab with a panel
    .venv/bin/python tools/panel_shots.py book/01_what_is_goodput.ipynb --width 1000

Each notebook is opened in JupyterLab as `make lab` opens it (tools/labdriver.py), at full size
(not SMOKE), and run from the top down to its last panel (the cells after it do not change a
panel); then every panel's output is photographed at the window width (1400 px by default) and
written as ``docs/panels/<notebook>-<Panel>.png``, and docs/panels/README.md lists them with
the run they come from. Needs Chromium and the test extra (playwright), like the browser test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import labdriver  # noqa: E402

ROOT = labdriver.ROOT
OUT = ROOT / "docs" / "panels"
PANEL_CALL = re.compile(r"gl\.widgets\.([A-Z]\w+)(?:\.from_run)?\(")  # a class: a panel (self_check is not one)


def panel_cells(rel: str) -> list[tuple[int, str]]:
    """(cell index, panel class) of each cell that makes a panel, e.g. ``gl.widgets.RunPanel(``."""
    nb = json.loads((ROOT / rel).read_text())
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            m = PANEL_CALL.search("".join(cell["source"]))
            if m:
                found.append((i, m.group(1)))
    return found


def notebooks_with_panels() -> list[str]:
    rels = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("[0-9]*.ipynb"))
    rels += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "labs").glob("*.ipynb"))
    return [rel for rel in rels if panel_cells(rel)]


def machine() -> str:
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
        version = torch.__version__
    except Exception:  # the caption still says what it can
        gpu, version = "GPU unknown", "unknown"
    return f"{os.cpu_count()} CPU cores, {gpu}, PyTorch {version}, Python {platform.python_version()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", help="notebooks (paths from the repository root); default: all with a panel")
    ap.add_argument("--width", type=int, default=labdriver.WIDTHS[-1], help="window width in CSS pixels (default 1400)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"folder for the PNGs (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds one notebook may run (default 3600)")
    args = ap.parse_args(argv)
    if labdriver.CHROMIUM is None:
        ap.error("no chromium on PATH (apt-get install chromium)")
    rels = args.notebooks or notebooks_with_panels()
    for rel in rels:
        if not (ROOT / rel).exists() or not panel_cells(rel):
            ap.error(f"{rel}: not a notebook with a panel")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    env = {k: v for k, v in os.environ.items() if k != "GOODPUTLAB_SMOKE"}
    os.environ.pop("GOODPUTLAB_SMOKE", None)  # full size: the server's kernels must not see it
    with tempfile.TemporaryDirectory(prefix="panel-shots-") as tmp, \
            labdriver.LabServer(Path(tmp), env=env) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=labdriver.CHROMIUM, args=labdriver.CHROMIUM_ARGS)
        for rel in rels:
            cells = panel_cells(rel)
            reader = labdriver.Reader(browser, server, width=args.width)
            reader.open(rel)
            t = time.monotonic()
            print(f"{rel}: running to cell {cells[-1][0]} at full size...", flush=True)
            reader.start_all(upto=cells[-1][0])
            seconds = reader.wait_done(args.timeout, upto=cells[-1][0])
            problems = reader.problems()
            for problem in problems:
                print(f"  in the reader's way: {problem}")
            stem = Path(rel).stem
            shots = reader.screenshot_panels(args.out, f"{Path(rel).parent.name}-{stem}")
            by_cell = dict(cells)
            for shot in shots:
                index = int(re.search(r"cell(\d+)\.png$", shot.name).group(1))
                name = f"{Path(rel).parent.name}-{stem}-{by_cell.get(index, 'panel')}.png"
                target = shot.with_name(name)
                shot.replace(target)
                rows.append((rel, by_cell.get(index, "panel"), target.name))
                print(f"  {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
            print(f"  {seconds:.0f} s to run, {time.monotonic() - t:.0f} s in all", flush=True)
            reader.close_notebook()
            reader.page.close()
        browser.close()
    if args.out == OUT and not args.notebooks:
        write_index(rows, args.width)
    return 0


def write_index(rows: list[tuple[str, str, str]], width: int) -> None:
    day = dt.date.today().strftime("%-d %B %Y")
    lines = [
        "# The panels, as a reader sees them",
        "",
        f"Each chapter's and lab's panels in JupyterLab at a {width} px window, after the notebook ran at full",
        "size (not the tests' SMOKE sizes) down to its last panel: the panel's default run. Made by",
        f"`tools/panel_shots.py` on {day} ({machine()}); the figures in them are that machine's.",
        "The browser test (tests/test_browser.py) checks the same panels at 1000 and 1400 px on every run.",
        "",
    ]
    for rel, panel, name in rows:
        lines += [f"## {rel}: {panel}", "", f"![{panel} in {rel}]({name})", ""]
    (OUT / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
