"""Measuring phase costs from an event log, and the lab model beside a real run."""

import math

import pytest

from goodputlab.measure import events as E
from goodputlab.engine.config import RunConfig
from goodputlab.errors import ConfigError
from goodputlab.experiments.interval_sweep import (
    SweepRun,
    failure_draws,
    measure_timings,
    pool_sweep,
    predict_measured,
)
from goodputlab.engine.supervisor import poisson_failure_rng
from goodputlab.theory import RunPrediction, RunTimings, daly_goodput, textbook_goodput


def ev(t, attempt, kind, step=None, **fields):
    return {"t": t, "attempt": attempt, "step": step, "kind": kind, **fields}


# A 4-step run, a checkpoint every 2 steps, killed once while computing step 2.
SYNTHETIC = [
    ev(0.00, 0, E.SUP_START),
    ev(0.01, 0, E.SUP_SPAWN),
    ev(0.21, 0, E.W_INIT),
    ev(2.21, 0, E.W_WARMUP, 0),
    ev(2.31, 0, E.W_COMPUTE, 0),
    ev(2.41, 0, E.W_STEP_END, 0, loss=4.0, samples=[0]),
    ev(2.42, 0, E.W_DATA_WAIT, 1),
    ev(2.43, 0, E.W_COMPUTE, 1),
    ev(2.53, 0, E.W_STEP_END, 1, loss=3.9, samples=[1]),
    ev(2.54, 0, E.W_CKPT_SAVE, 1),
    ev(2.60, 0, E.M_CKPT_COMMIT, ckpt_step=2),
    ev(2.60, 0, E.W_DATA_WAIT, 2),
    ev(2.61, 0, E.W_COMPUTE, 2),
    ev(2.66, 0, E.SUP_FAILURE, cause="poisson"),
    ev(2.67, 0, E.SUP_RESTART_DELAY),
    ev(3.17, 1, E.SUP_SPAWN),
    ev(3.37, 1, E.W_INIT),
    ev(5.37, 1, E.W_RESTORE),
    ev(5.40, 1, E.M_RESTORED, ckpt_step=2),
    ev(5.40, 1, E.W_WARMUP, 2),
    ev(5.50, 1, E.W_COMPUTE, 2),
    ev(5.60, 1, E.W_STEP_END, 2, loss=3.8, samples=[2]),
    ev(5.61, 1, E.W_DATA_WAIT, 3),
    ev(5.62, 1, E.W_COMPUTE, 3),
    ev(5.72, 1, E.W_STEP_END, 3, loss=3.7, samples=[3]),
    ev(5.73, 1, E.W_CKPT_SAVE, 3),
    ev(5.79, 1, E.W_EXIT),
    ev(5.83, 1, E.SUP_TEARDOWN),
    ev(5.84, 1, E.SUP_END, completed=True, reason="completed", resume_step=4),
]


def test_measure_timings_by_hand():
    tm = measure_timings(SYNTHETIC)
    assert tm.compute_s == pytest.approx(0.10)  # the compute cut by the kill (0.05 s) is left out
    assert tm.data_wait_s == pytest.approx(0.01)
    assert tm.step_other_s == pytest.approx(0.01)
    assert tm.save_s == pytest.approx(0.06)
    assert tm.launch_s == pytest.approx(0.2 + 2.0 + 0.1)  # spawn + init + warm-up, both attempts
    assert tm.restore_s == pytest.approx(0.03)
    assert tm.relaunch_delay_s == pytest.approx(0.51)  # kill at 2.66 -> launch at 3.17
    assert tm.exit_s == pytest.approx(0.04)
    assert tm.start_s == pytest.approx(0.01)
    assert tm.teardown_s == pytest.approx(0.01)


def test_measure_timings_needs_a_step():
    with pytest.raises(ConfigError) as info:
        measure_timings(SYNTHETIC[:4])
    assert info.value.field == "events"


def _log_with_kills(seed, mtbf, lag):
    """A log whose two kills land ``lag`` s after the supervisor's draws for ``seed``."""
    rng = poisson_failure_rng(seed)
    draws = [rng.exponential(mtbf) for _ in range(3)]
    t, events = 0.0, [ev(0.0, 0, E.SUP_START)]
    for attempt in range(2):
        events += [ev(t + 0.01, attempt, E.SUP_SPAWN), ev(t + 0.01 + draws[attempt] + lag, attempt, E.SUP_FAILURE)]
        t += 0.01 + draws[attempt] + lag + 0.5
    events.append(ev(t + 0.01, 2, E.SUP_SPAWN))
    return events, draws


def test_failure_draws_come_from_the_seed():
    events, draws = _log_with_kills(seed=4, mtbf=5.0, lag=0.02)
    got = failure_draws(events, RunConfig(steps=10, mtbf=5.0, seed=4))
    assert got == pytest.approx([d + 0.02 for d in draws])


@pytest.mark.parametrize(
    "config, field",
    [
        (RunConfig(steps=10, mtbf=5.0, seed=5), "events"),  # another seed's draws
        (RunConfig(steps=10, mtbf=0.0, seed=4), "mtbf"),
        (RunConfig(steps=10, mtbf=5.0, seed=4, kill_at_steps=(3,)), "kill_at_steps"),
    ],
)
def test_failure_draws_refuse_a_mismatch(config, field):
    events, _ = _log_with_kills(seed=4, mtbf=5.0, lag=0.02)
    with pytest.raises(ConfigError) as info:
        failure_draws(events, config)
    assert info.value.field == field


