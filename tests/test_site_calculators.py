"""The website calculators compute the package's numbers: Vega evaluates each page's formulas at sampled
inputs (through vl-convert, the same Vega build the site ships) and every one matches the Python model to
1e-9 relative. The browser side (sliders moved in Chromium, two widths, nothing off the machine) is in
tests/test_site.py, which builds and serves the site once."""

from __future__ import annotations

import math
import random
import re

import pytest
import vl_convert

from conftest import ROOT
from goodputlab.charts import site_calculators as sc
from goodputlab.charts import vega_formulas as vf

REL = 1e-9


def vega_eval(exprs: dict[str, str], rows: list[dict]) -> list[dict[str, float]]:
    """Evaluate Vega expressions (``datum.x`` for a row's field ``x``) on each row, in Vega itself."""
    names = list(exprs)
    text = " + ' ' + ".join(f"('' + datum.{n})" for n in names)
    spec = {
        "$schema": "https://vega.github.io/schema/vega/v5.json",
        "width": 1,
        "height": 1,
        "data": [{"name": "rows", "values": rows,
                  "transform": [{"type": "formula", "as": n, "expr": e} for n, e in exprs.items()]}],
        "marks": [{"type": "text", "from": {"data": "rows"}, "encode": {"enter": {"text": {"signal": text}}}}],
    }
    items = vl_convert.vega_to_scenegraph(spec)["scenegraph"]["items"][0]["items"][0]["items"]
    return [dict(zip(names, map(float, item["text"].split(" ")))) for item in items]


def sample(slider: sc.Slider, rng: random.Random) -> float:
    """A value the slider can take: log-uniform on a log scale (0 too where the slider has it)."""
    if slider.scale == "pow2":
        return float(2 ** rng.randint(round(math.log2(slider.lo)), round(math.log2(slider.hi))))
    if slider.scale == "linear":
        return float(rng.randint(int(slider.lo), int(slider.hi)))
    if slider.zero and rng.random() < 0.15:
        return 0.0
    return slider.lo * (slider.hi / slider.lo) ** rng.random()


def assert_close(got: float, want: float, what: str) -> None:
    assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-300) or (math.isinf(got) and got == want), \
        f"{what}: the page computes {got!r}, goodputlab.theory {want!r}"


@pytest.mark.parametrize("calc", sc.CALCULATORS, ids=lambda c: c.slug)
def test_page_formulas_match_the_python_models(calc):
    """Every signal of the page, evaluated by Vega at 60 sampled slider settings (the ends of each
    range included), equals the Python model it stands for."""
    rng = random.Random(31)
    rows = [{s.name: s.value for s in calc.sliders}]
    rows += [{s.name: s.lo if i % 2 else s.hi for s in calc.sliders} for i in range(2)]
    rows += [{s.name: sample(s, rng) for s in calc.sliders} for _ in range(60)]
    refs = {n: f"datum.{n}" for n in [*(s.name for s in calc.sliders), *(s.name for s in calc.signals)]}
    got = vega_eval({s.name: s.expr(refs) for s in calc.signals}, rows)
    for row, page in zip(rows, got):
        want = calc.model(row)
        for s in calc.signals:
            assert_close(page[s.name], want[s.name], f"{calc.slug}.{s.name} at {row}")


def test_curves_match_the_python_models():
    """The interval page's three curves are the three models of goodputlab.theory, at any interval."""
    from goodputlab import theory

    rng = random.Random(3)
    rows = [{"t": 60 * 10 ** rng.uniform(-1, 3), "d": rng.choice([0.0, 10 ** rng.uniform(0, 3.3)]),
             "r": rng.choice([0.0, 10 ** rng.uniform(1, 4)]), "m": 3600 * 10 ** rng.uniform(-0.6, 2.3)}
            for _ in range(60)]
    refs = {"save_s": "datum.d", "restart_s": "datum.r", "mtbf_s": "datum.m"}
    got = vega_eval({name.split(" ")[0]: model("datum.t", refs) for name, model in sc._CURVE_MODELS}, rows)
    for row, page in zip(rows, got):
        t, d, r, m = row["t"], row["d"], row["r"], row["m"]
        assert_close(page["first"], theory.expected_goodput(t, d, r, m), f"first order at {row}")
        assert_close(page["Daly"], theory.daly_goodput(t, d, r, m), f"Daly at {row}")
        assert_close(page["free"], theory.exact_goodput_free(t, m), f"free at {row}")


def test_expm1_keeps_its_digits_near_zero():
    """Vega has no expm1: the page's form of it holds 1e-13 relative from 1e-300 to 700."""
    xs = [1e-300, 1e-12, -3e-9, 9.99e-6, 1.01e-5, -2e-5, 1e-3, 0.3, -0.999, 1.0, 5.0, 700.0]
    got = vega_eval({"y": vf.expm1("datum.x")}, [{"x": x} for x in xs])
    for x, page in zip(xs, got):
        assert math.isclose(page["y"], math.expm1(x), rel_tol=1e-13), f"expm1({x}): {page['y']!r}"


def test_every_calculator_is_listed_and_linked():
    """The calculators page lists every calculator, and each belongs to a chapter that exists."""
    listing = (ROOT / "book" / "calculators.md").read_text()
    for calc in sc.CALCULATORS:
        assert f'href="../{sc.page_path(calc)}"' in listing, f"{calc.slug} is not on book/calculators.md"
        assert (ROOT / f"{calc.chapter}.ipynb").exists(), calc.chapter
        shown = [s.name for s in calc.signals if s.label]
        assert shown and all(s.kind in ("duration", "share", "number", "count") for s in calc.signals)
    assert len(re.findall(r"<li>", listing)) == len(sc.CALCULATORS)


def test_write_site_shares_one_bundle(tmp_path):
    """Every page loads the one Vega bundle from _static (no inline copy, no CDN) and links its chapter."""
    pages = sc.write_site(tmp_path, {"book/03_checkpoint_interval": "3. How often to checkpoint"},
                          cache=ROOT / "book" / "_build" / "vega")
    bundle = tmp_path / sc.STATIC_DIR / sc.BUNDLE
    assert bundle.stat().st_size > 500_000
    for page in pages:
        text = page.read_text()
        assert len(text) < 50_000, f"{page.name} is {len(text)} bytes: the bundle must not be inlined"
        assert f'src="../{sc.STATIC_DIR}/{sc.BUNDLE}"' in text
        assert "http://" not in text and "https://" not in text.replace("https://vega.github.io/schema/", "")
    interval = (tmp_path / sc.page_path(sc.INTERVAL)).read_text()
    assert 'href="../book/03_checkpoint_interval.html">3. How often to checkpoint</a>' in interval
