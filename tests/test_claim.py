"""The claim explainer (goodputlab/theory/claim.py, `goodputlab claim`): it inverts chapter 10's model,
so the values it implies, put back into that model, give the claim's two goodputs; it calls the
hot-spare claim of the book implausible for its restart, and a modest claim plausible."""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest

from conftest import ROOT

from goodputlab.errors import ConfigError
from goodputlab.theory import capstone, renewal
from goodputlab.theory import claim as C

GRID = [(600, 5, 0, 360, 10_000), (60, 2, 300, 400, 10_000), (30, 5, 100, 50, 1_000), (5, 0.1, 40, 0, 500)]


@pytest.mark.parametrize("tau,delta,lag,r,m", GRID)
def test_the_closed_form_is_the_renewal_models(tau, delta, lag, r, m):
    assert C.goodput(tau, delta, lag, r, m) == pytest.approx(
        renewal.periodic_goodput(tau, delta, r, m, durable_lag_s=lag), rel=1e-12)


@pytest.mark.parametrize("delta,lag,m", [(5, 0, 10_000), (2, 300, 10_000), (60, 0, 10_047), (0.01, 50, 3_000)])
def test_the_best_interval_is_the_renewal_models_optimum(delta, lag, m):
    tau = C.best_interval(delta, lag, m)
    assert tau == pytest.approx(renewal.optimal_interval(delta, 0.0, m, durable_lag_s=lag), rel=1e-4)
    # and the restart does not move it
    assert C.best_interval(delta, lag, m) == tau


def test_the_solvers_invert_the_model():
    m = C.solve_mtbf(0.9, 10.0, 0.0, 400.0)
    assert C.best_goodput(10.0, 0.0, 400.0, m)[0] == pytest.approx(0.9, abs=1e-9)
    r = C.solve_recovery(0.85, 10.0, 0.0, m)
    assert C.best_goodput(10.0, 0.0, r, m)[0] == pytest.approx(0.85, abs=1e-9)
    short, long = C.solve_intervals(0.8, 10.0, 0.0, 400.0, m)
    for tau in (short, long):
        assert C.goodput(tau, 10.0, 0.0, 400.0, m) == pytest.approx(0.8, abs=1e-9)
    assert short < C.best_interval(10.0, 0.0, m) < long
    assert C.solve_intervals(0.95, 10.0, 0.0, 400.0, m) is None  # above the best


def _scenario(claim: C.Claim, **changes) -> capstone.ClusterScenario:
    """Chapter 10's scenario with the claim's implied failure rate and its assumed or implied storage."""
    storage = claim.implied.get("storage_gbps", claim.assumed.get("storage_gbps")) * 1e9
    settings = dict(parameters=claim.model_params_b * 1e9, gpus=claim.gpus, storage_bps=storage,
                    gpu_mtbf_years=claim.implied["device_mtbf_h"] / C.YEAR_H,
                    detect_s=claim.assumed.get("detect_s", 90.0), restart_s=claim.assumed.get("restart_s", 300.0))
    return capstone.ClusterScenario(**{**settings, **changes})


def _at(scenario: capstone.ClusterScenario, interval_s: float | None = None) -> float:
    return capstone.evaluate(scenario, interval_s=interval_s).goodput


@pytest.mark.parametrize("lever,before,after,gpus", [
    ("async", 0.90, 0.95, 16_384), ("restart", 0.85, 0.93, 16_384), ("detection", 0.85, 0.90, 4_096),
    ("hot-spare", 0.80, 0.95, 2_048), ("interval", 0.60, 0.90, 16_384),
])
def test_the_implied_values_give_the_claim_in_chapter_10s_model(lever, before, after, gpus):
    claim = C.explain(lever, before, after, gpus)
    at = lambda s, tau: _at(s, tau)  # noqa: E731
    best = lambda s: C.best_interval(  # noqa: E731  the claim model's continuous optimum, for the capstone's scenario
        capstone.evaluate(s).blocking_s, capstone.evaluate(s).durable_lag_s if s.strategy == "async" else 0.0, s.job_mtbf_s)
    if lever == "async":
        old, new = _scenario(claim), _scenario(claim, strategy="async")
    elif lever == "restart":
        old = _scenario(claim, restart_s=claim.assumed["restart_before_s"])
        new = _scenario(claim, restart_s=claim.implied["restart_after_s"])
    elif lever == "detection":
        old = _scenario(claim, detect_s=claim.assumed["detect_before_s"])
        new = _scenario(claim, detect_s=claim.implied["detect_after_s"])
    elif lever == "hot-spare":
        old = _scenario(claim, restart_s=claim.implied["restart_s"])
        failures = _scenario(claim).days * _scenario(claim).failures_per_day
        new = _scenario(claim, restart_s=claim.implied["restart_s"], spares=int(2 * failures + 100),
                        spare_swap_s=claim.assumed["spare_swap_s"])  # a pool no failure finds empty
    else:
        old = new = _scenario(claim)
    if lever == "interval":
        assert at(old, 60 * claim.implied["interval_before_long_min"]) == pytest.approx(before, abs=1e-6)
        assert at(old, 60 * claim.implied["interval_before_short_min"]) == pytest.approx(before, abs=1e-6)
    else:
        assert at(old, best(old)) == pytest.approx(before, abs=1e-6)
    assert at(new, best(new)) == pytest.approx(after, abs=1e-6)
    # the capstone's own optimum, a whole number of steps, is within a fraction of a point
    assert _at(new) == pytest.approx(after, abs=0.003)


