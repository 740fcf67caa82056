"""The lab model (predict_run, replay_run): against Daly, hand-walked timelines and its own Monte Carlo."""

import math

import numpy as np
import pytest

from goodputlab import theory
from goodputlab.categories import CATEGORIES
from goodputlab.errors import ConfigError
from goodputlab.theory import RunTimings, predict_run, replay_run

# Costs like the lab's on a 2-core CPU (seconds)
LAB = RunTimings(
    compute_s=0.022,
    data_wait_s=0.0005,
    step_other_s=0.0001,
    save_s=0.025,
    launch_s=3.0,
    restore_s=0.02,
    relaunch_delay_s=0.51,
    exit_s=0.05,
    start_s=0.01,
    teardown_s=0.001,
)


def assert_closes(prediction):
    assert set(prediction.buckets) == set(CATEGORIES)
    assert sum(prediction.buckets.values()) == pytest.approx(prediction.wall_s, rel=1e-12)
    assert all(v >= 0 for v in prediction.buckets.values())


def test_no_failures_is_the_plain_timeline():
    # 400 steps, a save every 30 and after the last: 13 regular saves + the final one
    p = predict_run(LAB, 400, 30, math.inf)
    saves = 400 // 30 + 1
    wall = 0.01 + 3.0 + 400 * LAB.step_s + saves * 0.025 + 0.05 + 0.001
    assert p.wall_s == pytest.approx(wall, rel=1e-12)
    assert p.failures == 0 and p.wall_sd_s == 0
    assert p.buckets["productive"] == pytest.approx(400 * 0.022)
    assert p.buckets["checkpoint_save"] == pytest.approx(saves * 0.025)
    assert p.buckets["startup"] == pytest.approx(3.01)
    assert p.buckets["lost_work"] == p.buckets["restart"] == 0
    assert p.goodput == pytest.approx(400 * 0.022 / wall)
    assert_closes(p)


def test_a_multiple_of_the_interval_saves_once_at_the_end():
    # 400 = 4 x 100: the save after step 400 is the fourth, not a fifth
    p = predict_run(LAB, 400, 100, math.inf)
    assert p.buckets["checkpoint_save"] == pytest.approx(4 * 0.025)
    assert predict_run(LAB, 400, 0, math.inf).buckets["checkpoint_save"] == pytest.approx(0.025)
    assert predict_run(LAB, 400, 400, math.inf).wall_s == predict_run(LAB, 400, 0, math.inf).wall_s


def test_single_segment_hand_computed():
    # one segment of 10 s exposed, M = 10 s, pause D = 2 s, free launch:
    # (e^1 - 1) (M + D) = 1.718281828 * 12 = 20.6194 s; failures e - 1 = 1.718
    tm = RunTimings(compute_s=1.0, relaunch_delay_s=2.0)
    p = predict_run(tm, 10, 0, 10.0)
    assert p.wall_s == pytest.approx((math.e - 1) * 12, rel=1e-12)
    assert p.wall_s == pytest.approx(20.6194, abs=1e-4)
    assert p.failures == pytest.approx(math.e - 1, rel=1e-12)
    assert_closes(p)
    # the failed tries: E[Y | Y < 10] = M - 10/(e - 1) = 4.18023 s each, all compute
    assert p.buckets["lost_work"] == pytest.approx((math.e - 1) * (10 - 10 / (math.e - 1)), rel=1e-9)
    assert p.buckets["restart"] == pytest.approx((math.e - 1) * 2.0, rel=1e-12)


def test_long_run_is_daly_plus_the_first_launch():
    # Without the lab's extras (no pause, restore, exit, data wait) and a
    # multiple of the interval, the lab model is Daly's with R = launch, plus
    # the first launch: M (e^(L/M) - 1).
    tm = RunTimings(compute_s=0.5, save_s=3.0, launch_s=20.0)
    steps, k, mtbf = 1000, 40, 600.0
    p = predict_run(tm, steps, k, mtbf, clock="wall")
    daly = theory.daly_expected_wall_time(steps * 0.5, k * 0.5, 3.0, 20.0, mtbf)
    assert p.wall_s - mtbf * math.expm1(20.0 / mtbf) == pytest.approx(daly, rel=1e-12)
    assert_closes(p)


