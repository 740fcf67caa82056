"""`make figures`: every chart a chapter shows, written as SVG and PNG into one folder."""

from __future__ import annotations

import re
import subprocess
import sys

import altair as alt
import pytest

from goodputlab.charts.figures import FigureWriter

from conftest import ROOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_writer_writes_both_files_of_each_chart(tmp_path):
    writer = FigureWriter(tmp_path / "out", prefix="chapter one")
    chart = alt.Chart(alt.InlineData(values=[{"x": 1, "y": 2}, {"x": 2, "y": 3}])).mark_line().encode(x="x:Q", y="y:Q")
    first = writer.write(chart.to_dict())
    second = writer.write(chart.properties(title="again").to_dict())
    assert [p.name for p in first + second] == ["chapter-one-01.svg", "chapter-one-01.png",
                                                "chapter-one-02.svg", "chapter-one-02.png"]
    assert first[0].read_text().lstrip().startswith("<svg") and "again" in second[0].read_text()
    assert first[1].read_bytes().startswith(PNG_MAGIC)


@pytest.mark.notebooks
def test_make_figures_on_a_chapter(tmp_path):
    """Chapter 2 (theory and the simulator: cheap) shows its charts (at least the four of its first
    sections) and panels; every chart is written, numbered in the order shown, and the panels are not."""
    out = tmp_path / "figures"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_figures.py"), "--out", str(out),
                           str(ROOT / "book" / "02_failures_at_scale.ipynb")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = re.search(r"book/02_failures_at_scale\.ipynb: (\d+) charts", done.stdout.replace(str(ROOT) + "/", ""))
    assert shown and int(shown.group(1)) >= 4, done.stdout
    n = int(shown.group(1))
    svgs, pngs = sorted(out.glob("*.svg")), sorted(out.glob("*.png"))
    assert [p.stem for p in svgs] == [p.stem for p in pngs] == [f"02_failures_at_scale-{i:02d}" for i in range(1, n + 1)]
    assert all(p.read_text().lstrip().startswith("<svg") for p in svgs)
    assert all(p.read_bytes().startswith(PNG_MAGIC) and p.stat().st_size > 10_000 for p in pngs)
    assert "Llama 3" in "".join(p.read_text() for p in svgs)  # the cause chart's title, as text in the SVG


def test_make_figures_refuses_a_missing_notebook(tmp_path, capsys, monkeypatch):
    """The refusal comes before anything is executed: the script's ``main``, in this process."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    monkeypatch.chdir(ROOT)
    import make_figures

    assert make_figures.main(["--out", str(tmp_path / "figures"), "book/no_such_chapter.ipynb"]) == 2
    assert "no notebook book/no_such_chapter.ipynb" in capsys.readouterr().err
    assert not (tmp_path / "figures").exists()
