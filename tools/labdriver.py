"""Drive the book's notebooks in JupyterLab in a real headless browser, as a reader would.

Used by tests/test_browser.py (every chapter and lab at two window widths) and by
tools/panel_shots.py (the screenshots of every panel in docs/panels/).

- :class:`LabServer` starts JupyterLab the way ``make lab`` does, on a copy of book/ and labs/ (the
  browser's autosave must not touch the repository), with the page's app exposed
  (``window.jupyterapp``) so a script can run ``notebook:run-all-cells``.
- :class:`Reader` is one Chromium page on it: :meth:`Reader.open` a notebook, :meth:`Reader.run_all`,
  then :meth:`Reader.problems` lists what a reader would trip over at the current window width: a
  widget label, read-out or button whose text does not fit its box, an output (a chart, a legend,
  a panel) wider than its output area, a chart that drew nothing, a formula MathJax could not
  typeset (MathJax's error marks), a dialog or notification over the notebook.

Needs Debian's ``chromium`` and the ``playwright`` package (the test extra); nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TOKEN = "goodputlab-test-token"
#: the window widths a reader commonly has (a laptop, a desktop); a narrow Binder window is the first
WIDTHS = (1000, 1400)
#: a panel's output: the output areas that hold widgets a reader can move
CONTROLS = ".widget-slider, .widget-hslider, .widget-button, .widget-toggle-buttons, .widget-dropdown, .widget-text"

KERNEL = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """JupyterLab as ``make lab`` starts it (the book's settings: no news feed), serving a copy of
    book/ and labs/ in ``root``; ``env`` adds to the environment of the server and its kernels
    (``GOODPUTLAB_SMOKE=1`` for small runs). A context manager; :attr:`url` while it runs."""

    def __init__(self, root: Path, env: dict | None = None, start_timeout_s: float = 120.0):
        self.root = Path(root)
        self.env = env or {}
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def _copy(self) -> None:
        for folder in ("book", "labs"):
            shutil.copytree(ROOT / folder, self.root / folder,
                            ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"), dirs_exist_ok=True)
        # JupyterLab draws only the cells near the viewport (windowing); a reader scrolls, a script reads all
        settings = self.root / "jupyter-config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')

    def __enter__(self) -> "LabServer":
        self._copy()
        port = free_port()
        env = {**os.environ, **self.env, "JUPYTER_CONFIG_DIR": str(self.root / "jupyter-config")}
        lab_args = (f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --ServerApp.token={TOKEN} "
                    "--LabApp.expose_app_in_browser=True")
        # `make lab` as the README runs it, served from the copy's root instead of the repository's
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "-C", str(ROOT), "lab", f"LAB_ROOT={self.root}", f"LAB_ARGS={lab_args}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={TOKEN}", timeout=2)
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    out = self.proc.stdout.read().decode(errors="replace") if self.proc.poll() is not None else ""
                    self.__exit__()
                    raise RuntimeError(f"JupyterLab did not start:\n{out[-3000:]}")
                time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
        self.proc = None


@dataclass
class Problem:
    """Something in the reader's way: ``kind`` (overflow, too-wide, blank-chart, math, dialog) and
    what it is, in words (the text that does not fit, the chart's title...)."""

    kind: str
    what: str
    cell: int = -1

    def __str__(self) -> str:
        where = f"cell {self.cell}: " if self.cell >= 0 else ""
        return f"{where}{self.kind}: {self.what}"


# The checks, in the page. Text boxes: a label, read-out or button clips its text (overflow hidden,
# text-overflow ellipsis) when its scrollWidth exceeds its clientWidth; a <select> or <input> shows
# its value in a box whose text is measured with the element's own font. Outputs: an output area
# that scrolls sideways hides part of a chart (a legend) or a panel. Charts: vega-embed drew an svg
# or canvas of some size. MathJax 3 draws a formula it cannot parse as <mjx-merror>.
_PROBLEMS_JS = r"""
(nb) => {
  const problems = [];
  const cellOf = (el) => {
    const cell = el.closest('.jp-Cell');
    return cell ? [...nb.querySelectorAll('.jp-Cell')].indexOf(cell) : -1;
  };
  const shown = (el) => el.offsetParent !== null && el.getClientRects().length > 0;
  const canvas = document.createElement('canvas').getContext('2d');
  const textWidth = (el, text) => {
    const s = getComputedStyle(el);
    canvas.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    return canvas.measureText(text).width;
  };
  const clipping = [
    '.widget-label', '.widget-label-basic', '.widget-readout', '.jupyter-widget-readout', '.widget-button',
    '.jupyter-button', '.widget-toggle-button', '.widget-inline-hbox .widget-html-content',
  ].join(', ');
  for (const el of nb.querySelectorAll(`.jp-OutputArea-output :is(${clipping})`)) {
    if (!shown(el)) continue;
    if (el.scrollWidth > el.clientWidth + 1) {
      problems.push({kind: 'overflow', cell: cellOf(el),
                     what: `"${el.textContent.trim()}" needs ${el.scrollWidth}px in a ${el.clientWidth}px box`});
    }
  }
  for (const el of nb.querySelectorAll('.jp-OutputArea-output :is(select, input[type=text], input[type=number])')) {
    if (!shown(el)) continue;
    const text = el.tagName === 'SELECT' ? (el.selectedOptions[0] || {}).text || '' : el.value;
    const s = getComputedStyle(el);
    const inner = el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)
                  - (el.tagName === 'SELECT' ? 16 : 0);  // the drop-down arrow
    const need = textWidth(el, text);
    if (need > inner + 1) {
      problems.push({kind: 'overflow', cell: cellOf(el),
                     what: `"${text}" needs ${Math.ceil(need)}px in a ${Math.floor(inner)}px box`});
    }
  }
  // anything wider than its output area: the area scrolls sideways, or a widget box clips it
  const parts = '.vega-embed svg, .vega-embed canvas, .widget-inline-hbox, .widget-button, .widget-toggle-buttons, '
              + '.widget-html, .widget-label-basic, .widget-checkbox, .widget-progress';
  for (const out of nb.querySelectorAll('.jp-OutputArea-output')) {
    if (!shown(out)) continue;
    const edge = out.getBoundingClientRect().right;
    const wide = [...out.querySelectorAll(parts)].filter(e => shown(e) && e.getBoundingClientRect().right > edge + 1);
    if (out.scrollWidth > out.clientWidth + 1 || wide.length) {
      const chart = (wide.find(e => e.closest('.vega-embed')) || out).closest('.vega-embed') || out.querySelector('.vega-embed');
      const title = chart ? ((chart.querySelector('.role-title-text') || {}).textContent || 'a chart') : '';
      const what = wide.length ? (title || `"${wide[0].textContent.trim().slice(0, 60)}"`) : (title || 'an output');
      const right = Math.max(out.getBoundingClientRect().left + out.scrollWidth, ...wide.map(e => e.getBoundingClientRect().right));
      problems.push({kind: 'too-wide', cell: cellOf(out),
                     what: `${what} reaches ${Math.ceil(right - out.getBoundingClientRect().left)}px in a ${out.clientWidth}px output area`});
    }
  }
  for (const chart of nb.querySelectorAll('.jp-OutputArea-output .vega-embed')) {
    if (!shown(chart)) continue;
    const drawn = [...chart.querySelectorAll('svg, canvas')].some(e => e.getBoundingClientRect().width > 20
                                                                     && e.getBoundingClientRect().height > 10);
    if (!drawn) problems.push({kind: 'blank-chart', cell: cellOf(chart), what: 'a chart drew nothing'});
  }
  // MathJax 3: a formula it cannot parse is <mjx-merror>, an unknown macro red text (MathJax 2: .MathJax_Error)
  for (const el of nb.querySelectorAll('mjx-merror, mjx-mtext[style*="color: red"], .MathJax_Error')) {
    problems.push({kind: 'math', cell: cellOf(el),
                   what: `a formula did not render: ${(el.getAttribute('data-mjx-error') || el.textContent).trim()}`});
  }
  if (nb.textContent.includes('Math input error')) {
    problems.push({kind: 'math', cell: -1, what: '"Math input error" in the notebook'});
  }
  const box = nb.getBoundingClientRect();
  for (const el of document.querySelectorAll('.jp-Dialog, .Toastify__toast, .jp-toast-container > *')) {
    const r = el.getBoundingClientRect();
    if (!shown(el) || r.width === 0) continue;
    if (r.right > box.left && r.left < box.right && r.bottom > box.top && r.top < box.bottom) {
      problems.push({kind: 'dialog', cell: -1, what: `"${el.textContent.trim().slice(0, 80)}" covers the notebook`});
    }
  }
  return problems;
}
"""

# After a resize: JupyterLab lays its panels out on the frames after the window's resize event, and
# vega-embed redraws a chart sized to its container on a frame after that
_LAID_OUT_JS = r"""
async ([width, height]) => {
  const frame = () => new Promise(r => { requestAnimationFrame(() => r()); setTimeout(r, 50); });
  const widths = () => {
    const w = window.jupyterapp.shell.currentWidget;
    const node = w ? w.node : document.body;
    return [node, ...node.querySelectorAll('.jp-OutputArea-output, .vega-embed svg, .vega-embed canvas')]
      .map(e => Math.round(e.getBoundingClientRect().width)).join(',');
  };
  const deadline = Date.now() + 10000;
  while ((window.innerWidth !== width || window.innerHeight !== height) && Date.now() < deadline) await frame();
  let last = null, same = 0;
  while (same < 10 && Date.now() < deadline) {
    await frame();
    const now = widths();
    same = now === last ? same + 1 : 0;
    last = now;
  }
}
"""

_PANELS_JS = f"""
(nb) => [...nb.querySelectorAll('.jp-OutputArea-output')]
  .filter(out => out.querySelector('{CONTROLS}') && out.offsetParent !== null)
  .map(out => [...nb.querySelectorAll('.jp-Cell')].indexOf(out.closest('.jp-Cell')))
"""


class Reader:
    """A Chromium page on a :class:`LabServer`, reading one notebook at a time."""

    def __init__(self, browser, server: LabServer, width: int = WIDTHS[-1], height: int = 1000):
        self.server = server
        self._started = time.monotonic()
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self._app_loaded = False
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.outside.append(r.url)
                     if r.url.startswith("http") and not r.url.startswith(server.url) else None)

    # --- a notebook ---------------------------------------------------------------------------------
    def open(self, rel: str, timeout_s: float = 180.0) -> None:
        """Open ``rel`` (a path under the server's root) in JupyterLab's first-visit layout (the
        file browser open beside it) and wait for its kernel to be idle. The page's first notebook
        loads JupyterLab (``/lab/tree/...&reset``); a later one, after :meth:`close_notebook`, is
        opened in the same JupyterLab (File > Open), in the same layout, as a reader opens the next
        chapter: loading the app again for each notebook would cost more than reading most of them.
        What the page records (errors, requests off the machine) starts afresh with each notebook."""
        self.errors.clear()
        self.outside.clear()
        if self._app_loaded:
            self.page.evaluate("(path) => { window.jupyterapp.commands.execute('docmanager:open', {path}); }", rel)
        else:
            self.page.goto(f"{self.server.url}/lab/tree/{rel}?token={TOKEN}&reset")
            self._app_loaded = True
        self.page.wait_for_function(
            f"() => {{ try {{ return window.jupyterapp.shell.currentWidget.context.path === {rel!r}"
            f" && {KERNEL}.status === 'idle'; }} catch (e) {{ return false; }} }}",
            timeout=timeout_s * 1000,
        )

    def start_all(self, upto: int | None = None) -> None:
        """Start running the cells from the top (outputs cleared first), every one or those up to cell
        index ``upto``, and return at once: :meth:`wait_done` waits for the end, so another notebook
        can run meanwhile."""
        self._started = time.monotonic()
        self.page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        if upto is None:
            self.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            return
        self.page.evaluate(
            """(last) => {
                window.jupyterapp.shell.currentWidget.content.activeCellIndex = last;
                window.jupyterapp.commands.execute('notebook:run-all-above');
                window.jupyterapp.commands.execute('notebook:run-cell');
            }""", upto)

    def wait_done(self, timeout_s: float = 600.0, upto: int | None = None) -> float:
        """Wait until the cells :meth:`start_all` started (or those up to cell index ``upto``) have
        run; seconds since the start. Raises on a cell that failed."""
        last = -1 if upto is None else upto
        # done: no cell waits or runs (prompt [*]) and the kernel is idle; a failed cell stops the run
        self.page.wait_for_function(
            f"""() => {{
              const nb = window.jupyterapp.shell.currentWidget.content;
              const code = nb.widgets.filter((c, i) => c.model.type === 'code' && ({last} < 0 || i <= {last}));
              const busy = code.some(c => c.model.executionState === 'running' || c.promptNode.textContent.includes('*'));
              const failed = code.some(c => [...Array(c.model.outputs.length).keys()]
                                            .some(i => c.model.outputs.get(i).type === 'error'));
              return failed || (!busy && {KERNEL}.status === 'idle'
                                && code.every(c => c.model.executionCount !== null || !c.model.sharedModel.source.trim()));
            }}""",
            timeout=timeout_s * 1000, polling=500,
        )
        failed = self.page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.widgets
                 .filter(c => c.model.type === 'code')
                 .flatMap(c => [...Array(c.model.outputs.length).keys()].map(i => c.model.outputs.get(i))
                               .filter(o => o.type === 'error').map(o => o.toJSON()))
                 .map(o => `${o.ename}: ${o.evalue}`)""")
        if failed:
            raise RuntimeError(f"a cell failed: {failed[0]}")
        self.settle()
        return time.monotonic() - self._started

    def run_all(self, timeout_s: float = 600.0) -> float:
        """Run every cell from the top and wait for the end (:meth:`start_all`, :meth:`wait_done`)."""
        self.start_all()
        return self.wait_done(timeout_s)

    def settle(self) -> None:
        """Let the page finish drawing: charts (vega-embed) and formulas (MathJax) render after the output."""
        self.page.wait_for_function(
            """() => [...window.jupyterapp.shell.currentWidget.node.querySelectorAll('.vega-embed')]
                   .every(e => e.querySelector('svg, canvas'))""", timeout=60_000)
        self.page.wait_for_timeout(500)

    def run_in_kernel(self, code: str) -> str:
        """Run ``code`` in the notebook's kernel (after whatever it is running) and return what it printed."""
        return self.page.evaluate(
            f"""async (code) => {{
              const future = {KERNEL}.requestExecute({{code}});
              let out = "";
              future.onIOPub = (msg) => {{ if (msg.header.msg_type === "stream") out += msg.content.text; }};
              await future.done;
              return out;
            }}""", code)

    def close_notebook(self) -> None:
        """Shut the notebook's kernel down and close its tab (the next notebook starts a fresh kernel)."""
        self.page.evaluate("""async () => {
            const w = window.jupyterapp.shell.currentWidget;
            if (w && w.sessionContext) { await w.sessionContext.shutdown(); }
            if (w) { w.dispose(); }
        }""")

    # --- what the reader sees -------------------------------------------------------------------------
    def resize(self, width: int, height: int = 1000) -> None:
        """Set the window's size and wait until JupyterLab has laid the notebook out again: the
        window has the new size and the widths of the notebook, its output areas and its charts
        have not changed for 10 frames in a row."""
        if self.page.viewport_size == {"width": width, "height": height}:
            return
        self.page.set_viewport_size({"width": width, "height": height})
        self.page.evaluate(_LAID_OUT_JS, [width, height])

    def notebook_node(self):
        return self.page.evaluate_handle("window.jupyterapp.shell.currentWidget.node")

    def problems(self) -> list[Problem]:
        """What a reader trips over at the current width (see :data:`_PROBLEMS_JS`)."""
        found = self.page.evaluate(_PROBLEMS_JS, self.notebook_node())
        return [Problem(p["kind"], p["what"], p["cell"]) for p in found]

    def panel_cells(self) -> list[int]:
        """Indices of the cells whose output holds controls (sliders, buttons, drop-downs)."""
        return sorted(set(self.page.evaluate(_PANELS_JS, self.notebook_node())))

    def screenshot_panels(self, folder: Path, stem: str) -> list[Path]:
        """A PNG of each panel's output: ``{stem}-cell{N}.png`` in ``folder``. The window is made tall
        enough for the tallest panel while it is photographed (the width stays)."""
        folder.mkdir(parents=True, exist_ok=True)
        shots = []
        cells = self.page.locator(".jp-Notebook .jp-Cell")
        size = self.page.viewport_size
        outputs = [(index, cells.nth(index).locator(".jp-OutputArea-output", has=self.page.locator(CONTROLS)).first)
                   for index in self.panel_cells()]
        tallest = max((o.bounding_box()["height"] for _, o in outputs), default=0)
        if tallest + 250 > size["height"]:
            self.resize(size["width"], int(tallest) + 250)
        try:
            for index, output in outputs:
                path = folder / f"{stem}-cell{index:02d}.png"
                output.scroll_into_view_if_needed()
                output.screenshot(path=str(path))
                shots.append(path)
        finally:
            if self.page.viewport_size != size:
                self.resize(size["width"], size["height"])
        return shots
