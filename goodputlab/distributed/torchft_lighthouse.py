"""torchft's lighthouse, started without ``import torchft``: run by path, ``python .../torchft_lighthouse.py ARGS``.

torchft's ``torchft_lighthouse`` script imports ``torchft._torchft``, and with it the ``torchft`` package,
which imports torch: about 2 CPU-seconds, and a second or more of every torchft run's start-up, for a
server written in Rust that uses none of it. This file loads that extension alone and calls the same
``lighthouse_main``. It is run by its path, not with ``-m``: the lighthouse reads its arguments from the
process's own command line after the first word, so that word must be this file, as it is the script's.
It imports nothing of goodputlab.
"""

import sys

del sys.path[0]  # this file's folder: none of its neighbours may stand in for a module of the standard library

import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> int:
    package = importlib.util.find_spec("torchft")  # found, not run: its __init__ is what this file avoids
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_torchft{suffix}"
            if path.is_file():
                spec = importlib.util.spec_from_file_location("torchft._torchft", path)
                extension = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(extension)
                sys.argv[0] = "torchft_lighthouse"
                return extension.lighthouse_main()
    raise SystemExit(f"torchft's extension _torchft is not in {list(package.submodule_search_locations)}")


if __name__ == "__main__":
    sys.exit(main())
