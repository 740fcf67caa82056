"""End to end in a real browser: every chapter and lab in JupyterLab as `make lab` opens it, read as
a reader reads it.

For each notebook: before Run, the committed static figures are drawn; then every cell runs (SMOKE
sizes) and the notebook is read at two window widths (tools/labdriver.py, WIDTHS: 1000 px with the
file browser open, where the output area is about 570 px, and 1400 px). At each width nothing may be
in the reader's way: no widget label, read-out or button whose text overflows its box, no chart or
legend wider than its output area, no chart that drew nothing, no formula MathJax failed on, no
dialog or notification over the notebook, no request that leaves the machine. A screenshot of every
panel at both widths is saved (GOODPUTLAB_SCREENSHOTS=folder keeps them; the docs' full-size ones
come from tools/panel_shots.py). Chapter 1's panel is also driven: a value typed into a read-out,
Run, a new real experiment.

Needs Chromium (Debian's `chromium`; `.ci/run` installs it). Without it the test is skipped,
unless GOODPUTLAB_REQUIRE_BROWSER=1 (set by CI), where a missing browser is a failure.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import labdriver  # noqa: E402  (tools/labdriver.py)

pytestmark = pytest.mark.notebooks

#: what a reader opens: every chapter, every lab's exercise notebook and the workshop dashboard, a
#: chapter and a lab in turn (a chapter's run is the longer; see Ahead)
_CHAPTERS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("[0-9]*.ipynb"))
_LABS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "labs").glob("*.ipynb"))
READER_NOTEBOOKS = [rel for pair in itertools.zip_longest(_CHAPTERS, _LABS) for rel in pair if rel]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if labdriver.CHROMIUM is None:
        if os.environ.get("GOODPUTLAB_REQUIRE_BROWSER") == "1":
            pytest.fail("GOODPUTLAB_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    with labdriver.LabServer(tmp_path_factory.mktemp("lab"), env={"GOODPUTLAB_SMOKE": "1"}) as server:
        yield server


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=labdriver.CHROMIUM, args=labdriver.CHROMIUM_ARGS)
        yield b
        b.close()


class Ahead:
    """Opens and runs the notebooks the session will test in their order, keeping the next one
    running in its own page while the current one is read: the kernels' runs wait on sleeps and
    launches as much as on the cores, so two at a time finish sooner than one after another.

    The two pages are kept: a notebook read and closed hands its page (JupyterLab loaded, its
    first-visit layout) to a later one, which opens there as a reader opens the next chapter
    (Reader.open); a page whose notebook failed is closed instead."""

    def __init__(self, browser, lab, order: list[str]):
        self.browser, self.lab, self.order = browser, lab, order
        self.readers: dict[str, labdriver.Reader] = {}
        self.idle: list[labdriver.Reader] = []

    def _page(self) -> labdriver.Reader:
        if self.idle:
            reader = self.idle.pop()
            reader.resize(labdriver.WIDTHS[0])
            return reader
        return labdriver.Reader(self.browser, self.lab, width=labdriver.WIDTHS[0])

    def release(self, reader: labdriver.Reader, read: bool) -> None:
        """``reader``'s notebook is done: its page reads a later one (``read``: it was read to the
        end and closed), or its kernel is shut down and the page closed."""
        if read:
            self.idle.append(reader)
            return
        try:
            reader.close_notebook()
        except Exception:  # the test reports what went wrong; the server shuts the kernel down at the end
            pass
        reader.page.close()

    def _start(self, rel: str) -> None:
        if rel not in self.readers:
            reader = self._page()
            self.readers[rel] = reader
            reader.open(rel)
            # before Run: the committed outputs are static figures (no widget view to fail without its state)
            _check_static_figures(reader.page, rel)
            reader.start_all()

    def take(self, rel: str) -> labdriver.Reader:
        """The reader of ``rel``, its run started; the next notebook of the order is started too."""
        self._start(rel)
        later = self.order[self.order.index(rel) + 1:] if rel in self.order else []
        if later:
            try:
                self._start(later[0])
            except Exception:  # its own test reports it
                self.readers.pop(later[0], None)
        return self.readers.pop(rel)

    def close(self) -> None:
        for reader in [*self.readers.values(), *self.idle]:
            reader.page.close()


@pytest.fixture(scope="module")
def ahead(request, lab, browser):
    order = [item.callspec.params["rel"] for item in request.session.items
             if getattr(item, "originalname", "") == "test_notebook_reads_well_in_jupyterlab"]
    runner = Ahead(browser, lab, order)
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("GOODPUTLAB_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


def _png_outputs(rel: str) -> int:
    nb = json.loads((ROOT / rel).read_text())
    return sum(1 for c in nb["cells"] for o in c.get("outputs", []) or [] if "image/png" in o.get("data", {}))


def _check_static_figures(page, rel: str) -> None:
    """Every PNG of the committed notebook is drawn, and nothing says a widget failed."""
    want = _png_outputs(rel)
    assert want >= 1, f"{rel} has no static figure"
    page.wait_for_function(
        f"() => [...window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-OutputArea-output img')]"
        f".filter(i => i.complete && i.naturalWidth > 0).length >= {want}",
        timeout=60_000,
    )
    text = page.evaluate("window.jupyterapp.shell.currentWidget.node.textContent")  # this notebook's tab only
    for bad in ("Error displaying widget", "Loading widget", "GOODPUTLAB_METRICS", "Cannot display"):
        assert bad not in text, f"{rel}: {bad!r} in the notebook"


def _drive_chapter_1(reader: labdriver.Reader) -> None:
    """Type a new checkpoint interval into the panel's read-out, press Run: a new real experiment."""
    page = reader.page
    before = int(reader.run_in_kernel("print(len(panel.history))"))  # the runs the chapter's own cells made
    assert before >= 1
    readout = page.locator(".widget-hslider", has_text="checkpoint every").locator(".widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("10")
    page.keyboard.press("Enter")
    page.locator("button.widget-button", has_text="Run").click()
    # the kernel runs the click's experiment first, then this request
    out = reader.run_in_kernel("print(len(panel.history), panel.result.config.ckpt_every, panel.status.value)")
    runs, ckpt_every, status = out.split(maxsplit=2)
    assert (int(runs), int(ckpt_every), status.strip()) == (before + 1, 10, "done")
    page.wait_for_function("[...document.querySelectorAll('.widget-html')].some(e => e.innerText.includes('goodput'))",
                           timeout=30_000)
    assert "identical final model: True" in page.evaluate("document.querySelector('.jp-Notebook').textContent")


@pytest.mark.parametrize("rel", READER_NOTEBOOKS)
def test_notebook_reads_well_in_jupyterlab(rel, ahead, shots):
    reader = ahead.take(rel)
    read = False
    try:
        reader.wait_done()
        stem = Path(rel).with_suffix("").as_posix().replace("/", "-")
        panels = 0
        for width in labdriver.WIDTHS:
            reader.resize(width)
            problems = reader.problems()
            assert not problems, f"{rel} at {width} px:\n" + "\n".join(map(str, problems))
            panels = len(reader.screenshot_panels(shots, f"{stem}-{width}px"))
        body = reader.page.inner_text("body")
        assert "GOODPUTLAB_METRICS" not in body, "the tests' metrics are in the reader's way"
        assert "has not been properly enabled" not in body
        assert "official Jupyter news" not in body  # `make lab` switches the news feed off
        if rel == "book/01_what_is_goodput.ipynb":
            cells = json.loads((ROOT / rel).read_text())["cells"]
            checks = sum("gl.widgets.self_check(" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")
            assert panels == 1 + checks  # the run panel, and each self-check's question
            _drive_chapter_1(reader)
            assert not reader.problems(), "after a second run"
        reader.close_notebook()
        read = True
    finally:
        ahead.release(reader, read)
    assert not reader.outside, f"requests left the machine: {reader.outside[:5]}"
    assert not [e for e in reader.errors if "vega" in e.lower() or "altair" in e.lower()], reader.errors


def test_chapter_without_a_kernel_shows_static_figures(lab, browser):
    """A committed chapter read in JupyterLab with no kernel: its figures are there, no widget error,
    and the test plumbing is collapsed."""
    rel = "book/02_failures_at_scale.ipynb"
    reader = labdriver.Reader(browser, lab)
    page = reader.page
    page.goto(f"{lab.url}/lab/tree/{rel}?token={labdriver.TOKEN}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                           "&& window.jupyterapp.shell.currentWidget.context.isReady", timeout=120_000)
    # no kernel: shut down whatever JupyterLab started for the notebook, once it has started it (beside two busy
    # loops a shutdown sent while the kernel was still starting found no session, and the kernel came up after it)
    page.evaluate("async () => { const sc = window.jupyterapp.shell.currentWidget.sessionContext; "
                  "await sc.ready; await sc.shutdown(); }")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.sessionContext.session", timeout=60_000)
    _check_static_figures(page, rel)
    collapsed = page.evaluate("window.jupyterapp.shell.currentWidget.node"
                              ".querySelectorAll('.jp-InputArea.lm-mod-hidden, .jp-Cell .jp-InputPlaceholder').length")
    assert collapsed >= 3, "the parameters, SMOKE and metrics cells are collapsed"
    # the committed figures fit the output area at the narrow width too
    reader.resize(labdriver.WIDTHS[0])
    wide = [p for p in reader.problems() if p.kind == "too-wide"]
    page.close()
    assert not wide, "\n".join(map(str, wide))


def test_the_reader_checks_catch_what_they_look_for(lab, browser):
    """The checks can fail: a cut-off label, a chart wider than its output area, a broken formula and
    a dialog over the notebook are each reported."""
    reader = labdriver.Reader(browser, lab, width=labdriver.WIDTHS[0])
    try:
        reader.open("book/10_your_cluster.ipynb")
        code = ("import ipywidgets as W, altair as alt\n"
                "from IPython.display import display, Markdown\n"
                "display(W.IntSlider(description='a description far too long for its box', style={'description_width': '40px'}))\n"
                "alt.JupyterChart.enable_offline()\n"
                "display(alt.JupyterChart(alt.Chart(alt.InlineData(values=[{'x': 1}])).mark_point().encode(x='x:Q')"
                ".properties(width=900)))\n"
                "display(Markdown('$\\\\frac{1}$ and $\\\\badmacro$'))\n")
        page = reader.page
        page.evaluate("""(code) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = nb.widgets.length - 1;
            window.jupyterapp.commands.execute('notebook:insert-cell-below');
            nb.activeCell.model.sharedModel.setSource(code);
            return window.jupyterapp.commands.execute('notebook:run-cell');
        }""", code)
        page.wait_for_function("() => document.querySelectorAll('mjx-merror, .vega-embed svg').length > 0", timeout=60_000)
        reader.settle()
        page.evaluate("() => { window.jupyterapp.commands.execute('help:about'); }")  # a dialog over the notebook
        page.wait_for_selector(".jp-Dialog", timeout=30_000)
        kinds = {p.kind for p in reader.problems()}
        assert {"overflow", "too-wide", "dialog"} <= kinds, kinds
        assert "math" in kinds, kinds
        reader.close_notebook()
    finally:
        reader.page.close()
