"""Chapter 10's claim explainer: type a claim ("RAM-tier checkpoints took our goodput from 85% to 95%
on 8,192 GPUs") and read what it implies about the cluster, and whether that is plausible.

The logic is :func:`goodputlab.theory.claim.explain` (pure); this panel only reads the controls
and lays the answer out. :meth:`ClaimPanel.explain` is a plain method, so the tests set a control's
``value`` and call it (an exception inside an ipywidgets callback would only log a warning).
"""

from __future__ import annotations

import html

import ipywidgets as W

from ..errors import ConfigError
from ..theory import claim as model
from .common import PanelNote, definitions_note, set_big_number, show_panel

WHAT = model.WHAT
LABELS = model.LABELS
#: The values a user may pin (:class:`goodputlab.theory.claim.Pins`): (field, description); blank is the default.
PINS = (("storage_gbps", "storage GB/s"), ("save_s", "sync save (s)"), ("restart_s", "restart (s)"),
        ("detect_s", "detection (s)"))


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


class ClaimPanel:
    """The claim explainer: lever, goodput before and after (percent), GPUs, model size, and what the user
    knows of the cluster (pins, blank for the book's defaults); the verdict, the implied values against
    their published ranges, the goodputs read as ETTR, and why."""

    def __init__(self, lever: str = "memory", before: float = 85.0, after: float = 95.0, gpus: int = 8192,
                 model_params_b: float = 70.0):
        self.lever = W.Dropdown(options=[(WHAT[k], k) for k in model.LEVERS], value=lever, description="lever")
        self.before = W.BoundedFloatText(value=before, min=1.0, max=99.99, step=0.1, description="goodput before (%)")
        self.after = W.BoundedFloatText(value=after, min=1.0, max=99.99, step=0.1, description="goodput after (%)")
        self.gpus = W.BoundedIntText(value=gpus, min=1, max=10_000_000, description="GPUs")
        self.params = W.BoundedFloatText(value=model_params_b, min=0.001, max=100_000.0, description="model (billions)")
        self.pins = {name: W.Text(value="", placeholder="default", description=label) for name, label in PINS}
        self.headline = W.HTML()
        self.table = W.HTML()
        self.note = PanelNote(
            "The claim pins two unknowns of this chapter's model: the failure rate, and the setting the lever changed. "
            "Everything else is the chapter's defaults (a 90 s detection, a 5-minute restart, Llama 3's storage per GPU), "
            "or what you pin. Each published range spans the slowest published cluster to the fastest; an implied value "
            "more than three times outside it, or two goodputs that contradict each other, makes the claim implausible.")
        controls = (self.lever, self.before, self.after, self.gpus, self.params, *self.pins.values())
        for control in controls:
            control.observe(lambda _change: self.explain(), names="value")
        self.claim: model.Claim | None = None
        self.widget = W.VBox([W.HBox([self.lever, self.gpus, self.params]), W.HBox([self.before, self.after]),
                              W.HBox(list(self.pins.values())), self.headline, self.table, self.note, definitions_note()])
        self.explain()

    def pinned(self) -> model.Pins:
        """The pins the controls hold (blank: not pinned); raises :class:`ConfigError` for a value that is not one."""
        values = {}
        for name, box in self.pins.items():
            text = box.value.strip()
            if text:
                try:
                    values[name] = float(text)
                except ValueError:
                    raise ConfigError(name, text, "a number, or blank for the default") from None
        return model.Pins(**values)

    def explain(self) -> model.Claim | None:
        """Explain the claim the controls state; ``None`` (and the reason in the headline) when it cannot be read."""
        try:
            self.claim = model.explain(self.lever.value, self.before.value / 100, self.after.value / 100,
                                       int(self.gpus.value), float(self.params.value), pins=self.pinned())
        except ConfigError as e:
            self.claim = None
            set_big_number(self.headline, "the claim", "cannot be read", html.escape(str(e)))
            self.table.value = ""
            return None
        c = self.claim
        set_big_number(self.headline, f"{WHAT[c.lever]}, {c.before:.1%} to {c.after:.1%} on {c.gpus:,} GPUs "
                                      f"({c.model_params_b:g}B parameters):", "plausible" if c.plausible else "implausible")
        rows = [f"<tr><td>{LABELS[k][0]}</td><td><b>{_fmt(v)}</b> {LABELS[k][1]}</td></tr>"
                for k, v in c.implied.items() if k in LABELS]
        rows += [f"<tr><td>ETTR {k}</td><td><b>{v:.1%}</b> (goodput {getattr(c, k):.1%})</td></tr>"
                 for k, v in c.ettr.items()]
        checks = [f"<li>{html.escape(ch.range.quantity)}: <b>{'plausible' if ch.plausible else 'implausible'}</b> "
                  f"(published: {html.escape(ch.range.published)})</li>" for ch in c.checks]
        why = [f"<li>{html.escape(r)}</li>" for r in c.reasons] + [f"<li>{html.escape(n)}</li>" for n in c.notes]
        self.table.value = (f"<p><i>{html.escape(c.reading)}</i></p><table>{''.join(rows)}</table>"
                            + (f"<ul>{''.join(checks)}</ul>" if checks else "") + (f"<ul>{''.join(why)}</ul>" if why else ""))
        return c

    def _ipython_display_(self) -> None:
        show_panel(self.widget)
