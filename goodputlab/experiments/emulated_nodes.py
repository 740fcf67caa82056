"""A cluster of emulated nodes in the book (chapter 7): a node lost whole, and a spare node in its place.

- :func:`can_emulate`: whether this machine can make network namespaces (root and iproute2), and if
  not, why, in a few words;
- :func:`node_loss`: a real run of ``nodes`` emulated nodes (``--emulate-nodes``, docs/DISTRIBUTED.md)
  with one node killed whole after step ``kill_step`` and ``spare_nodes`` spares;
- :func:`record`: what the chapter shows of that run, a few kilobytes (``book/data/emulated_nodes_run.json``),
  :func:`save_recording` and :func:`load_recording` (which checks its shape);
- :func:`node_loss_facts`: the figures the chapter's prose is rendered from.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from ..errors import RunFileError

RECORDING_VERSION = 1
RECORDING_NAME = "emulated_nodes_run.json"
#: the job: a tiny model, one rank per node, a checkpoint every 5 steps
JOB: dict[str, Any] = {"model": "tiny", "nproc": 1, "ckpt_every": 5, "device": "cpu"}
_SUMMARY_KEYS = ("wall_s", "buckets", "goodput", "failures", "final_state_sha256", "emulated_nodes", "spare_nodes",
                 "node_replacements", "world_size", "steps_completed", "config")


def can_emulate() -> tuple[bool, str]:
    """``(True, "")`` where this process may create network namespaces (root, with iproute2's ``ip``),
    else ``(False, why)``."""
    if shutil.which("ip") is None:
        return False, "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return False, "this process is not root"
    return True, ""


def node_loss(steps: int, kill_step: int, out_root: str | Path, nodes: int = 2, spare_nodes: int = 1, seed: int = 0,
              progress: bool = False):
    """A real run (:class:`~goodputlab.engine.api.RunResult`, in ``out_root/node-loss``) of ``nodes`` emulated
    nodes, one rank each, a node killed whole after step ``kill_step`` and ``spare_nodes`` spare nodes. Needs
    :func:`can_emulate`."""
    from ..engine.api import run

    return run(steps=steps, emulate_nodes=nodes, spare_nodes=spare_nodes, kill_node_at_steps=(kill_step,), seed=seed,
               out=Path(out_root) / "node-loss", progress=progress, **JOB)


def record(result, machine: str) -> dict[str, Any]:
    """The run, compact: its summary's figures, the node failure (time, node, the spare that replaced it)
    and the first step the relaunched job trained (``resumed_at``: the checkpoint it restored)."""
    summary = {k: result.summary[k] for k in _SUMMARY_KEYS if k in result.summary}
    events = result.events
    failure = next(e for e in events if e["kind"] == "failure")
    restored = next((e for e in events if e["kind"] == "restored" and e["attempt"] == failure["attempt"] + 1), None)
    first_step = next(e["t"] for e in events if e["kind"] == "compute" and e["attempt"] == failure["attempt"] + 1)
    return {"version": RECORDING_VERSION, "machine": machine, "summary": summary,
            "failure": {k: failure.get(k) for k in ("t", "attempt", "cause", "node", "spare")},
            "resumed_at": restored["ckpt_step"] if restored else 0, "first_step_after_s": round(first_step - failure["t"], 6)}


def save_recording(recording: Mapping[str, Any], path: str | Path) -> None:
    """Write ``recording`` (from :func:`record`) to ``path`` as JSON."""
    Path(path).write_text(json.dumps(recording, indent=1) + "\n")


def load_recording(path: str | Path) -> dict[str, Any]:
    """A recording written by :func:`save_recording`; :class:`RunFileError` when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RunFileError(f"{path}: not a recording of an emulated cluster ({e})") from None
    if not isinstance(data, dict) or data.get("version") != RECORDING_VERSION or \
            not {"summary", "failure", "resumed_at", "first_step_after_s", "machine"} <= set(data):
        raise RunFileError(f"{path}: not a version-{RECORDING_VERSION} recording of an emulated cluster")
    return data


def node_loss_facts(recording: Mapping[str, Any]) -> dict[str, Any]:
    """The figures the chapter says: nodes, spares, the kill step, the node lost and its replacement, the
    checkpoint resumed from, seconds from the kill to the next step, the restart bucket, wall, goodput."""
    s, f = recording["summary"], recording["failure"]
    replaced = s.get("node_replacements") or []
    return {"nodes": s["emulated_nodes"], "spares": s.get("spare_nodes", 0), "steps": s["config"]["steps"],
            "kill_step": s["config"]["kill_node_at_steps"][0], "node": f["node"], "spare": f.get("spare"),
            "replaced": bool(replaced), "resumed_at": recording["resumed_at"],
            "back_s": recording["first_step_after_s"], "restart_s": s["buckets"]["restart"], "wall_s": s["wall_s"],
            "goodput": s["goodput"], "failures": s["failures"], "sha": s["final_state_sha256"]}