def test_a_ram_copy_on_a_peer_is_chapter_10s_memory_strategy():
    claim = C.explain("memory", 0.90, 0.96, 16_384, model_params_b=405)
    new = _scenario(claim, strategy="memory, peer copy")
    assert _at(new) == pytest.approx(0.96, abs=0.003)
    assert _at(_scenario(claim), C.best_interval(claim.implied["save_s"], 0.0, claim.implied["job_mtbf_h"] * 3600)) \
        == pytest.approx(0.90, abs=1e-6)


def test_hot_spares_alone_cannot_take_a_thousand_gpus_from_half_to_99_percent():
    claim = C.explain("hot-spare", 0.50, 0.99, 1000)
    assert not claim.plausible
    assert claim.implied["restart_s"] > 10 * 3600  # a cold restart of more than ten hours before the spares
    assert any("restart" in r and "times above the published range" in r for r in claim.reasons)
    restart = next(c for c in claim.checks if c.key == "restart_s")
    assert not restart.plausible and "deadpool-2026" in restart.range.refs
    assert next(c for c in claim.checks if c.key == "device_mtbf_h").plausible  # the failure rate itself is ordinary
    assert "does not move" in " ".join(claim.notes)


def test_a_modest_claim_is_plausible_and_says_why():
    claim = C.explain("restart", 0.85, 0.93, 16_384)
    assert claim.plausible and not claim.reasons
    assert 40 / C.TOLERANCE <= claim.implied["restart_after_s"] <= 300
    assert "plausible" in C.lines(claim)[-1]


def test_a_ram_tier_claim_implies_a_save_of_tens_of_seconds_which_is_commonplace():
    """85% to 95% with a RAM copy on 8,192 GPUs needs a 42 s synchronous save before: slower than Llama 3's Tectonic,
    faster than the 149 s of PyTorch's blog. The ranges span the slowest published clusters to the fastest."""
    claim = C.explain("memory", 0.85, 0.95, 8192)
    assert claim.plausible
    save = next(c for c in claim.checks if c.key == "save_s")
    assert save.plausible and 10 < claim.implied["save_s"] < C.RANGES["save_s"].high
    assert claim.implied["storage_gbps"] == pytest.approx(claim.implied["storage_per_gpu_mbps"] * 8192 / 1000)
    assert "RAM copy of each checkpoint on a peer" in claim.reading and claim.ettr["before"] > claim.before
    # a save slower than every published cluster is implausible, and says so
    slow = C.explain("memory", 0.40, 0.95, 8192)
    assert not slow.plausible and any("synchronous save" in r and "times above" in r for r in slow.reasons)


def test_a_lever_that_moves_the_interval_has_two_effects_that_add_up():
    claim = C.explain("async", 0.90, 0.95, 16_384, model_params_b=405)
    e = claim.effects
    assert e["cheaper_saves_pts"] + e["shorter_interval_pts"] == pytest.approx(5.0, abs=1e-6)
    assert e["cheaper_saves_pts"] > 0 and e["shorter_interval_pts"] > 0
    assert e["interval_after_min"] < e["interval_before_min"]
    assert "two effects" in " ".join(claim.notes)
    assert C.explain("restart", 0.85, 0.93, 16_384).effects is None


def test_an_impossible_claim_says_what_no_setting_can_do():
    claim = C.explain("async", 0.50, 0.95, 1000)
    assert not claim.plausible and "no storage bandwidth makes it true" in claim.reasons[-1]
    assert not claim.implied  # no value is implied, none negative
    faster = C.explain("restart", 0.50, 0.999, 16_384)
    assert not faster.plausible and any("even an instant restart" in r for r in faster.reasons)


