"""Chapter 8 trains at several batch sizes and reads throughput, efficiency and goodput off real runs."""

import math

import pytest

from goodputlab.efficiency.noise import LR_RULES, statistical_efficiency

from conftest import widget_views

pytestmark = pytest.mark.notebooks

CHAPTER = "book/08_statistical_efficiency.ipynb"


def test_chapter_8_sweep(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    rows, sizes = m["rows"], m["batch_sizes"]
    assert [r["batch_size"] for r in rows] == sizes and m["smoke"] is True
    assert all(r["reached"] for r in rows)
    eff = [r["statistical_efficiency"] for r in rows]
    assert eff[0] == 1.0 and eff[-1] < 0.8  # the biggest batch needs clearly more samples
    steps = [r["steps_to_target"] for r in rows]
    assert steps == sorted(steps, reverse=True) and steps[-1] < steps[0]  # but fewer steps
    for r in rows:
        assert r["samples_to_target"] == r["steps_to_target"] * r["batch_size"]
        assert r["goodput"] == pytest.approx(r["samples_per_s"] * r["statistical_efficiency"])
        assert r["predicted_efficiency"] == pytest.approx(statistical_efficiency(r["batch_size"], m["noise_scale"], sizes[0]))
        assert r["samples_per_s"] > 0
    # every run starts from the same model, which knows nothing yet
    assert len(set(m["initial_losses"])) == 1 and m["initial_losses"][0] == pytest.approx(math.log(64), abs=0.15)
    assert m["source_entropy"] < m["target_loss"]
    assert 1 < m["noise_scale"] < 1000
    assert m["best_batch_size"] in sizes and m["predicted_best_batch_size"] in sizes
    assert m["optimal_batch_size"] == pytest.approx(math.sqrt(m["noise_scale"] * m["knee"]))
    best = max(rows, key=lambda r: r["goodput"])
    assert m["best_batch_size"] == best["batch_size"]
    assert m["critical_batch"]["b_crit"] > 0 and m["threads"] == 1


def test_chapter_8_noise_scale(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    for exact, estimate in m["regression"]:  # the estimator against the exact value
        assert estimate == pytest.approx(exact, rel=0.05)
    # the noise scale grows as the loss falls, and the predicted best batch with it
    adapt = m["adaptivity"]
    losses = [a["loss"] for a in adapt]
    assert losses == sorted(losses, reverse=True) and losses[-1] == m["target_loss"]
    assert adapt[-1]["noise_scale"] > 1.5 * adapt[0]["noise_scale"]
    assert adapt[-1]["optimal"] > adapt[0]["optimal"]
    assert adapt[-1]["noise_scale"] == pytest.approx(m["noise_scale"])
    assert all(a["measured"] in m["batch_sizes"] for a in adapt)


def test_chapter_8_rules(executed_notebook):
    _, m, _ = executed_notebook(CHAPTER)
    rules = m["rules"]
    assert set(rules) == set(LR_RULES)
    base_steps = {r["steps"][0] for r in rules.values()}
    assert len(base_steps) == 1  # every rule trains the smallest batch alike
    sizes, lr0 = m["batch_sizes"], rules["sqrt"]["lr"][0]
    assert rules["linear"]["lr"][-1] == pytest.approx(lr0 * sizes[-1] / sizes[0])
    assert rules["sqrt"]["lr"][-1] == pytest.approx(lr0 * math.sqrt(sizes[-1] / sizes[0]))
    # AdaScale's (Adam) gain lies between no scaling and the square-root rule
    assert lr0 < rules["adascale"]["lr"][-1] < rules["sqrt"]["lr"][-1]
    for rule in rules.values():
        assert all((e is None) == (s is None) for e, s in zip(rule["efficiency"], rule["steps"]))
        assert set(rule["missed"]) == {b for b, s in zip(sizes, rule["steps"]) if s is None}


def test_chapter_8_two_goodputs_and_panel(executed_notebook):
    nb, m, _ = executed_notebook(CHAPTER)
    rows = {r["batch_size"]: r for r in m["rows"]}
    for batch, (ledger, seconds) in m["combined"].items():
        r = rows[int(batch)]
        assert seconds == pytest.approx(r["samples_to_target"] / (r["samples_per_s"] * ledger))
    assert m["panel_rules"] == sorted(LR_RULES) and m["panel_rule"] == "sqrt"
    assert m["panel_batch"] == m["batch_sizes"][-1] and f"batch {m['batch_sizes'][-1]}" in m["panel_headline"]
    # sweep bars, factors, noise scale, loss curves and trade-off, rules, adaptivity, panel
    assert len(widget_views(nb)) >= 8
