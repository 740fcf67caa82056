"""The pure arithmetic of statistical efficiency: noise-scale estimator, Pollux's efficiency and
goodput, the learning-rate rules, the fits, and the sweep's analysis (missed targets included)."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from goodputlab.efficiency import analysis as A
from goodputlab.efficiency import noise as N
from goodputlab.efficiency import sweep_config
from goodputlab.errors import ConfigError

from efficiency_helpers import synthetic_result


# --- the gradient noise scale against a problem whose noise is known exactly -----------------
#
# Linear regression y = x.w* + eps with x ~ N(0, I_d), eps ~ N(0, s^2), loss (x.w - y)^2 / 2.
# At w = w* + delta the per-sample gradient is g = x (x.delta - eps), so
#   G = E[g] = delta,   Sigma = E[g g^T] - G G^T = delta delta^T + (|delta|^2 + s^2) I
# (Isserlis: E[x x^T A x x^T] = 2A + tr(A) I for Gaussian x), hence
#   |G|^2 = |delta|^2,  tr(Sigma) = (d + 1)|delta|^2 + d s^2.

D, NOISE_SD = 10, 0.7


def exact_regression(delta):
    g2 = float(delta @ delta)
    trace = (D + 1) * g2 + D * NOISE_SD**2
    return g2, trace, trace / g2


def regression_norms(delta, b_big, repeats, seed):
    """Squared gradient norms of ``repeats`` batches of ``b_big`` samples: the mean over the two
    halves (``b_big / 2`` samples each) and the full batch, as the sweep takes them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((repeats, b_big, D))
    eps = NOISE_SD * rng.standard_normal((repeats, b_big))
    g = x * ((x @ delta) - eps)[..., None]  # per-sample gradients (repeats, b_big, D)
    half = b_big // 2
    small = 0.5 * ((g[:, :half].mean(1) ** 2).sum(-1) + (g[:, half:].mean(1) ** 2).sum(-1))
    big = (g.mean(1) ** 2).sum(-1)
    return small, big


@pytest.mark.parametrize("delta_scale", [1.0, 0.3])
def test_simple_estimator_recovers_the_exact_noise_scale(delta_scale):
    delta = delta_scale * np.linspace(-1, 1, D)
    g2, trace, noise = exact_regression(delta)
    small, big = regression_norms(delta, 32, 6000, seed=1)
    est_g2, est_trace = N.simple_noise_estimates(small.mean(), big.mean(), 16, 32)
    assert est_g2 == pytest.approx(g2, rel=0.06)
    assert est_trace == pytest.approx(trace, rel=0.03)
    assert N.simple_noise_scale(small, big, 16, 32) == pytest.approx(noise, rel=0.07)
    # the smaller the true gradient, the larger the noise scale (as training converges)
    assert noise > 10 if delta_scale < 1 else noise < 30


def test_estimator_is_unbiased_for_each_quantity():
    """Elementwise on arrays; E|G_B|^2 = |G|^2 + tr(Sigma)/B reversed exactly."""
    g2, trace = 2.0, 50.0
    small = g2 + trace / 4
    big = g2 + trace / 16
    est = N.simple_noise_estimates(np.array([small, small]), np.array([big, big]), 4, 16)
    assert np.allclose(est[0], g2) and np.allclose(est[1], trace)
    assert N.simple_noise_scale(small, big, 4, 16) == pytest.approx(25.0)
    with pytest.raises(ValueError):
        N.simple_noise_estimates(1.0, 1.0, 16, 16)


def test_tracker_follows_the_exact_value_and_its_change():
    delta = np.linspace(-1, 1, D)
    tracker = N.NoiseScaleTracker(window_samples=20_000)
    assert math.isnan(tracker.noise_scale)
    small, big = regression_norms(delta, 32, 3000, seed=2)
    for s, b in zip(small, big):
        tracker.update(s, b, 16, 32)
    assert tracker.updates == 3000
    assert tracker.noise_scale == pytest.approx(exact_regression(delta)[2], rel=0.12)
    # the gradient shrinks (training converges): the tracked scale rises to the new value
    near = 0.3 * delta
    small, big = regression_norms(near, 32, 3000, seed=3)
    for s, b in zip(small, big):
        tracker.update(s, b, 16, 32)
    assert tracker.noise_scale == pytest.approx(exact_regression(near)[2], rel=0.15)
    # a non-finite gradient (a diverging run) leaves the estimate alone
    before = tracker.noise_scale
    assert tracker.update(float("nan"), 1.0, 16, 32) == before


