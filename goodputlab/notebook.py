"""Small helpers the chapters and labs share: smoke mode and metrics the tests read back.

A chapter's ``parameters`` cell sets ``SMOKE = os.environ.get("GOODPUTLAB_SMOKE") == "1"``
(papermill can also inject ``SMOKE=True``). Its last cell calls
:func:`record_metrics` with the figures it produced; the notebook tests parse
them from the executed notebook with :func:`read_metrics` and assert on them.

The metrics are for the tests, not the reader: they travel as a display output of their own
MIME type (``METRICS_MIMETYPE``), which no viewer draws (JupyterLab, GitHub, nbviewer and the
site show nothing for it), and the cell is hidden (tools/execute_notebooks.py tags it).
"""

from __future__ import annotations

import json
from typing import Any

METRICS_MIMETYPE = "application/vnd.goodputlab.metrics+json"
_PREFIX = "GOODPUTLAB_METRICS "  # the printed form, read from notebooks executed before the MIME type


def record_metrics(**metrics: Any) -> None:
    """Record the notebook's figures for the tests: a display output of ``METRICS_MIMETYPE`` (JSON),
    with no text form, so a reader sees nothing. Outside IPython: one printed JSON line."""
    # JSON text inside the output: it keeps NaN and infinity, which a kernel message's JSON cannot carry
    text = json.dumps(metrics, sort_keys=True, default=float)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is None or get_ipython() is None:
        print(_PREFIX + text)
        return
    display({METRICS_MIMETYPE: {"json": text}}, raw=True)


def read_metrics(notebook: dict) -> dict[str, Any]:
    """The metrics an executed notebook (``nbformat`` node or plain dict) recorded; later ones win."""
    found: dict[str, Any] = {}
    for cell in notebook["cells"]:
        for out in cell.get("outputs", []) or []:
            data = out.get("data", {}) or {}
            if METRICS_MIMETYPE in data:
                found.update(json.loads(data[METRICS_MIMETYPE]["json"]))
            if out.get("output_type") == "stream":
                for line in "".join(out.get("text", "")).splitlines():
                    if line.startswith(_PREFIX):
                        found.update(json.loads(line[len(_PREFIX) :]))
    return found
