"""Launch links, built in one place: the Binder badge in the README, the launch link in the first
cell of every chapter and lab, the site's launch button (book/conf.py imports this module), and the
README's clone commands.

    python tools/launch_links.py            # rewrite the links that are out of date
    python tools/launch_links.py --check    # exit 1 and name the files whose links are out of date

The repository is ``[project.urls] Repository`` in pyproject.toml. A link opens the notebook in
JupyterLab on mybinder.org (``labpath=``), on the branch ``BRANCH``.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
BINDER = "https://mybinder.org"
BRANCH = "main"
#: the cell tag of a notebook's launch link (the site and the tests find it by this tag)
TAG = "launch-link"
README_START, README_END = "<!-- launch-links: start -->", "<!-- launch-links: end -->"
#: a clone command in the README (it must name the repository of pyproject.toml too)
CLONE = re.compile(r"git clone https://github\.com/[\w.-]+/[\w.-]+ && cd [\w.-]+")


def repository_url() -> str:
    """``https://github.com/ORG/REPO`` from pyproject.toml's ``[project.urls] Repository``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    url = project["urls"]["Repository"].rstrip("/")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"[project.urls] Repository must be https://github.com/ORG/REPO, got {url!r}")
    return url


def binder_url(path: str | None = None) -> str:
    """The mybinder.org URL that builds the repository and opens ``path`` (relative to the
    repository root) in JupyterLab; the whole repository when ``path`` is None."""
    org_repo = repository_url().removeprefix("https://github.com/")
    url = f"{BINDER}/v2/gh/{org_repo}/{BRANCH}"
    return url if path is None else f"{url}?labpath={quote(path, safe='')}"


def notebooks() -> list[Path]:
    """Every chapter and lab (solutions included), in reading order."""
    found = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "labs").rglob("*.ipynb"))
    return [p for p in found if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts]


def launch_cell_source(rel: str) -> str:
    """The markdown of the launch link at the top of notebook ``rel`` (a plain link: a badge image
    would be fetched from the network by every reader of the site)."""
    kind = "lab" if rel.startswith("labs/") else "chapter"
    return (
        f"[Open this {kind} in JupyterLab on Binder]({binder_url(rel)}) "
        "(a free machine with the book installed; about 2 GB of memory, no GPU)"
    )


def sync_notebook(path: Path, write: bool) -> bool:
    """True when the notebook's launch cell was missing or stale (and rewritten if ``write``)."""
    import nbformat

    rel = path.relative_to(ROOT).as_posix()
    nb = nbformat.read(path, as_version=4)
    want = launch_cell_source(rel)
    have = [i for i, c in enumerate(nb.cells) if TAG in c.get("metadata", {}).get("tags", [])]
    if have == [0] and nb.cells[0].cell_type == "markdown" and nb.cells[0].source == want:
        return False
    if write:
        for i in reversed(have):
            del nb.cells[i]
        cell = nbformat.v4.new_markdown_cell(want, metadata={"tags": [TAG]})
        cell.id = "launch-link"
        nb.cells.insert(0, cell)
        nbformat.write(nb, path)
    return True


def readme_block() -> str:
    return (
        f"{README_START}\n"
        f"[![Launch on Binder]({BINDER}/badge_logo.svg)]({binder_url('book/01_what_is_goodput.ipynb')})\n"
        f"{README_END}"
    )


def sync_readme(write: bool) -> bool:
    readme = ROOT / "README.md"
    text = readme.read_text()
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no {README_START} ... {README_END} block for the Binder badge")
    new = pattern.sub(lambda _: readme_block(), text)
    # the clone commands name the same repository
    repo = repository_url()
    new = CLONE.sub(lambda _: f"git clone {repo} && cd {repo.rsplit('/', 1)[1]}", new)
    if new == text:
        return False
    if write:
        readme.write_text(new)
    return True


def main(args: list[str]) -> int:
    write = "--check" not in args
    stale = [p.relative_to(ROOT).as_posix() for p in notebooks() if sync_notebook(p, write)]
    if sync_readme(write):
        stale.append("README.md")
    if stale and not write:
        print("launch links out of date (run python tools/launch_links.py):", ", ".join(stale))
        return 1
    for rel in stale:
        print(f"updated the launch link of {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