def test_with_the_train_clock_launches_are_never_struck():
    # The train clock starts at a worker's first step: the launch (L) takes its own time, once, and
    # a segment of a exposed seconds takes (e^(a/M) - 1)(M + L) with its failures and relaunches
    # (no e^(L/M): a relaunch is not exposed); the first launch is L, never retried.
    tm = RunTimings(compute_s=0.5, save_s=3.0, launch_s=20.0)
    steps, k, mtbf = 1000, 40, 600.0
    p = predict_run(tm, steps, k, mtbf)  # the default: the lab's runs use the train clock
    a = k * 0.5 + 3.0
    assert p.wall_s == pytest.approx(20.0 + steps / k * math.expm1(a / mtbf) * (mtbf + 20.0), rel=1e-12)
    assert p.buckets["startup"] == pytest.approx(20.0)
    assert p.failures == pytest.approx(steps / k * math.expm1(a / mtbf), rel=1e-12)
    assert_closes(p)
    # the wall clock's launches are exposed: the same run takes longer and fails more
    wall = predict_run(tm, steps, k, mtbf, clock="wall")
    assert wall.wall_s > p.wall_s and wall.failures > p.failures
    # a launch as long as the MTBF (a busy machine's import torch): with the wall clock most failures
    # strike a worker that is still starting; the train clock's strike only training
    slow = RunTimings(compute_s=0.01, save_s=0.02, launch_s=4.0, restore_s=0.02)
    w, tr = predict_run(slow, 400, 50, 4.0, clock="wall"), predict_run(slow, 400, 50, 4.0)
    assert w.failures > 3 * tr.failures and w.goodput < tr.goodput


def test_pause_after_a_kill_is_safe_from_failures():
    # Moving time from the exposed launch to the safe pause raises goodput
    exposed = predict_run(RunTimings(compute_s=0.02, launch_s=3.0), 400, 20, 8.0, clock="wall")
    safe = predict_run(RunTimings(compute_s=0.02, launch_s=2.5, relaunch_delay_s=0.5), 400, 20, 8.0, clock="wall")
    assert safe.goodput > exposed.goodput
    assert safe.failures < exposed.failures


def test_replay_hand_walked():
    # compute 1 s/step, 10 steps, save every 4 (0.5 s), launch 2 s, restore 1 s, pause 3 s.
    # attempt 0 killed at 1 s (launching): startup 1, pause 3            -> 4 s
    # attempt 1 (no checkpoint yet): launch 2, steps 0-3 + save 4.5,
    #   killed 2.5 s into steps 4-7 (lost), pause 3                      -> 12 s
    # attempt 2: launch 2, restore 1, steps 4-7 + save, steps 8-9 + save -> 10 s
    tm = RunTimings(compute_s=1.0, save_s=0.5, launch_s=2.0, restore_s=1.0, relaunch_delay_s=3.0)
    r = replay_run(tm, 10, 4, [1.0, 9.0], clock="wall")
    assert r.wall_s == pytest.approx(26.0)
    assert r.failures == 2
    expected = {
        "productive": 10.0,
        "lost_work": 2.5,
        "checkpoint_save": 1.5,
        "checkpoint_restore": 1.0,
        "restart": 3 + 2 + 3 + 2,
        "startup": 1.0,
        "data_wait": 0.0,
        "straggler_wait": 0.0,
        "degraded": 0.0,
        "other": 0.0,
    }
    assert r.buckets == pytest.approx(expected)
    assert r.goodput == pytest.approx(10 / 26)


def test_replay_hand_walked_with_the_train_clock():
    # the same run, failures counted from each worker's first step (draws 1 s and 7 s):
    # attempt 0: launch 2 (never cut short), 1 s of step 0 (lost), pause 3          -> 6 s
    # attempt 1: launch 2, steps 0-3 + save 4.5, 2.5 s into steps 4-7 (lost), pause 3 -> 12 s
    # attempt 2: launch 2, restore 1, steps 4-7 + save, steps 8-9 + save              -> 10 s
    tm = RunTimings(compute_s=1.0, save_s=0.5, launch_s=2.0, restore_s=1.0, relaunch_delay_s=3.0)
    r = replay_run(tm, 10, 4, [1.0, 7.0])
    assert r.failures == 2
    assert r.buckets["startup"] == pytest.approx(2.0)
    assert r.buckets["lost_work"] == pytest.approx(1.0 + 2.5)
    assert r.buckets["restart"] == pytest.approx(3 + 2 + 3 + 2)
    assert r.buckets["checkpoint_restore"] == pytest.approx(1.0)
    assert r.wall_s == pytest.approx(28.0)
    assert r.wall_s == pytest.approx(sum(r.buckets.values()))


def test_replay_with_each_attempts_own_launch():
    # as above, but attempt 0 launches in 0.5 s: its kill at 1 s lands in training
    # (0.5 s of step 0 lost); attempt 1 launches in 3 s and trains 6 s (4.5 s segment + 1.5 s lost)
    tm = RunTimings(compute_s=1.0, save_s=0.5, launch_s=2.0, restore_s=1.0, relaunch_delay_s=3.0)
    r = replay_run(tm, 10, 4, [1.0, 9.0], launch_s_by_attempt=[0.5, 3.0], clock="wall")
    assert r.buckets["startup"] == pytest.approx(0.5)
    assert r.buckets["lost_work"] == pytest.approx(0.5 + 1.5)
    # attempt 2 has no launch of its own: the mean (2 s)
    assert r.buckets["restart"] == pytest.approx(3 + 3 + 3 + 2)
    assert r.wall_s == pytest.approx(sum(r.buckets.values()))


