"""Reading the recordings that chapters fall back on (``book/data/*.json``): one read and one check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import RunFileError


def read_recording(path: str | Path, what: str, version: int, valid: Callable[[dict], bool]) -> dict[str, Any]:
    """The JSON object at ``path``, a version-``version`` recording of ``what`` whose fields ``valid``
    accepts; :class:`RunFileError` naming the file and ``what`` when it cannot be read or is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RunFileError(f"{path}: not a recording of {what} ({e})") from None
    if not isinstance(data, dict) or data.get("version") != version or not valid(data):
        raise RunFileError(f"{path}: not a version-{version} recording of {what}")
    return data
