"""Figures without a kernel: every chart and panel the book displays carries a PNG of itself, and
the committed notebooks keep that PNG instead of a widget view that cannot draw without a kernel.

The browser side (JupyterLab shows the PNG before Run and the live chart after) is in
tests/test_browser.py; the site side (every figure drawn) in tests/test_site.py.
"""

from __future__ import annotations

import base64
import re
import json
import struct
import sys
import zlib

import altair as alt
import ipywidgets as W
import numpy as np
import pytest

from conftest import NOTEBOOKS, ROOT
from goodputlab import charts
from goodputlab.charts import static
from goodputlab.notebook import METRICS_MIMETYPE, read_metrics, record_metrics
from goodputlab.widgets import PanelView, chart_widget
from goodputlab.widgets.common import panel_static_parts

sys.path.insert(0, str(ROOT / "tools"))
import execute_notebooks as EN  # noqa: E402

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _chart(title="goodput against interval", n=40):
    rows = [{"x": i, "y": (i * 7) % 13} for i in range(n)]
    return alt.Chart(alt.InlineData(values=rows)).mark_line().encode(x="x:Q", y="y:Q").properties(
        title=title, width=300, height=120
    )


def _decode_palette_png(data: bytes) -> np.ndarray:
    """RGB pixels of an 8-bit palette PNG (what compact_png writes), decoded independently."""
    chunks = dict(static._chunks(data))
    w, h, depth, color_type, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color_type) == (8, 3)
    palette = np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)
    idat = b"".join(body for kind, body in static._chunks(data) if kind == b"IDAT")
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w + 1)
    assert (rows[:, 0] == 0).all()
    return palette[rows[:, 1:]]


def test_chart_png_is_the_chart_and_compact():
    import vl_convert as vlc

    chart = _chart()
    raw = vlc.svg_to_png(static.svg(chart), scale=static.SCALE)
    small = static.png(chart)
    assert static.png_size(small) == static.png_size(raw)
    assert len(small) < len(raw) / 2, (len(small), len(raw))
    # the same picture: compare with the RGBA original composited on white (vl-convert's own decode
    # is not available, so decode the original through compact_png's lossless path on few colours)
    pixels = _decode_palette_png(small)
    w, h = static.png_size(small)
    assert pixels.shape == (h, w, 3)
    # a line chart is mostly white background with dark axes and a coloured line
    share_white = (pixels == 255).all(axis=2).mean()
    assert 0.5 < share_white < 0.99
    assert ((pixels[..., 2] > 150) & (pixels[..., 0] < 100)).any(), "the blue line is missing"


def test_compact_png_is_lossless_for_few_colours():
    """An image of at most 256 colours comes back pixel for pixel (RGBA onto white)."""
    h, w = 7, 9
    rgba = np.zeros((h, w, 4), np.uint8)
    rgba[..., 3] = 255
    rgba[2:5, 3:7, 0] = 200
    rgba[0, :, 1] = 90
    rgba[6, 0] = (10, 20, 30, 0)  # transparent: becomes white
    scan = b"".join(b"\x01" + bytes(np.concatenate([r[:1], np.diff(r.astype(np.int16), axis=0).astype(np.uint8)]).ravel())
                    for r in rgba)  # Sub filter, as vl-convert writes
    png = (b"\x89PNG\r\n\x1a\n" + static._chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
           + static._chunk(b"IDAT", zlib.compress(scan)) + static._chunk(b"IEND", b""))
    out = _decode_palette_png(static.compact_png(png))
    want = rgba[..., :3].copy()
    want[6, 0] = 255
    assert (out == want).all()


def test_live_chart_carries_its_png_beside_the_widget_view():
    chart = _chart("loss against step")
    live = chart_widget(chart)
    assert isinstance(live, alt.JupyterChart)
    data, metadata = live._repr_mimebundle_()
    assert WIDGET_VIEW in data, "the live chart is still there for a kernel"
    png = base64.b64decode(data["image/png"])
    w, h = static.png_size(png)
    assert metadata["image/png"] == {"width": round(w / static.SCALE), "height": round(h / static.SCALE)}
    assert data["text/plain"] == "<chart: loss against step>"
    # redrawn in place: the next display shows the new chart
    live.chart = _chart("another title", n=10)
    assert live._repr_mimebundle_()[0]["text/plain"] == "<chart: another title>"


def test_setup_notebook_renders_plain_charts_with_a_png():
    before = alt.renderers.active
    try:
        charts.setup_notebook()
        assert alt.renderers.active == "goodputlab"
        data, metadata = _chart()._repr_mimebundle_()
        assert WIDGET_VIEW in data and "image/png" in data and "image/png" in metadata
    finally:
        alt.renderers.enable(before)


