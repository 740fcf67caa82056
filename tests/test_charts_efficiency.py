"""Chapter 8's charts: built from a sweep's analysis, with what they claim to show in their data."""

from __future__ import annotations

import math

import pytest

from goodputlab.charts import efficiency as C
from goodputlab.efficiency.analysis import SweepResult, adaptive_batch_sizes

from conftest import chart_rows
from efficiency_helpers import synthetic_result


@pytest.fixture(scope="module")
def result():
    return synthetic_result(noise=40.0, missed=(128,), growing=True)


def test_factors_show_measured_predicted_and_missed(result):
    a = result.analyse()
    spec = C.factors_chart(a, selected=32).to_dict()
    rows = chart_rows(spec)
    measured = [r for r in rows if r.get("source") == "measured" and "goodput" in r]
    assert sorted(r["batch_size"] for r in measured) == [8, 16, 32, 64]  # the missed batch has no measured goodput
    predicted = [r for r in rows if r.get("source") == "predicted from the noise scale" and "efficiency" in r]
    assert predicted[0]["efficiency"] == pytest.approx(1.0) and predicted[-1]["efficiency"] < 0.5
    assert any(r.get("note", "").startswith("missed") and r["batch_size"] == 128 for r in rows)
    throughput = [r for r in rows if "samples_per_s" in r and "source" in r]
    assert len(throughput) == 5
    assert {"batch_size": a.best_batch_size, "label": f"best measured: {a.best_batch_size}"} in rows


def test_curves_noise_tradeoff_rules_adaptivity(result):
    a = result.analyse()
    loss_rows = chart_rows(C.loss_curves(result).to_dict())
    assert {"loss": result.config.target_loss, "label": f"target {result.config.target_loss:g}"} in loss_rows
    assert all(r["samples"] > 0 for r in loss_rows if "samples" in r)
    noise_rows = [r for r in chart_rows(C.noise_scale_chart(result).to_dict()) if "noise_scale" in r]
    assert noise_rows and all(math.isfinite(r["noise_scale"]) for r in noise_rows)
    trade = chart_rows(C.tradeoff_chart(a).to_dict())
    assert len([r for r in trade if "batch_size" in r]) == 4 and len([r for r in trade if "batch_size" not in r]) == 60
    linear = SweepResult(result.config.replace(lr_rule="linear"), result.throughput, result.trajectories)
    rules = chart_rows(C.rules_chart({"sqrt": a, "linear": linear.analyse()}).to_dict())
    assert {r["rule"] for r in rules} == {"sqrt", "linear"} and any("note" in r for r in rules)
    adapt = adaptive_batch_sizes(result, [3.0, 2.0, 1.6, result.config.target_loss])
    kinds = {r["kind"] for r in chart_rows(C.adaptivity_chart(adapt, result.config.batch_sizes).to_dict())}
    assert kinds == {"measured (this stretch)", "predicted (swept sizes)", "closed form"}


def test_a_chart_renders_offline(result, tmp_path):
    from goodputlab.charts import save_png

    save_png(C.factors_chart(result.analyse()), tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
