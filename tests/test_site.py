"""The book as a website: `make book` builds it offline, and a real browser reads every page.

The site is built once per session (as `make book` does, into a temporary folder), served on
127.0.0.1, and opened in headless Chromium through Playwright. Every request the browser makes
is routed through the test: anything that is not this server fails the test, so a page that
would fetch a script, a font or MathJax from a CDN cannot pass.

Needs Chromium (Debian's `chromium`; `.ci/run` installs it). Without it the browser tests are
skipped, unless GOODPUTLAB_REQUIRE_BROWSER=1 (set by CI), where a missing browser is a failure.
"""

from __future__ import annotations

import functools
import http.server
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import launch_links  # noqa: E402

pytestmark = pytest.mark.notebooks

LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# every chapter and lab page (the site picks them up by glob; so does this list)
PAGES = [p.relative_to(ROOT).with_suffix("").as_posix() for p in launch_links.notebooks()]


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """Build the site the way `make book` does (same command, same warnings-as-errors)."""
    out = tmp_path_factory.mktemp("site")
    html = out / "html"
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", "book",
         "-d", str(out / "doctrees"), ".", str(html)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"the site did not build:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    print(f"site built in {time.monotonic() - t:.1f} s")
    return html


def test_make_book_uses_the_same_command():
    """The fixture above builds what `make book` builds: the Makefile's recipe is that command."""
    recipe = subprocess.run(["make", "-n", "-C", str(ROOT), "--no-print-directory", "book", "SITE_STAMP="],
                            capture_output=True, text=True, check=True).stdout
    assert "sphinx-build -b html -q -W --keep-going -c book . book/_build/html" in recipe, recipe


def test_site_has_every_chapter_and_lab(site):
    assert (site / "index.html").read_text().count("book/index.html") >= 1
    front = (site / "book" / "index.html").read_text()
    for page in PAGES:
        assert (site / f"{page}.html").exists(), f"{page} is not on the site"
        href = os.path.relpath(site / f"{page}.html", site / "book").replace(os.sep, "/")
        assert f'href="{href}"' in front, f"{page} is not in the table of contents"
    assert (site / "search.html").exists() and (site / "searchindex.js").exists()


def test_site_pages_launch_their_notebook(site):
    """The theme's launch button and the chapter's own link open the same notebook (labpath=)."""
    for page in PAGES:
        html = (site / f"{page}.html").read_text()
        want = launch_links.binder_url(f"{page}.ipynb").replace("&", "&amp;")
        assert html.count(want) >= 1, f"{page}: no launch link to {want}"
        assert "urlpath=" not in html, f"{page}: a launch link that does not use labpath="


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser(chromium):
    return chromium


class Visit:
    """A browser page whose every request is checked: off-machine requests are aborted and
    recorded, and so is any local request that fails (a missing script, image or font)."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.outside: list[str] = []
        self.broken: list[str] = []
        self.errors: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("response", lambda r: r.status >= 400 and self.broken.append(f"{r.status} {r.url}"))
        self.page.on("requestfailed", lambda r: self.broken.append(f"failed {r.url}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        # requests under way: a page that fetches in the background (the search page fetches every hit's page
        # for its summary, and says "found" when it has *started* the last fetch) is left only once they end
        self.pending: set = set()
        self.page.on("request", lambda r: self.pending.add(r))
        self.page.on("requestfinished", lambda r: self.pending.discard(r))
        self.page.on("requestfailed", lambda r: self.pending.discard(r))

    def _route(self, route):
        url = route.request.url
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about") or parsed.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until no request of the page is under way (events are delivered while the page waits)."""
        deadline = time.monotonic() + timeout_s
        while self.pending and time.monotonic() < deadline:
            self.page.wait_for_timeout(50)
        assert not self.pending, f"requests still under way after {timeout_s:.0f} s: {[r.url for r in self.pending]}"

    def check(self):
        assert not self.outside, f"requests left the machine: {self.outside}"
        assert not self.broken, f"requests that failed: {self.broken}"
        assert not self.errors, f"JavaScript errors: {self.errors}"


def _static_figures(rel: str) -> int:
    """How many outputs of the committed notebook carry a static image."""
    nb = json.loads((ROOT / rel).read_text())
    return sum(
        1
        for c in nb["cells"]
        for o in c.get("outputs", []) or []
        if {"image/png", "image/svg+xml"} & set(o.get("data", {}))
    )


