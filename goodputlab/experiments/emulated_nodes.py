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

from .recordings import read_recording

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
    fields = {"summary", "failure", "resumed_at", "first_step_after_s", "machine"}
    return read_recording(path, "an emulated cluster", RECORDING_VERSION, lambda data: fields <= set(data))


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


# --- the RAM tier on emulated nodes: a process kill against a node kill (chapter 4) -----------------------
RAM_RECORDING_NAME = "emulated_ram_tier_run.json"
#: the RAM tier's job: the tiny model, one rank per node, a save every 2 steps, no disk copy before the end
RAM_JOB: dict[str, Any] = {"model": "tiny", "nproc": 1, "ckpt_every": 2, "device": "cpu", "memory_disk_every": 100}


def ram_tier_kills(steps: int, process_kill: int, node_kill: int, out_root: str | Path, nodes: int = 2,
                   strategies: tuple[str, ...] = ("memory", "sync"), seed: int = 0, progress: bool = False) -> dict:
    """One real run per strategy (``out_root/<strategy>``), one after the other, each with one rank's process
    killed after step ``process_kill`` and one node killed whole after ``node_kill``: with ``memory`` the first
    relaunch reads each node's own RAM, the second finds the dead node's RAM gone and reads its neighbour's copy;
    with ``sync`` both read the disk. Needs :func:`can_emulate`."""
    from ..engine.api import run

    return {s: run(steps=steps, emulate_nodes=nodes, ckpt=s, kill_at_steps=(process_kill,),
                   kill_node_at_steps=(node_kill,), seed=seed, out=Path(out_root) / s, progress=progress, **RAM_JOB)
            for s in strategies}


def failure_costs(events: list[dict], rank_logs: Mapping[int, list[dict]] | None = None) -> list[dict[str, Any]]:
    """Each failure of a run's merged event log: its kind (``process`` or ``node``), the step it struck after,
    the step the relaunch restored and from where on each rank (``memory``, ``peer``, ``disk``; ``none``: from
    scratch), the steps lost, the seconds of work lost (from the end of the restored step to the kill) and the
    restore's seconds, from a rank's ``restore`` to its ``restored``: ``restore_s`` on the rank that began last
    (the restore's own cost) and ``restore_wait_s`` on the one that began first (which waited for the others
    in the ranks' agreement). ``rank_logs``: each rank's own events (the merged log keeps one timeline of
    phases for the job, not each rank's ``restore``), by rank."""
    mine = [dict(e, rank=r) for r, evs in (rank_logs or {}).items() for e in evs if e["kind"] in ("restore", "restored")]
    rows = []
    for f in (e for e in events if e["kind"] == "failure" and "cause" in e):
        nxt = f["attempt"] + 1
        restored = {e["rank"]: e for e in events if e["kind"] == "restored" and e["attempt"] == nxt}
        began = {e.get("rank", 0): e["t"] for e in (mine or events) if e["kind"] == "restore" and e["attempt"] == nxt}
        own = {e["rank"]: e for e in mine if e["kind"] == "restored" and e["attempt"] == nxt}
        step = max((e["step"] + 1 for e in events if e["kind"] == "step_end" and e["attempt"] == f["attempt"]
                    and e["t"] <= f["t"]), default=0)
        back = min((e["ckpt_step"] for e in restored.values()), default=0)
        ends = [e["t"] for e in events if e["kind"] == "step_end" and e["attempt"] == f["attempt"] and e["step"] == back - 1]
        starts = [e["t"] for e in events if e["kind"] == "compute" and e["attempt"] == f["attempt"]]
        since = max(ends) if ends else min(starts, default=f["t"])
        took = [r["t"] - began[k] for k, r in (own or restored).items() if k in began]
        rows.append({"kind": "node" if f["cause"].startswith("node") else "process", "cause": f["cause"],
                     "after_step": step, "restored_step": back, "lost_steps": step - back,
                     "sources": {str(k): restored[k]["source"] for k in sorted(restored)} or {"0": "none"},
                     "paths": {str(k): restored[k].get("path") for k in sorted(restored)},
                     "lost_s": round(f["t"] - since, 6), "restore_s": round(min(took, default=0.0), 6),
                     "restore_wait_s": round(max(took, default=0.0), 6)})
    return rows


def record_ram_tier(results: Mapping[str, Any], machine: str) -> dict[str, Any]:
    """The runs of :func:`ram_tier_kills`, compact: each strategy's summary figures and :func:`failure_costs`."""
    return {"version": RECORDING_VERSION, "kind": "ram_tier", "machine": machine,
            "runs": {s: {"summary": {k: r.summary[k] for k in _SUMMARY_KEYS if k in r.summary},
                         "failures": failure_costs(r.events, _rank_logs(r))} for s, r in results.items()}}


def _rank_logs(result) -> dict[int, list[dict]]:
    from ..distributed.joblog import rank_events

    return {rank: rank_events(result.out, rank) for rank in range(result.summary.get("world_size", 1))}


def load_ram_tier_recording(path: str | Path) -> dict[str, Any]:
    """A recording of :func:`record_ram_tier`; :class:`RunFileError` when it is not one."""

    def valid(data: dict) -> bool:
        runs = data.get("runs")
        return data.get("kind") == "ram_tier" and isinstance(runs, dict) and "memory" in runs and \
            all(isinstance(r, dict) and len(r.get("failures", ())) == 2 for r in runs.values())

    return read_recording(path, "the RAM tier on emulated nodes", RECORDING_VERSION, valid)


def ram_tier_facts(recording: Mapping[str, Any]) -> dict[str, Any]:
    """The figures the chapter says, per strategy and failure kind (``process``, ``node``): where the ranks
    restored from, the steps and seconds of work lost, the restore's seconds; and the final states' equality."""
    facts: dict[str, Any] = {"machine": recording["machine"]}
    for s, r in recording["runs"].items():
        for f in r["failures"]:
            facts[f"{s}_{f['kind']}"] = f
        facts[f"{s}_sha"] = r["summary"]["final_state_sha256"]
        facts[f"{s}_steps"] = r["summary"]["config"]["steps"]
    facts["bit_exact"] = len({v for k, v in facts.items() if k.endswith("_sha")}) == 1
    if "memory_node" in facts:  # where the node kill would have gone back to without the neighbour's copy
        config = recording["runs"]["memory"]["summary"]["config"]
        saves = facts["memory_node"]["after_step"] // config["ckpt_every"]
        facts["memory_node_disk_step"] = saves // config["memory_disk_every"] * config["memory_disk_every"] * config["ckpt_every"]
    return facts