@pytest.mark.parametrize("kwargs,field", [
    (dict(lever="faster", before=0.8, after=0.9, gpus=8), "lever"),
    (dict(lever="async", before=0.9, after=0.8, gpus=8), "after"),
    (dict(lever="async", before=0.0, after=0.8, gpus=8), "before"),
    (dict(lever="async", before=0.8, after=0.9, gpus=0), "gpus"),
    (dict(lever="async", before=0.8, after=0.9, gpus=8, model_params_b=0), "model_params_b"),
])
def test_bad_values_name_their_field(kwargs, field):
    with pytest.raises(ConfigError) as e:
        C.explain(**kwargs)
    assert e.value.field == field


def test_the_command_answers_with_plausible_and_implied(cli, cli_env):
    out = subprocess.run([*cli, "claim", "--lever", "hot-spare", "--before", "50", "--after", "99", "--gpus", "1000",
                          "--json"], capture_output=True, text=True, env=cli_env, check=True).stdout
    data = json.loads(out)
    assert data["plausible"] is False and isinstance(data["implied"], dict)
    assert {"device_mtbf_h", "job_mtbf_h", "restart_s"} <= set(data["implied"])
    assert all(re.search(r"_(s|h|min|gbps|mbps)$", k) for k in data["implied"]), data["implied"]
    assert data["reasons"] and data["checks"][0]["sources"]
    text = subprocess.run([*cli, "claim", "--lever", "memory", "--before", "85%", "--after", "95", "--gpus", "8192"],
                          capture_output=True, text=True, env=cli_env, check=True).stdout
    verdict = next(line for line in text.splitlines() if line.startswith("verdict"))
    assert "storage_gbps" in text and verdict.startswith("verdict (for a 70B-parameter model): plausible")
    assert "ETTR: effective training time ratio" in text  # the definitions under the explanation
    assert "reading: a 'RAM tier' is read as a RAM copy" in text and "as ETTR" in text
    assert math.isfinite(json.loads(subprocess.run(
        [*cli, "claim", "--lever", "memory", "--before", "85", "--after", "95", "--gpus", "8192", "--json"],
        capture_output=True, text=True, env=cli_env, check=True).stdout)["implied"]["storage_gbps"])


@pytest.mark.parametrize("flag,text", [("--gpus", "1_000"), ("--gpus", "\u0661\u0662"), ("--before", "5_0"),
                                       ("--model-params-b", "7_0"), ("--save-s", "\u0669")])
def test_the_command_reads_numbers_as_typed_in_ascii(cli, cli_env, flag, text):
    """`claim` reads its numbers as every other command does: no 1_000, no other scripts' digits (issue 41, item 16)."""
    args = {"--lever": "memory", "--before": "85", "--after": "95", "--gpus": "8192", flag: text}
    out = subprocess.run([*cli, "claim", *[x for kv in args.items() for x in kv]], capture_output=True, text=True,
                         env=cli_env)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, lines
    assert flag in lines[0] and (text in lines[0] or repr(text) in lines[0]), lines[0]


# --- calibrated to real clusters: pins, bounds instead of negative values, the decisive reason first --------


def test_no_implied_value_is_ever_negative():
    import random

    rng = random.Random(7)
    for _ in range(60):
        lever = rng.choice(C.LEVERS)
        before = rng.uniform(0.05, 0.97)
        after = before + (1 - before) * rng.uniform(0.02, 0.98)
        claim = C.explain(lever, before, after, int(10 ** rng.uniform(0, 5)), 10 ** rng.uniform(-1, 3))
        assert all(v >= 0 for v in claim.implied.values()), (lever, before, after, claim.implied)
        assert claim.plausible or claim.reasons


def test_a_lever_that_cannot_reach_the_claim_says_so_with_the_bound():
    claim = C.explain("detection", 0.85, 0.95, 8192)
    assert "detect_after_s" not in claim.implied
    assert claim.reasons == [r for r in claim.reasons if r.startswith("even an instant detection gives at most")]
    assert "after" not in claim.ettr and claim.ettr["before"] > 0


