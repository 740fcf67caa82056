"""The website calculators' pages: what a calculator is (sliders, signals, a chart) and how its page is written.

:mod:`goodputlab.charts.site_calculators` defines the calculators and :func:`write_pages` writes them:
one small HTML page per calculator into ``<site>/calculators/``, and the JavaScript they share into
``<site>/_static/calculators/``: Vega, Vega-Lite and vega-embed in one bundle from vl-convert-python
(about 0.9 MB, loaded once and cached for every page, never from a CDN) and ``calculator.js``, which
draws the controls and the numbers. A page's config carries its spec (:meth:`Calculator.spec`: Vega-Lite,
or Vega for the capstone, :mod:`goodputlab.charts.site_capstone`), its sliders and the outputs to show.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

STATIC = Path(__file__).with_name("site_static")
#: Where the pages and the shared JavaScript go, relative to the site's root.
PAGES_DIR = "calculators"
STATIC_DIR = "_static/calculators"
BUNDLE = "vega-bundle.js"
#: the schemas of the Vega-Lite and Vega that the bundle loads (vl-convert's), so vega-embed does not warn
VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
VEGA_SCHEMA = "https://vega.github.io/schema/vega/v6.json"

Refs = Mapping[str, str]  # a name -> its expression: the signal itself on a page, ``datum.name`` in a test


@dataclass(frozen=True)
class Slider:
    """One input: ``lo``..``hi`` in the unit shown; ``scale`` is ``log``, ``linear`` or ``pow2``.

    ``zero`` adds 0 at the slider's left end of a log scale (free saves, instant restarts).
    """

    name: str
    label: str
    lo: float
    hi: float
    value: float
    scale: str = "log"
    zero: bool = False
    step: float = 1.0
    options: tuple[str, ...] = ()  # a choice (drawn as a list): ``value`` is one of them, lo/hi unused
    #: ``(control, values)``: shown only while that control has one of these values (elsewhere it changes nothing)
    shown_when: tuple[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class Signal:
    """A computed value: ``expr`` writes its Vega expression, ``model`` computes it in Python.

    ``kind`` says how the page writes it: ``duration`` (seconds, as ``human_duration``), ``share``
    (a percentage), ``number`` (3 significant digits), ``count`` (a whole number with separators);
    ``label`` empty: used by other signals and the chart, not shown.
    """

    name: str
    expr: Callable[[Refs], str]
    model: Callable[[Mapping[str, float]], float]
    label: str = ""
    kind: str = "number"


@dataclass(frozen=True)
class Extra:
    """Outputs a page script computes rather than Vega: a simulation, whose loops Vega's expressions
    cannot hold. ``script`` (in ``site_static``) defines ``window[model].outputs(values, data)``, which
    returns ``{name: value}`` from the signals named in ``inputs`` and ``data()`` (JSON the build writes
    into the page). Each output is shown like a signal; its ``model`` computes it in Python (for the
    tests; its ``expr`` is unused), ``none`` is what the page shows when it is NaN (no answer)."""

    script: str
    model: str
    inputs: tuple[str, ...]
    outputs: tuple[Signal, ...]
    data: Callable[[], dict]
    none: str = "not computed"


@dataclass(frozen=True)
class Calculator:
    slug: str
    title: str
    chapter: str  # the chapter's page, e.g. "book/03_checkpoint_interval"
    intro: str  # HTML
    sliders: tuple[Slider, ...]
    signals: tuple[Signal, ...]  # in dependency order
    chart: Callable[[], dict]  # a Vega-Lite spec whose expressions use the signals by name
    note: str = ""  # HTML
    extra: Extra | None = None  # outputs a page script computes (a simulation)

    def vega_lite(self) -> dict:
        """The page's whole Vega-Lite spec: the sliders and signals as parameters, and the chart."""
        names = {s.name: s.name for s in (*self.sliders, *self.signals)}
        params = [{"name": s.name, "value": s.value} for s in self.sliders]
        params += [{"name": s.name, "expr": s.expr(names)} for s in self.signals]
        spec = self.chart()
        return {
            "$schema": VEGA_LITE_SCHEMA,
            "params": params,
            "width": "container",
            "height": 260,
            "autosize": {"type": "fit-x", "contains": "padding"},
            **spec,
        }

    def spec(self) -> dict:
        """What the page hands to vega-embed (here Vega-Lite)."""
        return self.vega_lite()

    def model(self, inputs: Mapping[str, float]) -> dict[str, float]:
        """Every signal from the slider values, by the Python models."""
        values = dict(inputs)
        for s in self.signals:
            values[s.name] = s.model(values)
        return values


def outputs(calc) -> tuple[Signal, ...]:
    """What ``calc``'s page shows: its labelled signals, then its page script's outputs (:class:`Extra`).
    ``calc``: a :class:`Calculator`, or anything with its ``signals`` and ``extra`` (the capstone)."""
    return (*(s for s in calc.signals if s.label), *(calc.extra.outputs if calc.extra else ()))


def shown(calc, inputs: Mapping[str, float]) -> dict[str, float]:
    """Every output ``calc``'s page shows, from the slider values, by the Python models."""
    values = calc.model(inputs)
    scripted = {s.name for s in calc.extra.outputs} if calc.extra else set()
    return {s.name: (s.model(values) if s.name in scripted else values[s.name]) for s in outputs(calc)}


# --- the pages ------------------------------------------------------------------------------------


def page_path(calc: Calculator) -> str:
    """The calculator page's path from the site's root."""
    return f"{PAGES_DIR}/{calc.slug}.html"


#: the placeholders of the book's themed page (``book/conf.py`` renders it) that a live page fills
SHELL_TITLE = "@@goodputlab-live-title@@"
SHELL_BODY = "<!--goodputlab-live-body-->"


