"""nbval on the execution papermill already made: one SMOKE run of a chapter feeds both layers.

``make test`` executes every notebook once under papermill (SMOKE) in its first phase, for the
tests that read its metrics and figures, and saves the executed copy in ``GOODPUTLAB_EXECUTED_DIR``
(``tests/conftest.py``: ``executed_notebook``). nbval used to execute each chapter a second time,
the same code with the same parameters, only to compare the outputs of the cells tagged
``nbval-check-output`` with the committed ones.

This plugin (``pytest -p nbval_shared`` with ``tools/`` on ``PYTHONPATH``) gives nbval a kernel that
replays that execution instead: for each cell nbval sends, it answers with the iopub messages
whose outputs papermill stored for the same cell (the same source, in the same order; papermill's
injected-parameters cell is passed over). Everything else is nbval's own code: which cells it
collects, its tags, the sanitize file, the stream coalescing and its comparison, and a cell that
raised fails as it would live.

Where nothing was saved for a notebook (nbval run by hand, or the papermill run failed before
saving), or the saved copy does not match the committed cells one for one, nbval starts a real
kernel and executes the notebook itself, as plain nbval does, and says why.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import uuid
from pathlib import Path
from queue import Empty

import nbval.plugin

ENV = "GOODPUTLAB_EXECUTED_DIR"


def saved_name(rel: str) -> str:
    """The file name under ``GOODPUTLAB_EXECUTED_DIR`` of a notebook's executed copy
    (``rel``: its path relative to the repository)."""
    return rel.replace("/", "__")


def save_execution(rel: str, executed: Path) -> None:
    """Keep papermill's executed copy of the notebook ``rel`` for nbval, where
    ``GOODPUTLAB_EXECUTED_DIR`` is set (``make test`` sets it; elsewhere this does nothing)."""
    folder = os.environ.get(ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(executed, Path(folder) / saved_name(rel))


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"
            and "injected-parameters" not in c.get("metadata", {}).get("tags", [])]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


class ReplayKernel:
    """What nbval asks of a kernel (``nbval.kernel.RunningKernel``), answered from stored outputs:
    each ``execute_cell_input`` queues the iopub messages that the cell's outputs came from, then
    the kernel's return to idle."""

    def __init__(self, cells: list[dict], origin: Path):
        self.cells, self.origin = iter(cells), origin
        self.queue: list[dict] = []
        self.alive = True

    def execute_cell_input(self, cell_input: str, allow_stdin=None) -> str:
        cell = next(self.cells)
        if _source(cell) != cell_input:  # checked for every cell before the first is replayed
            raise RuntimeError(f"{self.origin}: the saved execution has another cell here")
        msg_id = uuid.uuid4().hex
        parent = {"msg_id": msg_id}
        for out in cell.get("outputs", []):
            kind = out["output_type"]
            if kind == "stream":
                content = {"name": out["name"], "text": _source({"source": out["text"]})}
            elif kind == "error":
                content = {k: out[k] for k in ("ename", "evalue", "traceback")}
            else:  # display_data, execute_result
                content = {"data": out.get("data", {}), "metadata": out.get("metadata", {})}
                if kind == "execute_result":
                    content["execution_count"] = out.get("execution_count")
            self.queue.append({"msg_type": kind, "content": content, "parent_header": parent})
        self.queue.append({"msg_type": "status", "content": {"execution_state": "idle"}, "parent_header": parent})
        return msg_id

    def get_message(self, stream, timeout=None) -> dict:
        if not self.queue:
            raise Empty
        return self.queue.pop(0)

    def await_reply(self, msg_id, timeout=None) -> None:
        return None

    def await_idle(self, parent_id, timeout) -> None:
        while self.queue and not (self.queue[0]["msg_type"] == "status"
                                  and self.queue[0]["parent_header"]["msg_id"] == parent_id):
            self.queue.pop(0)

    def is_alive(self) -> bool:
        return self.alive

    def interrupt(self) -> None:
        return None

    def stop(self) -> None:
        self.alive = False

    def restart(self) -> None:
        raise RuntimeError("a replayed execution cannot restart")


def replay_for(path: Path, root: Path) -> tuple[ReplayKernel | None, str]:
    """A replay kernel for the committed notebook at ``path`` from its saved execution, or ``None``
    and the reason there is none."""
    folder = os.environ.get(ENV)
    if not folder:
        return None, f"{ENV} is not set"
    try:
        rel = path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None, f"{path} is outside {root}"
    saved = Path(folder) / saved_name(rel)
    if not saved.is_file():
        return None, f"no saved execution of {rel} in {folder}"
    executed = _code_cells(json.loads(saved.read_text()))
    committed = _code_cells(json.loads(path.read_text()))
    mismatch = next((i for i, (a, b) in enumerate(itertools.zip_longest(executed, committed, fillvalue={}))
                     if _source(a) != _source(b)), None)
    if mismatch is not None:
        return None, f"the saved execution of {rel} differs from it at code cell {mismatch}"
    return ReplayKernel(executed, saved), f"replaying papermill's execution {saved}"


_live_setup = nbval.plugin.IPyNbFile.setup


def _setup(self) -> None:
    root = Path(str(self.config.rootdir)).resolve()
    kernel, why = replay_for(Path(str(self.fspath)), root)
    if kernel is None:
        print(f"\nnbval_shared: {Path(str(self.fspath)).name}: executing it (nbval's own kernel): {why}")
        return _live_setup(self)
    self.kernel = kernel
    self.setup_sanitize_files()
    print(f"\nnbval_shared: {Path(str(self.fspath)).name}: {why}")


def pytest_configure(config) -> None:
    nbval.plugin.IPyNbFile.setup = _setup
