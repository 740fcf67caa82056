"""Every checkpoint strategy, end to end: real workers, real SIGKILLs, a damaged checkpoint, bit-exact resume.

The reference is the session's uninterrupted sync run (``clean_run``): whatever the
strategy, kills and a damaged checkpoint must not change a single bit of the final model.
(sync itself is covered by test_supervisor.py.)
"""

import json
import os
from pathlib import Path

import pytest

from goodputlab import categories as C
from goodputlab.checkpoints.store import CheckpointStore, CheckpointWarning
from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import read_events
from goodputlab.checkpoints.ram_tier import memory_root
from goodputlab.engine.supervisor import run_supervised

from conftest import KILLS, RESUME_SETTINGS

DAMAGE_AT_FAILURE = 2  # after the second kill (step 50), damage the newest checkpoint before the restart


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _my_ram_tiers() -> list[Path]:
    return list(memory_root().glob(f"goodputlab-mem-{os.getpid()}-*"))


class DamageNewest:
    """A progress callback: right after failure ``at`` (the worker is dead, the next not yet launched),
    damage the newest checkpoint: the RAM snapshot for the memory strategy, else the newest on disk."""

    def __init__(self, out: Path, strategy: str, at: int):
        self.out, self.strategy, self.at = out, strategy, at
        self.damaged: tuple[str, int] | None = None

    def __call__(self, progress) -> None:
        if progress.phase != "failed" or progress.failures != self.at or self.damaged:
            return
        if self.strategy == "memory":
            (tier,) = _my_ram_tiers()
            current = json.loads((tier / "current.json").read_text())
            _flip_a_byte(tier / f"slot-{current['slot']}.data")
            self.damaged = ("memory", current["step"])
            return
        newest = CheckpointStore(self.out / "ckpt").list()[0]
        data_file = "state.pt" if self.strategy == "async" else next(
            p.name for p in newest.path.iterdir() if p.name.endswith(".distcp")
        )
        _flip_a_byte(newest.path / data_file)
        self.damaged = ("disk", newest.step)


@pytest.mark.parametrize("strategy", ["async", "dcp", "memory"])
def test_kills_and_a_damaged_checkpoint_still_end_bit_exact(tmp_path, clean_run, strategy):
    out = tmp_path / "run"
    settings = dict(RESUME_SETTINGS, ckpt=strategy, kill_at_steps=KILLS)
    if strategy == "memory":
        settings["memory_disk_every"] = 2  # disk holds every other save: the fallback has somewhere to go
    damage = DamageNewest(out, strategy, DAMAGE_AT_FAILURE)
    with pytest.warns(CheckpointWarning, match="skipped damaged") as caught:  # the user is told, once
        summary = run_supervised(RunConfig(**settings), out, progress=damage)
    events = read_events(out / "events.jsonl")
    assert len(caught) == 1

    assert summary["completed"] and summary["failures"] == len(KILLS) >= 3
    assert summary["final_state_sha256"] == clean_run[0]["final_state_sha256"]
    assert summary["final_loss"] == clean_run[0]["final_loss"]

    # the damaged checkpoint was found, reported and skipped; the restart took an older valid one
    tier, damaged_step = damage.damaged
    invalid = [(e["tier"], e["ckpt_step"]) for e in events if e["kind"] == "ckpt_invalid"]
    assert invalid == [(tier, damaged_step)]
    restored = {e["attempt"]: (e["source"], e["ckpt_step"]) for e in events if e["kind"] == "restored"}
    after_damage = restored[DAMAGE_AT_FAILURE]
    if strategy == "memory":
        assert after_damage == ("disk", damaged_step)  # the disk copy of the same save
        assert restored[1][0] == restored[3][0] == "memory"  # undamaged restarts never read the disk
        assert _my_ram_tiers() == []  # the supervisor removed the RAM tier
    else:
        assert after_damage[0] == "disk" and after_damage[1] < damaged_step
    for source, step in restored.values():
        assert step % RESUME_SETTINGS["ckpt_every"] == 0

    # the ledger still closes, and saves were booked
    b = summary["buckets"]
    assert abs(sum(b.values()) - summary["wall_s"]) / summary["wall_s"] < 0.01
    assert b[C.CHECKPOINT_SAVE] > 0 and b[C.CHECKPOINT_RESTORE] > 0
    commits = [e for e in events if e["kind"] == "ckpt_commit"]
    assert commits and all(e["tier"] in ("disk", "memory", "memory+disk") for e in commits)
    assert CheckpointStore(out / "ckpt").newest_valid_step() == RESUME_SETTINGS["steps"]  # the final state is durable
