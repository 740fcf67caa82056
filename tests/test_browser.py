"""End to end in a real browser: `make lab` opens chapter 1, every cell runs, the charts draw
offline, and the panel's slider and Run button drive a new real experiment.

Needs Chromium (Debian's `chromium`; `.ci/run` installs it). Without it the test is skipped,
unless GOODPUTLAB_REQUIRE_BROWSER=1 (set by CI), where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT
from goodputlab.notebook import METRICS_MIMETYPE

pytestmark = pytest.mark.notebooks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "goodputlab-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if CHROMIUM is None:
        if os.environ.get("GOODPUTLAB_REQUIRE_BROWSER") == "1":
            pytest.fail("GOODPUTLAB_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    # a copy of the book and the labs: the browser's autosave must not touch the repo
    root = tmp_path_factory.mktemp("lab")
    for folder in ("book", "labs"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    # JupyterLab draws only the cells near the viewport (windowing); the test reads the whole notebook
    settings = root / "jupyter-config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port = _free_port()
    env = {**os.environ, "GOODPUTLAB_SMOKE": "1", "JUPYTER_CONFIG_DIR": str(root / "jupyter-config")}
    lab_args = (
        f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --ServerApp.token={TOKEN} "
        "--LabApp.expose_app_in_browser=True"
    )
    proc = subprocess.Popen(
        # `make lab` as the README runs it, served from the copy's root instead of the repository's
        ["make", "--no-print-directory", "-C", str(ROOT), "lab", f"LAB_ROOT={root}", f"LAB_ARGS={lab_args}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                try:
                    os.killpg(proc.pid, 9)
                except ProcessLookupError:
                    pass
                pytest.fail(f"JupyterLab did not start:\n{out[-3000:]}")
            time.sleep(0.5)
    yield url
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)


KERNEL = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"


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

LAST_CELL_RECORDED = f"""() => {{
  const cells = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code');
  const outputs = cells[cells.length - 1].model.outputs;
  for (let i = 0; i < outputs.length; i++) {{
    if ('{METRICS_MIMETYPE}' in outputs.get(i).data) return true;
  }}
  return false;
}}"""

RUN_IN_KERNEL = f"""async (code) => {{
  const future = {KERNEL}.requestExecute({{code}});
  let out = "";
  future.onIOPub = (msg) => {{ if (msg.header.msg_type === "stream") out += msg.content.text; }};
  await future.done;
  return out;
}}"""


def test_chapter_1_in_jupyterlab(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # the server's front page opens chapter 1 (`make lab`'s default), with labs/ beside book/
        page.goto(f"{lab}/?token={TOKEN}")
        assert page.url.split("?")[0].endswith("/lab/tree/book/01_what_is_goodput.ipynb"), page.url
        for folder in ("book", "labs"):
            urllib.request.urlopen(f"{lab}/api/contents/{folder}?token={TOKEN}", timeout=10)
        page.wait_for_function(
            f"() => {{ try {{ return {KERNEL}.status === 'idle'; }} catch (e) {{ return false; }} }}",
            timeout=180_000,
        )
        # before Run: the committed outputs are static figures (no widget view to fail without its state)
        _check_static_figures(page, "book/01_what_is_goodput.ipynb")
        page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # the last cell records the metrics: an output no reader sees, so look for it in the model
        page.wait_for_function(LAST_CELL_RECORDED, timeout=600_000)

        # every chart drew offline: vega-embed put a canvas or an svg in each
        page.wait_for_function("document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 5", timeout=60_000)
        body = page.inner_text("body")
        assert "GOODPUTLAB_METRICS" not in body, "the tests' metrics are in the reader's way"
        assert "has not been properly enabled" not in body
        # every output is in the page (cells out of view are skipped by innerText, not by textContent)
        notebook_text = page.evaluate("document.querySelector('.jp-Notebook').textContent")
        assert "identical final model: True" in notebook_text
        # nothing covers the notebook: the news feed question is switched off by `make lab`
        assert "official Jupyter news" not in body
        page.screenshot(path=str(tmp_path / "chapter1.png"), full_page=True)

        # drive the panel like a reader: type a new checkpoint interval, press Run
        readout = page.locator(".widget-hslider", has_text="checkpoint every").locator(".widget-readout")
        readout.click()
        page.keyboard.press("Control+A")
        page.keyboard.type("10")
        page.keyboard.press("Enter")
        page.locator("button.widget-button", has_text="Run").click()
        # the kernel runs the click's experiment first, then this request
        out = page.evaluate(RUN_IN_KERNEL, "print(len(panel.history), panel.result.config.ckpt_every, panel.status.value)")
        runs, ckpt_every, status = out.split(maxsplit=2)
        assert (int(runs), int(ckpt_every), status.strip()) == (2, 10, "done")
        page.wait_for_function(
            "[...document.querySelectorAll('.widget-html')].some(e => e.innerText.includes('goodput'))", timeout=30_000
        )
        page.screenshot(path=str(tmp_path / "chapter1-after-run.png"), full_page=False)
        browser.close()
        shots = os.environ.get("GOODPUTLAB_SCREENSHOTS")
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            for f in tmp_path.glob("*.png"):
                shutil.copy(f, Path(shots) / f.name)
    assert not [e for e in errors if "vega" in e.lower() or "altair" in e.lower()], errors


def test_chapter_without_a_kernel_shows_static_figures(lab):
    """A committed chapter read in JupyterLab with no kernel: its figures are there, no widget error,
    and the test plumbing is collapsed."""
    from playwright.sync_api import sync_playwright

    rel = "book/02_failures_at_scale.ipynb"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{lab}/lab/tree/{rel}?token={TOKEN}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                               "&& window.jupyterapp.shell.currentWidget.context.isReady", timeout=120_000)
        # no kernel: shut down whatever JupyterLab started for the notebook
        page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.sessionContext.session", timeout=60_000)
        _check_static_figures(page, rel)
        collapsed = page.evaluate("window.jupyterapp.shell.currentWidget.node"
                                  ".querySelectorAll('.jp-InputArea.lm-mod-hidden, .jp-Cell .jp-InputPlaceholder').length")
        assert collapsed >= 3, "the parameters, SMOKE and metrics cells are collapsed"
        browser.close()
