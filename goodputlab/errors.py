"""Errors that users see: each names the field, the value and what is allowed."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is out of range.

    ``field`` is the name of the offending field (the CLI maps it to its flag),
    ``value`` what was given and ``allowed`` a short phrase saying what is allowed.
    """

    def __init__(self, field: str, value: object, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r} is invalid: {allowed}")


def check(condition: bool, field: str, value: object, allowed: str) -> None:
    """Raise :class:`ConfigError` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(field, value, allowed)


class RunFileError(ValueError):
    """A file of a run folder that cannot be read as what it should be.

    The message names the file (and the line, for ``events.jsonl``) and the problem,
    so a user sees where to look instead of a traceback from deep inside a reader.
    """
