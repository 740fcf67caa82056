"""Plain-text reports of a run: the breakdown table the CLI prints."""

from __future__ import annotations

from typing import Any

from ..categories import CATEGORIES, MEANINGS

_BAR = 30  # characters for a 100% bar


def breakdown_table(summary: dict[str, Any], legend: bool = True) -> str:
    """A readable table of where the wall time went, with a bar per category.

    ``legend`` adds one line per category saying what its seconds were spent on.
    """
    wall = summary["wall_s"]
    lines = [
        f"goodput {summary['goodput']:.1%}   wall {wall:.2f} s   failures {summary['failures']}   "
        f"checkpoints {summary['checkpoints']}   steps {summary['steps_completed']}/{summary['config']['steps']}"
        f" (executed {summary['steps_executed']})",
        "",
        f"{'category':<20}{'seconds':>10}{'share':>9}",
    ]
    for cat in CATEGORIES:
        sec = summary["buckets"][cat]
        share = sec / wall if wall > 0 else 0.0
        lines.append(f"{cat:<20}{sec:>10.3f}{share:>9.1%}  {'#' * round(share * _BAR)}")
    total = sum(summary["buckets"].values())
    lines.append(f"{'total':<20}{total:>10.3f}{(total / wall if wall else 0):>9.1%}")
    if legend:
        lines.append("")
        lines += [f"  {cat:<18}{MEANINGS[cat]}" for cat in CATEGORIES]
    auto = summary.get("auto_interval")
    if auto:
        lines.append("")
        lines.append(
            f"--ckpt-every auto: last chose {auto['interval_s']:.3g} s between saves "
            f"(Daly's interval for a save of {1000 * auto['save_s']:.3g} ms and an estimated MTBF of "
            f"{auto['mtbf_s']:.3g} s after {auto['failures_seen']} failures)"
        )
    if summary.get("initial_loss") is not None and summary.get("final_loss") is not None:
        lines.append("")
        lines.append(f"loss {summary['initial_loss']:.3f} -> {summary['final_loss']:.3f}")
    if summary.get("final_state_sha256"):
        lines.append(f"final_state_sha256 {summary['final_state_sha256']}")
    if not summary.get("completed", True):
        lines.append(f"NOT COMPLETED: {summary.get('stop_reason')}")
    return "\n".join(lines)
