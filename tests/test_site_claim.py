"""The website's claim explainer computes what goodputlab.theory.claim.explain computes: its JavaScript
(goodputlab/charts/site_static/claim.js) runs in Chromium, the browser the site is tested in, at sampled
claims of every lever (plausible and implausible ones, claims no setting makes true, the inputs' ends,
inputs the model refuses), and every implied and assumed value equals the Python's to 1e-9 relative,
every check, reason and note to its text. The page itself (its controls moved at two widths, from a
static server, nothing off the machine) is in tests/test_site.py."""

from __future__ import annotations

import json
import math
import random

import pytest

from conftest import ROOT
from goodputlab.charts import site_calculators as sc
from goodputlab.charts import site_claim
from goodputlab.errors import ConfigError
from goodputlab.theory import claim as model

REL = 1e-9

# hand-picked: the chapter's example, every kind of verdict (for the saves levers: a storage below the
# published range, no storage at all, a plausible one), the inputs' ends
EDGES = [
    (0.85, 0.95, 8192, 70.0), (0.5, 0.99, 1000, 70.0), (0.6, 0.7, 16384, 405.0), (0.9, 0.92, 64, 7.0),
    (0.3, 0.31, 1, 0.001), (0.0001, 0.9999, 10_000_000, 100_000.0), (0.98, 0.985, 2048, 70.0),
]


def _cases() -> list[tuple]:
    rng = random.Random(31)
    cases = [(lever, *edge) for lever in model.LEVERS for edge in EDGES]
    for lever in model.LEVERS:
        # the saves levers nest three bisections (about 0.2 s a claim in Python): fewer samples
        for _ in range(6 if lever in ("async", "memory") else 20):
            before = rng.uniform(0.05, 0.97)
            after = before + (1 - before) * rng.uniform(0.02, 0.98)
            gpus = int(10 ** rng.uniform(0, 5.5))
            cases.append((lever, before, after, gpus, 10 ** rng.uniform(-1, 3)))
    return cases


# claims with what the reader pinned (claim.Pins): a pin that replaces a default, and one on the very setting a
# lever solves for (the storage of the saves levers, the cold restart of hot spares), agreeing or contradicting
PINNED = [
    ("memory", 0.85, 0.95, 8192, 70.0, {"save_s": 42.0}), ("memory", 0.85, 0.95, 8192, 70.0, {"storage_gbps": 1000.0}),
    ("async", 0.88, 0.94, 2048, 13.0, {"save_s": 90.0}), ("hot-spare", 0.80, 0.95, 2048, 70.0, {"restart_s": 600.0}),
    ("restart", 0.85, 0.93, 16384, 70.0, {"restart_s": 900.0, "detect_s": 30.0, "save_s": 20.0}),
    ("detection", 0.85, 0.90, 4096, 70.0, {"detect_s": 1800.0}), ("interval", 0.6, 0.9, 16384, 405.0, {"storage_gbps": 500.0}),
]
REFUSED_PINS = [("memory", 0.85, 0.95, 8192, 70.0, {"save_s": 5.0, "storage_gbps": 10.0}),
                ("restart", 0.85, 0.93, 8192, 70.0, {"restart_s": -1.0}), ("async", 0.8, 0.9, 64, 7.0, {"save_s": 0.0})]

# inputs explain() refuses: the page must refuse them too
REFUSED = [("memory", 0.9, 0.9, 8192, 70.0), ("memory", 0.95, 0.85, 8192, 70.0), ("async", 0.0, 0.9, 8192, 70.0),
           ("async", 0.5, 1.0, 8192, 70.0), ("restart", 0.5, 0.9, 0, 70.0), ("restart", 0.5, 0.9, 8192, 0.0),
           ("restart", 0.5, 0.9, 8192.5, 70.0), ("interval", 0.5, 0.9, 8192, 1e6), ("cheaper", 0.5, 0.9, 8192, 70.0)]


@pytest.fixture(scope="module")
def claim_js(chromium):
    """A Chromium page with claim.js loaded (one page for the module's tests)."""
    page = chromium.new_page()
    page.add_script_tag(content=(site_claim.STATIC / "claim.js").read_text())
    yield page
    page.close()


def _close(page: float, python: float, what: str) -> None:
    assert math.isclose(page, python, rel_tol=REL, abs_tol=1e-300) or page == python, \
        f"{what}: the page computes {page!r}, goodputlab.theory.claim {python!r}"


def _compare(case, page, want) -> None:
    """One claim: the page's explanation against the Python's, value by value and text by text."""
    assert "error" not in page, f"{case}: the page refused it: {page['error']}"
    for part in ("implied", "assumed", "ettr"):
        assert set(page[part]) == set(want[part]), f"{case} {part}: {sorted(page[part])} against {sorted(want[part])}"
        for key, value in want[part].items():
            _close(page[part][key], value, f"{case} {part}.{key}")
    assert page["reading"] == want["reading"] and page["pinned"] == want["pinned"], case


