"""The one layout of every panel (goodputlab.widgets.layout) and charts that fit the output area
(goodputlab.charts.fit). The browser test (tests/test_browser.py) checks the result in JupyterLab;
these check the mechanisms without a browser."""

from __future__ import annotations

import altair as alt
import ipywidgets as W
import pytest

import goodputlab as gl
from goodputlab.charts import fit, static
from goodputlab.widgets import layout
from goodputlab.widgets.common import PanelView, panel_static_parts


def _rows(n=30):
    return [{"x": i, "y": (i * i) % 7, "category": "abcdefgh"[i % 8]} for i in range(n)]


def _chart(width, title="a chart", color=True):
    enc = dict(x="x:Q", y="y:Q")
    if color:
        enc["color"] = alt.Color("category:N", title="category")
    return alt.Chart(alt.InlineData(values=_rows())).mark_line().encode(**enc).properties(width=width, height=120, title=title)


# --- charts -----------------------------------------------------------------------------------
def test_a_chart_that_fits_is_left_alone():
    spec = _chart(300).to_dict()
    fitted, svg = fit.fit(spec)
    assert fitted == spec and fit.svg_width(svg) <= fit.MAX_WIDTH_PX


def test_a_wide_chart_with_a_legend_is_made_to_fit():
    spec = _chart(800, title="where the time went in a long run with many failures and a very long title").to_dict()
    before = fit.svg_width(fit._svg(spec))
    assert before > fit.MAX_WIDTH_PX + 100
    fitted, svg = fit.fit(spec)
    assert fit.svg_width(svg) <= fit.MAX_WIDTH_PX
    assert fitted["config"]["legend"]["orient"] == "bottom"  # the legend moved under the plot
    assert isinstance(fitted["title"], list) and len(fitted["title"]) >= 2  # the title wraps
    assert spec["width"] == 800 and "orient" not in spec.get("config", {}).get("legend", {})  # input untouched


def test_side_by_side_charts_are_stacked_when_too_wide():
    spec = alt.hconcat(_chart(300, "throughput"), _chart(300, "efficiency"), _chart(300, "goodput")).to_dict()
    fitted, svg = fit.fit(spec)
    assert "vconcat" in fitted and "hconcat" not in fitted
    assert fit.svg_width(svg) <= fit.MAX_WIDTH_PX


def test_wide_plots_without_a_legend_are_narrowed_with_their_titles():
    spec = alt.vconcat(_chart(900, "the first of two wide plots, with a title as wide as the plot itself was", color=False),
                       _chart(700, "the second", color=False)).to_dict()
    fitted, svg = fit.fit(spec)
    assert fit.svg_width(svg) <= fit.MAX_WIDTH_PX
    widths = [v["width"] for v in fitted["vconcat"]]
    assert widths[0] < 900 and widths[1] < 700 and widths[0] > widths[1]  # in proportion
    assert isinstance(fitted["vconcat"][0]["title"], list)  # wrapped to the narrower plot


def test_live_charts_and_their_figures_are_fitted():
    wide = _chart(800)
    live = gl.widgets.chart_widget(wide)
    assert live.chart is wide  # the chart as given
    assert live.spec["config"]["legend"]["orient"] == "bottom"  # the spec drawn is fitted
    data, _ = live._repr_mimebundle_()
    w, _ = static.png_size(__import__("base64").b64decode(data["image/png"]))
    assert w <= fit.MAX_WIDTH_PX * static.SCALE + 1
    live.chart = _chart(300)  # a redraw is fitted again (and needs nothing here)
    assert live.spec == fit.fitted(_chart(300))
    assert live.embed_options["actions"] is False  # no menu over the legend


def test_a_fitted_spec_is_not_laid_out_again(monkeypatch):
    """A live chart draws its PNG from its fitted spec: fitting that spec again returns the same spec
    and SVG from the cache, without rendering (each layout is a Vega rendering)."""
    spec = _chart(820, title="fitted once, drawn twice").to_dict()
    fitted, svg = fit.fit(spec)
    assert fitted != spec and fit.svg_width(svg) <= fit.MAX_WIDTH_PX
    rendered = []
    monkeypatch.setattr(fit, "_svg", lambda s: rendered.append(s) or pytest.fail("laid out again"))
    assert fit.fit(fitted) == (fitted, svg) and fit.fit(spec) == (fitted, svg)
    assert fit.svg_width(fit.fit(fitted)[1]) == fit.svg_width(svg) and rendered == []
    monkeypatch.undo()
    assert fit._svg(fitted) == svg  # what the cache holds is what a rendering of the fitted spec gives