def _has_math(rel: str) -> bool:
    nb = json.loads((ROOT / rel).read_text())
    return any(c["cell_type"] == "markdown" and "$" in "".join(c["source"]) for c in nb["cells"])


@pytest.mark.parametrize("page", PAGES)
def test_page_reads_offline(page, served, browser):
    """The page loads, its figures are drawn, its math renders, and it needs nothing off the machine."""
    v = Visit(browser)
    v.page.goto(f"{served}/{page}.html", wait_until="load")
    title = v.page.locator("article h1").first.inner_text()
    assert title.strip(), "no title"
    # figures: every static image of the committed outputs is on the page and drawn at a real size
    want = _static_figures(f"{page}.ipynb")
    drawn = v.page.evaluate(
        """() => [...document.querySelectorAll('article .cell_output img, article .cell_output svg')]
                 .filter(e => { const r = e.getBoundingClientRect();
                                return r.width > 0 && r.height > 0 && (e.tagName !== 'IMG' || (e.complete && e.naturalWidth > 0)); })
                 .length"""
    )
    assert want >= 1, f"{page}: no static figure in the committed notebook (tools/execute_notebooks.py)"
    assert drawn >= want, f"{drawn} figures drawn, the notebook has {want}"
    # no test plumbing on the page: the hidden cells are gone, the metrics never had a text form
    text = v.page.inner_text("article")
    assert "GOODPUTLAB_METRICS" not in text and "record_metrics" not in text and "GOODPUTLAB_SMOKE" not in text
    assert "Error displaying widget" not in text
    # math: MathJax (served by the site itself) typeset every formula, without an input error
    if _has_math(f"{page}.ipynb"):
        v.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
        v.page.evaluate("() => MathJax.startup.promise")
        assert v.page.locator("mjx-container").count() > 0, "no formula was typeset"
        body = v.page.inner_text("article")
        assert "Math input error" not in body and v.page.locator("mjx-merror").count() == 0, "a formula failed"
    v.page.close()
    v.check()


