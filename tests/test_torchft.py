"""In-job recovery with torchft (``goodputlab run --fault-tolerance torchft``, docs/IN_JOB_RECOVERY.md).

Real runs: a lighthouse and two replica groups of the tiny model, a replica SIGKILLed at fixed
steps, relaunched and healed from its peer. The ledger closes, every socket of the run listens on
loopback (read from ``/proc/net/tcp``), and nothing is left running after success, SIGTERM or
Ctrl-C (read from the process table). The ledger's rule itself is checked on a hand-made log.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest

import goodputlab as gl
from goodputlab import categories as C
from goodputlab.distributed.replica_ledger import job_books, job_ledger, job_per_step, recoveries
from goodputlab.measure import events as E
from goodputlab.measure.events import EventLogWarning, read_events
from goodputlab.engine.torchft_supervision import HEARTBEAT_TIMEOUT_MS
from goodputlab.recovery.control import replica_named
from conftest import chart_rows
from test_listen_loopback import cmdline, descendants, listening_sockets, socket_inodes

torchft = pytest.importorskip("torchft", reason="the ft extra: pip install 'goodputlab[ft]'")

RUN_LIMIT_S = 300
#: how often :func:`_watch` reads the process table and the sockets (about 10 ms of CPU a look on a busy
#: machine): every process it must see (the lighthouse, a replica, a group's torchrun agent, a standby)
#: lives for seconds, so a look every half second sees each of them and every socket it listens on
WATCH_S = 0.5
FT_FLAGS = ["--nproc", "2", "--fault-tolerance", "torchft", "--ckpt-every", "0", "--threads", "1", "--quiet"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _watch(proc: subprocess.Popen, until, every_s: float = WATCH_S) -> tuple[dict, set[int], dict[int, str]]:
    """Follow a live run: (address, port) -> who listened there; the lighthouse's pids; every pid seen (its command)."""
    seen, lighthouses, pids = {}, set(), {}
    deadline = time.monotonic() + RUN_LIMIT_S
    while proc.poll() is None and time.monotonic() < deadline and not until():
        listening = listening_sockets()
        for pid in descendants(proc.pid) - {proc.pid}:
            line = cmdline(pid)
            pids.setdefault(pid, line)
            if "torchft_lighthouse" in line:
                lighthouses.add(pid)
            for inode in socket_inodes(pid):
                if inode in listening:
                    seen.setdefault(listening[inode], line)
        time.sleep(every_s)
    return seen, lighthouses, pids


