"""The complete training state: model, optimizer, LR schedule, data position, every RNG, the step.

Resuming from it gives bit-identical training: :func:`capture_state` takes it,
:func:`check_training_state` refuses one that does not fit the live objects (before
anything is applied), :func:`apply_state` puts it back, RNGs included
(:func:`capture_rng`, :func:`restore_rng`: python, numpy, torch and CUDA).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from .. import validate
from .store import FORMAT_VERSION


def _is_count(value: Any) -> bool:
    return validate.is_whole(value) and value >= 0


def capture_rng() -> dict[str, Any]:
    """Every RNG the training touches, in a form ``torch.load(weights_only=True)`` accepts."""
    import torch

    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "name": np_state[0],
            "keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng(state: dict[str, Any]) -> None:
    import torch

    random.setstate(_as_tuple(state["python"]))
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(x):
    return tuple(_as_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def capture_state(model, optimizer, scheduler, step: int, data_position: dict[str, Any]) -> dict[str, Any]:
    """The complete state after ``step`` steps: enough to continue bit-exactly."""
    return {
        "format": FORMAT_VERSION,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "data": data_position,
        "rng": capture_rng(),
    }


def check_training_state(state: Any, step: int, model, optimizer=None) -> None:
    """Raise ``ValueError`` unless ``state`` is a training state of ``model`` after ``step`` steps.

    Checked before anything is applied (so a refused checkpoint leaves the live objects
    untouched): the keys :func:`capture_state` writes, the step, and every model tensor's
    name, shape and dtype. A checkpoint that verifies but fails this is skipped like a
    damaged one. A part the state says it left out on purpose (``--ckpt-omit``,
    :mod:`goodputlab.recovery.omit`) may be missing; nothing else may.
    """
    import torch

    from ..recovery.omit import omitted_parts, required_keys

    if not isinstance(state, dict):
        raise ValueError(f"the state is a {type(state).__name__}, not a training state")
    left_out = omitted_parts(state)
    keys = required_keys(state, ("step", "model", "optimizer", "scheduler", "data", "rng"))
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"the state has no {', '.join(missing)}")
    if not _is_count(state["step"]) or state["step"] != step:
        raise ValueError(f"the state is of step {state['step']!r}, its checkpoint of step {step}")
    if "data" in keys and (not isinstance(state["data"], dict) or not _is_count(state["data"].get("batch_size"))):
        raise ValueError("the state has no data position")
    for key in ("optimizer", "scheduler", "rng"):
        if key in keys and not isinstance(state[key], dict):
            raise ValueError(f"the state's {key} is a {type(state[key]).__name__}")
    if "rng" in keys and not {"python", "numpy", "torch"} <= set(state["rng"]):
        raise ValueError("the state lacks an RNG state")
    expected, got = model.state_dict(), state["model"]
    if not isinstance(got, dict) or set(got) != set(expected):
        raise ValueError("the state's model has other parameters than this model")
    for name, t in expected.items():
        v = got[name]
        if not isinstance(v, torch.Tensor) or v.shape != t.shape or v.dtype != t.dtype:
            raise ValueError(f"the state's {name} does not match this model")
    if optimizer is not None and "optimizer" not in left_out:
        groups = state["optimizer"].get("param_groups")
        live = optimizer.state_dict()["param_groups"]
        if (
            not isinstance(state["optimizer"].get("state"), dict)
            or not isinstance(groups, list)
            or len(groups) != len(live)
            or any(not isinstance(g, dict) or len(g.get("params") or ()) != len(h["params"]) for g, h in zip(groups, live))
        ):
            raise ValueError("the state's optimizer does not match this optimizer")


def apply_state(state: dict[str, Any], model, optimizer, scheduler) -> int:
    """Load ``state`` into the live objects; returns the step to continue from.

    A part the state left out on purpose is not restored: without the optimizer's state,
    AdamW starts its moments from zero (the learning rate still follows the restored
    schedule); without the RNG states, the worker's own draws go on (other dropout masks).
    """
    model.load_state_dict(state["model"])
    if "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if "optimizer" not in state:  # the schedule's rate is the optimizer's own setting: put it back
        for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr()):
            group["lr"] = lr
    if "rng" in state:
        restore_rng(state["rng"])
    return int(state["step"])