# --- panels -----------------------------------------------------------------------------------
def _panel():
    a = layout.float_slider(2.0, 0.0, 20.0, 0.5, "MTBF (s)")
    b = W.IntSlider(value=25, min=0, max=200, description="checkpoint every (steps)")
    c = W.Dropdown(options=["sync", "async"], description="strategy")
    d = layout.log_slider(10.0, 1.0, 480.0, "restart + reload (min)")
    status = W.Label(value="")
    root = W.VBox([W.HBox([W.VBox([a, b]), W.VBox([c, d])]), W.Button(description="simulate this interval"), status])
    return root, (a, b, c, d)


def test_arrange_gives_the_panel_one_label_width_and_lets_rows_wrap():
    root, (a, b, c, d) = _panel()
    layout.arrange(root)
    assert layout.PANEL_CLASS in root._dom_classes and isinstance(root.children[0], layout.PanelStyle)
    row = root.children[1]
    assert layout.ROW_CLASS in row._dom_classes
    # the widest label sets every control's, so the tracks line up side by side and stacked
    widest = f"{layout.text_px('checkpoint every (steps)')}px"
    assert {w.style.description_width for w in (a, b, c, d)} == {widest}
    for w in (a, b, c, d):  # a control is its label, a track and a read-out
        label = int(w.style.description_width[:-2])
        assert w.layout.width == f"{label + layout.TRACK_PX + layout.READOUT_PX}px"
    # two columns side by side fit a 1400 px window's output area (about 970 px); one fits 1000 px's (570)
    column = max(int(w.layout.width[:-2]) for w in (a, b, c, d))
    assert column <= 560
    layout.arrange(root)  # idempotent
    assert sum(isinstance(ch, layout.PanelStyle) for ch in root.children) == 1


def test_the_stylesheet_keeps_text_whole_and_is_not_in_the_static_figure():
    root, _ = _panel()
    PanelView(root)  # display arranges the panel
    css = layout.STYLESHEET
    for rule in ("min-width: max-content", "white-space: normal", "flex-wrap: wrap"):
        assert rule in css
    texts = [p[0] if isinstance(p, tuple) else p for p in panel_static_parts(root) if not isinstance(p, dict)]
    assert not any("<style>" in t or "max-content" in t for t in texts)


def test_a_dragged_or_typed_value_is_what_the_readout_shows():
    d = layout.log_slider(10.0, 1.0, 480.0, "restart (min)")
    d.set_state({"value": 12.022644346174131})  # what a drag to "12" sends: 10 ** 1.08
    assert d.value == 12.0 and d.readout_format == ",.3r"  # d3: "12.0", "2,000"
    d.set_state({"value": 479.99999999999994})
    assert d.value == 480.0
    share = layout.float_slider(0.1, 0.0, 0.3, 0.005, "data-stall share", fmt=".1%")
    share.set_state({"value": 0.123456})
    assert share.value == pytest.approx(0.123)
    a = layout.float_slider(2.0, 0.0, 20.0, 0.5, "MTBF (s)")
    assert a.readout_format == ".1f"
    a.set_state({"value": 2.37})  # typed with more digits than shown
    assert a.value == 2.4
    d.value = 5.19441  # set from code (a chapter's default): kept exactly
    assert d.value == 5.19441


def test_a_choice_slider_steps_through_round_values_including_zero():
    s = layout.choice_slider((0, 1, 2, 5, 10), 0, "save cost (s)")
    assert s.value == 0 and s.label == "0"
    s.value = 5
    assert s.label == "5"
    with pytest.raises(ValueError, match="save cost"):
        layout.choice_slider((0, 1, 2), 3, "save cost (s)")


def test_every_panel_is_arranged_when_displayed():
    panel = gl.widgets.IntervalPanel(simulate_trials=5, simulated_days=10)
    view = PanelView(panel.widget)
    assert layout.PANEL_CLASS in view.widget._dom_classes
    # the chapter's worked example is on the save-cost slider's stops
    assert panel.save_s.value == 0 and 60 in [v for _, v in panel.save_s.options]


# --- the docs' screenshots -------------------------------------------------------------------
def test_every_panel_has_its_screenshot_in_the_docs():
    """docs/panels/ (tools/panel_shots.py) shows every panel of every chapter and lab, each image
    listed in its README; a new panel without a screenshot fails here."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "tools"))
    import panel_shots

    index = (ROOT / "docs" / "panels" / "README.md").read_text()
    expected = []
    for rel in panel_shots.notebooks_with_panels():
        for _, panel in panel_shots.panel_cells(rel):
            assert hasattr(gl.widgets, panel), f"{rel}: {panel} is not a panel of gl.widgets"
            name = f"{rel.split('/')[0]}-{rel.split('/')[-1].removesuffix('.ipynb')}-{panel}.png"
            expected.append(name)
            assert (ROOT / "docs" / "panels" / name).is_file(), f"no screenshot of {panel} in {rel}"
            assert f"]({name})" in index, f"docs/panels/README.md does not show {name}"
    assert len(expected) >= 16  # the chapters' 14 panels, lab 10's capstone, the dashboard
