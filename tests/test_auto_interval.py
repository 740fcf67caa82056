"""``--ckpt-every auto``: Daly's interval from the measured save cost and the observed failures.

Unit tests of the estimator (known inputs give Daly's value), the event-log reader,
then a real killed run and the CLI flags of the checkpoint strategies.
"""

import json
import subprocess

import pytest

from goodputlab import theory
from goodputlab.checkpoints.interval import PRIOR_FAILURES, PRIOR_MTBF_S, AutoInterval
from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import EventLogWarning, read_events
from goodputlab.engine.supervisor import run_supervised

from conftest import RESUME_SETTINGS


def test_auto_interval_is_dalys_for_a_known_save_cost_and_failure_rate():
    est = AutoInterval(state_bytes=0)
    for _ in range(50):
        est.observe_save(0.2)
    for k in range(40):
        est.observe_failure(5.0 * k)
    now = 200.0
    mtbf = (PRIOR_FAILURES * PRIOR_MTBF_S + now) / (PRIOR_FAILURES + 40)
    assert est.save_cost_s() == pytest.approx(0.2)
    assert est.mtbf_s(now) == pytest.approx(mtbf)
    assert est.interval_s(now) == pytest.approx(theory.daly_interval(0.2, mtbf))
    # with many failures the prior fades: 1000 failures in 5000 s is an MTBF of 5 s
    for k in range(960):
        est.observe_failure(200 + 5.0 * k)
    assert est.mtbf_s(5000.0) == pytest.approx(5.0, rel=0.01)
    assert est.interval_s(5000.0) == pytest.approx(theory.daly_interval(0.2, 5.0), rel=0.01)
    assert est.due(est.interval_s(5000.0) + 1e-9, 5000.0) and not est.due(0.5 * est.interval_s(5000.0), 5000.0)


def test_auto_interval_prior_and_retuning():
    est = AutoInterval(state_bytes=50_000_000)
    prior = est.interval_s(0.0)
    assert prior == pytest.approx(theory.daly_interval(0.01 + 0.1, PRIOR_MTBF_S))
    est.observe_save(0.001)  # a cheap (async) save: much shorter interval
    assert est.interval_s(0.0) < prior / 5
    assert est.interval_s(600.0) > est.interval_s(0.0)  # surviving 10 minutes without a failure lengthens it
    est.observe_save(1.0)  # saves got slow (e.g. waiting for the previous one): longer again
    assert est.save_cost_s() == pytest.approx(0.3 * 1.0 + 0.7 * 0.001)


def test_auto_interval_reads_failures_and_save_costs_from_the_event_log(tmp_path):
    log = tmp_path / "events.jsonl"
    rows = [
        (0.0, 0, "start"), (0.1, 0, "spawn"), (1.0, 0, "compute"), (1.5, 0, "ckpt_save"), (1.7, 0, "data_wait"),
        (2.0, 0, "ckpt_save"), (2.05, 0, "failure"),  # a save cut short by a kill is not a measurement
        (2.6, 1, "spawn"), (3.0, 1, "ckpt_save"), (3.4, 1, "compute"), (4.0, 1, "failure"),
    ]
    step = {"compute": 0, "data_wait": 1}  # the phases of a step name it
    log.write_text(
        "".join(json.dumps({"t": t, "attempt": a, "step": step.get(k), "kind": k}) + "\n" for t, a, k in rows)
        + '{"t": 4.1, "cut'
    )
    with pytest.warns(EventLogWarning, match="line 12: cut short"):  # killed mid-write: skipped, and said
        est = AutoInterval.from_event_log(log)
    assert est.failure_times == [2.05, 4.0]
    assert est.unexposed_s == pytest.approx(2.6 - 2.05)  # from the first failure to the next launch
    assert est.mtbf_s(4.0) == pytest.approx((PRIOR_FAILURES * PRIOR_MTBF_S + 4.0 - 0.55) / (PRIOR_FAILURES + 2))
    assert est.saves_measured == 2
    assert est.save_cost_s() == pytest.approx(0.3 * 0.4 + 0.7 * 0.2)
    assert AutoInterval.from_event_log(tmp_path / "missing.jsonl").saves_measured == 0


