"""What a committed notebook's outputs were made from, and which notebooks predate a change to it.

When ``tools/execute_notebooks.py`` executes a notebook, every Python process of that execution
(the kernel, the supervisors and workers it launches, their loader processes) logs the modules of
the package it imports and the repository files it reads (``tools/source_log/sitecustomize.py``,
on ``PYTHONPATH`` only then). The notebook's metadata keeps each of those files with a digest of
its content (``goodputlab.sources``). A notebook is *stale* when one of them has changed since, or
is gone: its outputs may no longer be what the code draws.

A digest leaves out what cannot change an output: the comments and blank lines of a Python file
(``digest``). Files no execution reads (tests, docs, tools) are never recorded, so changing them
stales nothing.

    python tools/notebook_sources.py              # which committed notebooks are stale, and why (exit 1 if any)
    python tools/notebook_sources.py --list       # only their paths: make notebooks NB="$(... --list)"
    python tools/notebook_sources.py book/05_input_pipeline.ipynb   # some notebooks only
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOOK_DIR = Path(__file__).resolve().parent / "source_log"
LOG_ENV, ROOT_ENV = "GOODPUTLAB_SOURCES_LOG", "GOODPUTLAB_SOURCES_ROOT"
PACKAGE = "goodputlab"
MISSING = "missing"


def digest(path: Path) -> str:
    """A short SHA-256 of a file's content; for Python, of its code without comments and blank lines.

    Comments are found by the tokenizer (a ``#`` inside a string stays); what is left is compared
    line by line with trailing spaces dropped, so re-wording a comment or adding a blank line keeps
    the digest, and any change to code, strings or docstrings changes it. ``missing`` for no file.
    """
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return MISSING
    if path.suffix == ".py":
        data = _without_comments(data)
    return hashlib.sha256(data).hexdigest()[:16]


def _without_comments(data: bytes) -> bytes:
    try:
        tokens = list(tokenize.tokenize(io.BytesIO(data).readline))
    except (tokenize.TokenError, SyntaxError):
        return data  # not valid Python: compare it as it is
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    for tok in reversed(tokens):  # from the end, so earlier columns stay valid
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    kept = [line.rstrip() for line in lines if line.strip()]
    return "\n".join(kept).encode("utf-8", "surrogateescape")


def recording_env(log: Path, root: Path = ROOT) -> dict[str, str]:
    """The environment variables that make every Python process of an execution log what it uses."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(HOOK_DIR) + (os.pathsep + path if path else ""),
            LOG_ENV: str(log), ROOT_ENV: str(Path(root).resolve())}


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of a module of the package (``goodputlab.engine.api`` -> ``goodputlab/engine/api.py``)."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def read_log(log: Path, root: Path = ROOT) -> list[str]:
    """The files (paths relative to ``root``) that a log says the execution used, sorted."""
    used = set()
    text = log.read_text() if log.is_file() else ""
    for line in text.splitlines():
        kind, _, what = line.partition(" ")
        if kind == "module":
            path = module_file(what, root)
            if path is not None:
                used.add(path.relative_to(root).as_posix())
        elif kind == "file" and what:
            used.add(Path(what).as_posix())
    return sorted(used)


def record(files: list[str], root: Path = ROOT) -> dict[str, str]:
    """``{path: digest}`` of the files an execution used (what ``goodputlab.sources`` holds)."""
    return {f: digest(root / f) for f in files}


@dataclass
class Freshness:
    """One notebook against the files now: ``changed`` (recorded digest, now different or missing)."""

    notebook: str
    recorded: bool
    changed: list[str] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        return not self.recorded or bool(self.changed)

    def reason(self) -> str:
        if not self.recorded:
            return "has no record of the code it ran on (executed before the record existed)"
        shown = ", ".join(self.changed[:6]) + (f" and {len(self.changed) - 6} more" if len(self.changed) > 6 else "")
        return f"predates a change to {shown}"


def check(notebook: Path, root: Path = ROOT, cache: dict[str, str] | None = None) -> Freshness:
    """Whether ``notebook``'s outputs come from the files as they are now under ``root``."""
    import json

    meta = json.loads(Path(notebook).read_text()).get("metadata", {}).get(PACKAGE, {})
    sources = meta.get("sources")
    name = str(notebook)
    if not isinstance(sources, dict) or not sources:
        return Freshness(name, recorded=False)
    cache = {} if cache is None else cache
    changed = []
    for path, recorded in sorted(sources.items()):
        if path not in cache:
            cache[path] = digest(root / path)
        if cache[path] != recorded:
            changed.append(path)
    return Freshness(name, recorded=True, changed=changed)


def committed_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks committed with outputs: what ``make notebooks`` executes (its ``NB``)."""
    found = []
    for pattern in ("book/[0-9]*.ipynb", "labs/[0-9]*.ipynb", "labs/dashboard.ipynb", "labs/solutions/[0-9]*.ipynb"):
        found += sorted(root.glob(pattern))
    return found


def main(args: list[str]) -> int:
    only_paths = "--list" in args
    root = Path(next((a.split("=", 1)[1] for a in args if a.startswith("--root=")), ROOT))
    paths = [Path(a) for a in args if not a.startswith("--")] or committed_notebooks(root)
    cache: dict[str, str] = {}
    stale = [f for f in (check(p, root, cache) for p in paths) if f.stale]
    for f in stale:
        shown = _relative(f.notebook, root)
        print(shown if only_paths else f"{shown}: {f.reason()}")
    if not only_paths:
        print(f"{len(stale)} of {len(paths)} notebooks stale" + ("; to re-execute them:\n"
              '  make notebooks NB="$(.venv/bin/python tools/notebook_sources.py --list)"' if stale else ""))
    return 1 if stale and not only_paths else 0


def _relative(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
