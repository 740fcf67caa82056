"""One layout for every panel: labels, read-outs and buttons that show their whole text, columns of
controls side by side where there is room and stacked in a narrow window, status lines that wrap,
and sliders whose read-out is exactly the value the panel uses.

:func:`arrange` lays a panel's widget tree out; :func:`goodputlab.widgets.common.show_panel` calls
it, so every panel gets the same treatment without code of its own:

- every column of controls (a ``VBox`` of sliders, drop-downs, text boxes) gets one description
  width, the widest of its labels, so the tracks line up, and one control width;
- every row (an ``HBox``) wraps: two columns sit side by side in a wide window and one above the
  other in a narrow one (JupyterLab's output area is about 570 px in a 1000 px window);
- a small stylesheet, scoped to the panel, keeps any label, read-out or button at least as wide as
  its text (a font wider than the estimate widens the box rather than cutting the text), puts a row
  of toggle buttons beside its label (wrapping the buttons when they do not fit) and lets status
  lines wrap.

The sliders of :func:`float_slider` and :func:`log_slider` round a dragged or typed value to what
their read-out shows, so the number on screen is the number the experiment uses;
:func:`choice_slider` steps through a list of round values (zero among them where a log scale
cannot go).
"""

from __future__ import annotations

import math
import re

import ipywidgets as W

PANEL_CLASS = "goodputlab-panel"
ROW_CLASS = "goodputlab-row"
#: a slider's track and its read-out, in CSS pixels
TRACK_PX = 170
READOUT_PX = 76
#: width of one character of a 13 px sans-serif label (DejaVu Sans, among the widest UI fonts)
PX_PER_CHAR = 7.4
LABEL_PADDING_PX = 12

STYLESHEET = f"""<style>
.{PANEL_CLASS} .widget-label {{ min-width: max-content; }}
.{PANEL_CLASS} :is(.widget-readout, .jupyter-widget-readout) {{ flex: 0 0 {READOUT_PX - 12}px; min-width: max-content; max-width: none; }}
.{PANEL_CLASS} :is(.widget-button, .widget-toggle-button) {{ width: auto; min-width: max-content; padding: 0 12px; }}
.{PANEL_CLASS} .widget-label-basic {{ white-space: normal; height: auto; line-height: 1.5; }}
.{PANEL_CLASS} .{ROW_CLASS} {{ flex-wrap: wrap; column-gap: 24px; }}
.{PANEL_CLASS} .widget-toggle-buttons {{ display: flex; align-items: flex-start; }}
.{PANEL_CLASS} .widget-toggle-buttons > .widget-label {{ text-align: right; padding-right: 8px; }}
.{PANEL_CLASS} .widget-toggle-buttons > div {{ display: flex; flex-wrap: wrap; flex: 1 1 0; min-width: 0; }}
</style>"""


class PanelStyle(W.HTML):
    """The panel's stylesheet (:data:`STYLESHEET`): shows nothing, and the static figure leaves it out."""

    def __init__(self):
        super().__init__(value=STYLESHEET, layout=W.Layout(display="none"))


def text_px(text: str) -> int:
    """A generous estimate of ``text``'s width in a 13 px widget label (CSS pixels)."""
    return math.ceil(len(text) * PX_PER_CHAR) + LABEL_PADDING_PX


_SIZED = (W.IntSlider, W.FloatSlider, W.FloatLogSlider, W.SelectionSlider, W.IntRangeSlider, W.FloatRangeSlider,
          W.Dropdown, W.Text, W.IntText, W.FloatText, W.BoundedIntText, W.BoundedFloatText, W.SelectMultiple)


def _described(w: W.Widget) -> bool:
    return isinstance(w, (*_SIZED, W.ToggleButtons)) and bool(getattr(w, "description", ""))


def _size(w: W.Widget, label_px: int) -> None:
    w.style.description_width = f"{label_px}px"
    if isinstance(w, _SIZED):
        w.layout.width = f"{label_px + TRACK_PX + READOUT_PX}px"
    else:  # toggle buttons: as wide as their buttons
        w.style.button_width = ""
        w.layout.width = "auto"


def _described_in(w: W.Widget) -> list[W.Widget]:
    if _described(w):
        return [w]
    if isinstance(w, W.Box):
        return [c for child in w.children for c in _described_in(child)]
    return []


def _walk(w: W.Widget) -> None:
    if isinstance(w, W.HBox):
        w.add_class(ROW_CLASS)
    if isinstance(w, W.Box):
        for child in w.children:
            _walk(child)
    elif isinstance(w, W.Checkbox):
        w.layout.width = "auto"


def arrange(panel: W.Box) -> W.Box:
    """Lay ``panel`` (a panel's root box) out as the module says; idempotent. Returns ``panel``.

    Every described control of the panel gets the widest label's width, so the tracks line up
    whether two columns stand side by side or one above the other."""
    if PANEL_CLASS in panel._dom_classes:
        return panel
    panel.add_class(PANEL_CLASS)
    controls = _described_in(panel)
    if controls:
        label_px = max(text_px(c.description) for c in controls)
        for c in controls:
            _size(c, label_px)
    _walk(panel)
    panel.children = (PanelStyle(), *panel.children)
    return panel


