"""The pure parts of distributed runs: the torchrun command, the batch shards, the straggler, the job's log.

No process is started here (the real 2-process groups are in test_distributed_groups.py
and test_distributed_runs.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goodputlab import categories as C
from goodputlab.measure import events as E
from goodputlab.engine.config import RunConfig
from goodputlab.pipeline.loader import StepSampler
from goodputlab.distributed.joblog import job_events, rank_totals
from goodputlab.distributed.binding import (
    BIND_ENV, LOOPBACK, bind_address, exposure_warning, interface_of, listen_env, listening_socket,
)
from goodputlab.distributed.launch import TorchrunLaunch, check_batch_split, parse_rdzv_endpoint
from goodputlab.distributed.sharding import ShardedStepSampler, shard_bounds
from goodputlab.distributed.straggler import Straggler
from goodputlab.errors import ConfigError
from goodputlab.measure.ledger import build_ledger, summarize
from goodputlab.measure.merge import merge_ranks


# --- the torchrun command -----------------------------------------------------------------------
def test_one_machine_meets_at_a_private_file_and_listens_on_loopback():
    launch = TorchrunLaunch(nproc=2, max_restarts=3, log_dir="/tmp/x", rdzv_timeout_s=2.5)
    cmd = launch.command("py", "goodputlab.distributed.worker", ["--a", "1"], rdzv_file="/tmp/rdzv")
    assert cmd[:3] == ["py", "-m", "torch.distributed.run"] and "--standalone" not in cmd
    joined = " ".join(cmd)
    assert "--rdzv-backend c10d --rdzv-endpoint /tmp/rdzv --rdzv-id goodputlab --rdzv-conf store_type=file,join_timeout=3" in joined
    assert "--local-addr 127.0.0.1" in joined and bind_address(launch) == LOOPBACK
    assert "--nnodes 1 --nproc-per-node 2 --max-restarts 3 --monitor-interval 0.05" in joined
    assert "--log-dir /tmp/x --redirects 3 --tee 3" in joined
    assert cmd[-4:] == ["-m", "goodputlab.distributed.worker", "--a", "1"]
    with pytest.raises(ValueError, match="rdzv_file"):
        launch.command("py", "m", [])


def test_the_listening_environment_names_the_interface_that_holds_the_address():
    env = listen_env(LOOPBACK)
    assert env[BIND_ENV] == LOOPBACK and env["NCCL_SOCKET_IFNAME"] == "=" + env["GLOO_SOCKET_IFNAME"]
    assert interface_of("::1") == interface_of("127.0.0.1") == env["GLOO_SOCKET_IFNAME"]
    with pytest.raises(ValueError, match="no network interface"):
        interface_of("198.51.100.254")  # TEST-NET-2: no interface here holds it
    sock = listening_socket(LOOPBACK, 0)
    try:
        assert sock.getsockname()[0] == LOOPBACK
    finally:
        sock.close()


def test_a_launch_on_several_machines_is_warned_about_and_one_may_name_its_address():
    assert exposure_warning(TorchrunLaunch(nproc=2)) is None
    several = TorchrunLaunch(nproc=2, nnodes=2, rdzv_endpoint="node0:29500", rdzv_timeout_s=7)
    assert bind_address(several) is None  # torch's default: every interface
    line = exposure_warning(several)
    assert "\n" not in line and line.startswith("--nnodes 2: the rendezvous port node0:29500") and "SECURITY.md" in line
    assert "--rdzv-conf join_timeout=7,read_timeout=7" in " ".join(several.command("py", "m", []))
    named = TorchrunLaunch(nproc=2, nnodes=2, rdzv_endpoint="10.0.0.1:29500", bind_host="10.0.0.2")
    assert bind_address(named) == "10.0.0.2" and "--local-addr 10.0.0.2" in " ".join(named.command("py", "m", []))
    static = TorchrunLaunch(nproc=2, nnodes=2, node_rank=1, rdzv_endpoint="h:1", rdzv_timeout_s=9)
    assert "--rdzv-conf timeout=9" in " ".join(static.command("py", "m", []))


def test_several_machines_pass_nnodes_node_rank_and_endpoint_through():
    dynamic = TorchrunLaunch(nproc=8, nnodes=4, rdzv_endpoint="node0:29500", rdzv_id="job7").command("py", "m", [])
    assert "--standalone" not in dynamic
    assert " ".join(dynamic).count("--rdzv-backend c10d --rdzv-endpoint node0:29500 --rdzv-id job7") == 1
    assert "--nnodes 4 --nproc-per-node 8" in " ".join(dynamic)
    fixed = TorchrunLaunch(nproc=8, nnodes=4, node_rank=3, rdzv_endpoint="[fd00::1]:29500").command("py", "m", [])
    assert "--rdzv-backend static --rdzv-endpoint [fd00::1]:29500 --node-rank 3" in " ".join(fixed)
    assert TorchrunLaunch(nproc=8, nnodes=4, rdzv_endpoint="node0:1").world_size == 32


@pytest.mark.parametrize("text, host, port", [("node0:29500", "node0", 29500), ("10.0.0.7:1", "10.0.0.7", 1),
                                               ("[::1]:65535", "::1", 65535), (" a.b-c:80 ", "a.b-c", 80)])
def test_rendezvous_endpoints_parse(text, host, port):
    assert parse_rdzv_endpoint(text) == (host, port)


@pytest.mark.parametrize("text", ["node0", "node0:", ":29500", "node0:0", "node0:65536", "node0:port", "a b:1",
                                  "[::1]29500", "::1:29500", "-node:1", "", "node0:29500:1"])
def test_rendezvous_endpoints_that_do_not_parse_are_refused(text):
    with pytest.raises(ConfigError) as e:
        parse_rdzv_endpoint(text)
    assert e.value.field == "rdzv_endpoint" and "HOST:PORT" in e.value.allowed


@pytest.mark.parametrize("kwargs, field", [
    (dict(nproc=0), "nproc"), (dict(nproc=1025), "nproc"), (dict(nproc=2.0), "nproc"), (dict(nproc=True), "nproc"),
    (dict(nproc=2, nnodes=0), "nnodes"), (dict(nproc=2, nnodes=2), "rdzv_endpoint"),
    (dict(nproc=2, nnodes=2, rdzv_endpoint="h:1", node_rank=2), "node_rank"),
    (dict(nproc=2, node_rank=-1), "node_rank"), (dict(nproc=2, rdzv_endpoint="h"), "rdzv_endpoint"),
    (dict(nproc=2, max_restarts=-1), "max_restarts"),
    (dict(nproc=2, rdzv_endpoint="h:1"), "rdzv_endpoint"),  # one machine meets at a private file
    (dict(nproc=2, nnodes=2, rdzv_endpoint="0.0.0.0:1"), "rdzv_endpoint"),
    (dict(nproc=2, nnodes=2, rdzv_endpoint="[::]:1"), "rdzv_endpoint"),
    (dict(nproc=2, rdzv_timeout_s=0), "rdzv_timeout"), (dict(nproc=2, rdzv_timeout_s=float("nan")), "rdzv_timeout"),
    (dict(nproc=2, rdzv_timeout_s=1e9), "rdzv_timeout"), (dict(nproc=2, bind_host="0.0.0.0"), "bind_host"),
    (dict(nproc=2, bind_host="node0"), "bind_host"),
    (dict(nproc=2, nnodes=2, node_rank=0, rdzv_endpoint="h:1", bind_host="10.0.0.2"), "bind_host"),
])
def test_bad_launches_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as e:
        TorchrunLaunch(**kwargs)
    assert e.value.field == field


def test_the_batch_must_split_evenly_over_the_ranks():
    check_batch_split(16, 4)
    check_batch_split(16, 2, nnodes=8)
    with pytest.raises(ConfigError) as e:
        check_batch_split(16, 3)
    assert e.value.field == "nproc" and e.value.value == 3 and "(1, 2, 4, 8, 16)" in e.value.allowed
    with pytest.raises(ConfigError) as e:
        check_batch_split(16, 17)
    assert "splits the batch of 16" in e.value.allowed


@pytest.mark.parametrize("kwargs, field", [
    (dict(nproc=0), "nproc"), (dict(nproc=32), "nproc"), (dict(nproc=3), "nproc"),
    (dict(nproc=2, ckpt="memory", fault_tolerance="torchft"), "ckpt"), (dict(nproc=2, rdzv_endpoint="nope"), "rdzv_endpoint"),
    (dict(nproc=2, rdzv_timeout=0), "rdzv_timeout"), (dict(nproc=2, rdzv_timeout=float("inf")), "rdzv_timeout"),
    (dict(straggler_rank=0, straggler_prob=0.5), "straggler_rank"),
    (dict(launcher="torchrun", straggler_prob=0.5), "straggler_prob"),
    (dict(nproc=2, straggler_rank=2, straggler_prob=0.5), "straggler_rank"),
    (dict(nproc=2, straggler_rank=1), "straggler_rank"), (dict(nproc=2, straggler_factor=0.5), "straggler_factor"),
    (dict(nproc=2, straggler_prob=-0.1), "straggler_prob"), (dict(nproc=2, straggler_prob=1.5), "straggler_prob"),
])
def test_run_configurations_refuse_what_a_distributed_run_cannot_do(kwargs, field):
    with pytest.raises(ConfigError) as e:
        RunConfig(**kwargs)
    assert e.value.field == field


def test_a_distributed_configuration_round_trips():
    c = RunConfig(nproc=2, straggler_rank=1, straggler_factor=3.0, straggler_prob=0.5, ckpt="async")
    assert RunConfig.from_dict(c.to_dict()) == c


# --- the batch shards ----------------------------------------------------------------------------
def test_the_ranks_read_exactly_the_one_process_batch_of_every_step():
    one = list(StepSampler(512, 16, seed=3, start_step=0, end_step=70))  # 32 steps an epoch: crosses two epochs
    for world in (1, 2, 4, 16):
        shards = [list(ShardedStepSampler(512, 16, 3, 0, 70, r, world)) for r in range(world)]
        for s, request in enumerate(one):
            parts = [shards[r][s] for r in range(world)]
            assert all(p.step == request.step for p in parts)
            assert [i for p in parts for i in p.indices] == request.indices  # in rank order, nothing repeated or skipped
            assert all(len(p.indices) == 16 // world for p in parts)


def test_a_resumed_rank_reads_the_same_shard_of_the_same_steps():
    full = list(ShardedStepSampler(512, 16, 5, 0, 50, 1, 2))
    resumed = list(ShardedStepSampler(512, 16, 5, 37, 50, 1, 2))
    assert resumed == full[37:]
    assert ShardedStepSampler(512, 16, 5, 0, 50, 1, 2).indices_for(40) == full[40].indices


def test_shard_bounds_refuse_what_does_not_split():
    assert shard_bounds(16, 4, 3) == (12, 16)
    for args in ((16, 3, 0), (16, 2, 2), (16, 0, 0)):
        with pytest.raises(ValueError):
            shard_bounds(*args)


# --- the straggler -------------------------------------------------------------------------------
def test_only_the_chosen_rank_is_slowed_and_by_its_factor():
    s = Straggler(rank=1, factor=3.0, prob=1.0)
    assert s.delay_s(1, 5, 0.1) == pytest.approx(0.2) and s.delay_s(0, 5, 0.1) == 0.0
    assert not Straggler().active and Straggler().delay_s(0, 1, 1.0) == 0.0
    assert Straggler(rank=0, factor=1.0, prob=1.0).delay_s(0, 1, 1.0) == 0.0


def test_a_share_of_the_steps_is_slowed_the_same_steps_on_every_restart():
    s = Straggler(rank=0, factor=2.0, prob=0.25, seed=9)
    slowed = [step for step in range(4000) if s.slows(0, step)]
    assert 0.22 < len(slowed) / 4000 < 0.28
    assert slowed == [step for step in range(4000) if Straggler(rank=0, factor=2.0, prob=0.25, seed=9).slows(0, step)]
    assert slowed != [step for step in range(4000) if Straggler(rank=0, factor=2.0, prob=0.25, seed=10).slows(0, step)]


def test_every_rank_may_straggle_on_draws_of_its_own():
    s = Straggler(rank=None, factor=2.0, prob=0.1, seed=4)
    per_rank = [{step for step in range(3000) if s.slows(r, step)} for r in range(4)]
    assert all(0.08 < len(x) / 3000 < 0.12 for x in per_rank)
    assert len(per_rank[0] & per_rank[1]) < 0.03 * 3000  # independent: about 1% of steps slow on both
    union = set().union(*per_rank)
    assert 0.30 < len(union) / 3000 < 0.39  # 1 - 0.9^4 = 34% of steps have a slow rank


# --- the job's event log ---------------------------------------------------------------------------
def ev(t, kind, attempt=0, step=None, **f):
    return {"t": t, "attempt": attempt, "step": step, "kind": kind, **f}


def rank_step(t, step, compute, wait, attempt=0, loss=1.0, samples=(), data=0.0, optimizer=0.01):
    """One rank's step: data_wait, compute, sync_wait, optimizer compute, step_end (seconds)."""
    t_c = t + data
    return [
        ev(t, E.W_DATA_WAIT, attempt, step),
        ev(t_c, E.W_COMPUTE, attempt, step),
        ev(t_c + compute, E.W_SYNC_WAIT, attempt, step),
        ev(t_c + compute + wait, E.W_COMPUTE, attempt, step),
        ev(t_c + compute + wait + optimizer, E.W_STEP_END, attempt, step, loss=loss, samples=list(samples)),
    ]