def test_panel_view_shows_settings_headline_and_charts():
    slider = W.FloatSlider(value=2.5, description="MTBF (s)")
    toggle = W.ToggleButtons(options=["sync", "async"], value="async", description="strategy")
    headline = W.HTML("<b>goodput</b> <span>71.7%</span>")
    box = W.VBox([W.HBox([slider, toggle]), W.Button(description="Run"), headline,
                  chart_widget(_chart("timeline")), W.IntProgress(value=3, max=9)])
    parts = panel_static_parts(box)
    assert parts[0] == ("MTBF (s): 2.5  |  strategy: async", 12, False)
    assert parts[1] == ("goodput 71.7%", 15, True)
    # the chart as the live view draws it: its spec, fitted to the output area
    assert parts[2] == box.children[3].spec and parts[2]["title"] == "timeline" and len(parts) == 3
    data, metadata = PanelView(box)._repr_mimebundle_()
    assert WIDGET_VIEW in data and data["text/plain"] == "<panel: goodput 71.7%>"
    w, h = static.png_size(base64.b64decode(data["image/png"]))
    chart_w, chart_h = static.png_size(static.png(_chart("timeline")))
    assert w >= chart_w and h > chart_h, "the figure stacks text lines above the chart"


def test_every_panel_displays_through_panel_view():
    """The one place: each panel's _ipython_display_ shows its widget through show_panel."""
    import inspect

    import goodputlab.widgets as widgets

    panels = []
    import pkgutil

    for info in pkgutil.iter_modules(widgets.__path__):
        mod = __import__(f"goodputlab.widgets.{info.name}", fromlist=["x"])
        panels += [c for _, c in inspect.getmembers(mod, inspect.isclass)
                   if c.__module__ == mod.__name__ and "_ipython_display_" in vars(c)]
    assert len(panels) >= 8
    for cls in panels:
        assert "show_panel(self.widget)" in inspect.getsource(cls._ipython_display_), cls
    assert widgets.show_panel


def test_metrics_are_an_invisible_output(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    published = []
    shell.display_pub.publish = lambda data, metadata=None, **kw: published.append(data)
    record_metrics(goodput=0.5, nan=float("nan"), steps=3)
    assert capsys.readouterr().out == ""
    assert len(published) == 1 and set(published[0]) == {METRICS_MIMETYPE}, "no text form: nothing for a reader to see"
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": published[0]}]}]}
    got = read_metrics(nb)
    assert got["goodput"] == 0.5 and got["steps"] == 3 and got["nan"] != got["nan"]


# --- the committed notebooks ---------------------------------------------------------------------------
def _progress_state():
    return {
        "a": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_b", "IPY_MODEL_c", "IPY_MODEL_d"]}},
        "b": {"model_name": "HTMLModel", "state": {"value": "training: 100%"}},
        "c": {"model_name": "FloatProgressModel", "state": {"value": 80, "max": 80, "min": 0}},
        "d": {"model_name": "HTMLModel", "state": {"value": " 80/80 [00:05&lt;00:00, 15.0step/s]"}},
    }


def test_static_outputs_keeps_figures_and_the_final_text_of_progress_bars():
    import nbformat

    nb = nbformat.v4.new_notebook()
    view = {"version_major": 2, "version_minor": 0, "model_id": "a"}
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: view, "text/plain": "0%"}),
        nbformat.v4.new_output("execute_result", data={WIDGET_VIEW: {**view, "model_id": "z"}, "image/png": "AAAA",
                                                        "text/plain": "<chart: t>"}, execution_count=1),
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {**view, "model_id": "gone"}, "text/plain": "x"}),
    ])]
    nb.metadata["widgets"] = {EN.WIDGET_STATE: {"state": _progress_state()}}
    EN.static_outputs(nb)
    outs = nb.cells[0].outputs
    assert len(outs) == 2, "a widget with nothing to show without its kernel is dropped"
    assert outs[0].data == {"text/plain": "training: 100% |" + "█" * 20 + "| 80/80 [00:05<00:00, 15.0step/s]"}
    assert outs[1].data == {"image/png": "AAAA", "text/plain": "<chart: t>"}
    assert "widgets" not in nb.metadata
