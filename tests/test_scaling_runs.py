"""Chapter 7's measurements on real torchrun jobs (goodputlab/experiments/scaling.py and scale_out.py).

Two real runs of 2 gloo ranks (tiny preset, one torch thread each):

* ``calibration``: failure-free, sync sharded checkpoints;
* ``failing``: planned from it by :func:`scale_out_config` at Llama 3's save ratio, with Poisson rank
  failures and a straggler. Its sharded saves and restores go through the emulated storage.

Then the lab model replayed on the failing run's own failures must reproduce its goodput (the mechanics),
and the split into mechanics, luck and the simulator's picture must add up to measured minus simulated.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import warnings

import pytest

from goodputlab import categories as C
from goodputlab.charts import scaling as charts
from goodputlab.measure import events as E
from goodputlab.engine.api import RestartCostWarning, run
from goodputlab.engine.config import RunConfig
from goodputlab.experiments import scale_out, scaling
from goodputlab.experiments.scale_model import goodput_stderr, measured_ratios
from goodputlab.theory.scale_model import RECOVERY, SAVE, llama3_cluster

JOB = dict(model="tiny", seed=0, restart_delay=0.0, threads=1)
RUN_LIMIT_S = 300  # a hung run is stopped (SIGTERM: the supervisor cleans up) instead of hanging the suite


def limited_run(config: RunConfig, out):
    timer = threading.Timer(RUN_LIMIT_S, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with warnings.catch_warnings():
            # restarts of two new interpreters on a loaded machine may cost half the short MTBF: the check is for users
            warnings.simplefilter("ignore", RestartCostWarning)
            return run(config, out=out, progress=False)
    finally:
        timer.cancel()


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    return limited_run(RunConfig(nproc=2, steps=32, ckpt_every=8, **JOB), tmp_path_factory.mktemp("calibration"))


@pytest.fixture(scope="module")
def planned(calibration):
    # each rank fails every 12 s of training (the job every 6 s); seed 0 draws its first two failures at once
    return scale_out.scale_out_config(calibration, llama3_cluster(), 12.0, 1, nproc=2, straggler_rank=1,
                                    straggler_factor=3.0, straggler_prob=0.5, **JOB)


@pytest.fixture(scope="module")
def failing(planned, tmp_path_factory):
    config, _ = planned
    return limited_run(config, tmp_path_factory.mktemp("failing"))


def test_the_plan_sets_the_clusters_save_share_and_enough_steps(calibration, planned):
    config, plan = planned
    assert config.nproc == 2 and config.mtbf == 12.0 and config.ckpt == "sync" and config.straggler_rank == 1
    assert plan.mtbf_s == 6.0  # the job's MTBF: a rank's over the ranks
    write_s = llama3_cluster().save_s / llama3_cluster().mtbf_s * plan.mtbf_s
    assert config.ckpt_storage_mbps * 1e6 == pytest.approx(plan.state_bytes / write_s)
    assert config.ckpt_every == plan.ckpt_every("sync") >= 1
    assert config.steps * plan.step_s > 0.5 * plan.mtbf_s  # about one failure's worth of training


def test_bad_plans_name_the_field(calibration):
    with pytest.raises(ValueError, match="rank_mtbf_s"):
        scale_out.scale_out_config(calibration, llama3_cluster(), 0.0, 1, nproc=2, **JOB)
    with pytest.raises(ValueError, match="failures"):
        scale_out.scale_out_config(calibration, llama3_cluster(), 12.0, 0, nproc=2, **JOB)


def test_sharded_saves_and_restores_take_their_bytes_over_the_emulated_storage(failing):
    config, s = failing.config, failing.summary
    assert s["completed"] and s["failures"] >= 1
    bandwidth = config.ckpt_storage_mbps * 1e6
    nbytes = max(e["bytes"] for e in failing.events if e["kind"] == E.M_CKPT_COMMIT)
    whole = [seg for seg in failing.ledger.segments if seg.end not in set(failing.ledger.failure_times)]  # not cut by a kill
    saves = [seg.duration for seg in whole if seg.kind == E.W_CKPT_SAVE]
    assert saves and min(saves) >= 0.95 * nbytes / bandwidth  # a sync save waits for its paced commit
    restores = [seg.duration for seg in whole if seg.kind == E.W_RESTORE]
    restored = [e for e in failing.events if e["kind"] == E.M_RESTORED and e.get("rank") == 0]
    if restored:  # a failure before the first checkpoint restores nothing
        assert max(restores) >= 0.95 * nbytes / bandwidth


def test_the_ratios_are_the_jobs(failing):
    ratios, s = measured_ratios(failing), failing.summary
    job_mtbf = failing.config.mtbf / 2
    per_failure = (s["buckets"][C.RESTART] + s["buckets"][C.CHECKPOINT_RESTORE]) / s["failures"]
    assert ratios[RECOVERY] == pytest.approx(per_failure / job_mtbf)
    assert ratios[SAVE] > 0


def test_every_recomputed_step_gives_the_same_loss(failing):
    again = scaling.recomputed_losses(failing)
    assert again["equal"] is True
    s = failing.summary
    rolled_back = s["steps_executed"] - s["steps_completed"]  # executions beyond one per step
    # each rank compares every execution beyond a step's first, but for the one a kill cut short (no loss)
    assert 2 * (rolled_back - s["failures"]) <= again["comparisons"] <= 2 * rolled_back
    assert 1 <= again["steps"] <= rolled_back


def test_the_failure_clock_and_the_draws_are_the_supervisors(failing):
    spans = scaling.exposures(failing)
    # an attempt's clock starts at its first step: one that restored the last step's checkpoint has none
    assert len(spans) <= failing.summary["attempts"] and sum(x["killed"] for x in spans) == failing.summary["failures"]
    assert all(x["end"] >= x["start"] for x in spans)
    times = scale_out.failure_times(failing)
    assert len(times) == failing.summary["failures"] + 1  # one per attempt: the last saw none
    assert times[:-1] == pytest.approx([x["end"] - x["start"] for x in spans if x["killed"]])
    from goodputlab.engine.supervision import poisson_failure_rng

    rng = poisson_failure_rng(0)
    draws = [rng.exponential(6.0) for _ in spans]
    # every kill lands just after its attempt's draw from the run's seed (the supervisor polls); the last
    # attempt finished before its own draw
    assert all(0 <= t - d < 1.0 for t, d in zip(times[:-1], draws))
    assert times[-1] == math.inf
    if not spans[-1]["killed"]:
        # the completed attempt trained for less than its draw: its clock ran to its last step (the span itself
        # runs on to the supervisor's teardown, which a loaded machine stretches by seconds)
        from goodputlab.measure.ledger import build_ledger

        last = spans[-1]["attempt"]
        trained_until = max(seg.end for seg in build_ledger(failing.events).segments
                            if seg.kind == E.W_COMPUTE and seg.attempt == last)
        assert trained_until - spans[-1]["start"] < draws[len(spans) - 1]
    count = scaling.failure_count(failing)
    assert count["exposed_s"] == pytest.approx(sum(x["end"] - x["start"] for x in spans))
    assert count["expected"] == pytest.approx(count["exposed_s"] / 6.0)
    assert count["measured_mtbf_se_s"] == pytest.approx(count["measured_mtbf_s"] / math.sqrt(count["failures"]))


def test_the_replayed_model_reproduces_the_run_and_the_split_adds_up(failing):
    split = scale_out.split_goodput(failing, trials=300)
    assert split.measured == pytest.approx(failing.goodput)
    # the mechanics: the model walked through the run's own failures and costs. Its steps are the mean step,
    # so it misses only how the steps' times varied (a few points at most on a loaded machine)
    assert abs(split.mechanics) < 0.05, split
    assert split.replayed_failures == failing.summary["failures"]
    assert split.mechanics + split.luck + split.assumptions == pytest.approx(split.measured - split.simulated)
    assert split.expected_se > 0 and split.measured_se == pytest.approx(goodput_stderr(failing), nan_ok=True)
    assert [r["what"] for r in split.rows()][0] == "measured" and len(split.rows()) == 4
    # the simulator: each rank at the configured MTBF, for the lab model's expected time (not the run's own wall)
    assert split.sim.config.device_mtbf_s == failing.config.mtbf and split.sim.goodput_mean == split.simulated
    b = failing.summary["buckets"]  # fed the run's own wait for the straggler, not the straggler model's
    measured_share = b[C.STRAGGLER_WAIT] / (b[C.STRAGGLER_WAIT] + b[C.PRODUCTIVE] + b[C.LOST_WORK])
    assert split.sim.config.straggler_wait_share == pytest.approx(measured_share)


def test_the_straggler_wait_splits_into_parts_that_add_up(calibration, failing):
    cost = scaling.straggler_cost(failing, floor=calibration)
    assert 0 < cost["slowed_steps"] < cost["steps"]
    # the healthy rank waits on the slowed steps at least half what the straggler slept there (causal lower bound)
    assert cost["wait_on_slowed_s"] >= 0.5 * cost["slept_s"] > 0
    assert cost["wait_on_slowed_s"] + cost["wait_on_unslowed_s"] == pytest.approx(cost["measured_s"])
    assert cost["floor_per_step_s"] == pytest.approx(
        calibration.summary["buckets"][C.STRAGGLER_WAIT] / calibration.summary["steps_executed"])
    parts = scaling.straggler_parts(cost)
    assert parts[0]["seconds"] == cost["model_s"] and parts[-1]["seconds"] == cost["measured_s"]
    assert sum(p["seconds"] for p in parts[:-1]) == pytest.approx(cost["measured_s"])


def test_the_job_timings_are_the_jobs(failing):
    timings, launches = scale_out.job_timings(failing)
    assert len(launches) == failing.summary["attempts"]
    b = failing.summary["buckets"]
    assert sum(launches) == pytest.approx(b[C.STARTUP] + b[C.RESTART])
    assert timings.launch_s == launches[0] and timings.relaunch_s == pytest.approx(sum(launches[1:]) / (len(launches) - 1))
    assert timings.compute_s > 0 and timings.step_other_s > 0  # the wait for the slowest rank is part of a step


def test_the_job_mtbf_chart_draws_a_measured_point_with_its_band():
    spec = charts.job_mtbf_chart(24.0, [1, 2, 16], [{"ranks": 2, "job_mtbf_s": 10.0, "lo": 7.0, "hi": 13.0,
                                                     "label": "a run"}]).to_dict()
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["line", "point", "rule"]
    assert len(charts.job_mtbf_chart(24.0, [1, 2]).to_dict()["layer"]) == 2  # no measured band, no rule