def _run_to_the_end(cli, cli_env, args: list[str]) -> tuple[dict, set[int], dict[int, str], str]:
    """Run ``goodputlab run ARGS`` watched by :func:`_watch` to its end: what it listened on, the
    lighthouse's pids, every pid seen; and its stderr. Asserts it exited 0."""
    proc = subprocess.Popen([*cli, "run", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env)
    try:
        seen, lighthouses, pids = _watch(proc, lambda: False)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    return seen, lighthouses, pids, stderr


def test_a_two_replica_run_with_kills_heals_closes_its_ledger_listens_on_loopback_and_leaves_nothing(tmp_path, cli, cli_env):
    # 500 steps slowed by 70 ms of sleeping storage (cheap on CPU; each step's all-reduce and quorum is not): a
    # relaunch (3-4 s on a quiet machine) heals well before the next kill and the end, as 1000 steps of 20 ms did
    out, steps = tmp_path / "run", 500
    seen, lighthouses, pids, stderr = _run_to_the_end(
        cli, cli_env, [*FT_FLAGS, "--steps", str(steps), "--kill-at-steps", "80,160", "--io-latency-ms", "70", "--out", str(out)])
    s = json.loads((out / "summary.json").read_text())
    assert s["completed"] and s["failures"] == 2 and s["heals"] == 2, s
    assert s["final_state_sha256"] is not None  # both replicas ended with the same model
    assert abs(sum(s["buckets"].values()) - s["wall_s"]) <= 0.01 * s["wall_s"]
    for r in ("0", "1"):  # each replica's own timeline covers the wall too
        assert sum(s["replicas"][r].values()) == pytest.approx(s["wall_s"], rel=1e-9)
    assert s["buckets"][C.DEGRADED] > 0 and s["buckets"][C.CHECKPOINT_RESTORE] > 0 and s["buckets"][C.RESTART] == 0
    # the survivors lose no work: a try whose all-reduce failed keeps its gradient, reduced again over the
    # next quorum (a compute marked reused), never computed twice nor rolled back
    computes = [e for e in map(json.loads, (out / "events.jsonl").read_text().splitlines()) if e["kind"] == "compute"]
    assert s["lost_work_survivors_s"] == 0, s["lost_work_survivors_s"]
    assert len([e for e in computes if not e.get("reused")]) <= 2 * steps + s["failures"]  # a kill's cut step, redone
    # what the survivors do pay: a quorum that waits for the lighthouse to drop the dead group (its 1 s
    # heartbeat timeout), booked straggler_wait, reported per kill and survivor
    waits = s["survivor_quorum_waits_s"]
    assert len(waits) == 2 and all(w > 0.5 * HEARTBEAT_TIMEOUT_MS / 1000 for w in waits), waits
    assert sum(waits) <= 2 * s["buckets"][C.STRAGGLER_WAIT]
    # every socket of the run listened on loopback, the lighthouse's among them
    assert lighthouses and any("torchft_lighthouse" in who for who in seen.values()), seen
    assert any("ft_worker" in who for who in seen.values()), seen
    outside = {a: who for a, who in seen.items() if not ipaddress.ip_address(a[0]).is_loopback}
    assert not outside, f"listening beyond loopback: {outside}"
    assert not [p for p in pids if _alive(p)], "a replica or the lighthouse outlived the run"
    # `goodputlab report` reads the job's books, degraded time included
    shown = subprocess.run([*cli, "report", str(out)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert any(line.split()[:1] == [C.DEGRADED] for line in shown.stdout.splitlines()), shown.stdout
    # the timeline (gl.load_run(...).ledger and its chart) books by the job's rules too: it agrees with the summary
    run = gl.load_run(out)
    ledger = run.ledger
    assert ledger.wall_s == s["wall_s"] and len(ledger.failure_times) == 2 and ledger.completed
    assert ledger.buckets == pytest.approx(s["buckets"], abs=1e-9)
    strips = {}
    for seg in ledger.segments:
        strips.setdefault(seg.strip, C.empty_buckets())[seg.category] += seg.duration
    assert set(strips) == {"replica 0", "replica 1"}
    for r in ("0", "1"):  # each strip is that replica's own books, its degraded time in it
        assert strips[f"replica {r}"] == pytest.approx(s["replicas"][r], abs=1e-9)
    # per_step: each replica's rows; every step survived once per replica at most, and in at least one replica
    survived = [(r["replica"], r["step"]) for r in run.per_step() if r["survived"]]
    assert len(survived) == len(set(survived)) and {step for _, step in survived} == set(range(steps))
    recorded = gl.experiments.in_job.record({"torchft": run})["runs"]["torchft"]  # chapter 11's, from the ledger
    for r, timeline in recorded["timelines"].items():
        assert sum(b - a for a, b, c in gl.experiments.in_job.stretches(timeline) if c == C.DEGRADED) == pytest.approx(
            s["replicas"][r][C.DEGRADED], abs=0.01)
    bars = [row for row in chart_rows(run.timeline_chart()) if "category" in row]
    assert {row["strip"] for row in bars} == set(strips)
    # the chart merges segments narrower than half a pixel into the one before them (charts/runs.py), so a
    # degraded stretch may absorb the healed replica's first tiny steps: its bars hold at least the books'
    # degraded time, less the tiny degraded segments it could have merged away
    min_s = s["wall_s"] / 680 / 2
    lost = sum(seg.duration for seg in ledger.segments if seg.category == C.DEGRADED and seg.duration < min_s)
    drawn = sum(row["seconds"] for row in bars if row["category"] == C.DEGRADED)
    assert drawn >= 2 * s["buckets"][C.DEGRADED] - lost - 0.01, (drawn, s["buckets"][C.DEGRADED])
    assert {row["strip"] for row in bars if row["category"] == C.DEGRADED} >= {k for k, b in strips.items() if b[C.DEGRADED] > min_s}


def test_torchfts_own_failed_step_computes_the_survivors_step_again(tmp_path, cli, cli_env):
    """``--ft-failed-step recompute``: as torchft's OptimizerWrapper makes a loop do, a survivor whose all-reduce
    failed keeps nothing and computes the step again, so its failed try is lost work (the default reuses it)."""
    out = tmp_path / "run"
    # two kills: one that struck while the survivor waited in a quorum would leave it no failed try to compute again
    done = subprocess.run([*cli, "run", *FT_FLAGS, "--steps", "200", "--kill-at-steps", "60,130", "--io-latency-ms", "20",
                           "--ft-failed-step", "recompute", "--out", str(out)], capture_output=True, text=True,
                          env=cli_env, timeout=RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["completed"] and s["failures"] == 2 and s["config"]["ft_failed_step"] == "recompute"
    events = read_events(out / "events.jsonl")
    steps = [e for e in events if e["kind"] in (E.W_COMPUTE, E.W_STEP_END) and e["attempt"] == 0]  # first launches
    failed = [e for e in steps if e["kind"] == E.W_STEP_END and not e["committed"]]
    assert failed and not any(e["grad_kept"] for e in failed)  # nothing kept for the retry...
    assert not any(e.get("reused") for e in steps)  # ...which computed the step again
    for e in failed:  # the failed step's compute comes again in the same replica
        assert sum(1 for x in steps if x["kind"] == E.W_COMPUTE and x["step"] == e["step"]
                   and x["replica"] == e["replica"]) >= 2
    # the survivors' failed tries are lost work: more than none, less than a few steps' compute
    computes = [r["compute_s"] for r in gl.load_run(out).per_step() if r["survived"]]
    assert 0 < s["lost_work_survivors_s"] < 10 * max(computes), (s["lost_work_survivors_s"], max(computes))


def test_replica_groups_of_two_ranks_each_a_torchrun_job_heal_a_killed_group_and_end_with_one_model(tmp_path, cli, cli_env):
    """2 groups x 2 ranks (``--group-size 2``): a kill ends a whole group (its torchrun agent and both ranks);
    the group relaunches as a new torchrun job and each of its ranks heals from the same rank of the peer
    group. The steps are slowed by sleeping storage (cheap on CPU, where each step's four ranks, quorum and
    all-reduces are not) so the relaunch heals well before the end: 130 steps of 350 ms, as long as 300 of 150 ms."""
    out = tmp_path / "run"
    seen, lighthouses, pids, stderr = _run_to_the_end(
        cli, cli_env, [*FT_FLAGS, "--group-size", "2", "--steps", "130", "--kill-at-steps", "10", "--io-latency-ms", "350", "--out", str(out)])
    s = json.loads((out / "summary.json").read_text())
    assert s["completed"] and s["failures"] == 1 and s["heals"] == 1, s
    assert (s["replica_groups"], s["group_size"], s["world_size"]) == (2, 2, 4)
    assert abs(sum(s["buckets"].values()) - s["wall_s"]) <= 0.01 * s["wall_s"]
    assert s["buckets"][C.DEGRADED] > 0 and s["buckets"][C.CHECKPOINT_RESTORE] > 0 and s["lost_work_survivors_s"] == 0
    # both ranks of the relaunched group healed from the peer group, at the same step
    ranks = out / "ranks"
    healed = [e for p in ("events-replica1.jsonl", "events-replica1-rank1.jsonl")
              for e in map(json.loads, (ranks / p).read_text().splitlines()) if e["kind"] == "restored"]
    assert len(healed) == 2 and healed[0]["step"] == healed[1]["step"] == s["heal_steps"][0], healed
    # the four ranks ended with the same weights (the summary's hash is set only when every rank's agrees)
    finishes = [json.loads(line) for p in ranks.glob("events-replica*.jsonl") for line in p.read_text().splitlines()
                if '"finish"' in line]
    assert len({f["final_state_sha256"] for f in finishes}) == 1 and len(finishes) >= 4
    assert s["final_state_sha256"] == finishes[0]["final_state_sha256"]
    # each group was a torchrun job (an agent and its ranks) and every socket of the run listened on loopback
    assert sum("torch.distributed.run" in who for who in pids.values()) >= 3, pids  # 2 groups, then the relaunch
    outside = {a: who for a, who in seen.items() if not ipaddress.ip_address(a[0]).is_loopback}
    assert lighthouses and not outside, f"listening beyond loopback: {outside}"
    assert not [p for p in pids if _alive(p)], "a rank, a group's torchrun or the lighthouse outlived the run"


def test_a_run_stopped_after_a_hot_spare_took_over_leaves_no_replica_and_no_lighthouse(tmp_path, cli, cli_env):
    """SIGTERM once a replica killed at step 30 was handed to a hot spare (a standby replica process, set up
    beforehand) and healed from its peer, with the next standby waiting. (Ctrl-C: the checkpoint test below.)"""
    out = tmp_path / "run"
    proc = subprocess.Popen([*cli, "run", *FT_FLAGS, "--steps", "100000", "--hot-spare", "--kill-at-steps", "30", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env)

    def logs() -> str:
        return "".join(p.read_text() for p in (out / "ranks").glob("events-replica*.jsonl")) if (out / "ranks").is_dir() else ""

    def spare_healed_and_next_waits() -> bool:
        # a heal after the kill (attempt >= 1): a replica that joined the first quorum late also heals from its
        # peer, at attempt 0 (in CI beside two other test jobs), before any kill; and the next standby launched
        supervisor = out / "ranks" / "supervisor.jsonl"
        with warnings.catch_warnings():  # a replica may be writing its last line: read_events skips it, warning
            warnings.simplefilter("ignore", EventLogWarning)
            healed = any(e["kind"] == E.M_RESTORED and e["attempt"] >= 1
                         for p in (out / "ranks").glob("events-replica*.jsonl") for e in read_events(p))
        return healed and supervisor.is_file() and supervisor.read_text().count('"standby_spawned"') >= 2

    try:
        _, lighthouses, pids = _watch(proc, spare_healed_and_next_waits)
        assert spare_healed_and_next_waits() and lighthouses, "the run did not start training, heal a replica from the spare and launch the next"
        more = descendants(proc.pid) - {proc.pid}  # the pids once training (the next standby among them)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert not [p for p in set(pids) | more if _alive(p)], "a replica, a standby or the lighthouse outlived the run"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"].startswith("interrupted")
    (recovery,) = summary["recoveries"]
    assert recovery["hot"] and recovery["heal_s"] is not None and recovery["away_s"] > 0, recovery
    assert '"activate"' in logs() and summary["heals"] == 1


def test_without_torchft_a_run_says_how_to_install_it_in_one_line(tmp_path, cli_env):
    code = ("import sys; sys.modules['torchft'] = None; from goodputlab.cli import main; "
            f"sys.exit(main(['run', *{FT_FLAGS!r}, '--steps', '10', '--out', {str(tmp_path / 'run')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'goodputlab[ft]'" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()  # refused before the folder was claimed


def test_the_ledger_books_a_missing_replica_as_degraded_and_its_heal_as_a_restore():
    def ev(t, kind, attempt=0, step=None, **kw):
        return {"t": t, "attempt": attempt, "step": step, "kind": kind, **kw}

    supervisor = [ev(0.0, "start"), ev(4.0, "failure", replica=1, replica_attempt=0), ev(10.0, "end", completed=True)]
    survivor = [ev(1.0, "init"), ev(2.0, "compute", step=0), ev(3.0, "step_end", step=0, committed=True),
                ev(3.5, "compute", step=1), ev(4.5, "step_end", step=1, committed=False),  # its peer died
                ev(4.6, "compute", step=1), ev(9.0, "step_end", step=1, committed=True), ev(9.5, "exit")]
    victim = [ev(1.0, "init"), ev(2.0, "compute", step=0), ev(3.0, "step_end", step=0, committed=True),
              ev(3.5, "compute", step=1),  # killed at 4.0 in this step
              ev(5.0, "init", attempt=1), ev(7.0, "restore", attempt=1, step=0), ev(7.5, "restored", attempt=1, step=1),
              ev(8.0, "compute", attempt=1, step=1),
              ev(9.0, "step_end", attempt=1, step=1, committed=True), ev(9.5, "exit", attempt=1)]
    books = job_books(supervisor, {0: survivor, 1: victim}, 2)
    b, r0, r1 = books["buckets"], books["replicas"]["0"], books["replicas"]["1"]
    assert sum(b.values()) == pytest.approx(10.0) and books["wall_s"] == 10.0
    assert r1[C.DEGRADED] == pytest.approx(3.0)  # killed at 4, its relaunch set up until its heal at 7
    assert r1[C.CHECKPOINT_RESTORE] == pytest.approx(1.0) and r1[C.LOST_WORK] == pytest.approx(0.5)
    assert r0[C.LOST_WORK] == pytest.approx(1.0) and r0[C.DEGRADED] == 0  # the uncommitted try of step 1
    assert r0[C.PRODUCTIVE] == pytest.approx(1.0 + 4.4) and r0[C.STARTUP] == pytest.approx(2.0)
    assert b[C.DEGRADED] == pytest.approx(1.5) and books["lost_work_survivors_s"] == pytest.approx(0.5)
    assert recoveries(supervisor, {0: survivor, 1: victim}) == [
        {"replica": 1, "attempt": 1, "hot": False, "away_s": pytest.approx(3.0), "heal_s": pytest.approx(0.5)}]
    # the job's events.jsonl (the merge marks each replica's events) gives the same books as a timeline
    merged = sorted(supervisor + [{**e, "replica": r} for r, evs in ((0, survivor), (1, victim)) for e in evs], key=lambda e: e["t"])
    ledger = job_ledger(merged, 2)
    assert ledger.buckets == pytest.approx(b) and ledger.failure_times == [4.0] and ledger.completed
    degraded = [(seg.strip, seg.start, seg.end) for seg in ledger.segments if seg.category == C.DEGRADED]
    assert degraded == [("replica 1", 4.0, 5.0), ("replica 1", 5.0, 7.0)]
    # per step, per replica (RunResult.per_step of a torchft job): the survivor's two tries of step 1 are one row,
    # its failed try lost; the victim's cut step 1 lost, its healed launch's step 1 the one that survived
    rows = {(r["replica"], r["attempt"], r["step"]): r for r in job_per_step(merged, 2)}
    assert set(rows) == {(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1), (1, 1, 1)}
    assert rows[(0, 0, 1)]["compute_s"] == pytest.approx(1.0 + 4.4) and rows[(0, 0, 1)]["survived"]
    assert not rows[(1, 0, 1)]["survived"] and rows[(1, 0, 1)]["compute_s"] == pytest.approx(0.5)
    assert rows[(1, 1, 1)]["survived"] and rows[(1, 1, 1)]["compute_s"] == pytest.approx(1.0)
    assert rows[(0, 0, 0)]["survived"] and rows[(0, 0, 0)]["compute_s"] == pytest.approx(1.0)


def test_a_survivor_keeps_the_gradient_of_a_try_whose_all_reduce_failed():
    def ev(t, kind, step=None, **kw):
        return {"t": t, "attempt": 0, "step": step, "kind": kind, **kw}

    supervisor = [ev(0.0, "start"), ev(4.0, "failure", replica=1, replica_attempt=0), ev(7.0, "end", completed=True)]
    survivor = [ev(1.0, "init"), ev(3.5, "compute", step=1), ev(3.9, "sync_wait", step=1, failed=True),
                ev(4.5, "step_end", step=1, committed=False, grad_kept=True), ev(4.5, "sync_wait", step=1),
                ev(5.5, "compute", step=1, reused=True), ev(5.6, "step_end", step=1, committed=True), ev(6.0, "exit")]
    mine = job_books(supervisor, {0: survivor, 1: []}, 2)["replicas"]["0"]
    assert mine[C.LOST_WORK] == 0 and mine[C.PRODUCTIVE] == pytest.approx(0.4 + 0.1)  # its gradient and the retry's reduce
    assert mine[C.STRAGGLER_WAIT] == pytest.approx(0.6 + 1.0)  # the failed all-reduce, then the quorum without its peer
    recomputed = [*survivor[:5], ev(5.0, "compute", step=1), ev(5.6, "step_end", step=1, committed=True), ev(6.0, "exit")]
    assert job_books(supervisor, {0: recomputed, 1: []}, 2)["replicas"]["0"][C.LOST_WORK] == pytest.approx(0.4)


def test_a_standby_learns_its_replica_group_from_the_control_pipe():
    assert replica_named(["inject", "replica 3"]) == 3
    with pytest.raises(ValueError, match="replica <r>"):
        replica_named(["go 2"])


def test_a_stopped_torchft_run_resumes_from_its_checkpoint_to_the_uninterrupted_runs_weights(tmp_path, cli, cli_env):
    """``--ckpt-every 10``: one replica group saves every 10 committed steps (booked ``checkpoint_save``); a run
    stopped with Ctrl-C after its first checkpoint (leaving nothing running) continues with ``--resume``, every group restoring it
    (booked ``checkpoint_restore``), and ends bit-exact with a run never stopped. Without kills: a kill makes
    a torchft run's model depend on how many steps trained degraded, which wall time decides
    (docs/IN_JOB_RECOVERY.md), so two runs with the same kills do not end bit-exact, resumed or not."""
    flags = ["--nproc", "2", "--fault-tolerance", "torchft", "--threads", "1", "--steps", "40", "--ckpt-every", "10",
             "--io-latency-ms", "50"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    done = subprocess.run([*cli, "run", *flags, "--quiet", "--out", str(whole)], capture_output=True, text=True, env=cli_env, timeout=RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen([*cli, "run", *flags, "--quiet", "--out", str(stopped)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=cli_env)
    try:  # Ctrl-C once the first checkpoint is committed: nothing of the run may outlive it
        # (looked for often: the run is 40 short steps, and must still be running when the signal comes)
        _, lighthouses, pids = _watch(proc, lambda: any((stopped / "ckpt").glob("step-*")), every_s=0.2)
        assert lighthouses, "the run did not start"
        more = descendants(proc.pid) - {proc.pid}
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert not [p for p in set(pids) | more if _alive(p)], "a replica or the lighthouse outlived the run"
    first = json.loads((stopped / "summary.json").read_text())
    assert not first["completed"] and first["checkpoints"] >= 1 and first["stop_reason"] == "interrupted"
    resumed = subprocess.run([*cli, "run", "--resume", str(stopped), "--quiet"], capture_output=True, text=True, env=cli_env, timeout=RUN_LIMIT_S)
    assert resumed.returncode == 0, resumed.stderr
    w, s = (json.loads((d / "summary.json").read_text()) for d in (whole, stopped))
    assert w["checkpoints"] == 3 and w["buckets"][C.CHECKPOINT_SAVE] > 0  # after steps 10, 20, 30: one group each time
    assert s["completed"] and s["resumed_from_step"] >= 10 and s["buckets"][C.CHECKPOINT_RESTORE] > 0
    restored = [e for e in map(json.loads, (stopped / "events.jsonl").read_text().splitlines()) if e["kind"] == "restored"]
    assert len(restored) == 2 and {e["ckpt_step"] for e in restored} == {s["resumed_from_step"]}  # both groups, no heal
    assert s["heals"] == 0 and abs(sum(s["buckets"].values()) - s["wall_s"]) <= 0.01 * s["wall_s"]
    assert s["final_state_sha256"] is not None and s["final_state_sha256"] == w["final_state_sha256"]
