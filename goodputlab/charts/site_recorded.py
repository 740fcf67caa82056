"""Recorded runs on the website: pick one of the runs that ship with the package by its levers, see its
timeline and where its time went, with no kernel.

``make book`` writes ``calculators/recorded.html`` (the recordings' index: each run's levers, goodput,
failures and shares, from :func:`goodputlab.recorded_runs` and its summary) and, per recording,
``calculators/recorded/<name>.js``: the Vega-Lite specs of the package's own charts of that run
(:func:`goodputlab.charts.runs.timeline` of its ledger, :func:`~goodputlab.charts.runs.breakdown` of its
summary), the charts a notebook draws for ``gl.recorded_run(name)``. A page loads a run's file when the
reader picks it (a script tag: it works from disk too), so the index stays small. Building a run's
charts reads its event log and builds two Altair charts (about 0.5 s a run on a loaded 2-core machine), so each file is kept in a cache
folder under a key of what it is made from (the recording's files and the charts' code) and made again
only when one of those changes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

from altair.utils import schemapi

from ..engine.recorded import EVENTS_NAME, RECORDED_DIR, SUMMARY_NAME, recorded_run, recorded_runs
from . import runs as run_charts
from .site_pages import BUNDLE, PAGES_DIR, STATIC, STATIC_DIR, html_page

SLUG = "recorded"
TITLE = "Recorded runs: pick one by its levers"
SCRIPT = "recorded-page.js"
CHAPTER = "book/01_what_is_goodput"  # the nav bar's chapter: where runs and their ledgers begin
#: The levers a reader picks by: (key, label, the run's setting).
LEVERS = (("interval_steps", "checkpoint every (steps)", "ckpt_every"), ("mtbf_s", "MTBF (s; 0: scripted kills)", "mtbf"),
          ("hot_spare", "hot spare", "hot_spare"), ("strategy", "checkpoint strategy", "ckpt"),
          ("failure_mode", "failure mode", "failure_mode"))


def page_path() -> str:
    return f"{PAGES_DIR}/{SLUG}.html"


def data_path(name: str) -> str:
    return f"{PAGES_DIR}/{SLUG}/{name}.js"


def index(folder: Path = RECORDED_DIR) -> list[dict]:
    """One row per recording: its name, title, chapters, levers and its summary's figures."""
    rows = []
    for name, rec in recorded_runs(folder).items():
        config = rec.config
        summary = json.loads((folder / name / SUMMARY_NAME).read_text())
        rows.append({
            "name": name, "title": rec.title, "chapters": list(rec.chapters),
            "levers": {key: getattr(config, field) for key, _, field in LEVERS},
            "goodput": rec.goodput, "failures": rec.failures, "wall_s": rec.wall_s,
            "shares": summary.get("shares", {}),
        })
    return rows


def _fit(spec: dict) -> dict:
    """The chart as wide as the page (a phone's too), not the notebook's 680 px; its legend under the plot in
    rows, where a strip of one or two attempts leaves it room (beside it, a legend taller than the strip
    was cut off after five or six entries)."""
    config = dict(spec.get("config", {}))
    # three entries a row fit a phone; text of 11 px and more stays legible there
    config["legend"] = {**config.get("legend", {}), "orient": "bottom", "direction": "horizontal", "columns": 3,
                        "labelFontSize": 11, "titleFontSize": 12, "labelLimit": 120}
    config["axis"] = {**config.get("axis", {}), "labelFontSize": 11, "titleFontSize": 12}
    config["title"] = {**config.get("title", {}), "fontSize": 13}
    return dict(spec, width="container", autosize={"type": "fit-x", "contains": "padding"}, config=config)


def charts(name: str, folder: Path = RECORDED_DIR, validate: bool = False) -> dict:
    """The run's two charts as Vega-Lite specs: the package's timeline and breakdown of ``recorded_run(name)``.

    Altair checks every row of a chart's data against the Vega-Lite schema as it builds it, which was
    four fifths of the time (8.5 s against 1.6 s for six runs); the spec is the same either way
    (``tests/test_site_recorded.py`` compares them), and these charts are checked where the chapters draw
    them, so the site skips it unless ``validate``.
    """
    result = recorded_run(name, folder)
    with schemapi.debug_mode(validate):
        timeline = run_charts.timeline(result.ledger).to_dict(validate=validate)
        breakdown = run_charts.breakdown(result.summary).to_dict(validate=validate)
    return {"timeline": _fit(timeline), "breakdown": _fit(breakdown)}


def _key(name: str, folder: Path) -> str:
    """What a run's file is made from: its recording and the code that draws it."""
    h = hashlib.sha256()
    for path in (folder / name / EVENTS_NAME, folder / name / SUMMARY_NAME, Path(run_charts.__file__), Path(__file__)):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _data_script(name: str, folder: Path, cache: Path | None) -> str:
    kept = cache / f"{name}-{_key(name, folder)}.js" if cache is not None else None
    if kept is not None and kept.exists():
        return kept.read_text()
    data = json.dumps(charts(name, folder)).replace("<", "\\u003c")
    text = f"window.RECORDED_RUNS = window.RECORDED_RUNS || {{}};\nwindow.RECORDED_RUNS[{json.dumps(name)}] = {data};\n"
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(kept)
    return text


def _page(rows: list[dict], chapter_title: str, shell: str | None = None) -> str:
    config = {"runs": rows, "levers": [[key, label] for key, label, _ in LEVERS], "data_dir": SLUG}
    body = """<p>Real runs of the lab's training job, recorded with the package (a real process, really killed and
restarted; <code>gl.recorded_runs()</code> lists them). Choose the levers, then a run: its timeline (one strip
per attempt, each failure marked) and where its wall time went.</p>
<form id="controls" onsubmit="return false"></form>
<ul id="matches"></ul>
<table id="outputs"></table>
<div id="timeline" class="chart"></div>
<div id="breakdown" class="chart"></div>
<p class="note">These are recordings: their numbers are fixed. A live run in JupyterLab (or on Binder, a
click from each chapter) trains the model for real on your machine with any setting, not only these: another
interval, MTBF, strategy or failure mode, its own seed, your own training loop through <code>gl.Recorder</code>,
and the simulator and sweeps the chapters run beside it. Charts drawn in your browser, nothing downloaded.</p>"""
    return html_page(TITLE, (BUNDLE, SCRIPT), "recorded-config", config, CHAPTER, chapter_title, body, shell)


def write_page(site: str | Path, chapter_titles: Mapping[str, str] | None = None, folder: Path = RECORDED_DIR,
               cache: str | Path | None = None, names: list[str] | None = None, shell: str | None = None) -> Path:
    """Write the recorded runs' page, its script and one data file per run into a built site; returns the page.

    ``cache``: a folder that keeps each run's charts between builds; ``names``: only these runs (a test);
    ``shell``: the book's themed page it is written into (:func:`~goodputlab.charts.site_pages.html_page`).
    """
    site = Path(site)
    (site / STATIC_DIR).mkdir(parents=True, exist_ok=True)
    (site / STATIC_DIR / SCRIPT).write_text((STATIC / SCRIPT).read_text())
    rows = [r for r in index(folder) if names is None or r["name"] in names]
    for row in rows:
        path = site / data_path(row["name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_data_script(row["name"], folder, Path(cache) if cache is not None else None))
    page = site / page_path()
    title = (chapter_titles or {}).get(CHAPTER, CHAPTER.rsplit("/", 1)[-1])
    page.write_text(_page(rows, title, shell))
    return page