def _swept(k, seed, productive, wall, predicted_wall, sd):
    tm = RunTimings(compute_s=0.02, save_s=0.02, launch_s=3.0)
    prediction = RunPrediction(
        wall_s=predicted_wall, goodput=8.0 / predicted_wall, failures=2.0, buckets={"productive": 8.0}, wall_sd_s=sd
    )
    summary = {
        "goodput": productive / wall,
        "wall_s": wall,
        "buckets": {"productive": productive},
        "failures": 2,
        "config": {"steps": 400, "mtbf": 8.0},
    }
    return SweepRun(k, seed, summary, tm, prediction, prediction)


def test_pool_sweep_pools_as_ratio_of_totals():
    runs = [_swept(25, 0, 8.0, 10.0, 16.0, 3.0), _swept(25, 1, 8.0, 30.0, 16.0, 4.0), _swept(5, 0, 8.0, 20.0, 20.0, 1.0)]
    rows = pool_sweep(runs)
    assert [r["ckpt_every"] for r in rows] == [5, 25]
    row = rows[1]
    assert row["measured"] == pytest.approx(16.0 / 40.0)  # not the mean of 0.8 and 0.267
    assert (row["measured_min"], row["measured_max"]) == pytest.approx((8 / 30, 0.8))
    assert row["expected"] == pytest.approx(0.5)
    assert row["expected_se"] == pytest.approx(0.5 * 5.0 / 32.0)  # sqrt(3^2 + 4^2) over the total wall
    assert row["error_pts"] == pytest.approx(-10.0)
    assert row["z"] == pytest.approx(-0.1 / (0.5 * 5.0 / 32.0))
    assert row["interval_s"] == pytest.approx(25 * 0.02)


def test_textbook_goodput_uses_the_measured_costs():
    tm = RunTimings(compute_s=0.02, data_wait_s=0.005, save_s=0.03, launch_s=3.0, restore_s=0.1, relaunch_delay_s=0.5)
    got = textbook_goodput(tm, 400, 20, 8.0)
    assert got["daly"] == pytest.approx(0.8 * daly_goodput(20 * 0.025, 0.03, 3.6, 8.0))
    waste = 0.03 / 0.5 + (0.25 + 3.6) / 8.0
    assert got["first_order"] == pytest.approx(0.8 * (1 - waste))


def _step_drift_s(events) -> float:
    """Seconds by which the attempts' steps strayed from the run's mean step: the sum over attempts of
    |their steps' time - their step count x the mean step| (what a replay at the mean step cannot see)."""
    from collections import defaultdict

    from goodputlab.measure.ledger import build_ledger

    time_by, steps_by = defaultdict(float), defaultdict(int)
    for seg in build_ledger(events).segments:
        if seg.kind in (E.W_COMPUTE, E.W_DATA_WAIT, E.W_STEP_END):
            time_by[seg.attempt] += seg.duration
            steps_by[seg.attempt] += seg.kind == E.W_COMPUTE
    mean = sum(time_by.values()) / max(1, sum(steps_by.values()))
    return sum(abs(time_by[a] - steps_by[a] * mean) for a in time_by)


@pytest.mark.parametrize("clock", ["train", "wall"])
def test_real_run_matches_the_replayed_model(tmp_path, clock):
    # With MTBF 20 s, seed 0 draws 1.28, 0.08 and 19.96 s for the first three exposures.
    # wall: the clock runs from each launch, so the second kill strikes a worker still launching,
    # then an attempt has time to finish.
    # train: the clock runs from each worker's first step, so both kills strike training
    # (200 steps take longer than 1.3 s, and far less than 20 s, on a quiet or a busy machine).
    # Away from any threshold, so a slow or busy machine cannot change the story. The model fed
    # with this run's own costs and draws must land on the measured goodput.
    import goodputlab as gl

    steps = 200 if clock == "train" else 60
    config = RunConfig(steps=steps, ckpt_every=10, mtbf=20.0, seed=0, restart_delay=0.1, threads=1, failure_clock=clock)
    result = gl.run(config, out=tmp_path / "run", progress=False)
    s = result.summary
    assert s["completed"] and s["failures"] == 2
    lost = s["buckets"]["lost_work"]
    # train: the kills struck training. wall: the second kill (0.08 s) strikes a launch; the first (1.28 s) strikes a
    # launch or, where a forked worker starts training sooner, its first steps: either way the replay must follow.
    assert lost > 0 if clock == "train" else lost >= 0

    tm = measure_timings(result.events)
    assert 0.001 < tm.compute_s < 1.0
    assert 0.01 < tm.launch_s < 30.0  # a launch (a fork of a server that imported torch, or a fresh process)
    assert 0.1 <= tm.relaunch_delay_s < 0.5

    replayed = predict_measured(result.events, config, replay=True)
    assert replayed.failures == 2
    # the replay prices every step at the run's mean step; on a busy machine the steps of one attempt run slower
    # than another's. The tolerance is that drift, measured in this run (issue 42): no fixed bet on the load.
    drift = _step_drift_s(result.events)
    assert replayed.goodput == pytest.approx(s["goodput"], abs=0.01 + 2 * drift / s["wall_s"]), (drift, s["wall_s"])
    assert replayed.wall_s == pytest.approx(s["wall_s"], abs=0.05 * s["wall_s"] + drift)
    for category in ("productive", "restart", "startup"):
        assert replayed.buckets[category] == pytest.approx(s["buckets"][category], rel=0.1, abs=0.1), category

    expected = predict_measured(result.events, s["config"])
    assert 0 < expected.goodput < 1 and expected.goodput_sd > 0
    assert math.isfinite(expected.wall_s)
