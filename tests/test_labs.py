"""The lab checks pass right answers, refuse wrong ones with a hint, and never raise."""

from dataclasses import replace

import pytest

from goodputlab import categories as C
from goodputlab.labs import CheckResult, Scoreboard, lab01
from goodputlab.engine.api import RunResult
from goodputlab.engine.ledger import surviving_executions
from goodputlab.experiments.interval_sweep import measure_timings
from goodputlab.theory import optimal_ckpt_every, young_interval


@pytest.fixture(scope="module")
def result(killed_run, tmp_path_factory):
    summary, events = killed_run
    return RunResult(tmp_path_factory.mktemp("lab"), summary, events)


def test_data_wait_check(result):
    right = result.buckets[C.DATA_WAIT]
    assert lab01.check_data_wait(right, result).passed
    near = lab01.check_data_wait(right * 1.01, result)
    assert not near.passed and "phase" in near.message
    assert not lab01.check_data_wait(right * 3, result).passed
    assert not lab01.check_data_wait(None, result).passed


def test_lost_executions_check(result):
    executed = {(e["attempt"], e["step"]) for e in result.events if e["kind"] == "compute"}
    lost = executed - surviving_executions(result.events)
    assert lost and lab01.check_lost_executions(lost, result).passed
    assert not lab01.check_lost_executions(set(list(lost)[1:]), result).passed
    assert not lab01.check_lost_executions(None, result).passed


def test_interval_checks(result):
    t = measure_timings(result.events)
    young_steps = young_interval(t.save_s, 20.0) / t.step_s
    assert lab01.check_young_steps(young_steps, t, 20.0).passed
    assert not lab01.check_young_steps(young_interval(t.save_s, 20.0), t, 20.0).passed  # seconds, not steps
    best = optimal_ckpt_every(t, 90, 20.0)
    assert lab01.check_interval_choice(best, t, 90, 20.0).passed
    assert not lab01.check_interval_choice(2.5, t, 90, 20.0).passed
    assert not lab01.check_interval_choice(None, t, 90, 20.0).passed
    # Whether saving every step costs too much depends on the save against the step, which a
    # busy machine moves (a 0.5 s step once made every-step saves nearly free), so the refusal
    # is checked on fixed costs: a 20 ms save against a 16 ms step is far from the best, against
    # a 2 s step it is within 2% of it.
    fast = replace(t, compute_s=0.016, save_s=0.020, data_wait_s=0.0, step_other_s=0.0)
    assert not lab01.check_interval_choice(1, fast, 90, 20.0).passed
    assert lab01.check_interval_choice(optimal_ckpt_every(fast, 90, 20.0), fast, 90, 20.0).passed
    slow = replace(fast, compute_s=2.0)
    assert lab01.check_interval_choice(1, slow, 90, 20.0).passed


def test_scoreboard_counts():
    board = Scoreboard()
    board.add(CheckResult("a", True, ""))
    board.add(CheckResult("b", False, ""))
    board.add(CheckResult("a", True, "again"))  # re-running a check replaces it
    assert board.metrics() == {"checks": 2, "passed": 1, "passed_names": ["a"]}
    assert "1 of 2" in board._repr_html_()


@pytest.mark.notebooks
def test_lab_1_exercise_runs_clean_and_solution_passes_every_check(executed_notebook):
    _, exercise, _ = executed_notebook("labs/01_where_did_the_time_go.ipynb")
    _, solution, _ = executed_notebook("labs/solutions/01_where_did_the_time_go.ipynb")
    assert exercise["checks"] == 4 and exercise["passed"] == 0
    assert solution["checks"] == 4 and solution["passed"] == 4
