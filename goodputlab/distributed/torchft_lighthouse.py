"""torchft's lighthouse, started without ``import torchft``: run by path, ``python .../torchft_lighthouse.py ARGS``.

torchft's ``torchft_lighthouse`` script imports ``torchft._torchft``, and with it the ``torchft`` package,
which imports torch: about 2 CPU-seconds, and a second or more of every torchft run's start-up, for a
server written in Rust that uses none of it. This file loads that extension alone and calls the same
``lighthouse_main``. It is run by its path, not with ``-m``: the lighthouse reads its arguments from the
process's own command line after the first word, so that word must be this file, as it is the script's.
It imports nothing of goodputlab; the supervisor imports :func:`extension` to know whether it can run.
"""

import sys

if __name__ == "__main__":  # run by path: this file's folder heads sys.path, and none of its
    del sys.path[0]  # neighbours may stand in for a module of the standard library

import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402


def extension() -> Path | None:
    """The file of torchft's Rust extension (``_torchft``), found without running torchft's ``__init__``;
    None when torchft is not installed, or not with its extension beside it."""
    try:
        package = importlib.util.find_spec("torchft")
    except (ImportError, ValueError):  # a torchft blocked in sys.modules
        return None
    for folder in (package.submodule_search_locations or ()) if package is not None else ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_torchft{suffix}"
            if path.is_file():
                return path
    return None


def main() -> int:
    path = extension()
    if path is None:
        raise SystemExit("torchft's extension _torchft was not found: pip install 'goodputlab[ft]'")
    spec = importlib.util.spec_from_file_location("torchft._torchft", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.argv[0] = "torchft_lighthouse"
    return module.lighthouse_main()


if __name__ == "__main__":
    sys.exit(main())
