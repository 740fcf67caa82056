"""The charts' offline JavaScript, bundled once per version and kept on disk (goodputlab/charts/offline_js.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from goodputlab.charts import offline_js


def test_kept_builds_once_then_reads_the_file(tmp_path):
    built = []

    def build():
        built.append(1)
        return f"bundle {len(built)}"

    assert offline_js.kept("a.js", build, tmp_path) == "bundle 1"
    assert offline_js.kept("a.js", build, tmp_path) == "bundle 1"  # read, not made again
    assert len(built) == 1 and (tmp_path / "a.js").read_text() == "bundle 1"
    assert offline_js.kept("b.js", build, tmp_path) == "bundle 2"  # another name: made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.js", "b.js"]  # no partial file left


def test_kept_still_builds_where_nothing_can_be_written(tmp_path):
    blocker = tmp_path / "a file, not a folder"
    blocker.write_text("")
    assert offline_js.kept("a.js", lambda: "made", blocker / "cache") == "made"
    assert offline_js.kept("a.js", lambda: "made again", blocker / "cache") == "made again"


def test_folder_follows_the_settings(tmp_path, monkeypatch):
    monkeypatch.delenv(offline_js.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert offline_js.folder() == tmp_path / "xdg" / "goodputlab"
    monkeypatch.setenv(offline_js.ENV, str(tmp_path / "mine"))
    assert offline_js.folder() == tmp_path / "mine"


_SAME_AS_ALTAIR = """
import altair as alt
from goodputlab.charts import offline_js
offline_js.enable_offline()
ours = alt.JupyterChart._esm
alt.JupyterChart._is_offline = False
alt.JupyterChart.enable_offline()
assert ours == alt.JupyterChart._esm, "the kept bundle is not Altair's"
print(len(ours))
"""

_READ_NOT_MADE = """
import altair as alt, vl_convert
def refuse(*a, **k):
    raise AssertionError("bundled again")
vl_convert.javascript_bundle = refuse
from goodputlab.charts import offline_js
from goodputlab.charts.static import LiveChart
chart = LiveChart(alt.Chart(alt.InlineData(values=[{"x": 1}])).mark_point().encode(x="x:Q"))
assert alt.JupyterChart._is_offline and len(alt.JupyterChart._esm) > 100_000
"""


def test_the_live_charts_bundle_is_altairs_own_and_is_read_back_by_the_next_kernel(tmp_path):
    """A real bundle: the first process makes it (and it equals what Altair's ``enable_offline``
    makes), the next one draws a live chart with vl-convert's bundler switched off."""
    env = dict(os.environ, **{offline_js.ENV: str(tmp_path)})
    first = subprocess.run([sys.executable, "-c", _SAME_AS_ALTAIR], env=env, capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr[-2000:]
    assert int(first.stdout) > 100_000
    assert [p.name.startswith("altair-jupyterchart-") for p in tmp_path.iterdir()] == [True]
    second = subprocess.run([sys.executable, "-c", _READ_NOT_MADE], env=env, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr[-2000:]
