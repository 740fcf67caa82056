"""goodputlab: measure, model and teach training goodput.

Importing the package is cheap (no torch): the worker process and the CLI start
fast, and ``import goodputlab`` in a notebook costs nothing until a run starts.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .categories import CATEGORIES  # noqa: E402
from .config import RunConfig  # noqa: E402
from .errors import ConfigError  # noqa: E402


def __getattr__(name: str):
    # heavier pieces load on first use
    if name in ("run", "RunResult", "load_run"):
        from . import api

        return getattr(api, name)
    if name == "Recorder":  # pure (no torch): records any training loop
        return __import__("goodputlab.recorder", fromlist=["Recorder"]).Recorder
    raise AttributeError(f"module 'goodputlab' has no attribute {name!r}")


__all__ = ["CATEGORIES", "ConfigError", "Recorder", "RunConfig", "RunResult", "load_run", "run", "__version__"]
