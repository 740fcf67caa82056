"""The workshop dashboard's panel, driven directly (the browser test drives it through Voila)."""

from __future__ import annotations

import dataclasses

import ipywidgets as W
import pytest

import goodputlab as gl
from goodputlab.checkpoints import registry
from goodputlab.engine.config import RunConfig
from goodputlab.widgets.dashboard import OPTIONAL_LEVERS, WorkshopDashboard, _lever_for

from conftest import chart_rows


@pytest.fixture
def dashboard(tmp_path):
    return WorkshopDashboard(steps=40, out_root=tmp_path)


def test_every_lever_is_there_and_the_theory_predicts_at_once(dashboard):
    assert list(dashboard.levers()) == ["ckpt", "ckpt_every", "mtbf", *[n for n in OPTIONAL_LEVERS if n in
                                        {f.name for f in dataclasses.fields(RunConfig)}], "workers", "prefetch",
                                        "io_latency_ms"]
    assert list(dashboard.strategy.options) == list(registry.names())
    assert dashboard.prediction is not None and 0 < dashboard.prediction.goodput < 1
    assert "theory predicts" in dashboard.prediction_line.value and "recorded run 'every-25'" in dashboard.prediction_line.value
    assert dashboard.figures() == {"goodput": None, "predicted": dashboard.prediction.goodput, "runs": 0,
                                   "levers": list(dashboard.levers()), "recorded": False}


def test_the_prediction_follows_the_levers(dashboard):
    with_failures = dashboard.prediction.goodput
    dashboard.mtbf.value = 0.0  # the observer re-predicts, as a slider move in the browser does
    assert dashboard.prediction.goodput > with_failures and dashboard.prediction.failures == 0
    no_failures = dashboard.prediction.goodput
    dashboard.io_latency_ms.value = 40.0
    slow = dashboard.prediction.goodput
    assert slow < no_failures
    dashboard.workers.value = 2
    assert not dashboard.prefetch.disabled
    dashboard.prefetch.value = 4
    assert dashboard.prediction.goodput > slow  # workers hide the storage latency
    dashboard.strategy.value = "memory"
    assert "memory-every-25" in dashboard.prediction_line.value  # the costs of that strategy


def test_recorded_mode_shows_the_nearest_recording(dashboard):
    dashboard.controls.recorded.value = True
    dashboard.ckpt_every.value = 5
    result = dashboard.run_once()
    assert result.summary == gl.recorded_run("every-5").summary
    assert "recorded run 'every-5'" in dashboard.controls.note.value and "steps 500 instead of 40" in dashboard.controls.note.value
    assert dashboard.figures()["goodput"] == result.goodput and dashboard.figures()["runs"] == 1
    assert f"{result.goodput:.1%}" in dashboard.headline.value
    assert any(r.get("category") == "lost_work" for r in chart_rows(dashboard.timeline.chart))
    runs = {r["run"] for r in chart_rows(dashboard.breakdown.chart)}
    assert runs == {"theory, these levers", "#1: sync every 5, MTBF 10s, depth 0"}


def test_a_real_run_redraws_and_its_costs_feed_the_theory(dashboard):
    dashboard.mtbf.value = 0.0
    dashboard.ckpt_every.value = 20
    result = dashboard.run_once()
    assert result.summary["completed"] and result.config.steps == 40 and result.config.ckpt_every == 20
    assert dashboard.status.value == "done" and dashboard.controls.note.value == ""
    assert "measured: wall" in dashboard.headline.value
    assert "your last run" in dashboard.prediction_line.value
    rows = chart_rows(dashboard.timeline.chart)
    assert {r["category"] for r in rows if "category" in r} >= {"startup", "productive", "checkpoint_save"}
    assert len({r["run"] for r in chart_rows(dashboard.breakdown.chart)}) == 2


def test_levers_for_fields_that_recovery_adds_come_from_the_field():
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    choice = _lever_for("ckpt", fields["ckpt"])
    assert isinstance(choice, W.Dropdown) and list(choice.options) == list(registry.names()) and choice.value == "sync"
    assert isinstance(_lever_for("pin_memory", fields["pin_memory"]), W.Checkbox)
    whole = _lever_for("keep", fields["keep"])
    assert isinstance(whole, W.BoundedIntText) and whole.value == 3


def test_the_chapters_panels_offer_recorded_runs_too(tmp_path):
    panel = gl.widgets.RunPanel(steps=60, out_root=tmp_path, threads=1, seed=1)
    panel.controls.recorded.value = True
    panel.mtbf.value = 0.0
    result = panel.run_once()
    assert result.summary == gl.recorded_run("no-failures").summary
    assert panel.history[-1][0].startswith("#1: ckpt 25, no failures")
    assert "recorded run 'no-failures'" in panel.controls.note.value
    assert not list(tmp_path.iterdir()), "nothing trained, nothing written"


def test_the_recovery_levers_choose_the_costs_and_the_recording(dashboard):
    """Chapter 6's levers: a failure mode (a full disk left out: it needs a file system of its own) and a hot
    spare; the theory takes its costs from runs with the same levers, and recorded mode loads their recording."""
    modes = dashboard.extra_levers["failure_mode"]
    assert "hang" in modes.options and "disk-full" not in modes.options and modes.value == "kill"
    cold_prediction = dashboard.prediction
    cold = cold_prediction.goodput
    dashboard.extra_levers["hot_spare"].value = True
    assert "recorded run 'hot-spare-every-25'" in dashboard.prediction_line.value
    assert dashboard.prediction.goodput > cold  # no new process after a failure
    dashboard.extra_levers["hot_spare"].value = False
    modes.value = "hang"
    assert "recorded run 'hang-every-25'" in dashboard.prediction_line.value
    assert "each hang adds the watchdog's 5 s" in dashboard.prediction_line.value

    def restart_per_failure(p):
        return p.buckets["restart"] / p.failures

    # the watchdog's timeout is paid at every hang (the two recordings' launches differ by less than it)
    assert restart_per_failure(dashboard.prediction) > restart_per_failure(cold_prediction) + 4.0
    modes.value = "loader-death"  # needs loader workers: until there are some, no prediction, and why
    assert dashboard.prediction is None and "workers" in dashboard.prediction_line.value
    dashboard.workers.value = 2
    assert "repaired in place" in dashboard.prediction_line.value and dashboard.prediction.failures == 0
    dashboard.workers.value = 0
    modes.value = "hang"
    dashboard.controls.recorded.value = True
    result = dashboard.run_once()
    assert result.summary == gl.recorded_run("hang-every-25").summary
    assert dashboard.history[-1][0] == "#1: sync every 25, MTBF 10s, depth 0, hang"


def test_before_the_first_run_it_shows_a_recorded_run(dashboard):
    """Not blank before Run (nor on the website): the recorded run nearest to the levers is drawn, and it is
    not counted as a run of the session."""
    name, preview = dashboard.preview
    assert name == gl.engine.recorded.nearest_recorded(dashboard.config()).name
    assert f"{preview.goodput:.1%}" in dashboard.headline.value and "press Run" in dashboard.headline.value
    assert any(r.get("category") == "productive" for r in chart_rows(dashboard.timeline.chart))
    assert {r["run"] for r in chart_rows(dashboard.breakdown.chart)} == {"theory, these levers", f"recorded run {name!r}"}
    assert dashboard.result is None and dashboard.figures()["runs"] == 0