def test_the_wait_for_a_slow_rank_is_booked_as_straggler_wait():
    # rank 1 computes 0.3 s a step, rank 0 0.1 s; the all-reduce itself takes 0.02 s
    r0 = [ev(0.0, E.W_INIT), ev(0.5, E.W_WARMUP)]
    r1 = [ev(0.0, E.W_INIT), ev(0.5, E.W_WARMUP)]
    t = 1.0
    for s in range(3):
        r0 += rank_step(t, s, 0.1, 0.22, loss=2.0, samples=(0, 1))
        r1 += rank_step(t, s, 0.3, 0.02, loss=4.0, samples=(2, 3))
        t += 0.4
    for r in (r0, r1):
        r += [ev(t, E.W_EXIT), ev(t + 0.1, E.SUP_END, completed=True, clean=True)]
    merged = merge_ranks({0: r0, 1: r1})
    ledger = build_ledger(merged)
    assert sum(ledger.buckets.values()) == pytest.approx(ledger.wall_s, abs=1e-9)
    assert ledger.buckets[C.STRAGGLER_WAIT] == pytest.approx(3 * 0.2)  # slowest minus fastest compute
    assert ledger.buckets[C.PRODUCTIVE] == pytest.approx(3 * (0.1 + 0.02 + 0.01))  # fastest compute, the transfer, the optimizer
    ends = [e for e in merged if e["kind"] == E.W_STEP_END]
    assert [e["loss"] for e in ends] == [3.0, 3.0, 3.0] and ends[0]["samples"] == [0, 1, 2, 3]
    waits = [e for e in merged if e["kind"] == E.W_SYNC_WAIT]
    assert len(waits) == 3 and all(e["waiting_for"] == 1 for e in waits)


