"""Real distributed runs: the supervisor starts torchrun with 2 gloo ranks, kills ranks, torchrun restarts them.

Two runs of the same work (tiny preset, 24 steps, a checkpoint every 8):

* ``straggled`` (through the command line): no failure, async sharded checkpoints, rank 1 a straggler on half its steps
  (it only sleeps, so the training is the failure-free training);
* ``killed``: sync sharded checkpoints (committed before the next step, so the resume points are
  known), one rank SIGKILLed after steps 10 and 18 (chosen at random, seeded); torchrun restarts
  the group twice and it resumes from steps 8 and 16.

They must end bit-identical. Then the killed run's folder is resumed by one process, 4 steps more, in the
same event log.
"""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from goodputlab import categories as C
from goodputlab.measure import events as E
from goodputlab.engine.config import RunConfig
from goodputlab.distributed.joblog import RANKS_DIR
from goodputlab.measure.events import read_events
from goodputlab.measure.ledger import build_ledger
from goodputlab.engine.supervisor import run_supervised

WORK = dict(nproc=2, steps=24, ckpt_every=8, seed=5, restart_delay=0.0, threads=1)
RUN_LIMIT_S = 240  # a hung run is stopped (SIGTERM: the supervisor cleans up) instead of hanging the suite


def supervised(config: RunConfig, out, **kwargs) -> dict:
    timer = threading.Timer(RUN_LIMIT_S, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        return run_supervised(config, out, **kwargs)
    finally:
        timer.cancel()


@pytest.fixture(scope="module")
def straggled(tmp_path_factory, cli, cli_env):
    """Through the command line, as a user runs it: goodputlab run --nproc 2 ... --json."""
    import subprocess

    out = tmp_path_factory.mktemp("straggled")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in WORK.items()]
    proc = subprocess.Popen([*cli, "run", *flags, "--ckpt", "async", "--straggler-rank", "1", "--straggler-factor", "3",
                             "--straggler-prob", "0.5", "--quiet", "--json", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env)
    try:
        stdout, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired:  # SIGTERM, not SIGKILL: the supervisor then stops torchrun and the ranks
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        pytest.fail(f"goodputlab run --nproc 2 did not finish in {RUN_LIMIT_S} s")
    assert proc.returncode == 0, stderr
    return out, json.loads(stdout)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    out = tmp_path_factory.mktemp("killed")
    return out, supervised(RunConfig(**WORK, ckpt="sync", kill_at_steps=(10, 18)), out)


def closes(summary) -> bool:
    return sum(summary["buckets"].values()) == pytest.approx(summary["wall_s"], rel=1e-6)


def test_a_two_rank_run_records_its_ranks_and_one_job_ledger(straggled):
    out, s = straggled
    assert s["completed"] and s["launcher"] == "torchrun" and s["world_size"] == 2
    assert s["steps_completed"] == 24 and s["steps_executed"] == 24 and s["failures"] == 0
    assert closes(s) and s["final_state_sha256"]
    assert sorted(p.name for p in (out / RANKS_DIR).iterdir()) == ["events-rank0.jsonl", "events-rank1.jsonl", "supervisor.jsonl"]
    events = read_events(out / "events.jsonl")
    assert events[0]["kind"] == E.SUP_START and events[-1]["kind"] == E.SUP_END
    ledger = build_ledger(events)
    assert ledger.wall_s == pytest.approx(s["wall_s"]) and ledger.buckets == pytest.approx(s["buckets"])
    # the job's loss of a step is the mean of its ranks' losses, its samples the whole batch
    ends = [e for e in events if e["kind"] == E.W_STEP_END]
    assert {e["step"] for e in ends} == set(range(24)) and all(len(e["samples"]) == 16 for e in ends)
    assert s["checkpoints"] == 3 and json.loads((out / "config.json").read_text())["nproc"] == 2


def test_the_wait_for_the_straggler_is_measured_and_booked(straggled):
    out, s = straggled
    rank1 = read_events(out / RANKS_DIR / "events-rank1.jsonl")
    slowed = [e for e in rank1 if e["kind"] == E.W_SYNC_WAIT and e["slowed_s"] > 0]
    assert 4 <= len(slowed) <= 20  # about half its steps
    assert all(e["slowed_s"] == pytest.approx(2.0 * e["own_s"], abs=1e-5) for e in slowed)
    # the healthy rank sat in the all-reduce at least as long as the straggler slept, step by step
    rank0 = read_events(out / RANKS_DIR / "events-rank0.jsonl")
    waited = {e["step"]: nxt["t"] - e["t"] for e, nxt in zip(rank0, rank0[1:]) if e["kind"] == E.W_SYNC_WAIT}
    assert sum(waited[e["step"]] for e in slowed) >= 0.5 * sum(e["slowed_s"] for e in slowed)
    assert s["buckets"][C.STRAGGLER_WAIT] >= 0.5 * sum(e["slowed_s"] for e in slowed)
    # on the slowed steps the healthy rank waited for the straggler, not the other way round. (Not the totals
    # over all steps: on a loaded machine the healthy rank's own delays add to the straggler's waits, and a
    # busy clean-clone run had rank 0's total 0.60 s against rank 1's 0.64 s.)
    waited1 = {e["step"]: nxt["t"] - e["t"] for e, nxt in zip(rank1, rank1[1:]) if e["kind"] == E.W_SYNC_WAIT}
    assert sum(waited[e["step"]] for e in slowed) > sum(waited1[e["step"]] for e in slowed)


def test_killed_ranks_resume_through_torchrun_bit_exactly(straggled, killed):
    out, s = killed
    assert s["completed"] and closes(s)
    assert s["failures"] == 2 and s["attempts"] == 3
    assert s["final_state_sha256"] == straggled[1]["final_state_sha256"]
    sup = read_events(out / RANKS_DIR / "supervisor.jsonl")
    kills = [e for e in sup if e["kind"] == E.SUP_FAILURE]
    assert [e["cause"] for e in kills] == ["kill_at_step 10", "kill_at_step 18"] and {e["rank"] for e in kills} <= {0, 1}
    events = read_events(out / "events.jsonl")
    restored = [e for e in events if e["kind"] == E.M_RESTORED and e["rank"] == 0]
    assert [e["ckpt_step"] for e in restored] == [8, 16] and all(e["written_by"] == 2 for e in restored)
    # steps 8-9 and 16-17 ran twice at least; how many more ran before a kill landed depends on the
    # machine's speed (the supervisor kills when it sees step 10 or 18), so the count is held to the log
    executions = {(e["attempt"], e["step"]) for e in events if e["kind"] == E.W_COMPUTE}
    assert s["steps_executed"] == len(executions) >= 28
    assert s["buckets"][C.RESTART] > 0 and s["buckets"][C.LOST_WORK] > 0 and s["buckets"][C.CHECKPOINT_RESTORE] > 0
    assert not list((out / "ckpt").glob(".tmp-*"))


def test_a_two_rank_checkpoint_resumes_in_one_process(killed):
    """--resume in one process continues the job's event log (goodputlab.recovery.resume) as its next attempts."""
    out, before = killed
    with _no_skips():
        s = supervised(RunConfig(**{**WORK, "nproc": 1, "steps": 28}), out, resume=True)
    assert s["completed"] and s["steps_completed"] == 28 and closes(s)
    events = read_events(out / "events.jsonl")
    new = [e for e in events if e["attempt"] >= before["attempts"]]
    restored = [e for e in new if e["kind"] == E.M_RESTORED]
    assert [e["ckpt_step"] for e in restored] == [24]
    assert sorted(e["step"] for e in new if e["kind"] == E.W_COMPUTE) == [24, 25, 26, 27]
    assert s["failures"] == before["failures"] and s["wall_s"] > before["wall_s"]


class _no_skips:
    """No checkpoint is skipped as damaged."""

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        self.caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)
        assert not [w for w in self.caught if "skipping damaged" in str(w.message)]