def test_page_explains_pinned_claims_as_the_python_does(claim_js):
    got = claim_js.evaluate("([cases, K]) => cases.map(c => ClaimModel.explain(...c.slice(0, 5), K, c[5]))",
                            [PINNED + REFUSED_PINS, site_claim.constants()])
    for case, page in zip(PINNED, got[: len(PINNED)]):
        want = model.explain(*case[:5], pins=model.Pins(**case[5])).to_dict()
        _compare(case, page, want)
        assert page["plausible"] == want["plausible"] and page["reasons"] == want["reasons"], case
        assert page["notes"] == want["notes"], case
    assert any("contradict" in " ".join(p["reasons"]) for p in got[: len(PINNED)])
    for case, page in zip(REFUSED_PINS, got[len(PINNED):]):
        with pytest.raises(ConfigError):
            model.Pins(**case[5])
        assert "error" in page, f"{case}: Pins refuses it, the page explained it"


def test_page_explains_every_claim_as_the_python_does(claim_js):
    cases = _cases()
    got = claim_js.evaluate("([cases, K]) => cases.map(c => ClaimModel.explain(...c, K))",
                            [cases + REFUSED, site_claim.constants()])
    verdicts = set()
    for case, page in zip(cases, got[: len(cases)]):
        want = model.explain(*case).to_dict()
        _compare(case, page, want)
        assert "error" not in page, f"{case}: the page refused it: {page['error']}"
        for part in ("implied", "assumed"):
            assert set(page[part]) == set(want[part]), f"{case} {part}: {sorted(page[part])} against {sorted(want[part])}"
            for key, value in want[part].items():
                _close(page[part][key], value, f"{case} {part}.{key}")
        for key, value in (want["effects"] or {}).items():
            _close(page["effects"][key], value, f"{case} effects.{key}")
        assert (page["effects"] is None) == (want["effects"] is None), case
        assert page["plausible"] == want["plausible"], case
        assert [(c["key"], c["plausible"], c["published"]) for c in page["checks"]] == \
            [(c["key"], c["plausible"], c["published"]) for c in want["checks"]], case
        for check_page, check_py in zip(page["checks"], want["checks"]):
            _close(check_page["value"], check_py["value"], f"{case} check {check_py['key']}")
        assert page["reasons"] == want["reasons"], case
        assert page["notes"] == want["notes"], case
        verdicts.add((case[0], want["plausible"], bool(want["implied"])))
    # the samples reach every verdict the model gives: each lever plausible and not, and a claim without a solution
    for lever in model.LEVERS:
        assert {(lever, True), (lever, False)} <= {(v[0], v[1]) for v in verdicts}, (lever, verdicts)
    assert ("async", False, False) in verdicts and ("memory", False, False) in verdicts
    for case, page in zip(REFUSED, got[len(cases):]):
        with pytest.raises(ConfigError):
            model.explain(*case)
        assert "error" in page, f"{case}: explain() refuses it, the page explained it"


def test_number_formats_are_pythons(claim_js):
    """The texts carry numbers as Python formats them (ties to even, thousands, .3g's exponent)."""
    values = [0.0, 0.5, 1.5, 2.5, 0.125, 0.25, 999.4, 999.6, 1234.5, 2500.5, 1e-5, 1.2345e-7, 12345678.9,
              -0.04, -3.5, 99.95, 0.000123, 7199.0, 7200.0, 3.6e10, 119.5, 1e20, 5e21]
    got = claim_js.evaluate("vs => vs.map(v => [ClaimModel.fmt(v), ClaimModel.hours(v), ClaimModel.pct1(v)])", values)
    for v, (fmt, hours, pct) in zip(values, got):
        assert fmt == model._fmt(v), (v, fmt)
        assert hours == model._hours(v), (v, hours)
        assert pct == f"{v:.1%}", (v, pct)


def test_claim_page_is_written_listed_and_linked(tmp_path):
    """The page carries the Python's constants, loads only the site's own scripts, links chapter 10 and back."""
    page = site_claim.write_page(tmp_path, {"book/10_your_cluster": "10. Your cluster"})
    text = page.read_text()
    config = json.loads(text.split('id="claim-config">')[1].split("</script>")[0])
    assert config["constants"] == json.loads(json.dumps(site_claim.constants()))
    assert config["constants"]["ranges"]["restart_s"]["low"] == model.RANGES["restart_s"].low
    for name in site_claim.SCRIPTS:
        assert f'src="../{sc.STATIC_DIR}/{name}"' in text and (tmp_path / sc.STATIC_DIR / name).exists()
    assert "http://" not in text and "https://" not in text
    assert 'href="../book/10_your_cluster.html">10. Your cluster</a>' in text
    assert site_claim.CLAIM in sc.for_chapter("book/10_your_cluster")
    assert f'href="../{site_claim.page_path()}"' in (ROOT / "book" / "calculators.md").read_text()