def test_auto_interval_retunes_from_measured_saves_and_failures(tmp_path, clean_run):
    """--ckpt-every auto on a killed run: intervals follow Daly's formula for the estimates, which move."""
    from goodputlab import theory
    from goodputlab.checkpoints.interval import PRIOR_FAILURES, PRIOR_MTBF_S

    # storage latency paces the steps (~50 ms with two loader workers) without changing the data, so the
    # first attempts live long enough for the prior interval (~1.2 s) to come due; the final model is the same
    settings = dict(RESUME_SETTINGS, ckpt="async", ckpt_every="auto", io_latency_ms=100.0, kill_at_steps=(45, 75))
    summary = run_supervised(RunConfig(**settings), tmp_path / "run")
    events = read_events(tmp_path / "run" / "events.jsonl")
    assert summary["completed"] and summary["failures"] == 2
    assert summary["final_state_sha256"] == clean_run[0]["final_state_sha256"]  # where it saves changes nothing

    marks = [e for e in events if e["kind"] == "ckpt_interval"]
    assert {e["attempt"] for e in marks} == {0, 1, 2}
    for e in marks:  # every decision is Daly's interval for the estimates it reports
        # the event log rounds each figure to 6 decimals; with saves of a few ms that rounding alone moves
        # Daly's interval by ~1e-4 relative, so compare with the interval of every value that rounds the same
        # (Daly's interval grows with both the save cost and the MTBF)
        half = 5e-7
        lo = max(0.01, theory.daly_interval(e["save_s"] - half, e["mtbf_s"] - half))
        hi = max(0.01, theory.daly_interval(e["save_s"] + half, e["mtbf_s"] + half))
        assert lo - half <= e["interval_s"] <= hi + half, e
        assert e["failures_seen"] == e["attempt"]  # a worker knows the failures before it started
        # failures strike only while a worker trains (the train clock): from the start and from each
        # failure to the next worker's first step (its `exposed` marker) is not exposed; a span still
        # open at the decision (a worker deciding before its first step) counts once it closes
        def exposed_after(t):
            return next(s["t"] for s in events if s["kind"] == "exposed" and s["t"] >= t)

        unexposed = sum(
            exposed_after(f["t"]) - f["t"]
            for f in [{"t": 0.0}] + [f for f in events if f["kind"] == "failure"]
            if f["t"] < e["t"] and exposed_after(f["t"]) <= e["t"]
        )
        expected_mtbf = (PRIOR_FAILURES * PRIOR_MTBF_S + e["t"] - unexposed) / (PRIOR_FAILURES + e["attempt"])
        assert e["mtbf_s"] == pytest.approx(expected_mtbf, rel=0.05, abs=0.05)
    assert len({round(e["interval_s"], 4) for e in marks}) > 3  # it re-tunes
    first_of_attempt_2 = next(e for e in marks if e["attempt"] == 2)
    assert first_of_attempt_2["save_s"] != marks[0]["save_s"]  # measured save costs carried across the restart
    saves = [e for e in events if e["kind"] == "ckpt_save"]
    assert len(saves) >= 3


def run_cli(cli, env, *args, timeout=300):
    return subprocess.run([*cli, *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.parametrize(
    "args,flag,value",
    [
        (["--ckpt", "lazy"], "--ckpt", "lazy"),
        (["--memory-disk-every", "0"], "--memory-disk-every", "0"),
        (["--ckpt-every", "soon"], "--ckpt-every", "soon"),
    ],
)
def test_bad_checkpoint_flags_exit_2_with_one_line(cli, cli_env, tmp_path, args, flag, value):
    r = run_cli(cli, cli_env, "run", *args, "--out", str(tmp_path / "r"), timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and value in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_cli_runs_the_memory_strategy_with_an_auto_interval(cli, cli_env, tmp_path):
    out = tmp_path / "r"
    r = run_cli(
        cli, cli_env, "run", "--steps", "40", "--ckpt", "memory", "--ckpt-every", "auto",
        "--memory-disk-every", "2", "--ckpt-every-s", "0.05", "--kill-at-steps", "25", "--out", str(out), "--json", "--quiet",
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["completed"] and summary["failures"] == 1
    assert summary["config"]["ckpt"] == "memory" and summary["config"]["ckpt_every"] == "auto"
    events = read_events(out / "events.jsonl")
    assert [e["source"] for e in events if e["kind"] == "restored"] == ["memory"]
    last = [e for e in events if e["kind"] == "ckpt_interval"][-1]
    assert summary["auto_interval"] == {k: last[k] for k in ("interval_s", "save_s", "mtbf_s", "failures_seen")}
    # the table says which interval the run chose, and from what
    from goodputlab.measure.report import breakdown_table

    table = breakdown_table(summary)
    assert f"--ckpt-every auto: last chose {last['interval_s']:.3g} s between saves" in table
    assert f"after {last['failures_seen']} failures" in table


def test_auto_interval_chart_draws_every_decision_the_optimum_and_the_failures():
    from goodputlab.charts.checkpoints import auto_interval_chart

    from conftest import chart_rows

    decisions = [
        {"t": 2.0, "interval_s": 1.5, "mtbf_s": 60.0, "save_s": 0.02, "failures_seen": 0},
        {"t": 3.0, "interval_s": 0.9, "mtbf_s": 20.0, "save_s": 0.02, "failures_seen": 1},
    ]
    rows = chart_rows(auto_interval_chart(decisions, optimum_s=0.6, failure_times=[2.5]))
    assert [r["interval_s"] for r in rows if "interval_s" in r] == [1.5, 0.9]
    assert [r["optimum_s"] for r in rows if "optimum_s" in r] == [0.6]
    assert [r["t"] for r in rows if set(r) == {"t"}] == [2.5]
    assert len(chart_rows(auto_interval_chart(decisions))) == 2  # no optimum, no failures: just the choices


def test_auto_interval_mtbf_estimate_is_honest_after_a_few_failures(tmp_path):
    """Five failures, each 6 s of worker-alive time after its launch, with 0.5 s restarts between:
    the estimate is close to the true 6 s (the prior is worth 6 s of exposure, restarts are not exposed)."""
    rows, t = [(0.0, 0, "start")], 0.0
    for attempt in range(5):
        rows.append((t, attempt, "spawn"))
        t += 6.0
        rows.append((t, attempt, "failure"))
        rows.append((t + 0.01, attempt, "restart_delay"))
        t += 0.5
    rows.append((t, 5, "spawn"))
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps({"t": t, "attempt": a, "step": None, "kind": k}) + "\n" for t, a, k in rows))
    est = AutoInterval.from_event_log(log)
    assert est.unexposed_s == pytest.approx(5 * 0.5)
    assert est.mtbf_s(t) == pytest.approx((PRIOR_FAILURES * PRIOR_MTBF_S + 30.0) / (PRIOR_FAILURES + 5))
    assert 6.0 <= est.mtbf_s(t) <= 7.5
