"""A self-check in a chapter: a question with a few answers, a Check button, and "Right" or "Not yet".

``gl.widgets.self_check("3-young")`` shows the question :mod:`goodputlab.self_checks` names. With a
kernel it is this widget; its output also carries the question as Markdown and HTML with the answer
folded away (``<details>``), which is what the site, GitHub and JupyterLab without a kernel show.
"""

from __future__ import annotations

import ipywidgets as W

from .. import self_checks
from ..prose import to_html

CLASS = "goodputlab-self-check"
#: radio labels wrap instead of being cut (ipywidgets keeps them on one line)
STYLE = (f"<style>.{CLASS} .widget-radio-box label {{ white-space: normal; line-height: 1.35; margin: 2px 0; }}"
         f".{CLASS} .widget-radio-box {{ width: 100%; }}</style>")


class SelfCheck(W.VBox):
    """One question: pick an answer, press Check; :meth:`check` is what the button does."""

    def __init__(self, question: self_checks.Question):
        self.question = question
        prompt = W.HTML(f"<b>Check yourself.</b> {to_html(question.prompt)[3:-4]}")
        self.choice = W.RadioButtons(
            options=[(f"{self_checks.LETTERS[i]}. {text}", i) for i, text in enumerate(question.options)],
            value=None, layout=W.Layout(width="auto", max_width="560px"))
        self.button = W.Button(description="Check", button_style="")
        self.feedback = W.HTML()
        self.button.on_click(lambda _: self.check())
        super().__init__([W.HTML(STYLE, layout=W.Layout(display="none")), prompt, self.choice, self.button,
                          self.feedback])
        self.add_class(CLASS)

    def check(self) -> bool | None:
        """Say whether the chosen answer is right (True), not yet (False) or missing (None)."""
        right, words = self_checks.verdict(self.question, self.choice.value)
        color = {True: "#1b7a1b", False: "#b35900", None: "#555555"}[right]
        self.feedback.value = f"<div style='color:{color};max-width:560px;line-height:1.45'>{to_html(words)[3:-4]}</div>"
        return right

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        return {**(data or {}), **static_bundle(self.question)}, metadata or {}


def static_bundle(question: self_checks.Question) -> dict[str, str]:
    """The output a reader without a kernel sees: Markdown (the site, JupyterLab), HTML (GitHub), text."""
    markdown = self_checks.static_markdown(question)
    return {"text/markdown": markdown, "text/html": self_checks.static_html(question),
            "text/plain": f"Check yourself. {question.prompt}"}


def self_check(key: str) -> SelfCheck:
    """The self-check named ``key`` (``"3-young"``: chapter 3's question on Young's interval)."""
    return SelfCheck(self_checks.question(key))