def test_search_finds_a_chapter(served, browser):
    v = Visit(browser)
    v.page.goto(f"{served}/search.html?q=checkpoint", wait_until="load")
    v.page.wait_for_selector("#search-results ul.search li", timeout=30_000)
    # the search page fetches every hit's page for its summary, one after the other, and says "found" once it
    # has started the last fetch: leaving before they end aborts those still under way
    v.page.wait_for_function("() => /found/i.test(document.querySelector('#search-results .search-summary')?.textContent || '')",
                             timeout=30_000)
    v.settle()
    hits = v.page.locator("#search-results ul.search li a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert any("03_checkpoint_interval" in h for h in hits), hits
    # the search box in the page header leads there too
    v.page.goto(f"{served}/book/01_what_is_goodput.html", wait_until="load")
    assert v.page.locator("form[action$='search.html'] input[name='q']").count() >= 1
    v.page.close()
    v.check()


# --- the calculators that run in the page (goodputlab/charts/site_calculators.py) -------------------


def test_chapters_link_to_their_calculators(site):
    """A chapter with a calculator links to it from its top, and the calculator links back."""
    from goodputlab.charts import site_calculators

    for calc in site_calculators.PAGES:  # the calculators and the claim explainer
        chapter = (site / f"{calc.chapter}.html").read_text()
        assert f'href="../{site_calculators.page_path(calc)}"' in chapter, f"{calc.chapter} does not link {calc.slug}"
        page = (site / site_calculators.page_path(calc)).read_text()
        assert f'href="../{calc.chapter}.html"' in page
    assert (site / site_calculators.STATIC_DIR / site_calculators.BUNDLE).exists()


def _calculator_state(page) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """The sliders' values, and the outputs' values and text, as the page shows them."""
    return page.evaluate(
        """() => [
            Object.fromEntries([...document.querySelectorAll('#controls input, #controls select')].map(i => {
                const v = i.parentElement.querySelector('output.value').dataset.value;
                return [i.name, i.tagName === 'SELECT' ? v : Number(v)]; })),
            Object.fromEntries([...document.querySelectorAll('#outputs output')].map(o => [o.dataset.name, Number(o.dataset.value)])),
            Object.fromEntries([...document.querySelectorAll('#outputs output')].map(o => [o.dataset.name, o.textContent])),
        ]"""
    )


def _assert_model(calc, sliders: dict[str, float], shown: dict[str, float]) -> None:
    from goodputlab.charts import site_pages

    want = site_pages.shown(calc, sliders)
    assert set(shown) == {s.name for s in site_pages.outputs(calc)}
    for name, value in shown.items():
        if value != value and want[name] != want[name]:  # NaN both: the model refuses the setting, the page says so
            continue
        assert value == want[name] or abs(value - want[name]) <= 1e-9 * abs(want[name]), f"{calc.slug}.{name} at {sliders}: page {value}, model {want[name]}"


@pytest.mark.parametrize("width", [400, 1400])
def test_calculators_follow_their_sliders(width, served, browser):
    """From the static server, with no kernel: each slider moved in Chromium changes the numbers shown,
    and they are the Python model's at the new setting; the page fits a phone and nothing leaves the machine."""
    from goodputlab.charts import site_calculators

    for calc in site_calculators.CALCULATORS:
        v = Visit(browser)
        v.page.set_viewport_size({"width": width, "height": 900})
        v.page.goto(f"{served}/{site_calculators.page_path(calc)}", wait_until="load")
        v.page.wait_for_function("() => Number(document.body.dataset.ready) >= 1", timeout=30_000)
        sliders, shown, text = _calculator_state(v.page)
        assert sliders == {s.name: s.value for s in calc.sliders}
        _assert_model(calc, sliders, shown)
        # the page script's own inputs first (chapter 5's jitter and target), at the default setting, where
        # they matter: once the other sliders have moved, the supply can be so ample that no jitter shows
        scripted = set(calc.extra.inputs) if calc.extra else set()
        for slider in sorted(calc.sliders, key=lambda s: s.name not in scripted):
            ready = int(v.page.evaluate("() => Number(document.body.dataset.ready)"))
            if slider.options:  # a list of choices (the capstone's strategy): pick another
                v.page.locator(f"#controls select[name='{slider.name}']").select_option(slider.options[2])  # memory, same node: disk_every then matters
            else:
                box = v.page.locator(f"#controls input[name='{slider.name}']")
                lo, hi, now = box.evaluate("e => [e.min, e.max, e.value].map(Number)")
                target = lo + round(0.3 * (hi - lo))
                if target == now:
                    target = lo + round(0.7 * (hi - lo))
                box.fill(str(int(target)))
            v.page.wait_for_function(f"() => Number(document.body.dataset.ready) > {ready}", timeout=10_000)
            moved, shown, new_text = _calculator_state(v.page)
            assert moved[slider.name] != sliders[slider.name], f"{calc.slug}: {slider.name} did not move"
            assert new_text != text, f"{calc.slug}: moving {slider.name} changed no number"
            _assert_model(calc, moved, shown)
            sliders, text = moved, new_text
        # drawn, and no wider than the window (a phone scrolls down, not sideways)
        chart = v.page.locator("#chart svg").bounding_box()
        assert chart and 100 < chart["width"] <= width, chart
        assert v.page.evaluate("() => document.documentElement.scrollWidth") <= width
        v.page.close()
        v.check()


def test_calculator_opens_from_disk(site, browser):
    """Opened as a file (no server at all), a calculator still draws and follows its slider."""
    from goodputlab.charts import site_calculators

    calc = site_calculators.INTERVAL
    page = browser.new_page(viewport={"width": 400, "height": 900})
    elsewhere, errors = [], []
    page.route("**/*", lambda r: r.continue_() if urlparse(r.request.url).scheme in ("file", "data", "blob", "about")
               else (elsewhere.append(r.request.url), r.abort()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((site / site_calculators.page_path(calc)).as_uri(), wait_until="load")
    page.wait_for_function("() => Number(document.body.dataset.ready) >= 1", timeout=30_000)
    page.locator("#controls input[name='interval_min']").fill("300")
    page.wait_for_function("() => Number(document.body.dataset.ready) >= 2", timeout=10_000)
    sliders, shown, _ = _calculator_state(page)
    assert sliders["interval_min"] != 120.0
    _assert_model(calc, sliders, shown)
    assert page.locator("#chart svg").count() == 1
    page.close()
    assert not elsewhere and not errors, (elsewhere, errors)


# --- the claim explainer (goodputlab/charts/site_claim.py: claim.js, held to theory.claim by test_site_claim.py) ----


def _claim_state(page) -> tuple[dict, dict]:
    """The controls' values, and what the page shows: the implied values, the verdict, the checks, the texts."""
    return page.evaluate(
        """() => [
            Object.fromEntries([...document.querySelectorAll('#controls input, #controls select')]
                .map(i => [i.name, i.tagName === 'SELECT' ? i.value : i.value])),
            {implied: Object.fromEntries([...document.querySelectorAll('#outputs output')].map(o => [o.dataset.name, Number(o.dataset.value)])),
             plausible: document.getElementById('verdict').dataset.plausible,
             verdict: document.getElementById('verdict').textContent,
             checks: [...document.querySelectorAll('#checks li')].map(li => [li.dataset.key, li.dataset.plausible === 'true']),
             texts: [...document.querySelectorAll('#reasons li')].map(li => li.textContent)},
        ]"""
    )


#: the claim page's pins (theory.claim.Pins), blank for the chapter's defaults
PINS = ("storage_gbps", "save_s", "restart_s", "detect_s")


def _assert_claim(controls: dict, shown: dict) -> None:
    from goodputlab.errors import ConfigError
    from goodputlab.theory import claim as model

    try:
        pins = model.Pins(**{k: float(controls[k]) for k in PINS if controls.get(k, "") != ""})
        want = model.explain(controls["lever"], float(controls["before_pct"]) / 100, float(controls["after_pct"]) / 100,
                             int(controls["gpus"]), float(controls["model_params_b"]), pins=pins)
    except ConfigError:
        assert shown["plausible"] == "error" and "cannot be read" in shown["verdict"], (controls, shown)
        return
    assert shown["plausible"] == str(want.plausible).lower(), (controls, shown["verdict"])
    assert set(shown["implied"]) == set(want.implied), (controls, shown["implied"])
    for key, value in want.implied.items():
        assert math.isclose(shown["implied"][key], value, rel_tol=1e-9), f"{key} at {controls}: page {shown['implied'][key]}, model {value}"
    assert shown["checks"] == [[c.key, c.plausible] for c in want.checks], controls
    assert shown["texts"] == want.reasons + want.notes, controls


@pytest.mark.parametrize("width", [400, 1400])
def test_claim_explainer_follows_its_controls(width, served, browser):
    """From the static server: each control changed in Chromium (the lever among them, and a claim the model
    refuses) redraws the page with theory.claim.explain's values, verdict, checks and texts; the page fits
    the window, links chapter 10, and nothing leaves the machine."""
    from goodputlab.charts import site_claim

    v = Visit(browser)
    v.page.set_viewport_size({"width": width, "height": 900})
    v.page.goto(f"{served}/{site_claim.page_path()}", wait_until="load")
    v.page.wait_for_function("() => Number(document.body.dataset.ready) >= 1", timeout=30_000)
    controls, shown = _claim_state(v.page)
    defaults = dict(site_claim.CLAIM.defaults)
    claim_inputs = {k: val for k, val in controls.items() if k in defaults}
    assert {k: val if k == "lever" else float(val) for k, val in claim_inputs.items()} == defaults, controls
    assert {k: val for k, val in controls.items() if k not in defaults} == dict.fromkeys(PINS, ""), controls  # blank
    _assert_claim(controls, shown)
    verdicts = {shown["plausible"]}
    # plausible (hot spares), no storage at all (async from 60%), a restart that cannot reach the claim (the bound
    # instead of a negative time), pins (a restart, then a save the memory lever checks the claim against), and a
    # claim refused (after below before)
    moves = [("lever", "hot-spare"), ("lever", "async"), ("gpus", "16384"), ("before_pct", "60"), ("lever", "interval"),
             ("after_pct", "99"), ("lever", "restart"), ("model_params_b", "405"), ("restart_s", "900"),
             ("lever", "memory"), ("save_s", "60"), ("after_pct", "50")]
    for name, value in moves:
        ready = int(v.page.evaluate("() => Number(document.body.dataset.ready)"))
        control = v.page.locator(f"#controls [name='{name}']")
        if name == "lever":
            control.select_option(value)
        else:
            control.fill(value)
        v.page.wait_for_function(f"() => Number(document.body.dataset.ready) > {ready}", timeout=10_000)
        before_text = json.dumps(shown)
        controls, shown = _claim_state(v.page)
        assert controls[name] == value, (name, controls)
        assert json.dumps(shown) != before_text, f"changing {name} changed nothing shown"
        _assert_claim(controls, shown)
        verdicts.add(shown["plausible"])
    assert verdicts == {"true", "false", "error"}, verdicts  # the moves reach every verdict
    assert v.page.evaluate("() => document.documentElement.scrollWidth") <= width
    assert v.page.locator(f"nav a.chapter[href='../{site_claim.CLAIM.chapter}.html']").count() == 1
    v.page.close()
    v.check()


# --- the recorded runs (goodputlab/charts/site_recorded.py) ---------------------------------------------


@pytest.mark.parametrize("width", [400, 1400])
def test_recorded_runs_are_picked_by_their_levers(width, served, browser):
    """From the static server: choosing levers lists the recordings that have them, and picking one draws
    its timeline and breakdown with its goodput (the recording's summary); fits the window, nothing leaves."""
    import goodputlab as gl
    from goodputlab.charts import site_recorded

    runs = gl.recorded_runs()
    v = Visit(browser)
    v.page.set_viewport_size({"width": width, "height": 900})
    v.page.goto(f"{served}/{site_recorded.page_path()}", wait_until="load")
    v.page.wait_for_function("() => Number(document.body.dataset.ready) >= 1", timeout=30_000)
    for lever, value in [("strategy", '"async"'), ("hot_spare", "true"), ("interval_steps", "100")]:
        ready = int(v.page.evaluate("() => Number(document.body.dataset.ready)"))
        v.page.locator(f"#controls select[name='{lever}']").select_option(value)
        v.page.wait_for_function(f"() => Number(document.body.dataset.ready) > {ready}", timeout=30_000)
        if lever == "strategy":  # the async recordings, and nothing else
            listed = v.page.locator("#matches a").evaluate_all("as => as.map(a => a.dataset.name)")
            assert listed == [n for n, r in runs.items() if r.config.ckpt == "async"], listed
            v.page.locator("#controls select[name='strategy']").select_option("any")
            v.page.wait_for_function(f"() => Number(document.body.dataset.ready) > {ready + 1}", timeout=30_000)
    picked = v.page.evaluate("() => document.body.dataset.picked")
    want = [n for n, r in runs.items() if r.config.hot_spare and r.config.ckpt_every == 100]
    assert picked == want[0], (picked, want)
    shown = v.page.evaluate("() => Object.fromEntries([...document.querySelectorAll('#outputs output')].map(o => [o.dataset.name, Number(o.dataset.value)]))")
    assert shown["goodput"] == runs[picked].goodput and shown["failures"] == runs[picked].failures
    for chart in ("#timeline svg", "#breakdown svg"):
        box = v.page.locator(chart).bounding_box()
        assert box and 100 < box["width"] <= width, (chart, box)
    assert v.page.locator("#timeline svg .mark-rect path, #timeline svg .mark-rect").count() > 0
    assert v.page.evaluate("() => document.documentElement.scrollWidth") <= width
    v.page.close()
    v.check()


# --- the page as a reader meets it, at a desktop's width and a phone's (book/_static/reader.css) ----------------

#: a desktop window and a phone
LAYOUT_WIDTHS = (1300, 400)

_LAYOUT = r"""() => {
  const W = document.documentElement.clientWidth;
  const out = {scroll: document.documentElement.scrollWidth, cut: [], shrunk: [], blank: [], empty: [], clipped: [], maths: []};
  document.querySelectorAll('article mjx-container[display="true"]').forEach(m => {  // scaled to fit (reader.js)
    if (m.scrollWidth > m.clientWidth + 1) out.maths.push(m.textContent.slice(0, 40));
  });
  document.querySelectorAll('article pre, .goodputlab-live pre').forEach(p => {
    if (p.scrollWidth > p.clientWidth + 1) out.cut.push(p.textContent.trim().slice(0, 60));
  });
  document.querySelectorAll('article .cell_output img').forEach(img => {
    const w = Number(img.getAttribute('width') || img.naturalWidth);
    if (img.getBoundingClientRect().width + 1 < w) out.shrunk.push(img.getAttribute('src').slice(-40));
    const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
    if (!c.width || !c.height) { out.blank.push('not loaded'); return; }
    const g = c.getContext('2d'); g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data; let ink = 0;
    for (let i = 0; i < d.length; i += 16) if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) ink++;
    if (ink / (d.length / 16) < 0.01) out.blank.push(img.getAttribute('src').slice(-40));
  });
  document.querySelectorAll('.goodputlab-live svg.marks').forEach(svg => {
    const box = svg.getBoundingClientRect();
    if (!svg.querySelector('.mark-line path, .mark-rect path, .mark-symbol path, .mark-area path')) out.empty.push(svg.parentElement.id);
    svg.querySelectorAll('.role-legend').forEach(legend => {
      const r = legend.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.bottom > box.bottom + 1 || r.right > W + 1) out.clipped.push(svg.parentElement.id);
    });
  });
  return out;
}"""


def _reader_pages(site: Path) -> list[str]:
    pages = sorted(p.relative_to(site).as_posix() for pattern in ("book/*.html", "labs/*.html", "labs/solutions/*.html",
                                                                  "docs/*.html", "calculators/*.html")
                   for p in site.glob(pattern))
    assert len(pages) >= 40, pages
    return pages


@pytest.mark.parametrize("width", LAYOUT_WIDTHS)
def test_every_page_fits_the_window(width, site, served, browser):
    """At 1300 and 400 px, on every page: nothing scrolls sideways, no code block or printed output is cut (they wrap),
    no figure is shrunk below its size (its text stays at least as large as drawn; on a phone a wide figure
    scrolls inside its own box), no figure is blank, every display formula fits the column, and the live pages'
    charts draw marks with their legends whole."""
    problems = {}
    v = Visit(browser)
    v.page.set_viewport_size({"width": width, "height": 900})
    for page in _reader_pages(site):
        v.page.goto(f"{served}/{page}", wait_until="load")
        if page.startswith("calculators/"):
            v.page.wait_for_function("() => Number(document.body.dataset.ready) >= 1", timeout=30_000)
            v.page.wait_for_timeout(300)  # a chart loaded by a script tag draws after the numbers
        v.page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")  # typeset, then fitted
        v.page.wait_for_timeout(50)
        found = v.page.evaluate(_LAYOUT)
        v.settle()  # leave a page only when its fonts and scripts have come: a request cut short would count as broken
        found["scroll"] = found["scroll"] if found["scroll"] > width else None
        bad = {k: val for k, val in found.items() if val}
        if bad:
            problems[page] = bad
    v.page.close()
    assert not problems, f"at {width} px: {json.dumps(problems, indent=1)[:3000]}"
    v.check()


def test_the_sidebar_has_no_two_entries_alike_and_prev_next_say_where_they_go(site):
    """Every title in the sidebar is its own (the labs' solutions are titled as solutions), and each page's "next"
    and "previous" links name the page they open."""
    import re

    front = (site / "book" / "index.html").read_text()
    nav = front[re.search(r'<nav class="[^"]*bd-docs-nav', front).start():]
    nav = nav[:nav.index("</nav>")]
    titles = [re.sub(r"<[^>]+>", "", t).strip() for t in re.findall(r"<a class=\"reference internal\"[^>]*>(.*?)</a>", nav, re.S)]
    assert len(titles) >= 40 and len(titles) == len(set(titles)), [t for t in titles if titles.count(t) > 1]
    for page in _reader_pages(site):
        if page.startswith("calculators/"):
            continue
        html = (site / page).read_text()
        for side in ("left-prev", "right-next"):
            m = re.search(rf'<a class="{side}"\s+href="([^"]+)".*?<p class="prev-next-title">(.*?)</p>', html, re.S)
            if m:
                target = (site / page).parent / m.group(1).split("#")[0]
                heading = re.search(r"<h1>(.*?)</h1>", target.read_text(), re.S)
                shown = re.sub(r"<a class=\"headerlink\".*?</a>", "", heading.group(1), flags=re.S) if heading else ""
                name = re.sub(r"<[^>]+>", "", m.group(2)).strip()
                assert re.sub(r"<[^>]+>", "", shown).strip() == name, (page, side, name, shown)
