"""Charts of in-job recovery at scale, from a small simulated sweep."""

import pytest

from goodputlab import theory
from goodputlab.categories import COLORS
from goodputlab.charts import in_job as ic
from goodputlab.charts.fit import MAX_WIDTH_PX, _svg, svg_width
from goodputlab.theory import SimConfig


@pytest.fixture(scope="module")
def rows():
    config = SimConfig(devices=256, device_mtbf_s=256 * 3600.0, duration_s=200 * 3600.0, interval_s=600.0, save_s=30.0,
                       restart_s=300.0, recovery="in-job", heal_s=120.0, trials=20, seed=2)
    rows = theory.sweep_rows(theory.sweep_replica_groups(config, [2, 8, 32]))
    for r, result_groups in zip(rows, (1, 2, 8, 32)):
        assert r["replica_groups"] == result_groups
        r["closed_form_goodput"] = theory.in_job.predict(SimConfig(**{**config.to_dict(), "recovery": r["recovery"],
                                                                       "replica_groups": r["replica_groups"],
                                                                       "heal_s": None if r["recovery"] == "restart" else 120.0})).goodput
    return rows


def test_goodput_by_groups_draws_the_sweep_and_restart(rows):
    spec = ic.goodput_by_groups(rows).to_dict()
    layers = spec["layer"]
    values = [v for rows_ in spec["datasets"].values() for v in rows_]
    assert {v["replica_groups"] for v in values if v["recovery"] == "in-job"} == {2, 8, 32}
    assert any(v["recovery"] == "restart" for v in values)  # the dashed line
    assert any(layer["mark"].get("shape") == "diamond" for layer in layers if isinstance(layer["mark"], dict))
    assert [p["name"] for p in spec.get("params", [])] + [p["name"] for layer in layers for p in layer.get("params", [])] == ["groups_hover"]
    assert layers[0]["encoding"]["x"]["scale"] == {"type": "log", "base": 2}


def test_where_the_rest_went_stacks_the_losses_in_the_ledger_colours(rows):
    spec = ic.where_the_rest_went(rows).to_dict()
    shown = spec["encoding"]["color"]["scale"]["domain"]
    assert "degraded" in shown and "lost_work" in shown and "productive" not in shown
    assert spec["encoding"]["color"]["scale"]["range"] == [COLORS[c] for c in shown]
    values = [v for rows_ in spec["datasets"].values() for v in rows_]
    labels = {v["label"] for v in values}
    assert labels == {"restart", "2 groups", "8 groups", "32 groups"}
    # restart has no degraded time; in-job has no whole-job restart with 32 groups
    degraded = {v["label"] for v in values if v["category"] == "degraded"}
    assert "restart" not in degraded and "32 groups" in degraded
    assert spec["params"][0]["name"] == "category_pick"


def test_both_fit_the_output_area_as_drawn(rows):
    for chart in (ic.goodput_by_groups(rows), ic.where_the_rest_went(rows)):
        assert svg_width(_svg(chart.to_dict())) <= MAX_WIDTH_PX


def test_goodput_by_groups_draws_the_costs_of_the_timeout_and_the_all_reduce_as_a_dashed_line(rows):
    import dataclasses

    from goodputlab.experiments.in_job import costed_rows

    config = SimConfig(devices=256, device_mtbf_s=256 * 3600.0, duration_s=200 * 3600.0, interval_s=600.0, save_s=30.0,
                       restart_s=300.0, recovery="in-job", heal_s=120.0, trials=20, seed=2)
    costed = costed_rows(rows, config, 7e9, 1.0, 25e9, timeout_s=60.0)
    spec = ic.goodput_by_groups(costed).to_dict()
    dashed = [layer for layer in spec["layer"] if isinstance(layer["mark"], dict) and layer["mark"].get("strokeDash")
              and layer["encoding"]["y"]["field"] == "with_costs_goodput"]
    assert len(dashed) == 1 and dashed[0]["mark"]["color"] == ic.WITH_COSTS
    values = {v["replica_groups"]: v for rows_ in spec["datasets"].values() for v in rows_ if v.get("recovery") == "in-job"}
    for g, v in values.items():  # below the plain closed form: every group stalls after each failure
        plain = theory.in_job.predict(dataclasses.replace(config, replica_groups=g)).goodput
        assert v["with_costs_goodput"] < plain
    assert svg_width(_svg(spec)) <= MAX_WIDTH_PX
    # without the column the chart has no such line
    assert not any(layer["encoding"].get("y", {}).get("field") == "with_costs_goodput"
                   for layer in ic.goodput_by_groups(rows).to_dict()["layer"])
