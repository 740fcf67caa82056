"""Chapter 11's panel: it starts from the chapter's recorded pair, redraws from the runs it shows, and turns
a bad kill list into one status line instead of a run."""

import pytest

import goodputlab as gl
from goodputlab.widgets import InJobPanel
from goodputlab.widgets.in_job import parse_kills

from conftest import ROOT, chart_rows

ij = gl.experiments.in_job


@pytest.fixture(scope="module")
def recording():
    return ij.load_recording(ij.find_recording(ROOT))


def test_the_panel_shows_the_recorded_pair(recording):
    panel = InJobPanel(recording=recording)
    assert panel.figures() == {m: r["summary"]["goodput"] for m, r in recording["runs"].items()}
    lanes = {r["lane"] for r in chart_rows(panel.timeline.chart)}
    ranks = recording["runs"]["none"]["summary"].get("world_size", 1)
    groups = recording["runs"]["torchft"]["summary"]["replica_groups"]
    assert lanes == {f"restart: rank {r}" for r in range(ranks)} | {f"torchft: replica {r}" for r in range(groups)}
    # each lane spans its run's wall, and torchft's lanes show the missing group
    rows = chart_rows(panel.timeline.chart)
    ft = [r for r in rows if r["run"] == "torchft"]
    assert any(r["category"] == "degraded" for r in ft)
    assert not any(r["category"] == "degraded" for r in rows if r["run"] == "restart")
    for lane in lanes:
        mine = [r for r in rows if r["lane"] == lane]
        run = "none" if lane.startswith("restart") else "torchft"
        assert max(r["end"] for r in mine) == pytest.approx(recording["runs"][run]["summary"]["wall_s"], abs=0.01)


def test_the_controls_describe_the_run_and_a_bad_kill_list_is_one_line(recording):
    panel = InJobPanel(recording=recording, steps=300, kills="50, 150", replicas=4)
    c = panel.config()
    assert (c.fault_tolerance, c.nproc, c.kill_at_steps, c.ckpt_every) == ("torchft", 4, (50, 150), 0)
    panel.mode.value = "none"
    assert panel.config().ckpt_every == 50
    assert parse_kills("200; 100") == (100, 200) and parse_kills("") == ()
    panel.kills.value = "a hundred"
    assert panel.run_once() is None and panel.status.value.startswith("not run: kill_at_steps")
    panel.kills.value = "400"  # past the run's end: the config refuses it, nothing starts
    assert panel.run_once() is None and "kill_at_steps" in panel.status.value and not panel.history


def test_the_recording_is_small_and_its_timelines_close_on_the_wall(recording):
    assert (ROOT / "book" / "data" / ij.RECORDING_NAME).stat().st_size < 200_000
    for mode, r in recording["runs"].items():  # recorded at twice a chart's resolution: every category keeps its time
        wall = r["summary"]["wall_s"]
        for timeline in r["timelines"].values():
            parts = ij.stretches(timeline)
            assert parts[0][0] == pytest.approx(0.0, abs=0.01) and parts[-1][1] == pytest.approx(wall, abs=0.01)
            assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))  # no gaps
        books = r["summary"]["replicas"] if mode == "torchft" else {k: r["summary"]["buckets"] for k in r["timelines"]}
        for replica, timeline in r["timelines"].items():  # each timeline books what the summary says it booked
            own = {}
            for start, end, category in ij.stretches(timeline):
                own[category] = own.get(category, 0.0) + end - start
            for category, seconds in books[replica].items():
                assert own.get(category, 0.0) == pytest.approx(seconds, abs=0.05), (mode, replica, category)