def test_hide_plumbing_keeps_a_scoreboard_in_sight():
    """A metrics cell is removed from the site and collapsed; one that also shows the lab's
    scoreboard keeps its output (only the source is hidden)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell('SMOKE = os.environ.get("GOODPUTLAB_SMOKE") == "1"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("if SMOKE:\n    STEPS = 10"),
        nbformat.v4.new_code_cell("run = gl.run()"),
        nbformat.v4.new_code_cell("gl.record_metrics(goodput=run.goodput)"),
        nbformat.v4.new_code_cell("gl.record_metrics(**score.metrics())\nscore"),
    ]
    assert EN.plumbing_cells(nb) == [0, 1, 3, 4]
    EN.hide_plumbing(nb)
    EN.hide_plumbing(nb)  # twice: the same tags, not two of each
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags == [["parameters", "remove-cell"], ["remove-cell"], [], ["remove-cell"], ["remove-input"]]
    assert nb.cells[3].metadata.jupyter == {"source_hidden": True, "outputs_hidden": True}
    assert nb.cells[4].metadata.jupyter == {"source_hidden": True}
    assert not EN.shows_more_than_metrics("x = 1\ngl.record_metrics(a=1)")


@pytest.mark.parametrize("rel", NOTEBOOKS)
def test_committed_notebook_reads_without_a_kernel(rel):
    """No widget view (it would draw an error without a kernel), a static figure for every chart
    and panel, and the test plumbing hidden."""
    nb = json.loads((ROOT / rel).read_text())
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) or []:
            data = out.get("data", {})
            assert WIDGET_VIEW not in data, f"cell {i}: a widget view without a kernel draws an error"
            text = "".join(data.get("text/plain", ""))
            if text.startswith(("<chart", "<panel", "<altair", "VBox(", "HBox(")):
                assert "image/png" in data, f"cell {i}: a chart or panel without its static figure"
            assert "GOODPUTLAB_METRICS" not in "".join(out.get("text", "")) + text, f"cell {i}: metrics in sight"
    import nbformat

    hidden = EN.plumbing_cells(nbformat.reads(json.dumps(nb), as_version=4))
    assert hidden, "no parameters or record_metrics cell found"
    for i in hidden:
        meta = nb["cells"][i]["metadata"]
        source = "".join(nb["cells"][i]["source"])
        tag = "remove-input" if "record_metrics(" in source and EN.shows_more_than_metrics(source) else "remove-cell"
        assert tag in meta.get("tags", []) and meta.get("jupyter", {}).get("source_hidden"), (
            f"cell {i} is test plumbing: tools/execute_notebooks.py hides it"
        )
    for i, cell in enumerate(nb["cells"]):  # the SMOKE switch stays in the hidden cells
        if cell["cell_type"] == "code" and i not in hidden:
            assert not re.search(r"\bSMOKE\b", "".join(cell["source"])), (
                f"cell {i}: SMOKE in sight (derive the size in the hidden cell after the parameters)"
            )
    run = nb["metadata"].get("goodputlab")
    assert run and run["run"] in ("full", "smoke") and {"cpu_cores", "gpu", "torch"} <= set(run["machine"])
    captions = [c for c in nb["cells"] if "run-caption" in c["metadata"].get("tags", [])]
    assert len(captions) == 1 and run["machine"]["torch"] in "".join(captions[0]["source"])


def test_a_panel_without_a_kernel_is_a_labelled_table_not_a_run_on():
    """A panel's HTML (a headline figure, a table of values, a list of reasons) becomes a table of labels and
    bold values and a list of bullets in its static figure, not one long bold line."""
    from goodputlab.charts.static import Table
    from goodputlab.widgets.common import html_parts

    parts = html_parts("<div>goodput <span style='font-weight: bold'>29.7%</span> <span>restart 23.6%</span></div>"
                       "<table><tr><td>job MTBF</td><td><b>2.15</b> h</td></tr><tr><td>per GPU</td><td><b>2.8</b> MB/s</td></tr>"
                       "</table><ul><li>device MTBF: <b>plausible</b></li></ul><style>.x{}</style>")
    assert parts == [Table((("goodput", "29.7%", "restart 23.6%"),), 14),
                     Table((("job MTBF", "2.15 h", ""), ("per GPU", "2.8 MB/s", "")), 13),
                     ("• device MTBF: plausible", 12, False)]
    import goodputlab as gl

    claim = panel_static_parts(gl.widgets.ClaimPanel().widget)
    tables = [p for p in claim if isinstance(p, Table)]
    # the verdict, then the implied values (then the definitions of goodput and ETTR)
    assert len(tables) >= 2 and len(tables[1].rows) >= 5
    assert not any(isinstance(p, tuple) and p[2] and len(p[0]) > 80 for p in claim), "a run-on of bold text"
    png = static.stack_png(claim)
    assert static.png_size(png)[0] <= static.SCALE * (static.MAX_WIDTH_PX + 20)
