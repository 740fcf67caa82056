"""Execute notebooks in place: the outputs a reader sees, made readable without a kernel.

    python tools/execute_notebooks.py --full book/02_failures_at_scale.ipynb   # a full-size run (make notebooks)
    python tools/execute_notebooks.py book/01_what_is_goodput.ipynb            # a SMOKE run (quick, for development)
    python tools/execute_notebooks.py --time-only book/*.ipynb labs/*.ipynb     # time SMOKE runs, write nothing
    python tools/execute_notebooks.py --tidy book/*.ipynb                       # only the steps after execution

No parameters are injected (the ``parameters`` cell reads GOODPUTLAB_SMOKE), so the stored
notebook keeps its own cells. Fails on any cell error. After executing, every written notebook:

1. keeps static figures only: an output that carries a live widget view and a PNG (every chart
   and panel, goodputlab.charts.static) keeps the PNG; a widget without one (a progress bar) becomes
   its final text. Without saved widget state a widget view draws nothing but an error, so this is
   what GitHub, nbviewer, the website and JupyterLab before Run show.
2. hides the test plumbing: the ``parameters`` cell, the cell that shrinks sizes under SMOKE and
   the ``record_metrics`` cell are removed from the website (tag ``remove-cell``) and collapsed in
   JupyterLab (``jupyter.source_hidden``); metrics are an invisible output (goodputlab.notebook).
   A ``record_metrics`` cell that also displays something (a lab's scoreboard) keeps that output
   in sight: only its source is hidden (tag ``remove-input``).
3. hides the source of every sentence rendered from the data (a cell that is one ``gl.say(...)`` call,
   goodputlab.prose): the reader sees the sentence, not its template (tag ``remove-input``, and
   ``jupyter.source_hidden``). A cell that computes its values before its ``gl.say`` is folded
   away instead (tag ``hide-input``: the site shows it on a click).
4. numbers the figures (goodputlab.captions): "Figure 3.2" in each caption and in every link to it,
   computed from the captions' order, so a figure added or moved renumbers the rest.
5. records the run in its metadata (``goodputlab``: full or smoke, date, machine: cores, GPU or
   none, torch) and says so to the reader in a caption under the title (tag ``run-caption``).
5. records what the run was made from (``goodputlab.sources``: every file of the package and the
   repository that a process of the execution imported or read, with a digest of its content), so
   that ``tools/notebook_sources.py`` (and ``make test``) can say which committed notebooks predate
   a change to code they use.
"""

from __future__ import annotations

import ast
import contextlib
import datetime as dt
import html
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from goodputlab import captions
sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_sources  # noqa: E402  (tools/notebook_sources.py)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC = ("image/png", "image/svg+xml", "image/jpeg")
HIDDEN_TAG = "remove-cell"
SHOWN_TAG = "remove-input"  # a plumbing cell whose output is for the reader
CAPTION_TAG = "run-caption"
BUDGET_S = 60.0  # each notebook in SMOKE mode (the developers' brief)


