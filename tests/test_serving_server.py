"""The model server for real: KV-cache decoding against full recompute, continuous batching,
and both modes' worker processes on one workload. Structure and invariants only: no assertion
depends on how fast this machine is."""

import time

import pytest
import torch

from goodputlab.errors import ConfigError
from goodputlab.serving import SLO, poisson_workload
from goodputlab.serving import engine as E
from goodputlab.serving import kv
from goodputlab.serving.cluster import ServerConfig, ServingCluster
from goodputlab.serving.workload import SERVING_PRESETS

PRESET = SERVING_PRESETS["tiny"]
MIX = "8-40/4-24"  # short requests: the tests stay fast
SLO_LOOSE = SLO(10_000, 1_000)  # every request has time to finish, however busy the machine


@pytest.fixture(scope="module")
def model():
    # one torch thread, as in the workers: on a busy 2-core machine two threads spin against each other
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield kv.build_model(PRESET, seed=0)
    torch.set_num_threads(threads)


def test_prefill_matches_the_training_forward(model):
    prompt = torch.randint(0, 64, (37,), generator=torch.Generator().manual_seed(1))
    cache = kv.new_cache(PRESET, 2)
    logits = kv.prefill(model, prompt, cache, row=1)
    full, _ = model(prompt[None])
    torch.testing.assert_close(logits, full[0, -1], rtol=1e-5, atol=1e-5)
    assert cache[:, :, 0].abs().sum() == 0 and cache[:, :, 1, :, :, :37].abs().sum() > 0  # only its row was written


def test_batched_kv_decode_equals_full_recompute_with_joins_and_leaves(model):
    """Sequences of different lengths share a batch, one joins mid-way and one leaves (its row is
    reused): every step's logits equal a full recompute of that sequence, and greedy tokens match."""
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, 64, (n,), generator=gen) for n in (5, 23, 61, 12)]
    wants = [12, 6, 9, 10]  # output tokens: the fourth joins at step 3, then the second leaves (its row refilled)
    batch = E.Batch(model, PRESET, rows=4)
    clock = time.monotonic
    seqs = []
    for i in range(3):
        seqs.append(batch.prefill(E.Job(i, 0.0, prompts[i], wants[i]), clock))
    steps = 0
    while batch.seqs:
        if steps == 3:
            seqs.append(batch.prefill(E.Job(3, 0.0, prompts[3], wants[3]), clock))
            assert seqs[-1].joined_running == 3
        # the logits the batched step will use, checked against a full forward of each sequence
        tokens = torch.tensor([s.last for s in batch.seqs])
        lengths = torch.tensor([s.length for s in batch.seqs])
        logits = kv.decode(model, batch.cache.clone(), tokens, lengths)
        for b, s in enumerate(batch.seqs):
            full, _ = model(torch.cat([prompts[s.job.id], torch.tensor(s.tokens)])[None])
            torch.testing.assert_close(logits[b], full[0, -1], rtol=1e-4, atol=1e-4)
        batch.step(clock)
        steps += 1
    for s, prompt, n in zip(seqs, prompts, wants):
        assert len(s.tokens) == n
        assert s.tokens == kv.generate_reference(model, prompt, n)


def check_records(m, workload):
    """Invariants of a served measurement: all tokens, in order, after arrival."""
    by_id = {r.id: r for r in m.records}
    assert sorted(by_id) == [r.id for r in workload.requests]
    for req in workload.requests:
        r = by_id[req.id]
        assert r.finished and len(r.token_times_s) == len(r.tokens) == req.output_len
        # an arrival goes out as t0 + a on the monotonic clock and back as (t0 + a) - t0: it keeps t0's absolute
        # rounding (7e-12 s at 18 hours of uptime), which a relative tolerance on a 2.5-microsecond arrival is not
        assert r.arrival_s == pytest.approx(req.arrival_s, rel=1e-6, abs=1e-6) and r.prompt_len == req.prompt_len
        assert r.arrival_s <= r.token_times_s[0] <= r.token_times_s[-1]  # TTFT >= 0, first token <= completion
        assert all(a < b for a, b in zip(r.token_times_s, r.token_times_s[1:]))
        assert r.ttft_s >= 0 and r.tpot_s >= 0 and r.latency_s >= r.ttft_s
    return by_id


def joined_mid_batch(m) -> bool:
    """Some request's first decode step came after another's (on the same worker) and before that
    other's last token: it joined a batch that was already decoding, which then went on."""
    for a in m.records:
        for b in m.records:
            if a.id != b.id and a.worker == b.worker and a.token_times_s[1] < b.token_times_s[1] < a.token_times_s[-1]:
                return True
    return False


