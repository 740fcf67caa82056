"""Units of time and how durations are written for a reader."""

from __future__ import annotations

from .. import validate

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


def human_duration(seconds: float) -> str:
    """A short human form of a duration in seconds: ``"1h 12m"``, ``"4m 30s"``, ``"2d 3h"``."""
    validate.seconds("seconds", seconds)
    if seconds < 60:
        return f"{seconds:.3g}s"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s"


def compact_duration(seconds: float) -> str:
    """``"2 h"``, ``"30 min"``, ``"45 s"``: a round duration in its largest whole unit."""
    for unit, name in ((3600.0, "h"), (60.0, "min")):
        if seconds >= unit and (seconds / unit) == round(seconds / unit, 1):
            return f"{seconds / unit:g} {name}"
    return f"{seconds:g} s"
