"""The measuring docs on the site (issue 46, item 8): book/index.md lists the "Measure your own job" page
(docs/RECORDER.md included) and the API reference, and every object the reference documents exists and has a
docstring (autodoc would print an empty entry otherwise). The full build is tests/test_site.py's (make book)."""

from __future__ import annotations

import importlib
import re

import pytest

from conftest import ROOT

API = ROOT / "book" / "api.md"
DIRECTIVE = re.compile(r"^\.\. auto(?:class|function|exception|module):: ([\w.]+)$", re.M)


def test_the_pages_are_in_the_sites_table_of_contents():
    index = (ROOT / "book" / "index.md").read_text()
    assert re.search(r":caption: Measure your own job\n:maxdepth: 1\n\nmeasure\napi\n", index)
    assert "```{include} ../docs/RECORDER.md" in (ROOT / "book" / "measure.md").read_text()
    conf = (ROOT / "book" / "conf.py").read_text()
    assert '"sphinx.ext.autodoc"' in conf


@pytest.mark.parametrize("target", DIRECTIVE.findall(API.read_text()))
def test_every_documented_object_exists_with_a_docstring(target):
    pytest.importorskip("transformers")
    pytest.importorskip("lightning")
    module, _, name = target.rpartition(".")
    try:
        obj = importlib.import_module(target)
    except ImportError:
        obj = getattr(importlib.import_module(module), name)
    assert (obj.__doc__ or "").strip(), f"{target} has no docstring"


def test_every_member_the_reference_lists_exists():
    for block in re.findall(r"\.\. autoclass:: ([\w.]+)\n   :members: ([\w, ]+)", API.read_text()):
        target, members = block
        module, _, name = target.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        for member in (m.strip() for m in members.split(",")):
            assert (getattr(cls, member).__doc__ or "").strip(), f"{target}.{member} has no docstring"