def test_tracker_bias_correction_and_pure_noise():
    tracker = N.NoiseScaleTracker(1000)
    tracker.update(2.0 + 50 / 4, 2.0 + 50 / 16, 4, 16)  # one exact update, not pulled towards zero
    assert tracker.grad_sq == pytest.approx(2.0) and tracker.trace_sigma == pytest.approx(50.0)
    noise_only = N.NoiseScaleTracker(1000)
    noise_only.update(50 / 4, 50 / 16 - 1, 4, 16)  # |G|^2 estimate negative: all noise, no signal
    assert noise_only.noise_scale == math.inf


# --- Pollux's efficiency and gain, the learning-rate rules -------------------------------------


def test_statistical_efficiency():
    assert N.statistical_efficiency(8, 40.0, 8) == 1.0
    assert N.statistical_efficiency(40, 40.0, 8) == pytest.approx(48 / 80)
    # far below the noise scale a bigger batch loses little; far above, efficiency ~ (B + M0)/M
    assert N.statistical_efficiency(16, 1e6, 8) == pytest.approx(1.0, abs=1e-5)
    assert N.statistical_efficiency(4096, 40.0, 8) == pytest.approx(48 / 4136)
    assert N.statistical_efficiency(256, math.inf, 8) == 1.0
    e = N.statistical_efficiency(np.array([8, 16, 32, 64]), 30.0, 8)
    assert np.all(np.diff(e) < 0) and e[0] == 1.0
    # the same as McCandlish: samples(M) = E_min (1 + M / B)  =>  samples(M0) / samples(M)
    b, m0, m = 30.0, 8, 64
    assert N.statistical_efficiency(m, b, m0) == pytest.approx((1 + m0 / b) / (1 + m / b))


def test_adascale_gain_and_learning_rate_rules():
    assert N.adascale_gain(8, 40.0, 8) == pytest.approx(1.0)
    assert N.adascale_gain(64, math.inf, 8) == pytest.approx(8.0)  # all noise: linear scaling
    assert N.adascale_gain(64, 1e-9, 8) == pytest.approx(1.0)  # no noise: a bigger batch buys nothing
    assert N.adascale_gain(64, 40.0, 8) == pytest.approx(8 * 48 / 104)
    assert N.lr_factor("linear", 64, 8) == 8.0
    assert N.lr_factor("sqrt", 64, 8) == pytest.approx(math.sqrt(8))
    assert N.lr_factor("adascale", 64, 8, 40.0) == pytest.approx(math.sqrt(8 * 48 / 104))
    assert N.lr_factor("adascale", 64, 8) == pytest.approx(math.sqrt(8))  # no estimate yet: the sqrt rule
    assert N.lr_factor("adascale", 8, 8, 40.0) == 1.0  # every rule leaves the base batch alone
    with pytest.raises(ConfigError) as e:
        N.lr_factor("cubic", 64, 8)
    assert e.value.field == "lr_rule"


# --- throughput, the best batch size, the critical batch ---------------------------------------


def test_throughput_fit_and_closed_form_optimum():
    alpha, beta = 0.0015, 0.0003
    sizes = np.array([8, 16, 32, 64, 128, 256])
    fit = N.fit_throughput(sizes, alpha + beta * sizes)
    assert fit.overhead_s == pytest.approx(alpha) and fit.per_sample_s == pytest.approx(beta)
    assert fit.knee == pytest.approx(5.0)
    assert fit.samples_per_s(1e9) == pytest.approx(fit.ceiling_samples_per_s, rel=1e-5)
    for noise in (10.0, 50.0, 400.0):
        grid = np.linspace(1, 2000, 200_000)
        numeric = grid[np.argmax(fit.samples_per_s(grid) * N.statistical_efficiency(grid, noise, 8))]
        assert N.optimal_batch_size(noise, fit) == pytest.approx(numeric, rel=1e-3)
        assert N.optimal_batch_size(noise, fit) == pytest.approx(math.sqrt(noise * fit.knee))
    # a negative fitted overhead is clipped to zero
    clipped = N.fit_throughput([8, 16], [0.001, 0.0025])
    assert clipped.overhead_s == 0.0 and clipped.per_sample_s > 0