# --- 1. static outputs ------------------------------------------------------------------------------
def _strip_tags(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def _widget_text(model_id: str, state: dict, depth: int = 0) -> str:
    """The text a widget shows, from its saved state: labels and HTML as text, a progress bar as
    ``|#####     |`` (what tqdm prints in a terminal)."""
    model = state.get(model_id)
    if model is None or depth > 8:
        return ""
    name, s = model.get("model_name", ""), model.get("state", {})
    if name in ("HTMLModel", "LabelModel", "HTMLMathModel"):
        return _strip_tags(str(s.get("value", "")))
    if name in ("FloatProgressModel", "IntProgressModel"):
        span = (s.get("max", 100) or 0) - (s.get("min", 0) or 0)
        filled = round(20 * ((s.get("value", 0) or 0) - (s.get("min", 0) or 0)) / span) if span else 0
        bar = "|" + "█" * max(0, min(20, filled)) + " " * (20 - max(0, min(20, filled))) + "|"
        return f"{s.get('description', '')} {bar}".strip()
    children = s.get("children", [])
    return " ".join(t for t in (_widget_text(c.removeprefix("IPY_MODEL_"), state, depth + 1) for c in children) if t)


def static_outputs(nb: nbformat.NotebookNode) -> None:
    """Drop the widget views of the committed notebook (see the module's docstring, step 1)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data:
                view = data.pop(WIDGET_VIEW)
                # a figure, or a static form of its own (a self-check's question as Markdown), stays as it is
                if not any(k in data for k in (*STATIC, "text/markdown", "text/html")):
                    text = _widget_text(view.get("model_id", ""), state)
                    if not text:
                        continue  # a widget with nothing to show without its kernel
                    data["text/plain"] = text
            kept.append(out)
        cell.outputs = kept
    nb.metadata.pop("widgets", None)


# --- 2. the test plumbing, out of the reader's way ------------------------------------------------------
def plumbing_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the parameters cell, the SMOKE sizes cell after it, and the record_metrics cells."""
    found = []
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for pos, i in enumerate(code):
        cell = nb.cells[i]
        if "parameters" in cell.metadata.get("tags", []):
            found.append(i)
            if pos + 1 < len(code) and re.search(r"^\s*if\s+SMOKE\b", nb.cells[code[pos + 1]].source, re.M):
                found.append(code[pos + 1])
        elif "record_metrics(" in cell.source:
            found.append(i)
    return sorted(set(found))


def shows_more_than_metrics(source: str) -> bool:
    """Whether a ``record_metrics`` cell also displays something for the reader: its last statement
    is an expression other than the ``record_metrics`` call (a lab's scoreboard)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    if not body or not isinstance(body[-1], ast.Expr):
        return False
    value = body[-1].value
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name != "record_metrics"
    return True


def hide_plumbing(nb: nbformat.NotebookNode) -> None:
    """Tag and collapse the plumbing cells. A ``record_metrics`` cell that also displays something
    (a lab's scoreboard) keeps its output: only its source is hidden (tag ``remove-input``)."""
    for i in plumbing_cells(nb):
        cell = nb.cells[i]
        tags = cell.metadata.setdefault("tags", [])
        jupyter = cell.metadata.setdefault("jupyter", {})
        jupyter["source_hidden"] = True
        keep_output = "record_metrics(" in cell.source and shows_more_than_metrics(cell.source)
        tag, other = (SHOWN_TAG, HIDDEN_TAG) if keep_output else (HIDDEN_TAG, SHOWN_TAG)
        tags[:] = [t for t in tags if t != other]
        if tag not in tags:
            tags.append(tag)
        if "record_metrics(" in cell.source and not keep_output:
            jupyter["outputs_hidden"] = True
        else:
            jupyter.pop("outputs_hidden", None)


# --- 5. what ran, and where ------------------------------------------------------------------------
def machine() -> dict:
    """Cores, GPU (name, or None) and torch version of this machine, as the notebooks' kernel sees them."""
    probe = (
        "import json, os, torch; print(json.dumps({'cpu_cores': len(os.sched_getaffinity(0)), "
        "'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "
        "'torch': torch.__version__}))"
    )
    import json

    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    info = json.loads(out.strip().splitlines()[-1])
    info["python"] = ".".join(map(str, sys.version_info[:3]))
    return info


def caption(meta: dict, kind: str) -> str:
    """The sentence under a notebook's title that says which run its outputs come from."""
    m = meta["machine"]
    where = f"{m['cpu_cores']} CPU cores, " + (f"a {m['gpu']} GPU" if m["gpu"] else "no GPU") + f", PyTorch {m['torch']}"
    day = dt.date.fromisoformat(meta["date"]).strftime("%-d %B %Y")
    if kind == "page":  # back matter (book/reproductions.ipynb): arithmetic on published figures, no runs
        return (f"*The values on this page were computed on {day} ({where}) from the parameters each row states: "
                "nothing here is measured or drawn at random, so a re-run gives the same numbers.*")
    if meta["run"] == "full":
        run = f"The outputs in this {kind} come from a full-size run on {day} ({where}, {meta['seconds']:.0f} s in all)."
    else:
        run = (f"The outputs in this {kind} come from a small test run (SMOKE mode) on {day} ({where}); "
               "`make notebooks` replaces them with a full-size run.")
    # the parameters cell is collapsed in JupyterLab and removed from the website: say both
    return (f"*{run} Every figure is measured, so a run on your machine will show other numbers. "
            "The sizes of the runs are set in the notebook's parameters cell, its first code cell "
            "(collapsed in JupyterLab, left out of the website).*")


def set_caption(nb: nbformat.NotebookNode, text: str) -> None:
    """Put the caption right after the title cell (replacing an earlier one)."""
    nb.cells = [c for c in nb.cells if CAPTION_TAG not in c.metadata.get("tags", [])]
    title = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and re.match(r"#\s", c.source)), 0)
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": [CAPTION_TAG]})
    cell.id = CAPTION_TAG
    nb.cells.insert(title + 1, cell)