def _rank_pids(out) -> list[int]:
    pids = []
    for log in (out / RANKS_DIR).glob("events-rank*.jsonl"):
        pids += [e["pid"] for e in read_events(log) if e["kind"] == E.W_INIT]
    return pids


def _processes_naming(path) -> list[int]:
    """Live processes whose command line names ``path`` (torchrun's agent and the ranks get it as --run-dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if str(path).encode() in f.read() and _alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_the_failure_budget_stops_the_job_and_leaves_no_process(tmp_path):
    s = supervised(RunConfig(**{**WORK, "steps": 400}, kill_at_steps=(3,), max_failures=0), tmp_path)
    assert not s["completed"] and "failure budget exhausted" in s["stop_reason"] and s["failures"] == 1
    assert closes(s) and s["world_size"] == 2
    pids = _rank_pids(tmp_path)
    assert len(pids) == 2 and not any(_alive(p) for p in pids) and not _processes_naming(tmp_path)


def test_sigterm_stops_torchrun_and_every_rank(tmp_path):
    import subprocess
    import sys
    import time

    code = ("import sys; from goodputlab.engine.config import RunConfig; from goodputlab.engine.supervisor import run_supervised; "
            f"run_supervised(RunConfig(nproc=2, steps=5000, ckpt_every=0, threads=1), sys.argv[1])")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    log = tmp_path / RANKS_DIR / "events-rank1.jsonl"
    while time.monotonic() < deadline and not (log.exists() and '"step_end"' in log.read_text()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "RunInterrupted" in err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted by SIGTERM" and not summary["completed"]
    pids = _rank_pids(tmp_path)
    assert len(pids) == 2 and not any(_alive(p) for p in pids) and not _processes_naming(tmp_path)


def test_the_command_line_reports_a_two_rank_run(straggled, cli, cli_env):
    import subprocess

    out, s = straggled
    assert s["parallelism"] == "ddp" and s["config"]["straggler_rank"] == 1
    rep = subprocess.run([*cli, "report", str(out)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert rep.returncode == 0 and "straggler_wait" in rep.stdout and "waiting in the gradient all-reduce" in rep.stdout
    assert f"final_state_sha256 {s['final_state_sha256']}" in rep.stdout
