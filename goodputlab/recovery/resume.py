"""Resuming a stopped run (``goodputlab run --resume DIR``) in the same event log.

A run can stop before it is done: Ctrl-C, the failure budget, a reboot. Resuming it
starts a new supervisor *session* in the same folder: the first worker restores the
newest valid checkpoint, and the new session appends to the run's ``events.jsonl`` as
the next attempts, so one ledger covers the whole run and still closes (its buckets sum
to its wall time).

* The clock: the new session's times continue from the last event of the old one
  (:func:`continuation`), so the time the run was stopped (minutes, or a night) is not
  part of its wall time; the new session's set-up is booked ``restart`` (a ``resume``
  phase), like any other way back from a stop.
* The attempts: numbered on from the old session's last one, so steps the old session
  executed past its last checkpoint are ``lost_work`` once the new one executes them again.
* The configuration: a resumed run keeps what its checkpoints were made with (model size,
  batch size, learning rate, seed): another value would not match them, or would be silently
  overridden by them, and is refused with a clear message (:func:`check_resume_compatible`).
  Everything else may change: failure settings, checkpoint strategy, pipeline, device, and the
  number of steps (a run can be extended; its learning-rate schedule is the checkpoint's).
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import ConfigError

#: What the checkpoints were made with: a resumed run must keep these (resolved, so the preset's
#: default and the same value typed out are the same).
IDENTITY = ("model", "batch_size", "lr", "seed")

_WHY = {
    "model": "its checkpoints hold that model's weights",
    "batch_size": "its data position counts batches of that size",
    "lr": "its optimizer state holds that learning rate",
    "seed": "its data order, dropout and failures come from that seed",
}


def identity(config) -> dict[str, Any]:
    """The values of :data:`IDENTITY` for a :class:`~goodputlab.config.RunConfig` (resolved)."""
    return {
        "model": config.model,
        "batch_size": config.resolved_batch_size(),
        "lr": config.resolved_lr(),
        "seed": config.seed,
    }


def check_resume_compatible(stored, new) -> None:
    """Raise :class:`~goodputlab.errors.ConfigError` unless ``new`` may continue the run of ``stored``.

    Both are :class:`~goodputlab.config.RunConfig`; ``stored`` is the configuration the
    run's checkpoints were written with (its ``config.json``).
    """
    was, now = identity(stored), identity(new)
    for field in IDENTITY:
        if was[field] != now[field]:
            raise ConfigError(
                field,
                now[field],
                f"{was[field]}, the value of the run being resumed ({_WHY[field]}); "
                "resume without it, or start a new run in another folder",
            )


def resumed_config(stored, given: dict[str, Any]):
    """The configuration of a resumed run: ``stored`` with the settings the user ``given`` again
    (checked by :func:`check_resume_compatible`)."""
    new = stored.replace(**given) if given else stored
    check_resume_compatible(stored, new)
    return new


def continuation(events: Iterable[dict]) -> tuple[float, int]:
    """``(t, attempt)``: where a resumed session continues an event log.

    ``t`` is the time of the old log's last event (the new session's clock starts there);
    ``attempt`` is one more than the highest attempt in it.
    """
    last_t, last_attempt = 0.0, -1
    for e in events:
        last_t = max(last_t, float(e["t"]))
        last_attempt = max(last_attempt, int(e["attempt"]))
    return last_t, last_attempt + 1


def stored_config(out):
    """The configuration the run in folder ``out`` was started with (its ``config.json``), or None when
    there is none to read (not a run folder: the run-folder rules say so when the run is claimed)."""
    import json
    from pathlib import Path

    from ..engine.config import RunConfig
    from ..safe_io import read_regular

    try:
        return RunConfig.from_dict(json.loads(read_regular(Path(out).expanduser() / "config.json", 1 << 20)))
    except (OSError, ValueError, TypeError):
        return None


def resume_settings(out, given: dict[str, Any]):
    """The configuration for resuming the run in ``out`` with the settings ``given`` again: its own,
    with those changes (refused with :class:`~goodputlab.errors.ConfigError` when they change what
    decides its model). Without a readable ``config.json``, just ``given`` (the folder is judged later)."""
    from ..engine.config import RunConfig

    stored = stored_config(out)
    if stored is None:
        return RunConfig(**given)
    return resumed_config(stored, given)