def test_critical_batch_fit_recovers_mccandlish_parameters():
    e_min, b_crit = 6000.0, 60.0
    sizes = [8, 16, 32, 64, 128, 256]
    fit = N.critical_batch_fit(sizes, [e_min * (1 + m / b_crit) for m in sizes])
    assert fit["e_min"] == pytest.approx(e_min) and fit["b_crit"] == pytest.approx(b_crit)
    assert fit["s_min"] == pytest.approx(e_min / b_crit)
    assert N.critical_batch_fit([8], [6000]) is None
    assert N.critical_batch_fit([8, 16], [6000, 5000]) is None  # fewer samples at a bigger batch: no positive fit


# --- loss curves, steps to the target -------------------------------------------------------------


def test_crossing_interpolates_and_reports_misses():
    steps, losses = [0, 10, 20, 30], [4.0, 2.0, 1.5, 1.2]
    assert A.crossing(steps, losses, 1.5) == 20.0
    assert A.crossing(steps, losses, 1.35) == pytest.approx(25.0)
    assert A.crossing(steps, losses, 4.5) == 0.0
    assert A.crossing(steps, losses, 1.0) is None
    t = A.Trajectory(16)
    for s, loss in zip(steps, losses):
        t.add(s, loss, 10.0 + s, 1.0, 10.0 + s, 0.001)
    assert t.steps_to_target(1.35) == 25 and t.steps_to_target(1.34) == 26  # rounded up
    assert t.samples == [0, 160, 320, 480]
    assert t.noise_scale_at(1.35) == pytest.approx(35.0)
    assert t.noise_scale_at(1.0) is None


