"""End to end in a real browser: `make dashboard` serves the workshop dashboard with Voila, a
participant moves a lever, the theory's prediction moves with it, Run trains a real job, and the
goodput figure and the charts change. Nothing the page loads comes from the network.

Needs Chromium (Debian's `chromium`; `.ci/run` installs it). Without it the test is skipped,
unless GOODPUTLAB_REQUIRE_BROWSER=1 (set by CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.notebooks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dashboard():
    if CHROMIUM is None:
        if os.environ.get("GOODPUTLAB_REQUIRE_BROWSER") == "1":
            pytest.fail("GOODPUTLAB_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    port = _free_port()
    # SMOKE: each run is 60 steps (a few seconds); Voila serves the repository's notebook (it saves nothing)
    env = {**os.environ, "GOODPUTLAB_SMOKE": "1"}
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(ROOT), "dashboard",
         f"DASHBOARD_ARGS=--no-browser --port={port} --Voila.ip=127.0.0.1 --Voila.port_retries=0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}voila/static/voila.js", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                try:
                    os.killpg(proc.pid, 9)
                except ProcessLookupError:
                    pass
                pytest.fail(f"Voila did not start:\n{out[-3000:]}")
            time.sleep(0.5)
    yield url
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)


PREDICTED = re.compile(r"theory predicts\s*([\d.]+)%")
MEASURED = re.compile(r"goodput\s*([\d.]+)%\s*measured")


def _svg_texts(page, index: int) -> str:
    """The text of the index-th chart on the page (Vega draws SVG here, so its text is in the DOM)."""
    return page.evaluate(f"[...document.querySelectorAll('.vega-embed')][{index}].textContent")


def test_dashboard_lever_run_and_charts(dashboard, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors, outside = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: outside.append(r.url) if r.url.startswith("http") and not r.url.startswith(dashboard) else None)
        # Voila sends the page as the kernel runs the notebook: its load event comes when the run ends,
        # which beside other work can take longer than goto's 30 s; the widgets below are what we wait for
        page.goto(dashboard, wait_until="commit", timeout=120_000)
        page.wait_for_selector("text=theory predicts", timeout=120_000)
        page.wait_for_function("document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length >= 2", timeout=60_000)
        body = page.inner_text("body")
        assert "timeline: goodput" in _svg_texts(page, 0)  # before the first Run: the recorded run nearest the levers
        for label in ("checkpoint strategy", "checkpoint every", "MTBF", "loader workers", "prefetch per worker",
                      "storage latency", "recorded runs"):
            assert label in body, label
        assert "def " not in body and "import goodputlab" not in body  # Voila shows the widgets, not the code
        before = float(PREDICTED.search(body).group(1))

        # move a lever: no failures (type into the MTBF slider's readout, as a participant can)
        readout = page.locator(".widget-hslider", has_text="MTBF").locator(".widget-readout")
        readout.click()
        page.keyboard.press("Control+A")
        page.keyboard.type("0")
        page.keyboard.press("Enter")
        page.wait_for_function(
            f"(() => {{ const m = document.body.innerText.match(/theory predicts\\s*([\\d.]+)%/);"
            f" return m && parseFloat(m[1]) !== {before}; }})()", timeout=30_000)
        after = float(PREDICTED.search(page.inner_text("body")).group(1))
        assert after > before  # no failures: the theory expects more of the time to be productive
        page.screenshot(path=str(tmp_path / "dashboard-before-run.png"), full_page=True)

        # Run: a real job trains, the goodput figure appears and both charts are redrawn
        page.locator("button.widget-button", has_text="Run").click()
        page.wait_for_function("document.body.innerText.includes('measured: wall')", timeout=120_000)
        text = page.inner_text("body")
        goodput = float(MEASURED.search(text.replace("\n", " ")).group(1))
        assert 0 < goodput < 100
        assert "0 failures" in text
        page.wait_for_function("[...document.querySelectorAll('.vega-embed')][0].textContent.includes('timeline')",
                               timeout=30_000)
        assert "press Run" not in _svg_texts(page, 0) and "attempt 0" in _svg_texts(page, 0)
        assert "theory, these levers" in _svg_texts(page, 1) and "#1" in _svg_texts(page, 1)
        page.screenshot(path=str(tmp_path / "dashboard-after-run.png"), full_page=True)
        browser.close()
        shots = os.environ.get("GOODPUTLAB_SCREENSHOTS")
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            for f in tmp_path.glob("*.png"):
                shutil.copy(f, Path(shots) / f.name)
    assert not outside, f"the dashboard loaded from the network: {outside}"
    assert not errors, errors