def test_a_rank_late_because_of_its_data_is_not_a_straggler():
    # both compute 0.2 s; rank 1 waits 0.15 s for its data first, so rank 0 waits for it in the all-reduce
    r0 = [ev(0.0, E.W_INIT)] + rank_step(1.0, 0, 0.2, 0.17)
    r1 = [ev(0.0, E.W_INIT)] + rank_step(1.0, 0, 0.2, 0.02, data=0.15)
    for r in (r0, r1):
        r += [ev(1.6, E.W_EXIT), ev(1.7, E.SUP_END, completed=True, clean=True)]
    ledger = build_ledger(merge_ranks({0: r0, 1: r1}))
    assert ledger.buckets[C.DATA_WAIT] == pytest.approx(0.15)
    assert ledger.buckets[C.STRAGGLER_WAIT] == pytest.approx(0.0, abs=1e-9)
    assert ledger.buckets[C.PRODUCTIVE] == pytest.approx(0.2 + 0.02 + 0.01)


def test_the_final_hash_is_the_ranks_when_they_agree():
    def one(sha):
        return [ev(0.0, E.W_INIT), ev(1.0, E.M_FINISH, step=1, final_state_sha256=sha, final_loss=1.0),
                ev(1.0, E.W_EXIT), ev(1.1, E.SUP_END, completed=True, clean=True)]

    same = merge_ranks({0: one("ab" * 32), 1: one("ab" * 32)})
    assert next(e for e in same if e["kind"] == E.M_FINISH)["final_state_sha256"] == "ab" * 32
    differ = merge_ranks({0: one("ab" * 32), 1: one("cd" * 32)})
    assert next(e for e in differ if e["kind"] == E.M_FINISH)["final_state_sha256"] is None