# --- sliders whose read-out is the value used --------------------------------------------------------
_D3_FORMAT = re.compile(r"^(?:.?[<>=^])?[-+( ]?[$#]?0?\d*,?(?:\.(\d+))?~?([a-z%]?)$")


def _shown(value: float, fmt: str) -> float:
    """``value`` as a read-out with the d3 format ``fmt`` (ipywidgets formats read-outs with d3)
    shows it, as a number: ``.2f`` rounds to 2 decimals, ``.1%`` to a tenth of a percent, ``,.3r``
    (or ``g``, ``e``, ``s``) to 3 significant digits, ``d`` to an integer."""
    m = _D3_FORMAT.match(fmt)
    if not m:
        raise ValueError(f"a read-out format goodputlab does not know: {fmt!r}")
    precision, kind = m.group(1), m.group(2)
    p = int(precision) if precision is not None else 6
    if kind == "f":
        return round(value, p)
    if kind == "%":
        return round(value * 100, p) / 100
    if kind == "d":
        return float(round(value))
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{max(1, p)}g}")  # r, g, e, s, none: significant digits


class _ReadoutValue:
    """A value the reader drags to or types in is used as the read-out shows it (a value set from
    code, such as a chapter's default, is kept as given)."""

    def set_state(self, sync_data):
        if "value" in sync_data and isinstance(sync_data["value"], (int, float)):
            sync_data = {**sync_data, "value": _shown(float(sync_data["value"]), self.readout_format)}
        super().set_state(sync_data)


class ExactFloatSlider(_ReadoutValue, W.FloatSlider):
    """A ``FloatSlider`` whose value, when the reader moves it, is what its read-out shows."""


class ExactFloatLogSlider(_ReadoutValue, W.FloatLogSlider):
    """A ``FloatLogSlider`` whose value, when the reader moves it, is what its read-out shows
    (dragging moves the exponent in steps, so the value would otherwise be 12.0226... for "12")."""


def float_slider(value: float, lo: float, hi: float, step: float, description: str, fmt: str = "", **kwargs) -> ExactFloatSlider:
    """A slider from ``lo`` to ``hi`` in steps of ``step``; the read-out shows as many decimals as the
    step has (unless ``fmt`` says otherwise), and the value is what it shows."""
    if not fmt:
        decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
        fmt = f".{decimals}f"
    return ExactFloatSlider(value=value, min=lo, max=hi, step=step, description=description, readout_format=fmt,
                            continuous_update=False, **kwargs)


def log_slider(value: float, lo: float, hi: float, description: str, fmt: str = ",.3r", step: float = 0.01,
               **kwargs) -> ExactFloatLogSlider:
    """A slider from ``lo`` to ``hi`` on a log scale (for ranges of several decades); the read-out
    shows three significant digits in plain notation (``fmt``: 2,000, not 2.00e+3),
    and the value is what it shows."""
    # the ends a hair outside lo and hi: 10 ** log10(480) is 479.99999999999994, and "480" is used as 480
    return ExactFloatLogSlider(value=value, base=10, min=math.log10(lo) - 1e-12, max=math.log10(hi) + 1e-12, step=step,
                               description=description, readout_format=fmt, continuous_update=False, **kwargs)


def choice_slider(values, value, description: str, fmt: str = "g", **kwargs) -> W.SelectionSlider:
    """A slider through ``values`` (round numbers, several per decade, zero allowed), labelled with
    ``fmt``; its value is exactly the number shown."""
    options = [(format(v, fmt), v) for v in values]
    if value not in values:
        raise ValueError(f"{description}: {value!r} is not one of {list(values)}")
    slider = W.SelectionSlider(options=options, value=value, description=description, continuous_update=False, **kwargs)
    slider.label = options[list(values).index(value)][0]  # ipywidgets leaves it empty when the value is the first option
    return slider


#: checkpoint intervals (steps) an interval slider steps through: dense where a short run's lesson is
STEP_INTERVALS: tuple[int, ...] = (1, 2, 3, 5, 7, 10, 15, 20, 25, 30, 40, 50, 70, 100, 150, 200, 250, 300, 400, 500,
                                   700, 1000, 1500, 2000, 3000, 5000)


def interval_slider(value: int, steps: int, description: str = "checkpoint every (steps)", off: bool = False,
                    **kwargs) -> W.SelectionSlider:
    """A checkpoint interval in steps, from 1 (or 0, no checkpoints, with ``off``) to ``steps``, through
    :data:`STEP_INTERVALS`: a linear slider to ``steps`` would leave the intervals that matter (5 to 50)
    a sliver of its track."""
    values = sorted({*((0,) if off else ()), *(v for v in STEP_INTERVALS if v <= steps), value})
    return choice_slider(tuple(values), value, description, fmt="d", **kwargs)
