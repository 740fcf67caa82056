"""Reading an event log: every line checked, in batches, at the speed of the file (pure).

:func:`parse_event` is the rule for one line: a JSON object with the fields and types the
ledger relies on, or ``ValueError`` saying what is wrong. :func:`event_batches` reads a log
with it in batches of ``(t, attempt, step, kind, fields)`` tuples, the ledger fold's input,
holding one batch in memory at a time.

Most lines of a long log are a step's three events, written by the recorder and the
worker as ``{"t":12.3456789,"attempt":0,"step":41,"kind":"compute"}`` (``step_end`` adds
``"loss":2.31``). One regular expression over a megabyte of the file recognises those
lines whole (its grammar is a strict subset of JSON, so a line it accepts is a valid
event), and only the other lines (a checkpoint's commit, an attempt's start, anything
unusual) go through ``json.loads`` and :func:`parse_event`. The result is the same as
parsing every line with ``json.loads``, about 4x faster (``benchmarks/report_scale.py``
measures both, and orjson and msgspec beside them).

Errors: a line that is not an event raises :class:`EventLogError` naming the file and
the line; a line longer than :data:`MAX_LINE_BYTES` too. Only a last line cut short (no
newline: a process killed mid-write) is skipped, with an :class:`EventLogWarning`.
The file must be a regular file (never a link, a FIFO or a device; ``safe_io``).
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import RunFileError

MAX_LINE_BYTES = 1 << 20  # an event is a few hundred bytes; a longer "line" is not an event
CHUNK_BYTES = 1 << 20  # read this much at a time


class EventLogError(RunFileError):
    """A line of an event log that is not an event; the message names the file and the line."""


class EventLogWarning(UserWarning):
    """The last line of an event log was cut short (a process killed mid-write) and was skipped."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


_NUMBER = ("a number", _is_number)
_COUNT = ("a whole number >= 0", _is_count)
_STRING = ("a string", lambda v: isinstance(v, str))
_STEP = ("a step number", _is_count)
# Fields the ledger, the summary and the measurements read, by kind (the names of engine/events.py):
# (field, required, (what, check)).
_KIND_FIELDS: dict[str, tuple[tuple[str, bool, tuple[str, Callable[[Any], bool]]], ...]] = {
    "compute": (("step", True, _STEP),),
    "data_wait": (("step", True, _STEP),),
    "sync_wait": (("step", True, _STEP),),
    "step_end": (
        ("step", True, _STEP),
        ("loss", False, ("a number", _optional(_is_number))),
        ("samples", False, ("a list of sample numbers", lambda v: isinstance(v, list) and all(_is_count(i) for i in v))),
    ),
    "end": (
        ("completed", False, ("true or false", lambda v: isinstance(v, bool))),
        ("reason", False, _STRING),
        ("resume_step", False, _COUNT),
    ),
    "failure": (("cause", False, _STRING),),
    "finish": (
        ("final_state_sha256", False, ("a string", _optional(lambda v: isinstance(v, str)))),
        ("final_loss", False, ("a number", _optional(_is_number))),
    ),
    "restored": (("ckpt_step", True, _COUNT),),
    "ckpt_commit": (("ckpt_step", True, _COUNT),),
    "ckpt_invalid": (("ckpt_step", True, ("a step number", _is_int)), ("reason", False, _STRING)),
    "init": (("total_steps", False, ("a whole number >= 0", _optional(_is_count))),),
}
_NEEDS_STEP = frozenset(k for k, fields in _KIND_FIELDS.items() if any(n == "step" and req for n, req, _ in fields))
_NEEDS_FIELD = frozenset(k for k, fields in _KIND_FIELDS.items() if any(n != "step" and req for n, req, _ in fields))


def parse_event(raw: bytes) -> dict:
    """One line of the log (without its newline) as an event; raises ``ValueError`` saying what is wrong."""
    if b"\0" in raw:
        raise ValueError("NUL bytes (a block of zeros, as a crash of the file system can leave)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid UTF-8 (byte {e.start})") from None
    if not text.strip():
        raise ValueError("an empty line")
    try:
        e = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise ValueError("not an event (JSON nested too deeply)") from None
    except ValueError:  # an integer of more than 4300 digits
        raise ValueError("not an event (a number too long to read)") from None
    if not isinstance(e, dict):
        raise ValueError(f"a JSON {type(e).__name__}, not an object")
    for name, (what, check) in (
        ("t", ("a finite number of seconds", lambda v: _is_number(v) and math.isfinite(v))),
        ("attempt", _COUNT),
        ("kind", ("a string", lambda v: isinstance(v, str) and v != "")),
        ("step", ("a step number or null", _optional(_is_count))),
    ):
        if name not in e:
            raise ValueError(f"no {name!r} field")
        if not check(e[name]):
            raise ValueError(f"{name!r} is {_short(e[name])}, not {what}")
    for name, required, (what, check) in _KIND_FIELDS.get(e["kind"], ()):
        if name not in e:
            if required:
                raise ValueError(f"a {e['kind']!r} event without {name!r}")
            continue
        if not check(e[name]):
            raise ValueError(f"{name!r} of a {e['kind']!r} event is {_short(e[name])}, not {what}")
    return e


