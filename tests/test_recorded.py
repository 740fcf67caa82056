"""The recorded runs that ship with the package: complete, small, closed ledgers, the same RunResult as a real run."""

from __future__ import annotations

import fnmatch
import gzip
import math
import shutil
import subprocess
import sys
import tomllib

import pytest

import goodputlab as gl
from goodputlab.engine.config import RunConfig
from goodputlab.measure.ledger import build_ledger
from goodputlab.engine.recorded import RECORDED_DIR, nearest_recorded
from goodputlab.errors import RunFileError

from conftest import ROOT

NAMES = list(gl.recorded_runs())


def test_the_recordings_are_there_and_small():
    assert len(NAMES) >= 10
    folders = {p.name for p in RECORDED_DIR.iterdir() if p.is_dir()}
    assert folders == set(NAMES), "a recording folder without an index entry, or the reverse"
    total = sum(p.stat().st_size for p in RECORDED_DIR.rglob("*") if p.is_file())
    # 27 recordings, most of them 500-step runs of the dashboard or Lab 3 (about 40 KB of gzipped events each)
    assert total < 750_000, f"{total} bytes: the recordings should stay a few hundred KB"
    assert not list(RECORDED_DIR.rglob("*.pt")), "recordings hold event logs and summaries, never checkpoints"


def test_the_package_data_includes_every_recorded_file():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["goodputlab"]
    for path in RECORDED_DIR.rglob("*"):
        if path.is_file():
            rel = str(path.relative_to(ROOT / "goodputlab"))
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


@pytest.mark.parametrize("name", NAMES)
def test_each_recording_loads_and_its_ledger_closes(name):
    recording = gl.recorded_runs()[name]
    result = gl.recorded_run(name)
    assert isinstance(result, gl.RunResult)
    s = result.summary
    assert s["completed"] and math.isclose(sum(s["buckets"].values()), s["wall_s"], rel_tol=1e-9)
    ledger = build_ledger(result.events)  # recomputed from the events, not read from the summary
    assert math.isclose(ledger.wall_s, s["wall_s"], rel_tol=1e-9)
    for category, seconds in ledger.buckets.items():
        assert math.isclose(seconds, s["buckets"][category], rel_tol=1e-9, abs_tol=1e-9), category
    assert result.config == recording.config  # the settings the index says it ran with
    assert (recording.goodput, recording.failures) == (s["goodput"], s["failures"])
    assert recording.machine["cores"] and recording.machine["torch"]
    result.timeline_chart().to_dict()  # the charts draw from it as from a real run


def test_a_recording_older_than_a_category_books_zero_to_it(tmp_path):
    """A category added after a recording was made (straggler_wait with runs on many ranks) reads as zero."""
    from goodputlab.engine.recorded import with_every_category

    old = {"buckets": {"productive": 2.0, "restart": 1.0}, "shares": {"productive": 2 / 3, "restart": 1 / 3}}
    new = with_every_category(old)
    assert list(new["buckets"])[:len(gl.CATEGORIES)] == list(gl.CATEGORIES)
    assert new["buckets"]["productive"] == 2.0 and new["buckets"]["startup"] == 0.0
    assert sum(new["shares"].values()) == pytest.approx(1.0)
    summary = gl.recorded_run("lab01").summary
    assert set(gl.CATEGORIES) <= set(summary["buckets"]) and set(gl.CATEGORIES) <= set(summary["shares"])


def test_an_unknown_recording_lists_the_ones_there_are():
    with pytest.raises(gl.ConfigError, match="every-25"):
        gl.recorded_run("every-26")


def test_a_damaged_recording_names_the_file_and_the_line(tmp_path):
    folder = tmp_path / "recorded"
    shutil.copytree(RECORDED_DIR, folder)
    events = folder / "no-failures" / "events.jsonl.gz"
    lines = gzip.decompress(events.read_bytes()).split(b"\n")
    lines[3] = b'{"t": "soon", "attempt": 0, "step": null, "kind": "spawn"}'
    events.write_bytes(gzip.compress(b"\n".join(lines)))
    with pytest.raises(RunFileError, match=r"events.jsonl.gz, line 4: 't' is 'soon'"):
        gl.recorded_run("no-failures", folder=folder)
    events.write_bytes(b"not gzip")
    with pytest.raises(RunFileError, match="not a readable gzip file"):
        gl.recorded_run("no-failures", folder=folder)


def test_the_nearest_recording_and_how_it_differs():
    for name, recording in gl.recorded_runs().items():
        nearest = nearest_recorded(recording.config)
        assert nearest.distance == 0 and not nearest.differences, name
        assert gl.recorded_runs()[nearest.name].config == recording.config
    asked = RunConfig(steps=500, threads=1, seed=1, io_latency_ms=5.0, ckpt_every=30, mtbf=9.0)
    nearest = nearest_recorded(asked)
    assert nearest.name == "every-25"
    assert nearest.differences == {"ckpt_every": (30, 25), "mtbf": (9.0, 10.0)}
    assert "ckpt_every 25 instead of 30" in nearest.describe()
    assert nearest_recorded(asked.replace(mtbf=0.0)).name == "no-failures"
    assert nearest_recorded(asked.replace(ckpt="memory")).name == "memory-every-25"


def test_record_runs_lists_and_refuses_unknown_names():
    tool = [sys.executable, str(ROOT / "tools" / "record_runs.py")]
    listed = subprocess.run(tool + ["--list"], capture_output=True, text=True, cwd=ROOT)
    assert listed.returncode == 0 and all(name in listed.stdout for name in NAMES)
    bad = subprocess.run(tool + ["--out", "/nonexistent", "nope"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "unknown recording 'nope'" in bad.stderr
