"""What the chapters' panels share: an offline chart widget, a headline figure, the Run controls,
and the display of a panel with a static figure of itself (:func:`show_panel`)."""

from __future__ import annotations

import os
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable

import altair as alt
import ipywidgets as W

from ..errors import ConfigError
from ..machine import available_memory_bytes  # noqa: F401  (what fits in this machine's memory)


def chart_widget(chart: alt.TopLevelMixin) -> alt.JupyterChart:
    """An offline ``alt.JupyterChart`` (update it in place by assigning ``.chart``); displayed, it
    also carries a static PNG of its chart (:class:`goodputlab.charts.static.LiveChart`)."""
    from ..charts.static import LiveChart

    return LiveChart(chart)


def _settings_text(widget: W.Widget) -> str | None:
    """``description value`` of a control, for the static figure of a panel."""
    if isinstance(widget, (W.Button, W.IntProgress, W.FloatProgress, W.HTML, W.Label)):
        return None
    if not isinstance(widget, W.ValueWidget) or not getattr(widget, "description", ""):
        return None
    if widget.layout.display == "none":  # a control hidden because it changes nothing now
        return None
    value = widget.value
    if hasattr(widget, "options") and hasattr(widget, "label") and widget.label is not None:
        value = widget.label
    if isinstance(value, (tuple, list)):  # a multiple choice: its labels, not a Python tuple
        text = ", ".join(str(v) for v in value) or "none"
    else:
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return f"{widget.description}: {text}"


def _strip_tags(markup: str) -> str:
    import html
    import re

    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


class _Blocks(HTMLParser):
    """An HTML widget's text as blocks: table rows, list items, and lines of runs (text, bold)."""

    BLOCK = {"div", "p", "br", "h1", "h2", "h3", "h4"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, Any]] = []  # ("row", [cells]) | ("item", text) | ("line", [(text, bold)])
        self.bold: list[bool] = []  # per open tag: whether it makes its text bold
        self.runs: list[tuple[str, bool]] = []
        self.cells: list[str] | None = None
        self.item: list[str] | None = None
        self.hidden = 0  # inside <style> or <script>

    def _flush(self) -> None:
        text = "".join(t for t, _ in self.runs).strip()
        if text:
            self.blocks.append(("line", self.runs))
        self.runs = []

    def handle_starttag(self, tag, attrs):
        style = (dict(attrs).get("style") or "").replace(" ", "")
        if tag in ("style", "script"):
            self.hidden += 1
        if tag in self.BLOCK or tag in ("table", "ul", "ol", "li", "tr"):
            self._flush()
        if tag == "tr":
            self.cells = []
        elif tag in ("td", "th") and self.cells is not None:
            self.cells.append("")
        elif tag == "li":
            self.item = []
        if tag != "br":
            self.bold.append(tag in ("b", "strong") or "font-weight:bold" in style)

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self.hidden = max(0, self.hidden - 1)
        if tag == "tr" and self.cells is not None:
            self.blocks.append(("row", [" ".join(c.split()) for c in self.cells]))
            self.cells = None
        elif tag == "li" and self.item is not None:
            self.blocks.append(("item", " ".join("".join(self.item).split())))
            self.item = None
        elif tag in self.BLOCK:
            self._flush()
        if self.bold and tag != "br":
            self.bold.pop()

    def handle_data(self, data):
        if self.hidden:
            return
        if self.cells is not None and self.cells:
            self.cells[-1] += data
        elif self.item is not None:
            self.item.append(data)
        else:
            self.runs.append((data, any(self.bold)))

    def close(self):
        super().close()
        self._flush()


def html_parts(markup: str) -> list:
    """An HTML widget's content for a panel's static figure, as a reader would scan it: a table's rows and
    a headline figure (``label value note``, the value in bold) as a :class:`~goodputlab.charts.static.Table`,
    a list's items as bullets, other text as plain lines."""
    from ..charts.static import Table

    parser = _Blocks()
    parser.feed(markup)
    parser.close()
    parts: list = []
    rows: list[tuple[str, str, str]] = []

    def flush_rows(size: int = 13):
        if rows:
            parts.append(Table(tuple(rows), size))
            rows.clear()

    for kind, content in parser.blocks:
        if kind == "row" and len(content) >= 2:
            rows.append((content[0], content[1], " ".join(content[2:])))
            continue
        flush_rows()
        if kind == "row":
            parts.append((" ".join(content), 12, False))
        elif kind == "item":
            parts.append((f"• {content}", 12, False))
        else:
            first = next((i for i, (_, bold) in enumerate(content) if bold and _.strip()), None)
            text = lambda runs: " ".join("".join(t for t, _ in runs).split())  # noqa: E731
            if first is None:
                parts.append((text(content), 13, False))
                continue
            last = max(i for i, (t, bold) in enumerate(content) if bold and t.strip())
            label, value, note = text(content[:first]), text(content[first:last + 1]), text(content[last + 1:])
            if label:
                parts.append(Table(((label, value, note),), 14))
            else:
                parts.append((f"{value} {note}".strip(), 15, True))
    flush_rows()
    return parts


