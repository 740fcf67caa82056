"""Chapter 5's depth answer on the website (goodputlab/charts/site_static/depth.js) is
goodputlab.theory.data_stall.depth_for_share: run in Chromium at sampled settings, it gives the same
prefetch and the same data-wait share (1e-9 relative) from the same seeded reads."""

from __future__ import annotations

import math
import random

import numpy as np

from goodputlab.charts import site_calculators as sc
from goodputlab.theory import data_stall

REL = 1e-9


def _settings() -> list[dict]:
    """The page's default, the ends of every input, and random settings across the sliders' ranges."""
    sliders = {s.name: s for s in sc.PIPELINE.sliders}
    base = {s.name: s.value for s in sc.PIPELINE.sliders}
    rows = [dict(base)]
    for name in ("step_ms", "latency_ms", "transform_ms", "workers", "jitter", "target_pct"):
        for end in (sliders[name].lo, sliders[name].hi):
            rows.append({**base, name: end})
    rows.append({**base, "latency_ms": 0.0})  # free reads
    rows.append({**base, "jitter": 0.0, "workers": 2})  # steady reads: depth 1 or none
    rng = random.Random(5)
    for _ in range(40):
        row = dict(base)
        for name in ("step_ms", "latency_ms", "transform_ms"):
            s = sliders[name]
            row[name] = round(s.lo * (s.hi / s.lo) ** rng.random(), 3)
        row["workers"] = float(rng.randint(1, 16))
        row["jitter"] = rng.randint(0, 30) / 10
        row["target_pct"] = rng.randint(1, 40) / 2
        rows.append(row)
    return rows


def test_the_pages_draws_are_the_emulated_storages():
    """The draws the page carries give exactly the latencies the emulated storage sleeps."""
    draws = sc._depth_draws()["draws"]
    assert len(draws) == sc.DEPTH_STEPS
    sigma = math.sqrt(math.log1p(1.5 ** 2))
    mine = [0.4 * math.exp(sigma * z - sigma * sigma / 2) for z in draws[:50]]
    assert mine == list(data_stall.emulated_latencies(0.4, 1.5, sc.DEPTH_SEED, 50))


def test_depth_js_answers_as_the_python_does(chromium):
    page = chromium.new_page()
    page.add_script_tag(content=(sc.STATIC / "depth.js").read_text())
    rows = _settings()
    values = [sc.PIPELINE.model(row) for row in rows]
    inputs = [{n: v[n] for n in sc.DEPTH.inputs} for v in values]
    got = page.evaluate("([rows, data]) => rows.map(v => DepthModel.outputs(v, data))", [inputs, sc._depth_draws()])
    page.close()
    feasible = 0
    for row, value, js in zip(rows, values, got):
        advice = sc._depth(value)
        if advice.feasible:
            feasible += 1
            assert js["prefetch_needed"] == advice.prefetch, f"at {row}: page {js}, Python {advice}"
        else:
            none = js["prefetch_needed"]
            assert none is None or none != none, f"at {row}: page {js}, Python {advice}"  # NaN: no depth is enough
        assert math.isclose(js["jitter_share"], advice.predicted_share, rel_tol=REL, abs_tol=1e-300), (row, js, advice)
    assert 10 <= feasible < len(rows)  # both answers are exercised
    assert np.isfinite([a["jitter_share"] for a in got]).all()