def _is_say(node: ast.stmt) -> bool:
    """Whether ``node`` is the expression ``gl.say(...)``."""
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Call):
        return False
    func = node.value.func
    return isinstance(func, ast.Attribute) and func.attr == "say" and getattr(func.value, "id", "") == "gl"


#: statements that compute without showing anything: a cell of these and a closing gl.say only renders prose
_SILENT = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.FunctionDef, ast.Import, ast.ImportFrom)


def _body(source: str) -> list[ast.stmt]:
    try:
        return ast.parse(source).body
    except SyntaxError:
        return []


def is_prose(source: str) -> bool:
    """Whether a cell is one sentence rendered from the data: a single ``gl.say(...)`` expression."""
    body = _body(source)
    return len(body) == 1 and _is_say(body[0])


def renders_prose(source: str) -> bool:
    """Whether a cell only renders prose: values computed silently (assignments, a helper function),
    then one ``gl.say(...)`` that shows them. A cell that prints or draws anything else is not."""
    body = _body(source)
    return bool(body) and _is_say(body[-1]) and all(isinstance(b, _SILENT) for b in body[:-1])


HIDE_INPUT_TAG = "hide-input"  # the site folds the source away (a click shows it)


def hide_prose_sources(nb: nbformat.NotebookNode) -> None:
    """Step 3: the rendered sentences show their output only. A cell that is one ``gl.say`` loses its
    source on the website (``remove-input``); one that computes its values first keeps it folded away
    (``hide-input``: the site shows it on a click). JupyterLab collapses both (``jupyter.source_hidden``:
    a click shows it), and both stay runnable."""
    for cell in nb.cells:
        if cell.cell_type != "code" or not renders_prose(cell.source):
            continue
        tags = cell.metadata.setdefault("tags", [])
        tag = SHOWN_TAG if is_prose(cell.source) else HIDE_INPUT_TAG
        if SHOWN_TAG not in tags and tag not in tags:
            tags.append(tag)
        cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def tidy(nb: nbformat.NotebookNode) -> None:
    """Every step after execution that does not need the run itself (1 to 4)."""
    static_outputs(nb)
    hide_plumbing(nb)
    hide_prose_sources(nb)
    captions.number_figures(nb)
    for cell in nb.cells:  # execution metadata changes on every run; keep diffs small
        cell.get("metadata", {}).pop("execution", None)


def execute(path: Path, write: bool = True, full: bool = False, info: dict | None = None) -> float:
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="goodputlab-sources-") as scratch:
        log = Path(scratch) / "used.log"
        t = time.monotonic()
        with _environment(notebook_sources.recording_env(log) if write else {}):
            NotebookClient(
                nb,
                timeout=3600 if full else 900,
                kernel_name="python3",
                resources={"metadata": {"path": str(path.parent)}},
                store_widget_state=True,  # read by static_outputs (progress bars' final text), then dropped
            ).execute()
        elapsed = time.monotonic() - t
        used = notebook_sources.read_log(log)
    if not write:
        return elapsed
    tidy(nb)
    meta = {"run": "full" if full else "smoke", "date": dt.date.today().isoformat(),
            "machine": info or machine(), "seconds": round(elapsed, 1),
            "sources": notebook_sources.record(used)}
    nb.metadata["goodputlab"] = meta
    kind = "lab" if "labs" in path.parts else "chapter" if re.match(r"\d\d_", path.name) else "page"
    set_caption(nb, caption(meta, kind))
    nbformat.write(nb, path)
    return elapsed


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """Set environment variables for the kernel an execution starts (it inherits them), then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main(args: list[str]) -> int:
    write = "--time-only" not in args
    full = "--full" in args
    paths = [Path(a) for a in args if not a.startswith("--")]
    if "--tidy" in args:
        for p in paths:
            nb = nbformat.read(p, as_version=4)
            tidy(nb)
            nbformat.write(nb, p)
        return 0
    if full:
        os.environ.pop("GOODPUTLAB_SMOKE", None)
    else:
        os.environ["GOODPUTLAB_SMOKE"] = "1"
    info = machine() if write else None
    over = 0
    for p in paths:
        elapsed = execute(p, write=write, full=full, info=info)
        late = not full and elapsed > BUDGET_S
        over += late
        note = f"  OVER the {BUDGET_S:.0f} s budget" if late else ""
        print(f"{p}: {elapsed:.1f} s ({'full' if full else 'SMOKE'}){note}", flush=True)
    if not write:
        print(f"{len(paths) - over} of {len(paths)} within the {BUDGET_S:.0f} s SMOKE budget (kernel start included)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
