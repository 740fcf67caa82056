"""Log the repository files a notebook's execution used: on ``PYTHONPATH`` only while
``tools/execute_notebooks.py`` executes a notebook (``tools/notebook_sources.py``).

Every Python process of the execution imports this at start-up: the kernel, the supervisors and
workers it launches, their DataLoader workers (a forked child keeps the hook). An audit hook
appends to ``GOODPUTLAB_SOURCES_LOG`` each module of the package imported and each file under
``GOODPUTLAB_SOURCES_ROOT`` opened for reading, once per process, one ``os.write`` per line, so a
worker killed by SIGKILL has already logged what it used.
"""

import os
import sys

_LOG = os.environ.get("GOODPUTLAB_SOURCES_LOG")
_ROOT = os.environ.get("GOODPUTLAB_SOURCES_ROOT")
#: folders whose files are not sources: the environment, git's store, a built site, bytecode (and an
#: editable install's *.egg-info, read by importlib.metadata)
SKIPPED = {".venv", ".git", "_build", "__pycache__"}


def _install(log: str, root: str) -> None:
    prefix = os.path.join(os.path.realpath(root), "")
    seen: set[str] = set()

    def write(line: str) -> None:
        if line in seen:
            return
        seen.add(line)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def hook(event: str, args: tuple) -> None:
        if event != "import" and event != "open":
            return
        try:
            log_use(event, args)
        except Exception:  # an error raised in an audit hook would fail the import or the open itself
            pass

    def log_use(event: str, args: tuple) -> None:
        if event == "import":
            name = args[0]
            if isinstance(name, str) and (name == "goodputlab" or name.startswith("goodputlab.")):
                write("module " + name)
        elif event == "open":
            path, mode, flags = args
            if isinstance(mode, str):
                if any(c in mode for c in "wax+"):
                    return  # written, not read: an output, not something the outputs depend on
            elif isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR):
                return
            if hasattr(path, "__fspath__"):
                path = os.fspath(path)
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                return  # a file descriptor
            if not os.path.isabs(path):
                path = os.path.join(os.getcwd(), path)
            if not path.startswith(prefix):
                return  # cheap test first: every import opens files, most of them outside the repository
            rel = os.path.normpath(path[len(prefix):])
            parts = rel.split(os.sep)
            if SKIPPED.intersection(parts) or any(p.endswith(".egg-info") for p in parts) or not os.path.isfile(path):
                return
            write("file " + rel)

    sys.addaudithook(hook)


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if the interpreter has one further along the path."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if _LOG and _ROOT:
    _install(_LOG, _ROOT)
_chain()