def test_the_job_log_puts_the_supervisor_around_the_ranks_and_closes():
    sup = [ev(0.0, E.SUP_START), ev(0.01, E.SUP_SPAWN), ev(2.05, E.SUP_FAILURE, cause="poisson", rank=1),
           ev(2.9, E.SUP_SPAWN, attempt=1), ev(5.0, E.SUP_TEARDOWN, attempt=1),
           ev(5.01, E.SUP_END, attempt=1, completed=True, reason="completed", resume_step=4)]
    ranks = {}
    for r in (0, 1):
        evs = [ev(1.0, E.W_INIT), ev(1.2, E.W_WARMUP, step=0)]
        evs += rank_step(1.3, 0, 0.2, 0.05)[1:] + [ev(1.6, E.W_CKPT_SAVE, step=0)]
        evs += [ev(1.7, E.M_CKPT_COMMIT, ckpt_step=1)] if r == 0 else []
        evs += rank_step(1.8, 1, 0.2, 0.05)  # killed in step 2 (rank 0 is stopped a little later)
        evs += [ev(2.08 if r == 0 else 2.05, E.W_DATA_WAIT, step=2)]
        evs += [ev(3.0, E.SUP_RESTART_DELAY, attempt=1), ev(3.1, E.W_INIT, attempt=1), ev(3.5, E.W_RESTORE, attempt=1),
                ev(3.6, E.M_RESTORED, attempt=1, ckpt_step=1), ev(3.6, E.W_WARMUP, attempt=1, step=1)]
        t = 3.7
        for s in (1, 2, 3):
            evs += rank_step(t, s, 0.2, 0.05, attempt=1)
            t += 0.3
        evs += [ev(t, E.M_FINISH, attempt=1, step=4, final_state_sha256="ee" * 32, final_loss=0.5), ev(t, E.W_EXIT, attempt=1)]
        ranks[r] = evs
    job = job_events(sup, ranks)
    assert job[0]["kind"] == E.SUP_START and job[-1]["kind"] == E.SUP_END
    assert sum(1 for e in job if e["kind"] == E.SUP_SPAWN) == 1  # torchrun's relaunch is the ranks' business
    failure = next(e for e in job if e["kind"] == E.SUP_FAILURE)
    assert failure["attempt"] == 0 and failure["rank"] == 1
    s = summarize(job, {"steps": 4})
    ledger = build_ledger(job)
    assert sum(ledger.buckets.values()) == pytest.approx(ledger.wall_s, abs=1e-9) and ledger.wall_s == pytest.approx(5.01)
    assert s["completed"] and s["failures"] == 1 and s["attempts"] == 2
    assert s["final_state_sha256"] == "ee" * 32 and s["steps_executed"] == 5  # steps 0 and 1, then 1, 2 and 3 again
    assert ledger.buckets[C.RESTART] == pytest.approx((3.1 - 2.05) + (3.5 - 3.1) + (3.7 - 3.6))
    assert ledger.buckets[C.LOST_WORK] > 0 and ledger.buckets[C.STARTUP] == pytest.approx(1.3)
    assert rank_totals(ranks[0])[E.W_SYNC_WAIT] == pytest.approx(5 * 0.05)


