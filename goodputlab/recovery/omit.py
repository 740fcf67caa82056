"""Incomplete checkpoints, on purpose (``--ckpt-omit``), and what they do to a run.

A complete checkpoint holds the model, the optimizer (and LR schedule), the data
position and every RNG state; resuming from it is bit-exact. To teach why each part
is there, ``--ckpt-omit optimizer,data,rng`` leaves parts out of every checkpoint:

* ``optimizer``: the optimizer's state (AdamW's moment estimates and step counts) is
  not saved; a restart begins them from zero while the weights are trained, and the
  first updates are too large (the loss jumps). The LR schedule is kept.
* ``data``: the data position is not saved; a restart cannot know where the input
  stream was and starts it over, so samples are repeated (and, with a fixed number of
  steps, others are never seen). :func:`sample_accounting` counts both.
* ``rng``: the RNG states are not saved; a restart draws other dropout masks than the
  failure-free run would have, and the runs drift apart.

A checkpoint records what it leaves out (``state["omitted"]``), so a restore knows the
gap is deliberate and not damage. Pure functions on plain dicts: no torch here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from ..validate import Rule

OPTIMIZER, DATA, RNG = "optimizer", "data", "rng"
OMITTABLE: tuple[str, ...] = (OPTIMIZER, DATA, RNG)
OMITTED_KEY = "omitted"  # the state's list of the parts left out

_STATE_KEYS = {OPTIMIZER: ("optimizer",), DATA: ("data",), RNG: ("rng",)}


def parse_omit(value: Any) -> tuple[str, ...]:
    """``"optimizer,rng"`` (or a list or tuple of names) as a tuple in canonical order.

    Raises ``ValueError`` naming an unknown part. Empty text or ``()``: nothing omitted.
    """
    if isinstance(value, str):
        names = [p.strip().lower() for p in value.split(",") if p.strip()]
    elif isinstance(value, (list, tuple)):
        names = [str(p).strip().lower() for p in value]
    else:
        raise ValueError(f"{value!r} is not a list of checkpoint parts")
    unknown = [n for n in names if n not in OMITTABLE]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a part a checkpoint can leave out ({', '.join(OMITTABLE)})")
    return tuple(p for p in OMITTABLE if p in names)


def omit_from_state(state: dict[str, Any], omit: Iterable[str]) -> dict[str, Any]:
    """``state`` without the parts in ``omit`` (a new dict; the tensors are shared), recording them."""
    omit = parse_omit(tuple(omit))
    if not omit:
        return state
    out = {k: v for k, v in state.items() if not any(k in _STATE_KEYS[p] for p in omit)}
    out[OMITTED_KEY] = list(omit)
    return out


def omitted_parts(state: dict[str, Any]) -> tuple[str, ...]:
    """The parts a checkpoint's state says it left out (``()`` for a complete one)."""
    listed = state.get(OMITTED_KEY) or ()
    if not isinstance(listed, (list, tuple)):
        raise ValueError(f"the state's {OMITTED_KEY!r} is a {type(listed).__name__}, not a list")
    return parse_omit(tuple(listed))


def required_keys(state: dict[str, Any], keys: Iterable[str]) -> list[str]:
    """``keys`` a complete state has, less those this state says it left out."""
    left_out = {k for p in omitted_parts(state) for k in _STATE_KEYS[p]}
    return [k for k in keys if k not in left_out]


def data_start(state: dict[str, Any], step: int) -> int:
    """Where the input stream resumes after restoring ``state`` of ``step`` steps.

    With a data position, at its step (equal to ``step``: the data position is the
    step); without one the stream starts over at the beginning (position 0), as a
    loader that does not know where it was would.
    """
    data = state.get("data")
    if isinstance(data, dict) and isinstance(data.get("step"), int):
        return int(data["step"])
    return 0 if DATA in omitted_parts(state) else step


def sample_accounting(seen: Iterable[Iterable[int]], expected: Iterable[Iterable[int]]) -> dict[str, int]:
    """How a run's samples differ from a failure-free run's.

    ``seen`` and ``expected``: the sample indices of each step of the final model
    (:func:`goodputlab.ledger.surviving_samples`). Returns ``repeated`` (sample uses beyond
    what the failure-free run made of each sample), ``skipped`` (sample uses it made that
    this run did not), ``seen`` and ``expected`` (uses in all).
    """
    got = Counter(i for batch in seen for i in batch)
    want = Counter(i for batch in expected for i in batch)
    repeated = sum(max(0, n - want.get(i, 0)) for i, n in got.items())
    skipped = sum(max(0, n - got.get(i, 0)) for i, n in want.items())
    return {"repeated": repeated, "skipped": skipped, "seen": sum(got.values()), "expected": sum(want.values())}



class OmitRule(Rule):
    """The rule of the ``ckpt_omit`` field: a tuple of parts from :data:`OMITTABLE`, each at
    most once, in any order; on the command line, comma-separated."""

    allowed = "comma-separated parts of the state to leave out: optimizer, data, rng (each at most once)"

    def ok(self, value: Any) -> bool:
        return (
            isinstance(value, tuple)
            and all(isinstance(v, str) and v in OMITTABLE for v in value)
            and len(set(value)) == len(value)
        )

    def parse(self, text: str) -> tuple[str, ...]:
        names = [p.strip() for p in text.split(",") if p.strip()]
        if any(n not in OMITTABLE for n in names) or len(set(names)) != len(names):
            raise ValueError(text)
        return tuple(p for p in OMITTABLE if p in names)
