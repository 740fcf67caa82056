"""The website's recorded runs (goodputlab/charts/site_recorded.py): the page lists every recording with
its levers and figures, and a run's file holds the package's own charts of that run. The page in a
browser (levers picked at two widths, charts drawn, nothing off the machine) is in tests/test_site.py."""

from __future__ import annotations

import json

import goodputlab as gl
from goodputlab.categories import CATEGORIES
from goodputlab.charts import site_recorded as sr


def _values(spec: dict, part: dict) -> list[dict]:
    """The rows a chart (or one of its layers) draws: inline, or a named dataset of the spec."""
    data = part["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def test_page_lists_every_recording_and_a_run_file_holds_its_charts(tmp_path):
    page = sr.write_page(tmp_path, names=["every-25"], cache=tmp_path / "cache")
    config = json.loads(page.read_text().split('id="recorded-config">')[1].split("</script>")[0])
    assert [r["name"] for r in config["runs"]] == ["every-25"]
    assert "http://" not in page.read_text() and "https://" not in page.read_text()
    # the index: every recording, its levers from its configuration, its figures from its summary
    rows = {r["name"]: r for r in sr.index()}
    runs = gl.recorded_runs()
    assert list(rows) == list(runs)
    for name, rec in runs.items():
        assert rows[name]["goodput"] == rec.goodput and rows[name]["failures"] == rec.failures
        assert rows[name]["levers"]["interval_steps"] == rec.config.ckpt_every
        assert rows[name]["levers"]["strategy"] == rec.config.ckpt
    # the run's file: the breakdown's bars are its ledger's buckets, the timeline spans its wall time
    text = (tmp_path / sr.data_path("every-25")).read_text()
    charts = json.loads(text.split("] = ", 1)[1].rstrip().rstrip(";"))
    result = gl.recorded_run("every-25")
    bars = {row["category"]: row["seconds"] for row in _values(charts["breakdown"], charts["breakdown"])}
    assert set(bars) == {c for c in CATEGORIES if result.summary["buckets"][c] > 0}  # those the run holds
    for cat in CATEGORIES:  # every one, restart and startup among them, in the legend
        assert (cat in charts["breakdown"]["encoding"]["color"]["scale"]["domain"]) == (cat in bars), cat
    assert charts["breakdown"]["config"]["legend"]["orient"] == "bottom"  # under the plot, whole
    for cat, seconds in bars.items():
        assert abs(seconds - result.summary["buckets"][cat]) <= 1e-4, cat
    segments = next(layer for layer in charts["timeline"]["layer"] if "x2" in layer["encoding"])
    values = _values(charts["timeline"], segments)
    assert abs(sum(v["seconds"] for v in values) - result.summary["wall_s"]) < 1e-2 * result.summary["wall_s"]
    assert charts["timeline"]["width"] == "container"
    # the spec the site skips Altair's schema checks for is the checked one
    assert charts == json.loads(json.dumps(sr.charts("every-25", validate=True)))
    # kept in the cache: a second build reads it back
    kept = list((tmp_path / "cache").iterdir())
    assert len(kept) == 1 and kept[0].read_text() == text
