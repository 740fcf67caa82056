"""The book as a static website: Sphinx + MyST-NB + sphinx-book-theme (``make book``).

Why Sphinx and not Jupyter Book 2: Jupyter Book 2's HTML build downloads its theme while it builds
and fails without a network; Sphinx, MyST-NB and the book theme come from the package registry
(the ``site`` extra) and build offline. MathJax is served from the site itself
(sphinx-mathjax-offline), so reading the site needs no network either.

The source folder is the repository root (``sphinx-build -c book . book/_build/html``), so the
chapters (book/*.ipynb) and the labs (labs/**) keep their paths; ``include_patterns`` picks them
up by glob, so a new chapter or lab is on the site without editing this file. Nothing is executed:
the pages show the committed outputs.

The calculators run in the page with no kernel: ``goodputlab/charts/site_calculators.py`` writes them
into ``calculators/`` when the build has finished (Vega evaluates the package's formulas), and each
chapter that has one links to it from its top.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import launch_links  # noqa: E402  (the one place launch links are built)

from goodputlab.charts import site_calculators  # noqa: E402  (the calculators that run in the page)

project = "goodputlab"
author = "the goodputlab authors"
copyright = "the goodputlab authors, Apache-2.0"

extensions = ["myst_nb", "sphinx-mathjax-offline", "sphinx.ext.autodoc"]  # autodoc: book/api.md
autodoc_mock_imports = ["transformers", "lightning"]  # the callbacks' frameworks: not in the site's install
root_doc = "book/index"
include_patterns = ["book/*.md", "book/*.ipynb", "labs/*.ipynb", "labs/*.md", "labs/solutions/*.ipynb", "docs/*.md"]
exclude_patterns = ["**/_build", "**/.ipynb_checkpoints", ".venv", "**/node_modules"]

# --- notebooks: committed outputs, no execution ------------------------------------------------
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
# The committed outputs carry static figures (image/png); a live widget view cannot draw without a
# kernel, so images come first, and no ipywidgets JavaScript is loaded (it would come from a CDN).
nb_mime_priority_overrides = [
    # a sentence rendered from the data (gl.say) carries Markdown and HTML: the site reads the Markdown,
    # so its links to references.md resolve as a markdown cell's do
    ("html", "text/markdown", 4),
    ("html", "image/png", 5),
    ("html", "image/svg+xml", 6),
    ("html", "application/vnd.jupyter.widget-view+json", 100),
]
nb_ipywidgets_js = {}
nb_render_markdown_format = "myst"  # rendered sentences: MyST, as the markdown cells (links, emphasis)
# chapter text uses \* inside math (a markdown escape): MathJax sees the same characters
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]

# --- the theme -----------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "goodputlab: training goodput, measured"
html_static_path = ["_static"]
html_css_files = ["reader.css"]  # code and outputs that wrap, captions, self-checks, figures on a phone
html_js_files = ["reader.js"]  # display maths scaled to the column
html_theme_options = {
    "repository_url": launch_links.repository_url(),
    "repository_branch": launch_links.BRANCH,
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {"binderhub_url": launch_links.BINDER, "notebook_interface": "jupyterlab"},
    "show_toc_level": 2,
}
html_last_updated_fmt = None


def _binder_button(app, pagename, templatename, context, doctree):
    """Point the theme's Binder button at the same URL as the chapter's own link (``labpath=``)."""
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("text") == "Binder":
                source = app.env.doc2path(pagename)
                button["url"] = launch_links.binder_url(Path(source).relative_to(ROOT).as_posix())


def _calculator_links(app, pagename, templatename, context, doctree):
    """A chapter with a live calculator says so at its top (the notebooks stay as they are)."""
    calcs = site_calculators.for_chapter(pagename)
    if calcs and "body" in context:
        context["body"] = "".join(site_calculators.chapter_banner(c, pagename) for c in calcs) + context["body"]


SHELL = f"{site_calculators.PAGES_DIR}/_shell"  # a page of the book's theme, for the live pages to fill


def _calculator_shell(app):
    """One page of the book's theme (header, sidebar, footer) with placeholders for a title and a body: the
    live pages (calculators, the claim explainer, the recorded runs) are written into it, so they wear the
    book's theme and sidebar. It sits where they do, so its relative links hold for them."""
    yield SHELL, {"title": site_calculators.SHELL_TITLE, "body": site_calculators.SHELL_BODY}, "page.html"


def _write_calculators(app, exception):
    """The calculator pages and their shared JavaScript (goodputlab/charts/site_calculators.py)."""
    if exception is None and app.builder.format == "html":
        titles = {name: app.env.titles[name].astext() for name in app.env.titles}
        shell = Path(app.outdir) / f"{SHELL}.html"
        # the Vega bundle is kept in book/_build (ignored by git) between builds: making it takes seconds
        site_calculators.write_site(app.outdir, titles, cache=ROOT / "book" / "_build" / "vega", shell=shell.read_text())
        shell.unlink()


def _redirect_root(app, exception):
    """``index.html`` at the site's root opens the book's front page."""
    if exception is None and app.builder.format == "html":
        (Path(app.outdir) / "index.html").write_text(
            '<!doctype html><meta charset="utf-8"><title>goodputlab</title>'
            '<meta http-equiv="refresh" content="0; url=book/index.html">'
            '<a href="book/index.html">goodputlab</a>\n'
        )


_HTML_ANCHOR = re.compile(r"""<a\s+id=["']([^"']+)["']\s*>""")  # MyST: the </a> is a node of its own


def _html_anchors(app, doctree):
    """Register the ``<a id="young-1974"></a>`` anchors of a page (book/references.md: they work on
    GitHub and in JupyterLab too) as labels, so ``[Young 1974](references.md#young-1974)`` resolves
    (MyST only knows headings and explicit targets)."""
    std = app.env.domains.standard_domain
    for node in doctree.findall(nodes.raw):
        if node.get("format") == "html":
            for anchor in _HTML_ANCHOR.findall(node.astext()):
                std.anonlabels[anchor] = (app.env.docname, anchor)


def setup(app):
    app.connect("doctree-read", _html_anchors)
    # after the theme's own handler (priority 501), which builds the launch buttons
    app.connect("html-page-context", _binder_button, priority=900)
    app.connect("html-page-context", _calculator_links)
    app.connect("build-finished", _redirect_root)
    app.connect("html-collect-pages", _calculator_shell)
    app.connect("build-finished", _write_calculators)