def test_pinning_the_setting_a_lever_solves_for_checks_the_two_goodputs_against_each_other():
    free = C.explain("memory", 0.85, 0.95, 8192)
    agreeing = C.explain("memory", 0.85, 0.95, 8192, pins=C.Pins(save_s=free.implied["save_s"]))
    assert agreeing.plausible and "agree" in " ".join(agreeing.notes)
    assert agreeing.implied["device_mtbf_h"] == pytest.approx(free.implied["device_mtbf_h"], rel=1e-6)
    fast = C.explain("memory", 0.85, 0.95, 8192, pins=C.Pins(storage_gbps=1000))
    assert not fast.plausible and "contradict" in fast.reasons[-1] and fast.pinned == {"storage_gbps": 1000}
    spares = C.explain("hot-spare", 0.80, 0.95, 2048, pins=C.Pins(restart_s=600))
    assert "restart_s" not in spares.implied and spares.assumed["restart_s"] == 600


def test_pins_replace_the_defaults_a_lever_does_not_solve_for():
    claim = C.explain("restart", 0.85, 0.93, 16_384, pins=C.Pins(restart_s=900, detect_s=30, save_s=20))
    assert claim.assumed["restart_before_s"] == 900 and claim.assumed["detect_s"] == 30
    assert claim.assumed["save_s"] == pytest.approx(20)
    detection = C.explain("detection", 0.85, 0.90, 4096, pins=C.Pins(detect_s=1800))
    assert detection.assumed["detect_before_s"] == 1800
    with pytest.raises(ConfigError, match="save_s"):
        C.Pins(storage_gbps=10, save_s=5)
    with pytest.raises(ConfigError, match="restart_s"):
        C.Pins(restart_s=-1)


def test_the_decisive_reason_comes_first_and_the_verdict_names_the_model_size():
    # 1,024 GPUs from 20% to 99.9% with hot spares: a failure rate no cluster has, and a restart of days
    claim = C.explain("hot-spare", 0.20, 0.999, 1024, model_params_b=13)
    assert len(claim.reasons) >= 2 and claim.reasons[0].startswith("it needs a device MTBF")
    verdict = C.lines(claim)[-1]
    assert verdict.startswith("verdict (for a 13B-parameter model): implausible: it needs a device MTBF")


def test_every_range_spans_published_clusters_each_end_cited():
    cited = json.loads((ROOT / "book" / "data" / "cited.json").read_text())["ranges"]
    references = (ROOT / "book" / "references.md").read_text()
    for key, r in C.RANGES.items():
        assert r.low < r.high and r.low_source and r.high_source, key
        for ref in r.refs:
            assert f'<a id="{ref}"></a>' in references, ref
        ends = {(e["range"], e["end"]) for e in cited if e["range"] == key}
        assert ends == {(key, "low"), (key, "high")}, key
    entries = {(e["range"], e["end"]): e for e in cited}
    assert entries[("save_s", "high")]["value"] == "148.8 s" and entries[("save_s", "high")]["ref"] == "pytorch-async-dcp-2024"
    # tens of seconds to minutes is an ordinary save: not implausible
    assert C.RANGES["save_s"].plausible(60.0) and C.RANGES["save_s"].plausible(300.0)


def test_the_command_takes_pins_and_prints_ettr(cli, cli_env):
    data = json.loads(subprocess.run(
        [*cli, "claim", "--lever", "async", "--before", "88", "--after", "94", "--gpus", "2048", "--model-params-b", "13",
         "--save-s", "90", "--restart-s", "600", "--detect-s", "30", "--json"],
        capture_output=True, text=True, env=cli_env, check=True).stdout)
    assert data["pinned"] == {"save_s": 90.0, "restart_s": 600.0, "detect_s": 30.0}
    assert data["assumed"]["restart_s"] == 600.0 and data["assumed"]["detect_s"] == 30.0
    assert set(data["ettr"]) == {"before", "after"} and set(data["definitions"]) == {"goodput", "ettr"}
    assert data["reading"].startswith("asynchronous saves")
    want = C.explain("async", 0.88, 0.94, 2048, 13.0, pins=C.Pins(save_s=90, restart_s=600, detect_s=30)).to_dict()
    assert data["reasons"] == want["reasons"] and data["plausible"] == want["plausible"]


@pytest.mark.parametrize("tau,delta,lag,r,m", GRID)
def test_the_claims_ettr_is_the_restart_models(tau, delta, lag, r, m):
    from goodputlab.theory.jit import restart_goodput

    model = restart_goodput(tau, delta, r, m, durable_lag_s=lag)
    assert C.ettr(tau, delta, lag, r, m) == pytest.approx(model.ettr, rel=1e-12)
    assert C.goodput(tau, delta, lag, r, m) == pytest.approx(model.goodput, rel=1e-12)
