"""Small helpers the chapters and labs share: smoke mode and metrics the tests read back.

A chapter's ``parameters`` cell sets ``SMOKE = os.environ.get("GOODPUTLAB_SMOKE") == "1"``
(papermill can also inject ``SMOKE=True``). Its last cell calls
:func:`record_metrics` with the figures it produced; the notebook tests parse
them from the executed notebook with :func:`read_metrics` and assert on them.
"""

from __future__ import annotations

import json
from typing import Any

_PREFIX = "GOODPUTLAB_METRICS "


def record_metrics(**metrics: Any) -> None:
    """Print the notebook's figures as one JSON line the tests can find."""
    print(_PREFIX + json.dumps(metrics, sort_keys=True, default=float))


def read_metrics(notebook: dict) -> dict[str, Any]:
    """The metrics an executed notebook (``nbformat`` node or plain dict) recorded; later ones win."""
    found: dict[str, Any] = {}
    for cell in notebook["cells"]:
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "stream":
                for line in "".join(out.get("text", "")).splitlines():
                    if line.startswith(_PREFIX):
                        found.update(json.loads(line[len(_PREFIX) :]))
    return found
