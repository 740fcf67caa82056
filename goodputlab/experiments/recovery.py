"""Recovery measured on real runs (chapter 6): what an incomplete checkpoint does, every failure mode,
the hot spare against a cold restart, the RAM tier against disk.

Every function launches real supervised runs (:func:`goodputlab.engine.api.run`) or reads what
they wrote; the figures come from their event logs:

- :func:`omit_comparison`, :func:`omit_effects`: the same failure with a complete checkpoint and
  with each part left out (``--ckpt-omit``), against a failure-free run: the loss after the
  restart, the samples repeated and skipped, whether the final model is the same;
- :func:`mode_runs`: one run per failure mode (``--failure-mode``), each with the same failure;
- :func:`kill_to_first_step`, :func:`restore_times`: for each failure, the seconds until the next
  worker computes a step, and each restore phase;
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..engine.api import RunResult, run
from ..engine.config import RunConfig
from ..measure.ledger import surviving_samples
from ..recovery.omit import OMITTABLE, sample_accounting

VARIANTS = ("complete",) + OMITTABLE  # complete, optimizer, data, rng
#: Each part a checkpoint may leave out (``--ckpt-omit``), in words.
PART_NAMES = {"optimizer": "the optimizer's state", "data": "the data position", "rng": "the RNG states"}


def checkpoint_label(variant: str | tuple[str, ...]) -> str:
    """A run's checkpoint in words, for a legend or a headline: ``failure-free`` (the reference run),
    ``complete``, or ``without the optimizer's state`` (``"optimizer"``, ``("optimizer",)``; parts
    joined by ``+`` or given as a tuple: ``without the optimizer's state and the data position``)."""
    parts = tuple(p for p in (variant.split("+") if isinstance(variant, str) else variant) if p)
    if parts in ((), ("complete",)):
        return "complete"
    if parts == ("reference",):
        return "failure-free"
    return "without " + " and ".join(PART_NAMES.get(p, p) for p in parts)


def omit_comparison(base: RunConfig, out_root: str | Path, parts=OMITTABLE, progress=False) -> dict[str, RunResult]:
    """``{"reference", "complete", part...}``: a failure-free run, then ``base`` (which has failures) with
    complete checkpoints and with each of ``parts`` left out of them."""
    out_root = Path(out_root)
    runs = {"reference": run(base.replace(kill_at_steps=(), mtbf=0.0, hot_spare=False), out=out_root / "reference", progress=progress)}
    runs["complete"] = run(base.replace(ckpt_omit=()), out=out_root / "complete", progress=progress)
    for part in parts:
        runs[part] = run(base.replace(ckpt_omit=(part,)), out=out_root / f"omit-{part}", progress=progress)
    return runs


def losses(result: RunResult) -> dict[int, float]:
    """The loss of every step of the final model, by step."""
    return {row["step"]: row["loss"] for row in result.per_step() if row["survived"]}


def restart_steps(result: RunResult) -> list[int]:
    """The steps each restarted worker resumed from."""
    return [e["ckpt_step"] for e in result.events if e["kind"] == "restored"]


def omit_effects(runs: dict[str, RunResult]) -> list[dict[str, Any]]:
    """One row per variant (complete, and each part left out) against the failure-free run:

    ``bit_exact`` (the same final model), ``loss_jump`` (the loss of the second step after the first
    restart, the first that the restarted optimizer has updated, minus the failure-free run's there), ``max_loss_gap`` (the largest such difference
    after the restart), ``repeated`` and ``skipped`` (sample uses, :func:`~goodputlab.recovery.omit.sample_accounting`),
    ``final_loss``.
    """
    ref = runs["reference"]
    ref_losses, ref_samples = losses(ref), surviving_samples(ref.events)
    rows = []
    for name in (v for v in VARIANTS if v in runs):
        r = runs[name]
        got = losses(r)
        restart = (restart_steps(r) or [0])[0]
        after = [s for s in sorted(got) if s > restart and s in ref_losses]  # (step ``restart`` runs on restored weights)
        counts = sample_accounting(surviving_samples(r.events), ref_samples)
        rows.append({
            "variant": name,
            "checkpoint": checkpoint_label(name),
            "restart_step": restart,
            "bit_exact": r.summary["final_state_sha256"] == ref.summary["final_state_sha256"],
            "loss_jump": (got[after[0]] - ref_losses[after[0]]) if after else 0.0,
            "max_loss_gap": max((abs(got[s] - ref_losses[s]) for s in after), default=0.0),
            "repeated": counts["repeated"],
            "skipped": counts["skipped"],
            "final_loss": r.summary["final_loss"],
        })
    return rows


def loss_rows(runs: dict[str, RunResult]) -> list[dict[str, Any]]:
    """Tidy rows ``{variant, checkpoint, step, loss}`` of every run's surviving steps (for a line chart);
    ``checkpoint`` is the variant in words (:func:`checkpoint_label`)."""
    return [{"variant": name, "checkpoint": checkpoint_label(name), "step": s, "loss": loss}
            for name, r in runs.items() for s, loss in sorted(losses(r).items())]


def mode_runs(base: RunConfig, modes, out_root: str | Path, progress=False, **per_mode: dict) -> dict[str, RunResult]:
    """One run of ``base`` per failure mode (``per_mode[mode]``: extra settings for it, e.g. workers for loader-death)."""
    out_root = Path(out_root)
    return {
        mode: run(base.replace(failure_mode=mode, **per_mode.get(mode.replace("-", "_"), {})), out=out_root / mode, progress=progress)
        for mode in modes
    }


def kill_to_first_step(result: RunResult | list[dict]) -> list[dict[str, Any]]:
    """For each failure of a run (a RunResult or its events): ``{"seconds", "restore_s", "spare_ready"}``,
    the seconds from the failure to the next worker's first computed step, the restore's share of
    them, and whether a hot spare was ready when it came."""
    events = getattr(result, "events", result)
    rows = []
    for f in (e for e in events if e["kind"] == "failure"):
        nxt = [e for e in events if e["attempt"] == f["attempt"] + 1]
        first = next((e for e in nxt if e["kind"] == "compute"), None)
        if first is None:
            continue
        restore = next((e for e in nxt if e["kind"] == "restore"), None)
        after_restore = next((e for e in nxt if restore and e["t"] > restore["t"] and e["kind"] == "warmup"), None)
        act = next((e for e in nxt if e["kind"] == "activate"), None)
        rows.append({
            "seconds": first["t"] - f["t"],
            "restore_s": (after_restore["t"] - restore["t"]) if restore and after_restore else 0.0,
            "spare_ready": bool(act and act.get("standby_ready")),
        })
    return rows


def restore_times(result: RunResult | list[dict]) -> list[dict[str, Any]]:
    """Each restore phase of a run (a RunResult or its events): ``{"seconds", "source", "step"}``."""
    events = getattr(result, "events", result)
    rows = []
    for i, e in enumerate(events):
        if e["kind"] != "restore":
            continue
        end = next((x for x in events[i + 1:] if x["attempt"] == e["attempt"] and x["kind"] in ("warmup", "compute")), None)
        src = next((x for x in events[i + 1:] if x["attempt"] == e["attempt"] and x["kind"] == "restored"), None)
        if end is not None and src is not None:
            rows.append({"seconds": end["t"] - e["t"], "source": src["source"], "step": src["ckpt_step"]})
    return rows


def median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")