def test_colocated_engine_in_process(model):
    workload = burst(14, seed=5)
    jobs = E.jobs_from([(r.id, r.arrival_s, r.prompt, r.output_len) for r in workload.requests], t0 := time.monotonic())
    engine = E.ColocatedEngine(model, PRESET, max_batch=4, prefill_token_budget=64)
    records, spans = engine.run(jobs, t0, horizon=t0 + 60)
    from goodputlab.serving.slo import RequestRecord, measure_records

    m = measure_records([RequestRecord.from_dict(r) for r in records], SLO_LOOSE, 60, 0.4, 60, "colocated")
    by_id = check_records(m, workload)
    assert joined_mid_batch(m) and any(r["joined_running"] > 0 for r in records)
    for req in workload.requests[:6]:  # the full recompute is slow; the first requests already shared batches
        assert list(by_id[req.id].tokens) == kv.generate_reference(model, torch.as_tensor(req.prompt), req.output_len)
    kinds = {s[0] for s in spans}
    assert kinds == {"prefill", "decode"}
    assert sum(s[3] for s in spans if s[0] == "prefill") == workload.prompt_tokens()
    assert all(0 <= s[1] <= s[2] for s in spans)
    assert max(s[3] for s in spans if s[0] == "decode") == 4  # the batch fills, and never holds more


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def burst(n: int, seed: int):
    """``n`` requests arriving within a fraction of a millisecond: however fast the machine, later ones
    find the batch full and join it between decode steps, while requests with longer answers run on."""
    return poisson_workload(50_000, n / 50_000, MIX, seed=seed, min_requests=n)


@pytest.fixture(scope="module")
def both_modes():
    """The same workload served by each mode's real worker processes (started in parallel)."""
    workload = burst(24, seed=11)
    servers = {mode: ServingCluster(mode=mode, model="tiny", max_batch=8, transfer_rows=3) for mode in ("colocated", "disaggregated")}
    # colocated: two workers of 4 rows each; disaggregated: a decode worker of 8 rows fed through 3 transfer rows
    try:
        for s in servers.values():
            s.launch()
        for s in servers.values():
            s.wait_ready()
        results = {mode: s.measure(workload, SLO_LOOSE) for mode, s in servers.items()}
        pids = {mode: s.pids for mode, s in servers.items()}
        infos = {mode: s.workers for mode, s in servers.items()}
    finally:
        for s in servers.values():
            s.close()
    return workload, results, pids, infos


def test_both_modes_serve_every_request_and_agree_on_every_token(both_modes, model):
    workload, results, _, infos = both_modes
    colocated, disaggregated = results["colocated"], results["disaggregated"]
    for m in results.values():
        check_records(m, workload)
        assert m.attainment == 1.0 and m.requests == len(workload) and m.exact_for
    for a, b in zip(colocated.records, disaggregated.records):
        assert a.tokens == b.tokens  # same weights, greedy: the KV hand-over loses nothing
    for a, req in list(zip(colocated.records, workload.requests))[-4:]:  # ... and both equal a full recompute
        assert list(a.tokens) == kv.generate_reference(model, torch.as_tensor(req.prompt), req.output_len)
    for mode, workers in infos.items():
        assert len(workers) == 2 and all(w["threads"] == 1 for w in workers)
        assert len({w["params"] for w in workers}) == 1


def test_colocated_splits_requests_and_batches_continuously(both_modes):
    _, results, _, _ = both_modes
    m = results["colocated"]
    assert {r.worker for r in m.records} == {"colocated-0", "colocated-1"}
    assert joined_mid_batch(m)
    traces = m.info["traces"]
    assert set(traces) == {"colocated-0", "colocated-1"}
    assert all({s[0] for s in spans} == {"prefill", "decode"} for spans in traces.values())


def test_disaggregated_hands_every_kv_cache_over(both_modes):
    workload, results, _, _ = both_modes
    m = results["disaggregated"]
    assert {r.worker for r in m.records} == {"decode"}
    assert m.info["handoffs"] == len(workload)
    assert m.info["handoff_bytes"] == sum(kv.cache_nbytes(PRESET, r.prompt_len) for r in workload.requests)
    traces = m.info["traces"]
    assert {s[0] for s in traces["prefill"]} == {"prefill"}  # the prefill worker never decodes
    assert {s[0] for s in traces["decode"]} == {"handoff", "decode"}  # and the decode worker never prefills
    assert joined_mid_batch(m)  # sequences join the decode worker's running batch between steps


