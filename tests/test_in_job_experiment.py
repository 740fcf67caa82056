"""Chapter 11's experiment code without running a job: the in-job timeline keeps every category's time at a
chart's resolution, the scale pair is set at the cluster's ratios on the same failure draws, a torchft run's
ratios sit beside the cluster's, and the costs of more groups and of a dead peer's timeout lower the curve."""

import dataclasses
import math

import pytest

import goodputlab as gl
from goodputlab import categories as C

ij = gl.experiments.in_job


def _timeline(parts):
    """A compact timeline (``t``, ``c``) from ``(seconds, category)`` pieces laid end to end."""
    t, codes, at = [0.0], "", 0.0
    for seconds, category in parts:
        at += seconds
        t.append(round(at, 3))
        codes += str(C.CATEGORIES.index(category))
    return {"t": t, "c": codes}


def test_a_binned_timeline_draws_each_category_for_its_booked_time():
    # 400 steps of 20 ms compute and 10 ms data wait: at 0.5 s bins the data wait is never a bin's majority
    timeline = _timeline([(1.0, C.STARTUP)] + [(0.02, C.PRODUCTIVE), (0.01, C.DATA_WAIT)] * 400 + [(2.0, C.DEGRADED)])
    drawn: dict[str, float] = {}
    rows = ij.binned(timeline, 0.5)
    for start, end, category in rows:
        drawn[category] = drawn.get(category, 0.0) + end - start
    assert drawn[C.DATA_WAIT] == pytest.approx(4.0, abs=0.02) and drawn[C.PRODUCTIVE] == pytest.approx(8.0, abs=0.02)
    assert drawn[C.STARTUP] == pytest.approx(1.0) and drawn[C.DEGRADED] == pytest.approx(2.0)
    assert rows[0][0] == 0.0 and rows[-1][1] == pytest.approx(15.0) and len(rows) < 100  # a chart's worth of bars
    assert all(a[1] == pytest.approx(b[0], abs=1e-3) for a, b in zip(rows, rows[1:]))  # no gaps, no overlaps


def test_the_scaled_cluster_has_llama3s_costs_at_a_higher_failure_rate():
    base, big = gl.llama3_cluster(), ij.scaled_cluster(4)
    assert big.mtbf_s == pytest.approx(base.mtbf_s / 4) and "65,536 GPUs" in big.name
    assert (big.save_s, big.recovery_s, big.startup_s) == (base.save_s, base.recovery_s, base.startup_s)
    assert big.ratios()["recovery / MTBF"] == pytest.approx(4 * base.ratios()["recovery / MTBF"])


def test_the_costs_of_more_groups_and_of_the_timeout_lower_the_curve_most_for_many_groups():
    config = dataclasses.replace(gl.labs.lab11.llama3_in_job(8), trials=10)
    rows = [{"recovery": "restart", "replica_groups": 1, "goodput_mean": 0.92, "closed_form_goodput": 0.92}]
    rows += [{"recovery": "in-job", "replica_groups": g, "goodput_mean": 0.98} for g in (2, 8, 16, 64)]
    costed = ij.costed_rows(rows, config, 405e9, 6.0, 50e9, timeout_s=60.0)
    assert costed[0]["with_costs_goodput"] == 0.92 and costed[0]["allreduce_share"] == 0.0
    by_g = {r["replica_groups"]: r for r in costed[1:]}
    for r in by_g.values():  # each in-job row pays the stall, and the all-reduce grows with the groups
        plain = gl.theory.in_job.predict(dataclasses.replace(config, replica_groups=r["replica_groups"])).goodput
        assert r["with_costs_goodput"] < plain and r["stall_share"] > 0
    shares = [by_g[g]["allreduce_share"] for g in (2, 8, 16, 64)]
    assert shares == sorted(shares) and by_g[64]["state_bytes_per_device"] == pytest.approx(16 * 405e9 * 64 / 16384)
    assert by_g[64]["with_costs_goodput"] < max(by_g[8]["with_costs_goodput"], by_g[16]["with_costs_goodput"])


def test_a_degraded_steps_predicted_worth_follows_the_noise_scale_along_the_run():
    # a constant noise scale gives the point value; no noise, a whole step; a noise scale that grows weighs in
    steps = [0, 100, 200]
    for rule in ("fixed", "retuned"):
        point = gl.theory.in_job_costs.degraded_step_progress(8, 16, 16.0, rule)
        assert gl.experiments.degraded_step.predicted_worth(steps, [math.nan, 16.0, 16.0], 8, 16, rule) == pytest.approx(point)
        assert gl.experiments.degraded_step.predicted_worth(steps, [math.nan, 0.0, 0.0], 8, 16, rule) == pytest.approx(1.0)
    mixed = gl.experiments.degraded_step.predicted_worth(steps, [math.nan, 0.0, 16.0], 8, 16, "fixed")
    assert mixed == pytest.approx(200 / (100 + 100 / 0.5))
    # where a fixed learning rate makes no progress on the smaller batch, the worth is 0
    assert gl.experiments.degraded_step.predicted_worth(steps, [math.nan, 1e9, 1e9], 4, 16, "fixed") == 0.0


def test_a_degraded_step_is_measured_on_the_lab_model_at_one_learning_rate():
    """A real, short measurement: the tiny model to a loose target at the full batch and at half of it."""
    worth = gl.experiments.degraded_step.measure(16, 1, 2, target_loss=3.0, max_steps=400, seeds=(0, 1))
    assert (worth.full_batch, worth.batch, worth.lr) == (16, 8, gl.training.workload.PRESETS["tiny"].lr)
    for run in worth.runs:  # both reached the target; the smaller batch needed at least as many steps, at most twice
        assert run.full_steps and run.degraded_steps and run.full_steps <= run.degraded_steps * 1.1
        assert 0.4 < run.worth <= 1.1
        assert run.predicted["fixed"] <= run.predicted["retuned"] <= 1.0  # a fixed learning rate never gains
    assert worth.worth == pytest.approx(sum(r.worth for r in worth.runs) / 2) and worth.worth_stderr >= 0
    again = gl.experiments.degraded_step.DegradedStepWorth.from_dict(worth.to_dict())
    assert again == worth  # the recording keeps every figure
    with pytest.raises(ValueError, match="survivors"):
        gl.experiments.degraded_step.measure(16, 2, 2)
