"""Checks of Lab 6, "Recovery done right" (``labs/06_recovery.ipynb``).

What a checkpoint must hold, read off the final models of runs whose checkpoints left a part out; the
heartbeat watchdog's timeout read off a run's events; a cold restart measured from the
raw log against a hot spare; what a hot spare is worth on a cluster (Daly's model); and
which failure modes need no restart. The run-based checks work on real runs and on the
recorded ones alike.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..recovery.modes import MODES
from ..theory.closed_forms import daly_goodput, expected_goodput
from .checks import AnswerError, CheckResult, as_number, check, diagnose, direction, near

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.api import RunResult


def _as_names(answer: Any, names: Iterable[str], what: str) -> set[str]:
    """A collection of names, each one of ``names``; :class:`AnswerError` otherwise."""
    names = list(names)
    if isinstance(answer, str):
        raise AnswerError(f"expected a set of {what} such as {{{names[0]!r}}}, got the string {answer!r}")
    if not isinstance(answer, Iterable) or isinstance(answer, Mapping):
        raise AnswerError(f"expected a set of {what}, got {answer!r} (a {type(answer).__name__})")
    given = set()
    for name in answer:
        if not isinstance(name, str) or name.strip().lower() not in names:
            raise AnswerError(f"{name!r} is not one of {', '.join(map(repr, names))}")
        given.add(name.strip().lower())
    return given


#: Why a restart from a checkpoint that leaves a part out is a different run.
_DIFFERS = {
    "optimizer": "without its moments the optimizer takes full-size steps after the restart",
    "data": "without its position the loader starts the data over: samples come twice, others never",
    "rng": "other random draws after the restart (dropout masks) make another model, if only a little",
}


@check("the same model", "compare each run's summary['final_state_sha256'] with the failure-free run's")
def check_same_model(answer: Any, runs: Mapping[str, RunResult]) -> CheckResult:
    """Exercise 1: the restarted runs (every run in ``runs`` but ``"reference"``) that end with exactly the
    failure-free run's model; an empty set if none does."""
    name = check_same_model.check_name
    restarted = [n for n in runs if n != "reference"]
    given = _as_names(answer, restarted, "run names")
    ref = runs["reference"].summary["final_state_sha256"]
    expected = {n for n in restarted if runs[n].summary["final_state_sha256"] == ref}
    if given == expected:
        return CheckResult(name, True, "only a complete checkpoint makes a failure cost nothing but time")
    wrong = sorted(given - expected)
    if wrong:
        return CheckResult(name, False, "; ".join(f"{n} ends with another model: {_DIFFERS.get(n, 'its checkpoint lacked a part')}"
                                                  for n in wrong))
    return CheckResult(name, False, "a run is missing: a restart from a complete checkpoint resumes exactly; compare "
                                    "every run's hash, not only the ones that left something out")


def _attempt_events(result: RunResult, attempt: int = 0) -> list[dict]:
    return sorted((e for e in result.events if e["attempt"] == attempt), key=lambda e: e["t"])


def watched_gaps(result: RunResult, attempt: int = 0) -> list[float]:
    """Seconds between consecutive events of ``attempt`` while the watchdog watches it (first compute to exit)."""
    events = _attempt_events(result, attempt)
    first = next(i for i, e in enumerate(events) if e["kind"] == "compute")
    last = max((i for i, e in enumerate(events) if e["kind"] == "exit"), default=len(events) - 1)
    watched = events[first:last + 1]
    return [b["t"] - a["t"] for a, b in zip(watched, watched[1:])]


@check("the watchdog's floor", "the longest gap between two events of the worker, from its first compute to its exit, in seconds")
def check_longest_silence(answer_s: Any, reference: RunResult) -> CheckResult:
    """Exercise 2: the longest silence of a healthy worker once the watchdog is armed (seconds)."""
    name = check_longest_silence.check_name
    value = as_number(answer_s, "seconds")
    gaps = watched_gaps(reference)
    expected = max(gaps)
    if near(value, expected, 1e-3, 1e-6):
        return CheckResult(name, True, f"{1000 * value:.1f} ms: a timeout must stay well above the longest legitimate "
                                       "silence, or a slow step is taken for a hang")
    events = _attempt_events(reference)
    all_gaps = [b["t"] - a["t"] for a, b in zip(events, events[1:])]
    mistake = diagnose(value, [
        (max(all_gaps), "that gap is in the start-up: the watchdog is armed at the first compute (start-up and restore "
                        "depend on the machine, not on a fault)"),
        (sum(gaps) / len(gaps), "that is the mean gap; a healthy worker must never be silent for the timeout, so it is "
                                "the *longest* gap that matters"),
        (1000 * expected, "that looks like milliseconds: give seconds"),
    ], 1e-3)
    return CheckResult(name, False, mistake or f"{value:g} s is {direction(value, expected)}")


def kill_to_first_step_s(result: RunResult) -> list[float]:
    """For each failure: seconds from the ``failure`` event to the next attempt's first ``compute``."""
    events = sorted(result.events, key=lambda e: e["t"])
    out = []
    for f in (e for e in events if e["kind"] == "failure"):
        first = next((e for e in events if e["attempt"] == f["attempt"] + 1 and e["kind"] == "compute"), None)
        if first is not None:
            out.append(first["t"] - f["t"])
    return out