# --- the sweep's configuration -----------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"batch_sizes": (8,)}, "batch_sizes"),
        ({"batch_sizes": (8, 15)}, "batch_sizes"),
        ({"batch_sizes": (8, 8, 16)}, "batch_sizes"),
        ({"batch_sizes": (0, 16)}, "batch_sizes"),
        ({"target_loss": 0.5}, "target_loss"),  # below the source's entropy: unreachable
        ({"target_loss": 4.5}, "target_loss"),  # above ln(64): the initial model is already there
        ({"target_loss": float("nan")}, "target_loss"),
        ({"lr_rule": "cubic"}, "lr_rule"),
        ({"lr": 0.0}, "lr"),
        ({"max_steps": 0}, "max_steps"),
        ({"model": "huge"}, "model"),
        ({"threads": 0}, "threads"),
        ({"rounds": 0}, "rounds"),
        ({"eval_growth": 1.0}, "eval_growth"),
        ({"pool_sequences": 100}, "pool_sequences"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(changes, field):
    with pytest.raises(ConfigError) as e:
        sweep_config.SweepConfig(**changes)
    assert e.value.field == field


def test_config_sorts_and_knows_its_base():
    cfg = sweep_config.SweepConfig(batch_sizes=(64, 8, 16), lr_rule="linear", lr=1e-3)
    assert cfg.batch_sizes == (8, 16, 64) and cfg.base_batch == 8
    assert cfg.lr_at(64) == pytest.approx(8e-3)
    assert 0.9 < cfg.source_entropy < sweep_config.DEFAULT_TARGET_LOSS < math.log(64)
    assert sweep_config.SweepConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert sweep_config.parse_batch_sizes("8, 16,32") == (8, 16, 32)
    for bad in ("8,x", "8", "8,9", "8,8", ""):
        with pytest.raises(ConfigError) as e:
            sweep_config.parse_batch_sizes(bad)
        assert e.value.field == "batch_sizes"


def test_the_pure_module_imports_no_torch():
    import subprocess

    code = "import goodputlab.efficiency, goodputlab.efficiency.analysis, goodputlab.efficiency.noise, goodputlab.cli.efficiency, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the analysis of a sweep, a missed target included ------------------------------------------


def test_analysis_measures_efficiency_goodput_and_the_best_batch():
    noise = 40.0
    result = synthetic_result(noise=noise, missed=(128,))
    a = result.analyse()
    assert a.reference_batch_size == 8
    assert a.missed == [128]
    by = {r["batch_size"]: r for r in a.rows}
    assert [r["batch_size"] for r in a.rows] == [8, 16, 32, 64, 128]
    # the synthetic runs need exactly samples = E_min (1 + M / noise): efficiency is Pollux's formula
    for m in (8, 16, 32, 64):
        r = by[m]
        assert r["reached"] and r["samples_to_target"] == r["steps_to_target"] * m
        assert r["statistical_efficiency"] == pytest.approx(by[8]["samples_to_target"] / r["samples_to_target"])
        assert r["statistical_efficiency"] == pytest.approx(N.statistical_efficiency(m, noise, 8), rel=0.02)
        assert r["goodput"] == pytest.approx(r["samples_per_s"] * r["statistical_efficiency"])
        assert r["predicted_efficiency"] == pytest.approx(N.statistical_efficiency(m, noise, 8))
        assert r["time_to_target_s"] == pytest.approx(r["samples_to_target"] / r["samples_per_s"])
    missed = by[128]
    assert not missed["reached"] and missed["stopped"] == "max_steps"
    for key in ("steps_to_target", "samples_to_target", "statistical_efficiency", "goodput", "time_to_target_s", "noise_scale_at_target"):
        assert missed[key] is None
    assert missed["predicted_goodput"] > 0  # the model still says what it would have been
    assert a.noise_scale == pytest.approx(noise)
    # best measured = the shortest time to target, among the batch sizes that reached it
    fastest = min((r for r in a.rows if r["reached"]), key=lambda r: r["time_to_target_s"])
    assert a.best_batch_size == fastest["batch_size"]
    assert a.predicted_best_batch_size in result.config.batch_sizes
    assert a.critical_batch["b_crit"] == pytest.approx(noise, rel=0.05)
    assert a.optimal_batch_size == pytest.approx(math.sqrt(noise * a.throughput_fit.knee))
    out = json.loads(json.dumps(a.to_json(), allow_nan=False))
    assert {"rows", "noise_scale", "best_batch_size"} <= set(out)
    assert out["rows"][-1]["steps_to_target"] is None and out["rows"][-1]["reached"] is False
    assert out["missed"] == [128]


def test_analysis_when_the_smallest_batch_misses():
    a = synthetic_result(noise=40.0, missed=(8,)).analyse()
    assert a.reference_batch_size == 16
    assert a.row(16)["statistical_efficiency"] == 1.0
    assert a.row(8)["statistical_efficiency"] is None and a.row(8)["predicted_efficiency"] > 1  # better than the reference
    assert a.best_batch_size != 8


def test_analysis_when_every_batch_misses():
    a = synthetic_result(noise=40.0, missed=(8, 16, 32, 64, 128)).analyse()
    assert a.reference_batch_size is None and a.noise_scale is None
    assert a.best_batch_size is None and a.predicted_best_batch_size is None and a.critical_batch is None
    assert all(not r["reached"] and r["goodput"] is None and r["predicted_goodput"] is None for r in a.rows)
    json.dumps(a.to_json(), allow_nan=False)


def test_analysis_at_another_target_and_round_trip():
    result = synthetic_result(noise=40.0)
    higher = result.analyse(result.config.target_loss + 0.2)
    base = result.analyse()
    assert all(h["steps_to_target"] < b["steps_to_target"] for h, b in zip(higher.rows, base.rows))
    with pytest.raises(ConfigError) as e:
        result.analyse(result.config.target_loss - 0.05)  # the runs stopped at the sweep's target
    assert e.value.field == "target_loss"
    again = A.SweepResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.analyse().to_json() == base.to_json()


def test_adaptive_batch_grows_with_the_noise_scale():
    result = synthetic_result(noise=40.0, growing=True)
    target = result.config.target_loss
    rows = A.adaptive_batch_sizes(result, [target + 1.5, target + 0.8, target + 0.3, target])
    noises = [r["noise_scale"] for r in rows]
    assert [r["loss"] for r in rows] == sorted((r["loss"] for r in rows), reverse=True)
    assert noises == sorted(noises) and noises[-1] > 3 * noises[0]
    optimal = [r["optimal"] for r in rows]
    assert optimal == sorted(optimal)
    assert all(r["measured"] in result.config.batch_sizes for r in rows)