def test_an_attempt_killed_as_it_started_is_still_one_attempt_of_the_job():
    # each rank wrote only its init before the kill: too little to overlap in time, numbered alike by torchrun
    sup = [ev(0.0, E.SUP_START), ev(0.0, E.SUP_SPAWN), ev(1.5, E.SUP_FAILURE, cause="poisson", rank=0),
           ev(3.0, E.SUP_TEARDOWN, attempt=1), ev(3.0, E.SUP_END, attempt=1, completed=True, reason="completed", resume_step=1)]
    ranks = {r: [ev(1.0 + 0.05 * r, E.W_INIT), ev(2.0, E.W_INIT, attempt=1), ev(2.2, E.W_WARMUP, attempt=1, step=0)]
             + rank_step(2.3, 0, 0.1, 0.05, attempt=1)[1:]
             + [ev(2.8, E.M_FINISH, attempt=1, step=1, final_state_sha256="aa" * 32, final_loss=1.0), ev(2.8, E.W_EXIT, attempt=1)]
             for r in (0, 1)}
    s = summarize(job_events(sup, ranks), {"steps": 1})
    assert s["attempts"] == 2 and s["failures"] == 1 and s["completed"]


@pytest.mark.parametrize("field, value", [("hot_spare", True), ("failure_mode", "hang"), ("ckpt_omit", ("rng",)),
                                          ("hang_timeout", 5.0)])
