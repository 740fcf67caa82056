"""``goodputlab batch-sweep`` as a user runs it: one-line errors with exit code 2, a real tiny sweep."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess

import pytest

from goodputlab import cli
from goodputlab.cli.efficiency import FLAGS
from goodputlab.efficiency.analysis import SweepResult, report
from goodputlab.efficiency.sweep_config import SweepConfig

from efficiency_helpers import TINY, tiny_sweep  # noqa: F401  (a session fixture)


def run_cli(cli_cmd, env, *args, timeout=120):
    return subprocess.run([*cli_cmd, "batch-sweep", *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.parametrize(
    "args,flag,value",
    [
        (["--batch-sizes", "8,x"], "--batch-sizes", "8,x"),
        (["--batch-sizes", "8,15"], "--batch-sizes", "8,15"),
        (["--batch-sizes", "16"], "--batch-sizes", "16"),
        (["--target-loss", "0.5"], "--target-loss", "0.5"),  # below the source's entropy
        (["--target-loss", "abc"], "--target-loss", "abc"),
        (["--lr-rule", "cubic"], "--lr-rule", "cubic"),
        (["--lr", "-1"], "--lr", "-1"),
        (["--max-steps", "0"], "--max-steps", "0"),
        (["--model", "huge"], "--model", "huge"),
        (["--threads", "0"], "--threads", "0"),
        (["--out", "/proc/goodputlab-cannot-write-here.json"], "--out", "/proc/goodputlab-cannot-write-here.json"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, cli_env, args, flag, value):
    r = run_cli(cli, cli_env, *args, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert flag in lines[0] and value in lines[0] and "batch-sweep" in lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_every_field_has_its_flag():
    """Each SweepConfig field is a flag of the parser, and the main CLI names it in errors."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["batch-sweep"]
    options = {o for a in sub._actions for o in a.option_strings}
    for field in [f.name for f in dataclasses.fields(SweepConfig)] + ["out"]:
        assert cli._flag(field) == FLAGS[field] and FLAGS[field] in options


def test_json_rows_and_a_missed_batch(cli, cli_env, tmp_path):
    """A real sweep through the command: batch 4 cannot reach the target in 40 steps (it needs about 56), 16 can."""
    out = tmp_path / "sweep.json"
    args = ["--batch-sizes", "4,16", "--max-steps", "40", "--json", "--out", str(out)]
    for name in ("target_loss", "rounds", "timed_steps", "warmup_steps", "eval_sequences", "eval_growth", "pool_sequences", "lr"):
        args += [FLAGS[name], str(TINY[name])]
    r = run_cli(cli, cli_env, *args)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert {"rows", "noise_scale", "best_batch_size"} <= set(data)
    keys = {"batch_size", "samples_per_s", "steps_to_target", "samples_to_target", "statistical_efficiency", "goodput"}
    assert [row["batch_size"] for row in data["rows"]] == [4, 16] and all(keys <= set(row) for row in data["rows"])
    missed, reached = data["rows"]
    assert missed["reached"] is False and missed["steps_to_target"] is None and missed["goodput"] is None
    assert missed["stopped"] == "max_steps"
    assert reached["reached"] and reached["statistical_efficiency"] == 1.0 and reached["steps_to_target"] <= 40
    assert data["missed"] == [4] and data["best_batch_size"] == 16 and data["noise_scale"] > 0
    assert "training batch" in r.stderr  # the progress bar
    saved = json.loads(out.read_text())
    assert saved["analysis"] == data
    assert SweepResult.from_dict(saved["result"]).analyse().to_json() == data


def test_table_report(tiny_sweep):
    """What the command prints without --json (the same function, on the session's tiny sweep)."""
    text = report(tiny_sweep, tiny_sweep.analyse())
    assert "samples/s" in text and "best batch size: measured" in text and "gradient noise scale at the target" in text
    assert len([line for line in text.splitlines() if line.strip().startswith(("4 ", "16 "))]) == 2
    # in notation.md's symbols: B the batch, B_0 the base batch (not Pollux's M and M0)
    assert "predicted (B_noise + B_0) / (B_noise + B)" in text and "E_min (1 + B / B_crit)" in text
    assert not re.findall(r"\bM0?\b", text), text
