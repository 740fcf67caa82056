"""The book as a textbook: every chapter has objectives, a summary, exercises with answers and references;
the corrected facts stay corrected; the exercises' numbers are what the package computes.

Reads the committed notebooks (no execution): cheap.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from conftest import ROOT

from goodputlab import theory
from goodputlab.theory import RunTimings, optimal_ckpt_every, young_interval

CHAPTERS = sorted(p for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
REFERENCES = (ROOT / "book" / "references.md").read_text()


def markdown(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def text(name: str) -> str:
    return markdown(ROOT / "book" / name)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_has_the_apparatus(path):
    md = markdown(path)
    assert "**After this chapter you can:**" in md, "learning objectives at the top"
    assert "## What to remember" in md, "a summary"
    assert md.count("<details><summary>Answer</summary>") >= 3, "exercises with worked answers, hidden until asked for"
    assert md.count("**Exercise ") == md.count("<details><summary>Answer</summary>"), "one answer per exercise"
    assert "## References" in md
    for anchor in re.findall(r"references\.md#([a-z0-9-]+)", md):
        assert f'<a id="{anchor}"></a>' in REFERENCES, f"references.md has no entry {anchor}"
    assert "(notation.md)" in md, "a link to the notation page"
    objectives = md.index("**After this chapter you can:**")
    assert objectives < md.index("## ", md.index("\n") + 1), "objectives come before the first section"


@pytest.mark.parametrize("path", [*CHAPTERS, *sorted((ROOT / "labs").rglob("*.ipynb"))], ids=lambda p: p.name)
def test_text_is_for_a_reader(path):
    md = markdown(path)
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", md), "a control character (a lost backslash?)"
    for phrase in ("this project", "the issue", "we fixed", "GUIDE"):
        assert phrase not in md, phrase
    assert "U-shaped" not in md  # goodput against the interval is an upside-down U
    assert r"^\*" not in md  # tau^\* renders as a literal backslash


def test_bibliography_has_the_sources():
    for anchor in ("young-1974", "daly-2006", "llama3-2024", "checkfreq-2021", "gemini-2023", "ds-analyzer-2021",
                   "pollux-2021", "distserve-2024", "mccandlish-2018", "kokolis-2025", "google-goodput-2024",
                   "ml-goodput-measurement", "torchtitan-2024", "pytorch-dcp"):
        assert f'<a id="{anchor}"></a>' in REFERENCES, anchor
    assert "466 job interruptions" in REFERENCES and "47 planned and 419 unexpected" in REFERENCES


# --- corrected facts -----------------------------------------------------------------------


def test_chapter_2_says_which_rate_counts_what():
    md = text("02_failures_at_scale.ipynb")
    assert "fails about once every five years" not in md
    all_causes = theory.device_mtbf_for_count(theory.LLAMA3_GPUS, theory.LLAMA3_DURATION_S, 466) / (365 * 86400)
    gpu_only = theory.device_mtbf_for_count(theory.LLAMA3_GPUS, theory.LLAMA3_DURATION_S, 268) / (365 * 86400)
    assert round(all_causes) == 5 and round(gpu_only) == 9
    assert "every five years" in md and "about once every nine years" in md and "268 of the 419" in md


def rendered(name: str) -> str:
    """The chapter's markdown and the sentences its code rendered (gl.say) in the committed outputs."""
    nb = json.loads((ROOT / "book" / name).read_text())
    said = ["".join(o["data"]["text/markdown"]) for c in nb["cells"] if c["cell_type"] == "code"
            for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]
    return "\n".join([markdown(ROOT / "book" / name), *said])


def test_chapter_3_corrections():
    md = rendered("03_checkpoint_interval.ipynb")
    assert "optimistic" not in md  # first order is pessimistic when R/M is not small
    assert r"1 - R/M \le e^{-R/M}" in md
    m = theory.WORKED_EXAMPLE_MTBF_S
    assert theory.expected_goodput(1800, 0, 1800, m) < theory.daly_goodput(1800, 0, 1800, m)
    assert "73.1%" in md and "76.3%" in md
    assert "70-minute" not in md and "a tenth of a second" not in md
    # exercise 3.5: a 3 s relaunch at an 8 s MTBF is a 63-minute restart at Llama 3's MTBF, and the other way round
    assert round(3 / 8 * theory.llama3_mtbf_s() / 60) == 63 and "**63 minutes**" in md and "3/8 = 0.375" in md
    low, high = 300 / theory.llama3_mtbf_s() * 8, 360 / theory.llama3_mtbf_s() * 8
    assert (round(low, 2), round(high, 2)) == (0.24, 0.29) and "**0.24 s** at the lab's 8 s (0.29 s" in md
    assert "upside-down U" in md


def test_closed_forms_docstring_says_pessimistic():
    doc = theory.expected_goodput.__doc__
    assert "pessimistic here too" in doc and "optimistic" not in doc


def test_chapter_4_latex():
    md = text("04_cheap_checkpoints.ipynb")
    assert r"$\tau^* \approx \sqrt{2\,\delta\,M}$" in md