def test_replay_killed_during_restore_and_save():
    tm = RunTimings(compute_s=1.0, save_s=0.5, launch_s=2.0, restore_s=1.0, relaunch_delay_s=3.0)
    # attempt 0: steps 0-3 and save (6.5 s), then killed 4.2 s into the second segment's save;
    # attempt 1: killed 0.4 s into its restore; attempt 2 finishes
    r = replay_run(tm, 8, 4, [2 + 4.5 + 4.2, 2.4], clock="wall")
    assert r.failures == 2
    assert r.buckets["lost_work"] == pytest.approx(4.0)
    assert r.buckets["checkpoint_save"] == pytest.approx(0.5 + 0.2 + 0.5)
    assert r.buckets["checkpoint_restore"] == pytest.approx(0.4 + 1.0)
    assert sum(r.buckets.values()) == pytest.approx(r.wall_s)


@pytest.mark.parametrize("clock", ["train", "wall"])
@pytest.mark.parametrize("ckpt_every", [3, 25, 150])
def test_replay_averages_to_the_closed_form(ckpt_every, clock):
    # Monte Carlo over random failure times: the mean of replay_run is
    # predict_run's expectation, its spread is predict_run's wall_sd_s.
    rng = np.random.default_rng(ckpt_every)
    mtbf, trials = 8.0, 4000
    replays = [replay_run(LAB, 400, ckpt_every, rng.exponential(mtbf, size=80), clock=clock) for _ in range(trials)]
    walls = np.array([r.wall_s for r in replays])
    p = predict_run(LAB, 400, ckpt_every, mtbf, clock=clock)
    se = walls.std(ddof=1) / math.sqrt(trials)
    assert abs(walls.mean() - p.wall_s) < 4 * se
    assert walls.std(ddof=1) == pytest.approx(p.wall_sd_s, rel=0.08)
    assert np.mean([r.failures for r in replays]) == pytest.approx(p.failures, rel=0.05)
    for c in CATEGORIES:
        mc = np.mean([r.buckets[c] for r in replays])
        assert mc == pytest.approx(p.buckets[c], rel=0.05, abs=0.02), c


def test_optimum_in_steps_near_daly_for_a_long_run():
    tm = RunTimings(compute_s=0.01, save_s=0.02)
    steps, mtbf = 20_000, 10.0
    best = theory.optimal_ckpt_every(tm, steps, mtbf)
    daly_steps = theory.daly_interval(0.02, mtbf) / 0.01
    assert best == pytest.approx(daly_steps, rel=0.05)
    g = theory.predict_run_goodput(tm, steps, best, mtbf)
    assert g >= theory.predict_run_goodput(tm, steps, best + 5, mtbf)
    assert g >= theory.predict_run_goodput(tm, steps, best - 5, mtbf)


def test_goodput_sd_is_the_delta_method():
    p = predict_run(LAB, 400, 25, 8.0)
    assert p.goodput_sd == pytest.approx(p.goodput * p.wall_sd_s / p.wall_s)
    assert 0 < p.goodput_sd < p.goodput


def test_breakdown_rows():
    p = predict_run(LAB, 400, 25, 8.0)
    rows = p.breakdown_rows("model")
    assert [r["category"] for r in rows] == list(CATEGORIES)
    assert {r["run"] for r in rows} == {"model"}
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: RunTimings(compute_s=0), "compute_s"),
        (lambda: RunTimings(compute_s=0.1, save_s=-1), "save_s"),
        (lambda: RunTimings(compute_s=0.1, launch_s=float("nan")), "launch_s"),
        (lambda: predict_run(LAB, 0, 10, 8.0), "steps"),
        (lambda: predict_run(LAB, 100, -1, 8.0), "ckpt_every"),
        (lambda: predict_run(LAB, 100, 10, 0.0), "mtbf_s"),
        (lambda: replay_run(LAB, 100, 10, [-1.0]), "times_to_failure"),
        (lambda: replay_run(LAB, 100, 10, [1.0], [float("inf")]), "launch_s_by_attempt"),
        (lambda: theory.optimal_ckpt_every(LAB, 100, -2.0), "mtbf_s"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ConfigError) as info:
        call()
    assert info.value.field == field


def test_the_textbook_restart_is_the_handover_when_the_run_had_a_hot_spare():
    from goodputlab.theory import daly_goodput, textbook_goodput

    cold = RunTimings(compute_s=0.02, save_s=0.05, launch_s=4.77, restore_s=0.01, relaunch_delay_s=0.2)
    hot = RunTimings(compute_s=0.02, save_s=0.05, launch_s=4.77, restore_s=0.01, relaunch_delay_s=0.2, spare_launch_s=0.05)
    # the cold first launch is the start-up of both; only the run without a spare pays it at every restart
    assert textbook_goodput(hot, 1000, 20, 5.0)["daly"] == pytest.approx(daly_goodput(0.4, 0.05, 0.2 + 0.05 + 0.01, 5.0))
    assert textbook_goodput(cold, 1000, 20, 5.0)["daly"] == pytest.approx(daly_goodput(0.4, 0.05, 0.2 + 4.77 + 0.01, 5.0))
