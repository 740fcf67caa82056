"""What every lab's checks share: a check's result, and the scoreboard that collects them.

A check never raises on a wrong or missing answer: the lab notebook runs top to
bottom either way, and the :class:`Scoreboard` at the end says what is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckResult:
    """The outcome of one check: its name, whether it passed, and a message for the participant."""

    name: str
    passed: bool
    message: str

    def _repr_html_(self) -> str:
        colour, mark = ("#2ca02c", "passed") if self.passed else ("#d62728", "not yet")
        return f"<div style='color:{colour}'><b>{self.name}: {mark}</b> &mdash; {self.message}</div>"

    def __str__(self) -> str:
        return f"{self.name}: {'passed' if self.passed else 'not yet'} - {self.message}"


def unanswered(name: str, hint: str) -> CheckResult:
    return CheckResult(name, False, f"no answer yet ({hint})")


@dataclass
class Scoreboard:
    """Collects a lab's check results; ``metrics()`` feeds ``record_metrics``."""

    results: dict[str, CheckResult] = field(default_factory=dict)

    def add(self, result: CheckResult) -> CheckResult:
        self.results[result.name] = result
        return result

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results.values())

    def metrics(self) -> dict[str, Any]:
        return {"checks": len(self.results), "passed": self.passed, "passed_names": sorted(n for n, r in self.results.items() if r.passed)}

    def _repr_html_(self) -> str:
        rows = "".join(r._repr_html_() for r in self.results.values())
        return f"<div><b>{self.passed} of {len(self.results)} checks passed</b>{rows}</div>"