def panel_static_parts(widget: W.Widget) -> list:
    """What a panel shows now, for its static figure: one line of its settings, then its headline
    numbers, status lines and charts, in the order the panel lays them out."""

    from .layout import PanelStyle

    settings: list[str] = []
    shown: list = []

    def walk(w):
        if isinstance(w, PanelStyle):
            return
        if isinstance(w, PanelNote):
            shown.append((_strip_tags(w.value), 12, False))  # stack_png wraps it to the figure's width
            return
        if isinstance(w, W.Box):
            for child in w.children:
                walk(child)
        elif isinstance(w, alt.JupyterChart):
            if w.spec:  # a LiveChart's spec is fitted to the output area
                shown.append(w.spec)
        elif isinstance(w, W.HTML):
            shown.extend(html_parts(w.value))
        elif isinstance(w, W.Label):
            if w.value:
                shown.append(w.value)
        else:
            text = _settings_text(w)
            if text:
                settings.append(text)

    from ..charts.static import chars_per_line

    walk(widget)
    lines, line = [], ""
    for s in settings:  # wrap the settings into lines as wide as a chart, between settings
        if line and len(line) + len(s) > chars_per_line(12):
            lines.append(line)
            line = ""
        line = f"{line}  |  {s}" if line else s
    if line:
        lines.append(line)
    return [(text, 12, False) for text in lines] + shown


class PanelView:
    """Display a panel's widget tree live, laid out by :func:`goodputlab.widgets.layout.arrange`,
    with a static figure of its current state (settings, headline, charts) in the same output: the
    figure is what a reader without a kernel sees."""

    def __init__(self, widget: W.Widget):
        from .layout import arrange

        self.widget = arrange(widget) if isinstance(widget, W.Box) else widget

    def _repr_mimebundle_(self, **kwargs):
        from ..charts import static

        bundle = self.widget._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        try:
            parts = panel_static_parts(self.widget)
            image, image_metadata = static.image_entry(static.stack_png(parts))
        except Exception as e:  # the live panel still works; the committed-notebook test catches a missing figure
            import warnings

            warnings.warn(f"no static figure for a panel: {e}", stacklevel=2)
            return bundle
        text = next((p[0] for p in parts if isinstance(p, tuple) and p[1] > 12), "")
        return {**data, **image, "text/plain": f"<panel: {text}>" if text else "<panel>"}, {
            **(metadata or {}), **image_metadata}


def show_panel(widget: W.Widget) -> None:
    """What a panel's ``_ipython_display_`` does: the live widgets, with a static figure beside."""
    from IPython.display import display

    display(PanelView(widget))


def forget_old_runs(history: list, size: int, out_root: Path) -> list:
    """Keep a panel's newest ``size`` runs: delete the folders (``run-001``, ...) of the older ones
    and return the shortened history."""
    for i in range(1, len(history) - size + 1):
        shutil.rmtree(out_root / f"run-{i:03d}", ignore_errors=True)
    return history[-size:]


class PanelNote(W.HTML):
    """A sentence under a panel's charts saying what they show (in the static figure as small wrapped text)."""

    def __init__(self, text: str):
        super().__init__(value=f"<div style='color:#555;font-size:0.92em;line-height:1.45;max-width:560px'>{text}</div>")


#: what the ledger's bars and stripes show, for the panels that run real experiments
LEDGER_NOTE = (
    "Every second of a run is in one category. <b>startup</b> is the first worker's launch (importing PyTorch, "
    "building the model: a few seconds here, paid once per job on a cluster); <b>restart</b> runs from a failure "
    "to training again (a hot spare cuts it to a handover); <b>lost_work</b> is training a failure threw away; "
    "<b>checkpoint_save</b> is the part of a save that blocked training; <b>data_wait</b> is the loop waiting "
    "for its next batch."
)