def _short(value: Any) -> str:
    """A value as the error shows it: its repr, at most 60 characters."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        return "a number of more than 4300 digits"
    return text if len(text) <= 60 else text[:57] + "..."


# The lines most of a log is made of (see the module's docstring). t: no exponent, at most 16 digits
# before the point (so always finite); attempt and step: plain whole numbers; loss: a float.
_T = rb"-?(?:0|[1-9][0-9]{0,15})\.[0-9]+"
_WHOLE = rb"0|[1-9][0-9]{0,17}"
_LOSS = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)|null"
_LINE = re.compile(
    rb'(?:\{"t":(' + _T + rb'),"attempt":(' + _WHOLE + rb'),"step":(' + _WHOLE + rb'|null),"kind":"([a-z_]{1,40})"'
    rb'(?:\}|,"loss":(' + _LOSS + rb')\})|([^\n]*))\n'
)
_NO_FIELDS: dict = {}  # shared by every event without fields: never written to


def _kind_of(raw: bytes, kinds: dict) -> tuple[str, bool]:
    """``(kind, may be read fast)`` of a kind's bytes: a kind needing fields never can."""
    kind = raw.decode("ascii")
    entry = kinds[raw] = (kind, kind not in _NEEDS_FIELD)
    return entry


def event_batches(path: Path | str, offset: int = 0, lineno: int = 0, stop_at_partial: bool = False,
                  fd: int | None = None) -> Iterator[list[tuple]]:
    """The events of ``path`` from byte ``offset`` (line ``lineno`` before it) in batches of tuples
    ``(t, attempt, step, kind, fields)``, in file order; ``fields`` holds the event's other fields
    (for a line read by ``json.loads``, the whole event).

    A last line without its newline is skipped with an :class:`EventLogWarning`, unless
    ``stop_at_partial`` (a live log being appended to: :class:`LogReader` reads it next time).
    ``fd``: an open descriptor of the file to read instead of opening ``path`` (it is closed).
    """
    reader = LogReader(path, offset, lineno, fd=fd)
    try:
        yield from reader.batches(stop_at_partial)
    finally:
        reader.close()


def open_log(path: Path | str) -> int:
    """A read-only descriptor of the log at ``path``: a regular file, never a link, a FIFO or a device;
    :class:`EventLogError` otherwise (``FileNotFoundError`` when it does not exist)."""
    from ..safe_io import UnsafeFileError, open_regular

    try:
        fd, _ = open_regular(path, 1 << 62)
    except UnsafeFileError as e:  # its message begins with the file's name
        raise EventLogError(f"{Path(path).parent / str(e)}") from None
    return fd


class LogReader:
    """Reads a log's events from a byte offset on; :attr:`offset` and :attr:`lineno` say how far it got
    (the start of the first line not read yet), so a live log can be read on from there."""

    def __init__(self, path: Path | str, offset: int = 0, lineno: int = 0, fd: int | None = None):
        self.path = Path(path)
        self.offset, self.lineno = offset, lineno
        self.fd = open_log(path) if fd is None else fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def batches(self, stop_at_partial: bool = False) -> Iterator[list[tuple]]:
        """Batches of event tuples up to the end of the file (see :func:`event_batches`)."""
        rest = b""
        pos = self.offset
        while True:
            chunk = os.pread(self.fd, CHUNK_BYTES, pos)
            if not chunk:
                break
            pos += len(chunk)
            data = rest + chunk if rest else chunk
            end = data.rfind(b"\n") + 1
            rest = data[end:]
            if len(rest) > MAX_LINE_BYTES:
                raise EventLogError(f"{self.path}, line {self.lineno + 1}: longer than {MAX_LINE_BYTES} bytes, not an event")
            if end:
                batch = self._parse(data, end)
                self.offset = pos - len(rest)
                yield batch
        if rest and not stop_at_partial and rest.strip(b"\0 \t\r"):
            warnings.warn(
                f"{self.path}, line {self.lineno + 1}: cut short at the end of the log "
                "(a process killed while writing it); ignored",
                EventLogWarning,
                stacklevel=3,
            )

    def _parse(self, data: bytes, end: int) -> list[tuple]:
        kinds = _KINDS
        out: list[tuple] = []
        append = out.append
        for t, a, s, k, loss, other in _LINE.findall(data, 0, end):
            if t:
                entry = kinds.get(k) or _kind_of(k, kinds)
                if s == b"null":
                    if entry[0] in _NEEDS_STEP:
                        self._slow(data, end, len(out))  # raises, naming the line
                    s = None
                else:
                    s = int(s)
                if not entry[1]:
                    self._slow(data, end, len(out))
                if loss:
                    fields = {"loss": None if loss == b"null" else float(loss)}
                else:
                    fields = _NO_FIELDS
                append((float(t), int(a), s, entry[0], fields))
            else:
                if len(other) > MAX_LINE_BYTES:
                    raise EventLogError(
                        f"{self.path}, line {self.lineno + len(out) + 1}: longer than {MAX_LINE_BYTES} bytes, not an event"
                    )
                try:
                    e = parse_event(other)
                except ValueError as err:
                    raise EventLogError(f"{self.path}, line {self.lineno + len(out) + 1}: {err}") from None
                append((e["t"], e["attempt"], e["step"], e["kind"], e))
        self.lineno += len(out)
        return out

    def _slow(self, data: bytes, end: int, index: int) -> None:
        """A line the fast grammar read but that is not an event: raise with :func:`parse_event`'s reason."""
        raw = data[:end].split(b"\n")[index]
        try:
            parse_event(raw)
        except ValueError as err:
            raise EventLogError(f"{self.path}, line {self.lineno + index + 1}: {err}") from None
        raise AssertionError("the fast grammar accepted a line parse_event also accepts")  # pragma: no cover


_KINDS: dict[bytes, tuple[str, bool]] = {}


def as_dict(ev: tuple) -> dict:
    """An event tuple as the event's dict (``{"t", "attempt", "step", "kind", ...}``)."""
    t, a, s, k, f = ev
    if "kind" in f:
        return f
    return {"t": t, "attempt": a, "step": s, "kind": k, **f}
