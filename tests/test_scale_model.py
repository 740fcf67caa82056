"""The lab as a scale model: emulated checkpoint storage, standbys forked and preloaded, the plan at a cluster's
ratios, and a goodput's standard error from its failure cycles."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

import goodputlab as gl
from goodputlab import categories as C
from goodputlab.checkpoints.restore import Preload, checkpoint_identity
from goodputlab.checkpoints.store import CheckpointStore
from goodputlab.measure.ledger import Ledger, Segment
from goodputlab.experiments import scale_model as sm
from goodputlab.theory.scale_model import RECOVERY, SAVE, ClusterCosts, llama3_cluster, plan_lab


# --- the theory: a cluster's ratios and the lab's plan ------------------------------------------
def test_llama3_cluster_is_the_public_job_with_the_save_asked_for():
    c = llama3_cluster(save_s=300.0)
    assert c.mtbf_s == pytest.approx(54 * 86400 / 466)
    assert c.recovery_s == 90 + 300 + 300  # detect, restart, restore at the same bandwidth
    assert c.storage_bps() == pytest.approx(c.checkpoint_bytes / 300.0)
    assert c.ratios()[SAVE] == pytest.approx(300.0 / c.mtbf_s)


def test_the_plan_gives_the_lab_the_clusters_save_and_recovery_ratios():
    cluster = llama3_cluster(save_s=300.0)
    plan = plan_lab(cluster, state_bytes=1_000_000, step_s=0.02, snapshot_s={"sync": 0.004, "async": 0.004},
                    mtbf_s=3.0, recovery_floor_s=0.05, failures=40)
    write_s = cluster.save_s / cluster.mtbf_s * 3.0
    assert plan.storage_bps == pytest.approx(1_000_000 / write_s)
    assert plan.recovery_s / plan.mtbf_s == pytest.approx(cluster.ratios()[RECOVERY])
    assert plan.restart_delay_s == pytest.approx(plan.recovery_s - 0.05)
    # a cheaper blocking save moves the best interval shorter and the goodput up
    assert plan.intervals_s["async"] < plan.intervals_s["sync"]
    assert plan.goodputs["async"] > plan.goodputs["sync"]
    assert plan.steps * 0.02 >= 40 * 3.0 * plan.goodputs["sync"]


def test_bad_cluster_values_name_the_field():
    with pytest.raises(ValueError, match="mtbf_s"):
        ClusterCosts("x", mtbf_s=-1, save_s=1, recovery_s=1, startup_s=1, job_s=1)
    with pytest.raises(ValueError, match="state_bytes"):
        plan_lab(llama3_cluster(), state_bytes=0, step_s=0.1, snapshot_s={"sync": 0.0})


# --- emulated checkpoint storage -----------------------------------------------------------------
def test_paced_storage_makes_a_save_and_a_restore_take_their_bytes_over_the_bandwidth(tmp_path):
    import torch

    state = {"w": torch.zeros(250_000)}  # about 1 MB
    fast, slow = CheckpointStore(tmp_path / "fast"), CheckpointStore(tmp_path / "slow", storage_bps=4e6)
    t = time.monotonic()
    path = slow.save(state, 1)
    save_s = time.monotonic() - t
    nbytes = sum(f.stat().st_size for f in path.iterdir() if f.name != "manifest.json")
    assert save_s >= nbytes / 4e6  # the sleep makes up what the real write did not take
    t = time.monotonic()
    loaded = slow.load(path)
    assert time.monotonic() - t >= nbytes / 4e6
    assert torch.equal(loaded["w"], state["w"])
    fast_path = fast.save(state, 1)
    assert (fast_path / "state.pt").read_bytes() == (path / "state.pt").read_bytes()  # the same bytes either way


# --- a standby's preload -------------------------------------------------------------------------
def test_a_preload_hands_over_only_the_newest_checkpoint_unchanged(tmp_path):
    import torch

    store = CheckpointStore(tmp_path)
    store.save({"w": torch.ones(10)}, 10)
    p = Preload(store)
    p.refresh()
    ckpt, state = p.take()
    assert ckpt.step == 10 and torch.equal(state["w"], torch.ones(10))

    p = Preload(store)
    p.refresh()
    store.save({"w": torch.full((10,), 2.0)}, 20)  # committed after the read: the copy is stale
    assert p.take() is None

    p = Preload(store)
    p.refresh()
    newest = store.list()[0]
    before = checkpoint_identity(newest)
    time.sleep(0.01)
    with open(newest.path / "state.pt", "r+b") as f:  # damaged after the read, in place
        f.seek(100)
        f.write(b"\xff" * 8)
    assert checkpoint_identity(newest) != before
    assert p.take() is None  # restore reads it again and finds the damage


def test_a_preload_thread_reads_new_checkpoints_until_taken(tmp_path):
    import torch

    store = CheckpointStore(tmp_path)
    p = Preload(store)
    p.start(every_s=0.01)
    store.save({"w": torch.ones(4)}, 5)
    deadline = time.monotonic() + 10
    while p._found is None and time.monotonic() < deadline:
        time.sleep(0.01)
    ckpt, _ = p.take()
    assert ckpt.step == 5 and not p._thread.is_alive()


# --- forked standbys in a real run -----------------------------------------------------------------
def test_forked_standbys_take_over_bit_exact_with_the_preloaded_checkpoint(tmp_path):
    base = dict(steps=60, ckpt_every=10, seed=3, threads=1, io_latency_ms=30.0)
    plain = gl.run(out=tmp_path / "plain", progress=False, **base)
    spare = gl.run(out=tmp_path / "spare", progress=False, hot_spare=True, kill_at_steps=(45,), restart_delay=0.0, **base)
    assert spare.summary["final_state_sha256"] == plain.summary["final_state_sha256"]
    assert spare.summary["recovery"]["handovers"] == 1
    restored = [e for e in spare.events if e["kind"] == "restored"]
    assert [e.get("preloaded") for e in restored] == [True]  # read while it waited, not at the handover
    assert (tmp_path / "spare" / "logs" / "fork-server.log").is_file()
    spawned = {e["pid"] for e in spare.events if e["kind"] == "standby_spawned"}
    assert spawned and all(not Path(f"/proc/{pid}").exists() for pid in spawned)  # none outlives the run
    # the run measures this machine as calibrate's own run does: a step, a save's blocking part, the floor
    cal = sm.calibration_of(spare)
    from goodputlab.training.workload import PRESETS

    assert (cal.model, cal.state_bytes) == ("tiny", PRESETS["tiny"].state_bytes)
    assert cal.step_s > 0 and cal.snapshot_s > 0
    assert cal.recovery_floor_s == pytest.approx(spare.buckets[C.RESTART] + spare.buckets[C.CHECKPOINT_RESTORE])


def test_without_warm_spares_the_standby_is_launched_and_reads_at_activation(tmp_path, monkeypatch):
    monkeypatch.setenv("GOODPUTLAB_WARM_SPARES", "0")
    r = gl.run(out=tmp_path / "r", progress=False, steps=60, ckpt_every=10, seed=3, threads=1, io_latency_ms=30.0,
               hot_spare=True, kill_at_steps=(45,), restart_delay=0.0)
    assert r.summary["completed"] and r.summary["recovery"]["handovers"] == 1
    assert [e.get("preloaded") for e in r.events if e["kind"] == "restored"] == [None]
    assert not (tmp_path / "r" / "logs" / "fork-server.log").exists()


# --- the standard error of a goodput ---------------------------------------------------------------
class _Result:
    def __init__(self, ledger):
        self.ledger = ledger


def test_the_standard_error_comes_from_the_failure_cycles():
    # three cycles, cut at failures at t=4 and t=10: productive 3 of 4, 4 of 6, 1 of 2
    segs = [Segment(0, 3, C.PRODUCTIVE, 0, "compute"), Segment(3, 4, C.LOST_WORK, 0, "compute"),
            Segment(4, 6, C.RESTART, 1, "failure"), Segment(6, 10, C.PRODUCTIVE, 1, "compute"),
            Segment(10, 11, C.RESTART, 2, "failure"), Segment(11, 12, C.PRODUCTIVE, 2, "compute")]
    ledger = Ledger(segs, 12.0, {}, [4.0, 10.0], True)
    p, w = [3, 4, 1], [4, 6, 2]
    g = sum(p) / sum(w)
    expected = math.sqrt(3 / 2 * sum((pi - g * wi) ** 2 for pi, wi in zip(p, w)) / sum(w) ** 2)
    assert sm.goodput_stderr(_Result(ledger)) == pytest.approx(expected)
    assert math.isnan(sm.goodput_stderr(_Result(Ledger(segs, 12.0, {}, [4.0], True))))  # one failure: no spread


def test_a_scale_model_run_prints_its_ratios_beside_the_clusters(tmp_path):
    cal = sm.Calibration(model="tiny", state_bytes=1_274_880, step_s=0.02, snapshot_s=0.004, recovery_floor_s=0.05)
    model = gl.scale_model(calibration=cal, strategies=("sync", "async"), mtbf_s=2.0, failures=3)
    sync, async_ = model.config("sync"), model.config("async")
    assert sync.seed == async_.seed and sync.mtbf == async_.mtbf == 2.0  # the same failure draws
    assert sync.hot_spare and sync.ckpt_storage_mbps == pytest.approx(model.plan.storage_bps / 1e6)
    assert sync.ckpt_every_s > async_.ckpt_every_s
    assert "save / MTBF" in model.table()
    result = gl.run(sync.replace(steps=150), out=tmp_path / "sync", progress=False)
    rows = sm.ratio_rows({"sync": result}, model.cluster)
    assert [r["ratio"] for r in rows] == ["save / MTBF", "recovery / MTBF", "interval / MTBF", "start-up / job"]
    save = rows[0]["sync"]
    assert save >= model.plan.save_s / model.plan.mtbf_s * 0.9  # the paced write sets the save's floor
    text = sm.ratio_table({"sync": result}, model.cluster)
    assert "cluster: Llama 3 405B" in text and "failures" in text


def test_the_difference_of_two_runs_on_the_same_draws_pairs_their_cycles():
    segs_a = [Segment(0, 3, C.PRODUCTIVE, 0, "compute"), Segment(3, 4, C.LOST_WORK, 0, "compute"),
              Segment(4, 10, C.PRODUCTIVE, 1, "compute"), Segment(10, 12, C.PRODUCTIVE, 2, "compute")]
    a = _Result(Ledger(segs_a, 12.0, {}, [4.0, 10.0], True))
    assert sm.difference_stderr(a, a) == 0.0  # the same luck: none left in the difference
    assert sm.difference_stderr(a, a, paired=False) == pytest.approx(math.sqrt(2) * sm.goodput_stderr(a))
    # a run whose cycles are the same shares of each cycle as a's, shifted: its luck moves with a's
    segs_b = [Segment(0, 2, C.PRODUCTIVE, 0, "compute"), Segment(2, 4, C.CHECKPOINT_SAVE, 0, "ckpt_save"),
              Segment(4, 9, C.PRODUCTIVE, 1, "compute"), Segment(9, 10, C.CHECKPOINT_SAVE, 1, "ckpt_save"),
              Segment(10, 12, C.PRODUCTIVE, 2, "compute")]
    b = _Result(Ledger(segs_b, 12.0, {}, [4.0, 10.0], True))
    assert sm.difference_stderr(a, b) < sm.difference_stderr(a, b, paired=False)