def test_lab_1_wording_and_the_instructor_guide():
    for rel in ("labs/01_where_did_the_time_go.ipynb", "labs/solutions/01_where_did_the_time_go.ipynb"):
        md = markdown(ROOT / rel)
        assert "seconds of compute" not in md
        assert "seconds of *training* between checkpoints" in md and "`timings.step_s`" in md
        assert r"\tau^* = \sqrt{2\,\delta\,M}" in md  # stated before it is used; chapter 3 derives it
    guide = (ROOT / "labs" / "INSTRUCTOR.md").read_text()
    assert "a little below Young's" not in guide and "free restarts" not in guide
    # the guide's figures: a 22 ms step, a 14 ms save, a 20 s MTBF
    t = RunTimings(compute_s=0.0175, data_wait_s=0.004, step_other_s=0.0004, save_s=0.0139, launch_s=3.22, restore_s=0.023)
    assert round(young_interval(t.save_s, 20.0) / t.step_s) == 34
    assert optimal_ckpt_every(t, 80, 20.0) == 40  # two equal segments: above Young's (the lab's train clock)
    assert optimal_ckpt_every(t, 300, 20.0) == 34
    assert "34 steps for a 300-step run and 40 for the 80 steps" in guide


# --- the exercises' numbers ---------------------------------------------------------------


def test_exercise_answers_are_what_the_package_computes():
    from goodputlab.theory import capstone, checkpoint_cost, data_stall, frame, recovery_at_scale as ras

    ch1, ch2, ch3 = text("01_what_is_goodput.ipynb"), text("02_failures_at_scale.ipynb"), text("03_checkpoint_interval.ipynb")
    ch4, ch5, ch10 = text("04_cheap_checkpoints.ipynb"), text("05_input_pipeline.ipynb"), text("10_your_cluster.ipynb")
    b = {"productive": 24.0, "restart": 3.0, "lost_work": 1.2, "checkpoint_save": 0.6, "data_wait": 0.9, "startup": 0.3}
    assert f"**{frame.runtime_goodput(b):.1%}**" in ch1 and f"**{frame.effective_training_time_ratio(b):.1%}**" in ch1
    assert f"**{frame.ml_productivity_goodput(30 / 32, 0.8, 0.45):.4f}**" in ch1

    dev = theory.device_mtbf_for_count(theory.LLAMA3_GPUS, theory.LLAMA3_DURATION_S, 466)
    assert f"**{dev / 4096 / 3600:.1f} hours**" in ch2 and f"**{86400 * 4096 / dev:.2f} interruptions a day**" in ch2
    assert f"**{ras.detection_s(0.2):.0f} s**" in ch2
    assert f"**{ras.spare_hit_share(300, 466):.1%}**" in ch2 and ras.spare_hit_share(500, 466) >= 0.9985
    assert f"**{466 * ras.domain_interruption_rate(1, 1.0, 8, 0.5):.0f} interruptions**" in ch2

    assert f"**{young_interval(30, 14400) / 60:.1f} minutes**" in ch3
    assert f"**{theory.daly_interval(30, 14400) / 60:.1f} minutes**" in ch3
    assert f"**{math.sqrt(2 * 60 / 10_047):.1%}**" in ch3 and f"**{math.sqrt(8 * 60 / 10_047):.1%}**" in ch3
    assert f"**{ras.progress_goodput_free(0.5, 1):.1%}**" in ch3 and f"**{ras.timer_goodput_free(0.5, 1):.1%}**" in ch3

    c = checkpoint_cost.checkpoint_cost(70e9, 1024, 100e9)
    assert f"**{c.total_bytes / 1e9:.0f} GB**" in ch4 and f"**{c.rank_bytes / 1e6:.0f} MB per GPU**" in ch4
    assert f"**{c.write_s:.1f} s**" in ch4
    assert f"**{1 - math.exp(-120 / 10_800):.1%} of the goodput**" in ch4

    assert f"**{data_stall.workers_needed(0.4, 0.3, 0.25, headroom=1.2)} workers**" in ch5
    wait = data_stall.steady_state_wait_s(0.4, 0.3, 2, 0.25)
    assert f"**{1000 * wait:.0f} ms**" in ch5 and f"**{wait / (wait + 0.25):.1%}**" in ch5

    small = capstone.evaluate(capstone.ClusterScenario(parameters=70e9, gpus=2048, storage_bps=2e11))
    assert f"**{small.checkpoint.write_s:.1f} s**" in ch10 and f"**{small.goodput:.1%}**" in ch10
    assert f"**{small.scenario.job_mtbf_s / 3600:.0f} hours**" in ch10


def test_exercise_answers_of_chapters_8_and_9():
    ch8, ch9 = ROOT / "book" / "08_statistical_efficiency.ipynb", ROOT / "book" / "09_serving_goodput.ipynb"
    if not (ch8.exists() and ch9.exists()):
        pytest.skip("chapters 8 and 9 are not in this checkout")
    md8, md9 = markdown(ch8), markdown(ch9)
    eff = lambda m, b=48, m0=8: (b + m0) / (b + m)
    assert f"**{eff(64):.2f}**" in md8 and f"**{eff(256):.2f}**" in md8
    assert f"**{math.sqrt(48 * 2 / 0.35):.1f}**" in md8
    assert f"**{(1 / (0.99 * 0.2)) / (1 / 0.8):.1f} times**" in md8
    assert f"**{32 * eff(256):.1f}**" in md8 and f"**{1 + 48 // 8}**" in md8
    assert f"**{(0.772 - 0.400) / 31 * 1000:.1f} ms**" in md9
    assert f"**{6 * 2 * 384 * 4:,} bytes**" in md9 and f"**{80 * 2 * 8 * 128 * 2:,} bytes**" in md9
    assert f"**{200 * 6 * 2 * 384 * 4 / 1e6:.1f} MB**" in md9