def html_page(title: str, scripts: tuple[str, ...], config_id: str, config: dict, chapter: str, chapter_title: str,
              body: str, shell: str | None = None) -> str:
    """A live page of the site: the shared style, its ``scripts`` (names in ``_static/calculators``, loaded
    deferred), its ``config`` as JSON in a script tag of id ``config_id``, a line that links the book,
    ``chapter`` (its page name, e.g. ``book/10_your_cluster``) and every calculator, the title, ``body``.

    ``shell``: a page of the book's theme holding :data:`SHELL_TITLE` and :data:`SHELL_BODY` (the site's
    build makes one in ``calculators/``), so the live page wears the book's header, sidebar and fonts;
    without it, a page of its own.
    """
    # </script> cannot occur in JSON of our own text, but escape "<" anyway: the JSON sits in a script tag
    data = json.dumps(config).replace("<", "\\u003c")
    static = f"../{STATIC_DIR}"
    tags = "\n".join(f'<script defer src="{static}/{name}"></script>' for name in scripts)
    content = f"""<div class="goodputlab-live">
<link rel="stylesheet" href="{static}/calculator.css">
{tags}
<script type="application/json" id="{config_id}">{data}</script>
<nav class="live-nav"><a href="../book/index.html">goodputlab</a> &middot; <a class="chapter" href="../{chapter}.html">{html.escape(chapter_title)}</a>
&middot; <a href="../book/calculators.html">all calculators</a></nav>
<h1>{html.escape(title)}</h1>
{body}
</div>"""
    if shell is not None:
        if SHELL_TITLE not in shell or SHELL_BODY not in shell:
            raise ValueError("the themed page has no placeholders for a live page's title and body")
        return shell.replace(SHELL_TITLE, html.escape(title)).replace(SHELL_BODY, content)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{html.escape(title)} | goodputlab</title>
</head>
<body class="goodputlab-standalone">
<main>
{content}
</main>
</body>
</html>
"""


def _page(calc: Calculator, chapter_title: str, shell: str | None = None) -> str:
    config = {
        "spec": calc.spec(),
        "sliders": [s.__dict__ for s in calc.sliders],
        "outputs": [{"name": s.name, "label": s.label, "kind": s.kind} for s in outputs(calc)],
    }
    scripts = (BUNDLE, "calculator.js")
    if calc.extra is not None:
        extra = calc.extra
        config["extra"] = {"model": extra.model, "inputs": list(extra.inputs), "data": extra.data()}
        for o in config["outputs"]:
            if any(o["name"] == e.name for e in extra.outputs):
                o["none"] = extra.none
        scripts = (BUNDLE, extra.script, "calculator.js")
    chapter = f"../{calc.chapter}.html"
    body = f"""<p>{calc.intro}</p>
<form id="controls" onsubmit="return false"></form>
<table id="outputs"></table>
<div id="chart"></div>
<p class="note">{calc.note} Runs in your browser: no server, no kernel, nothing downloaded.
Back to <a href="{chapter}">{html.escape(chapter_title)}</a>.</p>"""
    return html_page(calc.title, scripts, "calculator-config", config, calc.chapter, chapter_title, body, shell)


def vega_bundle(cache: str | Path | None = None) -> str:
    """Vega, Vega-Lite and vega-embed as one script (vl-convert-python's bundle, no network).

    Bundling takes seconds, so it is kept in ``cache`` (a folder; default the user's cache,
    :func:`goodputlab.charts.offline_js.folder`), one file per vl-convert version, and made again
    only when that version changes.
    """
    import vl_convert

    from .offline_js import kept

    return kept(f"vega-bundle-{vl_convert.__version__}.js", vl_convert.javascript_bundle, cache)


def write_pages(site: str | Path, calculators, chapter_titles: Mapping[str, str] | None = None,
                cache: str | Path | None = None, shell: str | None = None) -> list[Path]:
    """Write the ``calculators``' pages and the JavaScript they share into a built site; returns the pages.

    ``chapter_titles`` maps a chapter's page name to the title its link shows (Sphinx's titles);
    ``cache``: a folder that keeps the Vega bundle between builds (:func:`vega_bundle`); ``shell``: the
    book's themed page they are written into (:func:`html_page`).
    """
    site = Path(site)
    static = site / STATIC_DIR
    static.mkdir(parents=True, exist_ok=True)
    # in a function of its own: its top-level names (one is `_`) would clash with the theme's scripts', as
    # classic scripts share one global scope; it hands out vegaEmbed, vega and vegaLite through `window`
    (static / BUNDLE).write_text(f"(function () {{\n{vega_bundle(cache)}\n}})();\n")
    extras = {calc.extra.script for calc in calculators if calc.extra is not None}
    for name in ("calculator.js", "calculator.css", *sorted(extras)):
        (static / name).write_text((STATIC / name).read_text())
    written = []
    for calc in calculators:
        path = site / page_path(calc)
        path.parent.mkdir(parents=True, exist_ok=True)
        title = (chapter_titles or {}).get(calc.chapter, calc.chapter.rsplit("/", 1)[-1])
        path.write_text(_page(calc, title, shell))
        written.append(path)
    return written


def chapter_banner(calc: Calculator, from_page: str) -> str:
    """The note a chapter's page carries at its top: a link to its live calculator."""
    depth = from_page.count("/")
    href = "../" * depth + page_path(calc)
    return (
        '<div class="admonition tip calculator-link"><p class="admonition-title">Live calculator</p>'
        f'<p><a href="{href}">{html.escape(calc.title)}</a>: move the sliders in this browser, '
        "no kernel needed.</p></div>\n"
    )