def big_number(label: str) -> W.HTML:
    """An HTML widget for a headline figure such as the goodput."""
    return W.HTML(value=f"<b>{label}</b>")


def set_big_number(widget: W.HTML, label: str, value: str, note: str = "") -> None:
    widget.value = (
        f"<div style='font-size:1.1em'>{label} <span style='font-size:1.8em;font-weight:bold'>{value}</span>"
        f" <span style='color:#666'>{note}</span></div>"
    )


# --- what fits in this machine's memory ----------------------------------------------------------
def models_that_fit(models, available_bytes: int | None = None) -> tuple[list[str], str]:
    """The model presets of ``models`` whose run fits in memory, and a sentence about the others.

    Binder gives a notebook about 2 GB; a run that does not fit is killed by the kernel's OOM killer
    mid-save, so a panel offers only what fits (and the smallest, if nothing does). ``available_bytes``:
    the memory free now (default :func:`available_memory_bytes`).
    """
    from ..training.workload import PRESETS

    available = available_memory_bytes() if available_bytes is None else available_bytes
    fit = [m for m in models if PRESETS[m].run_memory_bytes <= available]
    if not fit:
        fit = [min(models, key=lambda m: PRESETS[m].run_memory_bytes)]
    left_out = [m for m in models if m not in fit]
    if not left_out:
        return fit, ""
    why = ", ".join(f"{m} ({PRESETS[m].state_bytes / 1e6:.0f} MB state) needs about {PRESETS[m].run_memory_bytes / 1e9:.1f} GB"
                    for m in left_out)
    return fit, (f"Not offered: {why} for a run, and this machine has {available / 1e9:.1f} GB of memory available.")


class RunControls:
    """The Run button, progress bar and status line of a panel that starts real runs."""

    def __init__(self, steps: int, recorded: bool = False):
        self.button = W.Button(description="Run", button_style="primary", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=steps, description="steps")
        self.status = W.Label(value="")
        # a slow machine, Binder or a phone: load the recorded run nearest to the controls instead
        self.recorded = W.Checkbox(value=recorded, description="recorded runs (no training)", indent=False,
                                   layout=W.Layout(width="200px"))
        self.note = W.HTML(value="")
        self.widget = W.VBox([W.HBox([self.button, self.recorded, self.progress, self.status]), self.note])

    def on_progress(self, p) -> None:
        """Follow a run (a :class:`goodputlab.engine.supervisor.Progress`): the bar falls back after a failure."""
        self.progress.value = p.steps_done
        self.status.value = f"attempt {p.attempt}, failures {p.failures}: {p.phase}"

    def run(self, make_config: Callable, out: Path):
        """Build the config and run it with the button disabled; ``(config, result)``, or None on bad input.

        With the ``recorded`` box ticked nothing trains: the recorded run nearest to the
        config is loaded instead (:meth:`load_recorded`), and ``config`` is the recording's.

        A bad combination of controls is reported in the status line, not raised:
        it comes from a reader moving sliders, not from a bug.
        """
        from ..engine.api import run

        try:
            config = make_config()
        except ConfigError as e:
            self.status.value = f"not run: {e}"
            return None
        if self.recorded.value:
            return self.load_recorded(config)
        self.note.value = ""
        self.button.disabled = True
        self.progress.value = 0
        self.status.value = "starting..."
        try:
            result = run(config, out=out, progress=self.on_progress)
        finally:
            self.button.disabled = False
        return config, result

    def load_recorded(self, config):
        """The recorded run nearest to ``config``: ``(its config, its result)``; the note says how it differs."""
        from ..engine.recorded import nearest_recorded, recorded_run

        nearest = nearest_recorded(config)
        result = recorded_run(nearest.name)
        self.progress.value = min(self.progress.max, result.summary["steps_completed"])
        self.note.value = f"<i>{nearest.describe()}</i>"
        return result.config, result


def definitions_note() -> W.HTML:
    """What goodput and ETTR mean, one click away under a panel that prints both (:data:`goodputlab.theory.frame.DEFINITIONS`)."""
    from ..theory.frame import DEFINITIONS

    return W.HTML(value="<details style='color:#555;font-size:0.92em;max-width:560px'><summary>goodput and ETTR</summary>"
                        f"<b>goodput</b>: {DEFINITIONS['goodput']}. <b>ETTR</b>: {DEFINITIONS['ettr']}.</details>")