def test_one_process_recovery_settings_are_refused_under_torchrun(field, value):
    RunConfig(**{field: value})  # one process: recovery's
    for torchrun in (dict(nproc=2), dict(launcher="torchrun")):
        with pytest.raises(ConfigError) as e:
            RunConfig(**torchrun, **{field: value})
        assert e.value.field == field and "under torchrun" in e.value.allowed


def test_a_straggling_rank_is_slowed_on_the_steps_a_one_process_straggler_is():
    from goodputlab.recovery.inject import StragglerSchedule

    RunConfig(straggler_prob=0.5)  # one process slows its own steps
    one = StragglerSchedule(seed=3, prob=0.3, factor=2.0)
    rank = Straggler(rank=1, factor=2.0, prob=0.3, seed=3)
    assert [s for s in range(500) if rank.slows(1, s)] == one.slowed_steps(500)
    assert rank.delay_s(1, next(s for s in range(500) if one.slow(s)), 0.25) == one.extra_s(0.25)


def test_the_ram_tier_recording_of_chapter_4_says_which_copy_each_kill_restored_from(tmp_path):
    """book/data/emulated_ram_tier_run.json (benchmarks/ram_tier_nodes.py --record): the process kill read each
    node's own RAM, the node kill's rank its neighbour's copy, sync the disk; a file of another shape is refused."""
    from goodputlab.errors import RunFileError
    from goodputlab.experiments import emulated_nodes as en

    book = Path(__file__).resolve().parents[1] / "book" / "data" / en.RAM_RECORDING_NAME
    facts = en.ram_tier_facts(en.load_ram_tier_recording(book))
    assert set(facts["memory_process"]["sources"].values()) == {"memory"}
    assert sorted(facts["memory_node"]["sources"].values()) == ["memory", "peer"]
    assert set(facts["sync_node"]["sources"].values()) == {"disk"} and facts["bit_exact"]
    # each kill lost the steps since its last RAM copy, one copy every 2 steps (where it landed is the timing), and the
    # node kill far fewer than the disk would have cost
    mn, mp = facts["memory_node"], facts["memory_process"]
    assert 0 <= mn["lost_steps"] <= 2 and 0 <= mp["lost_steps"] <= 2
    assert mn["lost_steps"] < mn["after_step"] - facts["memory_node_disk_step"]
    assert facts["memory_node_disk_step"] == 0  # no disk copy before the end: without the peer, from scratch
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "ram_tier", "version": 1, "runs": {}}')
    with pytest.raises(RunFileError, match="not a version-1 recording"):
        en.load_ram_tier_recording(bad)
