"""Chapter 6's panel and charts: set the controls, call the methods, check the results and the specs."""

import pytest

from goodputlab.charts.restarts import loss_around_restart, restart_strip, samples_chart
from goodputlab.errors import ConfigError
from goodputlab.experiments.recovery import checkpoint_label
from goodputlab.widgets.common import panel_static_parts
from goodputlab.widgets.recovery import RecoveryRunPanel, checkpoint_words

from conftest import chart_rows


def test_controls_make_the_config():
    p = RecoveryRunPanel(steps=40, kill_at_steps=(25,))
    p.omit.value = ("rng", "optimizer")
    p.mode.value = "loader-death"
    p.hot_spare.value = True
    c = p.config()
    assert (c.ckpt_omit, c.failure_mode, c.hot_spare, c.steps, c.kill_at_steps) == (("optimizer", "rng"), "loader-death", True, 40, (25,))
    assert c.workers == 2  # a DataLoader worker process to kill comes with loader-death
    p.mode.value = "hang"
    assert p.config().hang_timeout == 1.0 and "disk-full" not in p.mode.options


def test_a_bad_fixed_setting_fails_at_construction():
    with pytest.raises(ConfigError, match="threads"):
        RecoveryRunPanel(steps=40, threads=0)


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    p = RecoveryRunPanel(steps=30, kill_at_steps=(15,), out_root=tmp_path_factory.mktemp("panel"), ckpt_every=5,
                      restart_delay=0.0, threads=1, seed=2)
    p.omit.value = ("data",)
    p.hot_spare.value = True
    p.first = p.run_once()
    return p


def test_a_run_with_the_data_position_left_out_is_not_the_reference(panel):
    assert panel.first is panel.result and panel.reference is not None
    assert panel.history == [{"omit": ("data",), "mode": "kill", "hot_spare": True, "goodput": panel.result.goodput,
                              "bit_exact": False}]
    assert "DIFFERENT" in panel.headline.value
    rows = chart_rows(panel.loss.chart)
    assert {r["variant"] for r in rows if "variant" in r} == {"reference", "data"}
    # the headline, the legend and the static figure say what the checkpoint held, in words
    assert "kill, checkpoint without the data position, hot spare" in panel.headline.value
    assert {r["checkpoint"] for r in rows if "checkpoint" in r} == {"failure-free", "without the data position"}
    shown = [p[0] for p in panel_static_parts(panel.widget) if isinstance(p, tuple)]
    assert any("checkpoint leaves out: data" in line for line in shown), shown
    assert not any("('" in line or "()" in line for line in shown), shown  # no Python tuple


def test_a_complete_checkpoint_matches_and_the_reference_is_made_once(panel):
    ref = panel.reference
    panel.omit.value = ()
    panel.run_once()
    assert panel.reference is ref and panel.history[-1]["bit_exact"] is True
    assert "identical" in panel.headline.value and "kill, complete checkpoint, hot spare" in panel.headline.value
    shown = [p[0] for p in panel_static_parts(panel.widget) if isinstance(p, tuple)]
    assert any("checkpoint leaves out: none" in line for line in shown), shown
    assert {r["run"] for r in chart_rows(panel.bars.chart)} >= {"failure-free", "this run"}


def test_charts_take_tidy_rows():
    c = loss_around_restart([{"variant": "reference", "step": 0, "loss": 4.0}, {"variant": "rng", "step": 0, "loss": 4.1}], 10)
    spec = c.to_dict()
    assert spec["layer"][1]["mark"]["type"] == "rule"
    assert spec["params"][0]["name"] == "variant_pick" if "params" in spec else spec["layer"][0]["params"][0]["name"] == "variant_pick"
    s = samples_chart([{"variant": "data", "repeated": 320, "skipped": 320}])
    assert {r["samples"] for r in chart_rows(s)} == {320}
    b = restart_strip([{"way": "cold restart", "failure": "failure 1", "seconds": 2.0},
                       {"way": "cold restart", "failure": "failure 2", "seconds": 3.0},
                       {"way": "hot spare", "failure": "failure 1", "seconds": 0.1}])
    rows = chart_rows(b)
    assert {r["seconds"] for r in rows if "seconds" in r} == {2.0, 3.0, 0.1}
    assert {(r["way"], r["median"]) for r in rows if "median" in r} == {("cold restart", 2.5), ("hot spare", 0.1)}


def test_a_checkpoint_is_named_by_what_it_holds():
    assert checkpoint_words(()) == "complete checkpoint"
    assert checkpoint_words(("optimizer",)) == "checkpoint without the optimizer's state"
    assert checkpoint_label("optimizer+data") == "without the optimizer's state and the data position"
    assert checkpoint_label(("rng",)) == "without the RNG states"
    assert (checkpoint_label("reference"), checkpoint_label("complete")) == ("failure-free", "complete")
    c = loss_around_restart([{"variant": "reference", "step": 0, "loss": 4.0}, {"variant": "optimizer", "step": 0, "loss": 4.1}])
    legend = c.to_dict()["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert legend == ["failure-free", "without the optimizer's state"]