@check("a cold restart", "for each failure event, the next attempt's first compute minus the failure's t; their mean, in seconds")
def check_cold_restart_s(answer_s: Any, cold: RunResult) -> CheckResult:
    """Exercise 3: the mean seconds from a failure to the restarted worker's first computed step."""
    name = check_cold_restart_s.check_name
    value = as_number(answer_s, "seconds")
    times = kill_to_first_step_s(cold)
    if not times:
        return CheckResult(name, False, "this run has no failure followed by a restarted step; use the cold run")
    expected = sum(times) / len(times)
    if near(value, expected, 0.005, 1e-6):
        return CheckResult(name, True, f"{value:.2f} s from the failure to training again, most of it a new process "
                                       "importing PyTorch and building the model")
    events = sorted(cold.events, key=lambda e: e["t"])
    fails = [e for e in events if e["kind"] == "failure"]

    def first_after(f: dict, kind: str) -> float:
        e = next((e for e in events if e["attempt"] == f["attempt"] + 1 and e["kind"] == kind), None)
        return math.nan if e is None else e["t"] - f["t"]

    mistake = diagnose(value, [
        (sum(first_after(f, "restore") for f in fails) / len(fails),
         "that stops at the restore (where the ledger's restart bucket ends too); the restarted worker still restores "
         "and warms up its pipeline before its first step"),
        (1000 * expected, "that looks like milliseconds: give seconds"),
    ], 0.005)
    return CheckResult(name, False, mistake or f"{value:g} s is {direction(value, expected)}")


def spare_gain(interval_s: float, save_s: float, cold_s: float, hot_s: float, mtbf_s: float, model=daly_goodput) -> float:
    """Goodput with a hot spare minus goodput with cold restarts (a share), in ``model``."""
    return model(interval_s, save_s, hot_s, mtbf_s) - model(interval_s, save_s, cold_s, mtbf_s)


@check("a hot spare on a cluster", "daly_goodput with the spare's restart minus daly_goodput with the cold one, a share")
def check_spare_gain(answer: Any, interval_s: float = 1800.0, save_s: float = 30.0, cold_s: float = 600.0,
                     hot_s: float = 60.0, mtbf_s: float = 3 * 3600.0) -> CheckResult:
    """Exercise 4: the goodput a hot spare adds (a share: 0.05 is five points) on a cluster, in Daly's model."""
    name = check_spare_gain.check_name
    value = as_number(answer, "a difference of goodputs, a share")
    expected = spare_gain(interval_s, save_s, cold_s, hot_s, mtbf_s)
    cold = daly_goodput(interval_s, save_s, cold_s, mtbf_s)
    if near(value, expected, 0.01):
        return CheckResult(name, True, f"{value:.1%} more of the cluster's time trains: on 16,384 GPUs about "
                                       f"{value * 16384 * 24:,.0f} GPU-hours a day")
    mistake = diagnose(value, [
        (spare_gain(interval_s, save_s, cold_s, hot_s, mtbf_s, model=expected_goodput),
         "that is the first-order model; use Daly's (gl.daly_goodput), which also charges failures during restarts"),
        (100 * expected, "that looks like percentage points: give a share of 1 (five points are 5 / 100)"),
        (daly_goodput(interval_s, save_s, hot_s, mtbf_s) / cold, "that is the ratio of the two goodputs; the question asks for their difference"),
        (daly_goodput(interval_s, save_s, hot_s, mtbf_s), "that is the goodput with the spare; subtract the goodput with cold restarts"),
        (-expected, "negative: the spare's restart is the shorter one, so its goodput is the higher"),
    ], 0.01)
    return CheckResult(name, False, mistake or f"{value:.4f} is {direction(value, expected)}")


def no_restart_modes() -> set[str]:
    """The failure modes the job survives without a restart (:data:`goodputlab.recovery.modes.MODES`)."""
    return {name for name, mode in MODES.items() if not mode.fatal}


@check("failures without a restart", "the modes after which the same process trains on: a set of mode names")
def check_no_restart_modes(answer: Any) -> CheckResult:
    """Exercise 5: the failure modes that need no restart (the process trains on)."""
    name = check_no_restart_modes.check_name
    given = _as_names(answer, MODES, "mode names")
    expected = no_restart_modes()
    if given == expected:
        return CheckResult(name, True, "the process lives and keeps its state: nothing is lost, only the repair is paid")
    fatal = sorted(given - expected)
    if fatal:
        why = {"kill": "a killed process is gone", "hang": "a hung process must be killed and restarted",
               "exception": "the worker exits with the error"}
        return CheckResult(name, False, "; ".join(why.get(m, f"{m} ends the process") for m in fatal) + ": a restart")
    missing = len(expected - given)
    return CheckResult(name, False, f"{missing} more mode{'s' if missing > 1 else ''} let{'' if missing > 1 else 's'} the "
                                    "process train on: which failures are repaired, or reported, without a new process?")


# --- the lab's runs ----------------------------------------------------------------------------------------

#: The recordings of this lab (tools/record_runs.py): a failure-free run, the same job killed once with
#: each part left out of its checkpoints (a hot spare takes over), and killed once with a cold restart.
RUNS = ("reference", "optimizer", "data", "rng", "cold")


def lab_runs(names: Iterable[str] = RUNS, recorded: bool = False, steps: int | None = None,
             kill_at_step: int | None = None) -> dict[str, RunResult]:
    """The lab's runs ``lab06-<name>``: recorded, or real with ``steps`` and the kill at ``kill_at_step``
    (the reference has no kill) instead of the recording's."""
    from .checks import lab_run

    runs = {}
    for name in names:
        changes: dict[str, Any] = {}
        if not recorded and steps is not None:
            changes["steps"] = steps
        if not recorded and kill_at_step is not None and name != "reference":
            changes["kill_at_steps"] = (kill_at_step,)
        runs[name] = lab_run(f"lab06-{name}", recorded=recorded, **changes)
    return runs
