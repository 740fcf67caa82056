"""Plain-text reports of a run: the breakdown table the CLI prints."""

from __future__ import annotations

from typing import Any

from ..categories import CATEGORIES, DEGRADED, MEANINGS, STRAGGLER_WAIT

_BAR = 30  # characters for a 100% bar


def _cannot_happen(cat: str, summary: dict[str, Any]) -> bool:
    """A category the run could not book, left out of its table while it is zero: ``straggler_wait``
    of a one-process run (nobody to wait for), ``degraded`` of a run without in-job recovery (no
    replica group trains on while another is missing)."""
    if summary["buckets"].get(cat, 0.0) != 0:
        return False
    if cat == STRAGGLER_WAIT:
        return summary.get("world_size", 1) <= 1
    if cat == DEGRADED:
        return (summary.get("config") or {}).get("fault_tolerance", "none") != "torchft"
    return False


def breakdown_table(summary: dict[str, Any], legend: bool = True) -> str:
    """A readable table of where the wall time went, with a bar per category.

    ``legend`` adds one line per category saying what its seconds were spent on.
    """
    wall = summary["wall_s"]
    lines = [
        f"goodput {summary['goodput']:.1%}   wall {wall:.2f} s   failures {summary['failures']}   "
        f"checkpoints {summary['checkpoints']}   steps {summary['steps_completed']}/{summary['config']['steps']}"
        f" (executed {summary['steps_executed']})",
        *([f"the part from {summary['interval']['since_s']:.2f} s to {summary['interval']['until_s']:.2f} s of the run"]
          if summary.get("interval") else []),
        "",
        f"{'category':<20}{'seconds':>10}{'share':>9}",
    ]
    shown = [c for c in CATEGORIES if not _cannot_happen(c, summary)]
    for cat in shown:
        sec = summary["buckets"].get(cat, 0.0)
        share = sec / wall if wall > 0 else 0.0
        lines.append(f"{cat:<20}{sec:>10.3f}{share:>9.1%}  {'#' * round(share * _BAR)}")
        if cat == "other":
            lines += custom_lines(summary)
    total = sum(summary["buckets"].values())
    lines.append(f"{'total':<20}{total:>10.3f}{(total / wall if wall else 0):>9.1%}")
    if legend:
        lines.append("")
        lines += [f"  {cat:<20}{MEANINGS[cat]}" for cat in shown]
    auto = summary.get("auto_interval")
    if auto:
        lines.append("")
        lines.append(
            f"--ckpt-every auto: last chose {auto['interval_s']:.3g} s between saves "
            f"(Daly's interval for a save of {1000 * auto['save_s']:.3g} ms and an estimated MTBF of "
            f"{auto['mtbf_s']:.3g} s after {auto['failures_seen']} failures)"
        )
    lines += recovery_lines(summary)
    if summary.get("initial_loss") is not None and summary.get("final_loss") is not None:
        lines.append("")
        lines.append(f"loss {summary['initial_loss']:.3f} -> {summary['final_loss']:.3f}")
    if summary.get("final_state_sha256"):
        lines.append(f"final_state_sha256 {summary['final_state_sha256']}")
    if not summary.get("completed", True):
        lines.append(f"NOT COMPLETED: {summary.get('stop_reason')}")
    return "\n".join(lines)


def custom_lines(summary: dict[str, Any]) -> list[str]:
    """Custom badput (``rec.custom("eval")``), one row per name under ``other``, of which it is a part."""
    wall = summary["wall_s"]
    return [f"  {'of which ' + name:<18}{sec:>10.3f}{(sec / wall if wall > 0 else 0.0):>9.1%}"
            for name, sec in sorted((summary.get("custom") or {}).items(), key=lambda kv: -kv[1])]


def recovery_lines(summary: dict[str, Any]) -> list[str]:
    """What recovery did, under the table (nothing for a run without recovery events)."""
    r = summary.get("recovery") or {}
    lines = []
    if r.get("straggler_steps"):
        lines.append(f"  of other: {r['straggler_s']:.3f} s added by {r['straggler_steps']} straggling steps")
    if r.get("injected"):
        lines.append("failures injected: " + ", ".join(f"{n} {mode}" for mode, n in sorted(r["injected"].items())))
    if r.get("hang_detection_s"):
        d = r["hang_detection_s"]
        lines.append(f"hangs detected after {min(d):.2f}-{max(d):.2f} s without progress (the watchdog)")
    if r.get("handovers"):
        lines.append(f"hot spare: {r['handovers']} failures handed to a standby already started")
    if r.get("loader_rebuilds"):
        lines.append(f"DataLoader rebuilt in place {r['loader_rebuilds']} times (no restart)")
    if r.get("ckpt_failed"):
        lines.append(f"saves that failed (disk full): {r['ckpt_failed']}; the previous checkpoint stayed the newest")
    return ([""] + lines) if lines else []