def test_workers_are_gone_after_close(both_modes):
    _, _, pids, _ = both_modes
    assert all(len(p) == 2 for p in pids.values())
    assert not any(_alive(pid) for p in pids.values() for pid in p)


class StepClock:
    """A clock that advances 1 ms per reading: the horizon falls at a known point of the work."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


def test_requests_cut_off_by_the_horizon_come_back_partial_and_miss(model):
    from multiprocessing import Pipe

    from goodputlab.serving.slo import RequestRecord, measure_records

    work = [(i, 0.0, list(range(5 + i)), 30) for i in range(6)]  # all arrive at once, 30 tokens each
    clock = StepClock()
    engine = E.ColocatedEngine(model, PRESET, max_batch=4, prefill_token_budget=8)
    records, _ = engine.run(E.jobs_from(work, 0.0), 0.0, horizon=0.040, clock=clock)
    m = measure_records([RequestRecord.from_dict(r) for r in records], SLO_LOOSE, 1, 1, 1)
    counts = sorted(len(r.token_times_s) for r in m.records)
    assert m.requests == 6 and m.finished == 0 and m.attainment == 0.0
    assert counts[0] == 0 and 0 < counts[-1] < 30  # two never started (batch full), the rest stopped part-way

    # the same through a prefill and a decode engine joined by a real pipe and a transfer buffer
    transfer = kv.new_cache(PRESET, 6)
    a, b = Pipe()
    _, spans = E.PrefillEngine(model, transfer).run(E.jobs_from(work, 0.0), 0.0, 1e9, a, probe=1)
    assert [s[0] for s in spans] == ["prefill"] * 6
    decode = E.DecodeEngine(model, PRESET, transfer, max_batch=4)
    records, _ = decode.run(6, 0.0, 0.040, b, probe=1, clock=StepClock())
    m = measure_records([RequestRecord.from_dict(r) for r in records], SLO_LOOSE, 1, 1, 1)
    assert m.requests == 6 and m.finished == 0 and decode.handoffs == 4
    assert sorted(len(r.token_times_s) for r in m.records)[:2] == [1, 1]  # waiting to join: the first token only
    assert all(r.tokens == tuple(kv.generate_reference(model, torch.arange(5 + r.id), len(r.tokens))) for r in m.records)


def test_config_errors_name_their_fields():
    for kwargs, field in [(dict(mode="split"), "mode"), (dict(model="huge"), "model"), (dict(max_batch=1), "max_batch"),
                          (dict(threads=0), "threads")]:
        with pytest.raises(ConfigError) as e:
            ServerConfig(**kwargs)
        assert e.value.field == field
    with pytest.raises(ConfigError) as e:
        ServerConfig(model="tiny").check_mix(__import__("goodputlab.serving", fromlist=["parse_mix"]).parse_mix("200-250/10-20"))
    assert e.value.field == "mix"


def test_only_the_colocated_workers_stop_decoding_for_prefills(both_modes):
    from goodputlab.serving.analysis import interference

    _, results, _, _ = both_modes
    colocated, disaggregated = interference(results["colocated"]), interference(results["disaggregated"])
    assert colocated["prefills_interrupting"] > 0 and colocated["stall_seq_s"] > 0
    assert disaggregated["prefills_interrupting"] == 0 and disaggregated["stall_seq_s"] == 0
    for i in (colocated, disaggregated):
        assert i["prefills"] == len(results["colocated"].records) and i["decode_steps"] > 0


def test_a_measurement_abandoned_midway_does_not_confuse_the_next():
    """Ctrl-C in a notebook abandons a measurement while the workers go on serving it; the next
    measurement must skip its late results."""
    import signal
    import threading

    workload = poisson_workload(40, 0.3, MIX, seed=2)
    with ServingCluster(mode="disaggregated", model="tiny", max_batch=8) as server:
        timer = threading.Timer(0.2, lambda: signal.raise_signal(signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            server.measure(poisson_workload(40, 1.5, MIX, seed=1), SLO_LOOSE)
        timer.join()
        # the prefill worker may finish the abandoned measurement and start this one before the
        # decode worker does: its hand-overs must wait for the decode worker, not be dropped
        m = server.measure(workload, SLO_LOOSE)
    assert m.requests == len(workload) and m.attainment == 1.0
    assert [r.prompt_len for r in m.records] == [r.prompt_len for r in workload.requests]
