"""Launch links: the README's Binder badge and the first cell of every chapter and lab open that
notebook in JupyterLab on Binder (labpath=), and all are built by tools/launch_links.py."""

from __future__ import annotations

import json
import re
import sys
from urllib.parse import parse_qs, urlparse

from conftest import NOTEBOOKS, ROOT

sys.path.insert(0, str(ROOT / "tools"))
import launch_links  # noqa: E402


def _binder_target(url: str) -> tuple[str, str]:
    """(``ORG/REPO/BRANCH``, the notebook path) of a mybinder.org launch URL."""
    u = urlparse(url)
    assert (u.scheme, u.netloc) == ("https", "mybinder.org"), url
    assert u.path.startswith("/v2/gh/"), url
    query = parse_qs(u.query)
    assert set(query) == {"labpath"}, f"open the notebook in JupyterLab with labpath=: {url}"
    return u.path.removeprefix("/v2/gh/"), query["labpath"][0]


def test_every_chapter_and_lab_starts_with_its_launch_link():
    assert set(NOTEBOOKS) == {p.relative_to(ROOT).as_posix() for p in launch_links.notebooks()}
    repo = launch_links.repository_url().removeprefix("https://github.com/")
    for rel in NOTEBOOKS:
        first = json.loads((ROOT / rel).read_text())["cells"][0]
        assert first["cell_type"] == "markdown" and launch_links.TAG in first["metadata"].get("tags", []), (
            f"{rel}: the first cell is not the launch link (run .venv/bin/python tools/launch_links.py)"
        )
        urls = re.findall(r"\]\((https://[^)]+)\)", "".join(first["source"]))
        assert len(urls) == 1, urls
        where, path = _binder_target(urls[0])
        assert where == f"{repo}/{launch_links.BRANCH}"
        assert path == rel, f"{rel}'s link opens {path}"


def test_readme_has_the_binder_badge():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"\[!\[[^\]]*\]\(https://mybinder\.org/badge_logo\.svg\)\]\((https://[^)]+)\)", readme)
    assert m, "no Binder badge in README.md"
    _, path = _binder_target(m.group(1))
    assert (ROOT / path).is_file(), path


def test_links_are_up_to_date():
    """The one place: every link is what tools/launch_links.py builds from pyproject's Repository."""
    assert launch_links.main(["--check"]) == 0


def test_repository_url_is_read_from_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'Repository = "{launch_links.repository_url()}"' in text


def test_every_github_address_in_the_docs_is_the_one_setting():
    """The repository is named once (pyproject's Repository); the README's badge and clone commands
    and the docs derive from it, so changing the setting and running the tool changes every one."""
    repo = launch_links.repository_url()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "labs" / "INSTRUCTOR.md"]:
        for found in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", doc.read_text()):
            if found.split("/")[3] in ("pytorch", "google", "AI-Hypercomputer", "karpathy", "d2l-ai"):
                continue  # the projects the book cites
            assert found == repo, f"{doc.name} names {found}, not the repository setting {repo}"
    readme = (ROOT / "README.md").read_text()
    assert launch_links.CLONE.search(readme)  # the clone command is one the tool rewrites
