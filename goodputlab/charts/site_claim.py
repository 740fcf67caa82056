"""The claim explainer on the website: chapter 10's :class:`~goodputlab.widgets.ClaimPanel`, with no kernel.

A reader picks the lever, the goodput before and after, the GPUs and the model size, and may pin what
they know (the storage or the save, the restart, the detection); the page shows how it reads the
lever, what must be true (the job's MTBF and the lever's setting), each value against its published
range, the two goodputs read as ETTR, and the verdict, as :func:`goodputlab.theory.claim.explain`
gives them.

Why JavaScript and not Vega expressions, as the other calculators: ``explain`` nests bisections (the
``async`` and ``memory`` levers bisect over the storage bandwidth, each step bisects over the MTBF,
each of those over the best interval). Counted on the chapter's example (``async``, 85% to 95% on
8,192 GPUs): 2,403 bisections of 46 steps (median; 47 at most), about 110,000 evaluations, 0.2 s in
Python. Vega's expressions have no loops or variables, so each step would be a formula transform of
its own, as the capstone unrolls its search (:mod:`~goodputlab.charts.site_capstone`): some 110,000
transforms per claim, a spec of megabytes that Vega would re-run at every keystroke. Instead
``site_static/claim.js`` is ``claim.py`` line for line (50 ms for an ``async`` claim, under 2 ms for
the levers without nesting, in V8 on this 2-core machine at load 8), and everything it reads the claim against (:data:`~goodputlab.theory.claim.RANGES`, the
cluster's defaults, the checkpoint's bytes per parameter, the labels) comes from the Python into the
page's config (:func:`constants`). ``tests/test_site_claim.py`` runs ``claim.js`` in Chromium at
sampled claims of every lever (plausible, implausible, without a solution, at the inputs' ends) and
holds each implied and assumed value to 1e-9 relative and each reason and note to its text.
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..theory import claim as model
from ..theory.checkpoint_cost import bytes_per_parameter
from .site_pages import PAGES_DIR, STATIC, STATIC_DIR, html_page

SCRIPTS = ("claim.js", "claim-page.js")


@dataclass(frozen=True)
class ClaimPage:
    """The claim explainer's page (a chapter links to it as to a calculator: ``slug``, ``title``, ``chapter``)."""

    slug: str = "claim"
    title: str = "Explain a claim about goodput"
    chapter: str = "book/10_your_cluster"
    defaults: tuple = (("lever", "memory"), ("before_pct", 85.0), ("after_pct", 95.0), ("gpus", 8192),
                       ("model_params_b", 70.0))  # the chapter's panel's


CLAIM = ClaimPage()


def constants() -> dict:
    """What ``claim.js`` reads a claim against, from :mod:`goodputlab.theory.claim` (one source)."""
    return {
        "levers": list(model.LEVERS),
        "tolerance": model.TOLERANCE,
        "ranges": {key: dataclasses.asdict(r) for key, r in model.RANGES.items()},
        "cluster": dataclasses.asdict(model.ClaimCluster()),
        # explain()'s checkpoint: mixed-precision Adam, a sharded save of equal shares (checkpoint_cost's defaults)
        "checkpoint_bytes_per_parameter": bytes_per_parameter().checkpoint,
        "what": model.WHAT,
        "labels": model.LABELS,
        "reading": model.READING,
        "consistency": model.CONSISTENCY,
    }


def page_path(page: ClaimPage = CLAIM) -> str:
    return f"{PAGES_DIR}/{page.slug}.html"


def _page(page: ClaimPage, chapter_title: str, shell: str | None = None) -> str:
    config = {"constants": constants(), "defaults": dict(page.defaults)}
    title = html.escape(chapter_title)
    body = f"""<p>"A RAM copy of each checkpoint took our goodput from 85% to 95% on 8,192 GPUs." A claim like this has two
numbers, so it pins two unknowns of chapter 10's model: how often the job failed, and the setting the lever
changed. This page finds both and holds each against the range published for it.</p>
<form id="controls" onsubmit="return false"></form>
<p id="verdict" class="verdict"></p>
<p id="reading" class="note"></p>
<p id="ettr"></p>
<table id="outputs"></table>
<ul id="checks"></ul>
<ul id="reasons"></ul>
<p class="note">What a claim leaves unsaid is the chapter's defaults: a 90 s detection, a 5-minute restart,
Llama 3's storage bandwidth per GPU, a 70B model in mixed precision with Adam; pin what you know instead
(blank: the default). Each published range runs from the slowest published cluster to the fastest; an
implied value more than {model.TOLERANCE:g} times outside it, or two goodputs that contradict each other,
makes the claim implausible. <b>Goodput</b> is productive compute over the wall time; <b>ETTR</b>, Meta's
effective training time ratio, counts a save as training time, as papers such as Llama 3 report it. The model is
<code>goodputlab.theory.claim</code>, run in your browser as JavaScript (a test holds it to the Python
package to 1e-9): no server, no kernel, nothing downloaded. Back to <a href="../{page.chapter}.html">{title}</a>.</p>"""
    return html_page(page.title, SCRIPTS, "claim-config", config, page.chapter, chapter_title, body, shell)


def write_page(site: str | Path, chapter_titles: Mapping[str, str] | None = None, page: ClaimPage = CLAIM,
               shell: str | None = None) -> Path:
    """Write the claim page and its two scripts into a built site (into the book's themed ``shell``, when
    given: :func:`~goodputlab.charts.site_pages.html_page`); returns the page."""
    site = Path(site)
    static = site / STATIC_DIR
    static.mkdir(parents=True, exist_ok=True)
    for name in SCRIPTS:
        (static / name).write_text((STATIC / name).read_text())
    path = site / page_path(page)
    path.parent.mkdir(parents=True, exist_ok=True)
    title = (chapter_titles or {}).get(page.chapter, page.chapter.rsplit("/", 1)[-1])
    path.write_text(_page(page, title, shell))
    return path
