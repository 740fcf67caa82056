"""The ranks' logs merged as a stream (measure/merge_stream.py) give the job's events of the in-memory
merge (measure/merge.py) event for event, on a real two-rank recording with a kill and on ranks that
straggle, restart out of step, keep other clocks or die mid-attempt; and the stream's memory does not
grow with the steps while the in-memory merge's does."""

from __future__ import annotations

import importlib.util
import sys
import tracemalloc
from pathlib import Path

import pytest

from goodputlab.measure import events as E
from goodputlab.measure.fold import sorted_tuples
from goodputlab.measure.recording import Recording

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "ledger_corpus"
sys.path.insert(0, str(CORPUS))
from make_corpus import unpack  # noqa: E402


def record_two_ranks(run_dir: Path, steps: int, every: int = 250) -> Path:
    """Two ranks of one job recorded in lockstep by one process through gl.Recorder (real files, real
    locks; benchmarks/report_scale.py's ``--ranks`` recording), killed at 60% and resumed."""
    spec = importlib.util.spec_from_file_location("report_scale", ROOT / "benchmarks" / "report_scale.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.make_recording(run_dir, steps, ranks=2, every=every)
    return run_dir


def streamed(run_dir: Path) -> list[tuple]:
    source = Recording(run_dir)._merged_stream()
    assert source is not None, "the logs are in time order: the stream must take them"
    return [ev for batch in source() for ev in batch]


def assert_same_as_in_memory(run_dir: Path) -> list[tuple]:
    got = streamed(run_dir)
    want = sorted_tuples(Recording(run_dir).merged_events())
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a[:4] == b[:4] and a[4] == b[4], (i, a, b)
    return got


def write_ranks(run_dir: Path, ranks: dict[int, list[dict]]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    for r, evs in ranks.items():
        lines = [E.event_line(e["t"], e["attempt"], e["step"], e["kind"],
                              {k: v for k, v in e.items() if k not in ("t", "attempt", "step", "kind")}) for e in evs]
        (run_dir / f"events-rank{r}.jsonl").write_bytes(b"".join(lines))
    return run_dir


def ev(t, kind, attempt=0, step=None, **f):
    return {"t": t, "attempt": attempt, "step": step, "kind": kind, **f}


def rank_step(t, step, compute, wait, attempt=0, loss=1.0, samples=(), data=0.0):
    """One rank's step: data_wait, compute, sync_wait (the all-reduce), the optimizer, step_end."""
    t_c = t + data
    return [ev(t, E.W_DATA_WAIT, attempt, step), ev(t_c, E.W_COMPUTE, attempt, step),
            ev(t_c + compute, E.W_SYNC_WAIT, attempt, step), ev(t_c + compute + wait, E.W_COMPUTE, attempt, step),
            ev(t_c + compute + wait + 0.01, E.W_STEP_END, attempt, step, loss=loss, samples=list(samples))]


def test_a_real_two_rank_recording_with_a_kill_streams_to_the_in_memory_merge(tmp_path):
    got = assert_same_as_in_memory(record_two_ranks(tmp_path / "job", 2400))
    assert sum(1 for e in got if e[3] == E.SUP_FAILURE) == 1 and got[-1][4]["completed"]
    assert sum(1 for e in got if e[3] == E.M_CKPT_COMMIT) == 2400 // 250  # each checkpoint once, both ranks saved it
    ends = [e[4] for e in got if e[3] == E.W_STEP_END]
    assert ends and all(e["loss"] == 1.5 for e in ends)  # the ranks' mean loss reached every step


def test_the_torchrun_job_of_the_ledger_corpus_streams_to_the_in_memory_merge(tmp_path):
    assert_same_as_in_memory(unpack(CORPUS / "jobs" / "two-ranks", tmp_path / "two-ranks"))


def test_stragglers_restarts_out_of_step_other_clocks_and_a_death_stream_alike(tmp_path):
    # rank 1 computes 0.3 s a step, rank 0 0.1 s; both save; rank 1 dies before recording attempt 1,
    # so its numbering lags; rank 2 keeps another clock (t0_unix 5 s later) and saves nothing;
    # the last attempt is killed: no rank closes it
    r = {0: [ev(0.0, E.W_INIT, t0_unix=1000.0)], 1: [ev(0.0, E.W_INIT, t0_unix=1000.0)], 2: [ev(-5.0, E.W_INIT, t0_unix=1005.0)]}
    t = 1.0
    for s in range(4):
        r[0] += rank_step(t, s, 0.1, 0.22, loss=2.0, samples=(0, 1))
        r[1] += rank_step(t, s, 0.3, 0.02, loss=4.0, samples=(2, 3))
        r[2] += rank_step(t - 5.0, s, 0.2, 0.12, loss=3.0, samples=(4, 5), data=0.01)
        t += 0.4
        if s == 1:
            r[0].append(ev(t - 0.05, E.M_CKPT_COMMIT, ckpt_step=2))
            r[1].append(ev(t - 0.04, E.M_CKPT_COMMIT, ckpt_step=2))
    for k in (0, 1):
        r[k].append(ev(t, E.SUP_FAILURE, cause="killed"))
    r[2].append(ev(t - 5.0, E.SUP_FAILURE, cause="killed"))
    t += 1.0
    r[0] += [ev(t, E.W_INIT, 1, t0_unix=1000.0), ev(t + 0.1, E.W_RESTORE, 1), ev(t + 0.2, E.M_RESTORED, 1, ckpt_step=2)]
    r[2] += [ev(t - 5.0, E.W_INIT, 1, t0_unix=1005.0)]
    t += 0.3
    for s in range(2, 5):
        r[0] += rank_step(t, s, 0.1, 0.2, attempt=1, loss=2.0)
        r[2] += rank_step(t - 5.0, s, 0.3, 0.0, attempt=1, loss=3.0)
        t += 0.4
    r[1] += [ev(t, E.W_INIT, 1, t0_unix=1000.0)] + rank_step(t + 0.1, 5, 0.1, 0.0, attempt=1)
    r[0] += rank_step(t + 0.1, 5, 0.1, 0.0, attempt=2)
    job = write_ranks(tmp_path / "job", r)
    got = assert_same_as_in_memory(job)
    assert any(e[3] == E.W_SYNC_WAIT for e in got)  # the wait for the slowest rank was cut out
    assert any(e[3] == E.M_RESTORED for e in got)
    assert got[-1][3] == E.SUP_END and not got[-1][4]["completed"] and got[-1][4]["resume_step"] == 2
    summary = Recording(job).summary()
    assert sum(summary["buckets"].values()) == pytest.approx(summary["wall_s"], rel=1e-9)


def lockstep_job(run_dir: Path, steps: int, every: int = 250, skew: float = 0.0005) -> Path:
    """Two ranks in lockstep (0.1 s a step, rank 1's clock ``skew`` seconds ahead, a checkpoint every
    ``every`` steps), killed at 60% and resumed from the newest checkpoint: the lines gl.Recorder writes,
    at exact times, so that the memory measured depends on the steps alone."""
    kill = int(steps * 0.6) + every // 2
    ranks: dict[int, list[dict]] = {0: [], 1: []}
    for r, evs in ranks.items():
        t = r * skew
        evs.append(ev(t, E.W_INIT, t0_unix=1000.0, total_steps=steps))
        for s in range(kill + 1):
            evs += [ev(t + 0.01, E.W_DATA_WAIT, 0, s), ev(t + 0.02, E.W_COMPUTE, 0, s), ev(t + 0.09, E.W_STEP_END, 0, s, loss=1.0 + r)]
            t += 0.1
            if (s + 1) % every == 0:
                evs += [ev(t, E.W_CKPT_SAVE, 0, s), ev(t + 0.01, E.M_CKPT_COMMIT, 0, s, ckpt_step=s + 1), ev(t + 0.01, E.R_LOOP, 0)]
                t += 0.02
        evs.append(ev(t + 5.0, E.SUP_FAILURE, 0, cause="killed"))
        t += 6.0
        resume = (kill + 1) // every * every
        evs += [ev(t, E.W_INIT, 1, t0_unix=1000.0, total_steps=steps), ev(t + 0.1, E.W_RESTORE, 1),
                ev(t + 0.2, E.M_RESTORED, 1, ckpt_step=resume)]
        t += 0.2
        for s in range(resume, steps):
            evs += [ev(t + 0.01, E.W_DATA_WAIT, 1, s), ev(t + 0.02, E.W_COMPUTE, 1, s), ev(t + 0.09, E.W_STEP_END, 1, s, loss=1.0 + r)]
            t += 0.1
        evs += [ev(t, E.M_FINISH, 1, steps), ev(t + 0.01, E.SUP_END, 1, completed=True, clean=True, reason="completed")]
    return write_ranks(run_dir, ranks)


def merge_peak_bytes(run_dir: Path, in_memory: bool = False) -> int:
    """Peak bytes Python allocated while merging the ranks' logs into the job's events (tracemalloc)."""
    tracemalloc.start()
    try:
        rec = Recording(run_dir)
        if in_memory:
            rec.merged_events()
        else:
            for _ in rec._merged_stream()():
                pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_streams_memory_does_not_grow_with_the_steps(tmp_path, monkeypatch):
    # the reader's blocks of 64 KB (not 1 MB) and batches of 256 events (not 4096), so that both jobs
    # span many of each: what is left is what the merge holds
    monkeypatch.setattr("goodputlab.measure.logread.CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr("goodputlab.measure.merge_stream.BATCH", 256)
    jobs = {steps: lockstep_job(tmp_path / str(steps), steps) for steps in (800, 3200)}
    assert_same_as_in_memory(jobs[800])
    merge_peak_bytes(jobs[800])  # warm: what the first read imports and compiles is not the merge's
    small, large = merge_peak_bytes(jobs[800]), merge_peak_bytes(jobs[3200])
    held = merge_peak_bytes(jobs[3200], in_memory=True)
    print(f"merge peak: {small:,} B at 800 steps, {large:,} B at 3,200; in memory {held:,} B")
    # 4x the steps (and checkpoints): the stream's peak stays flat; the in-memory merge holds every event
    assert large < 1.3 * small, (small, large)
    assert held > 4 * large, (large, held)


def test_what_a_live_log_gains_between_the_two_passes_waits_for_the_next_read(tmp_path):
    job = lockstep_job(tmp_path / "job", 300)
    want = streamed(job)
    source = Recording(job)._merged_stream()  # the first pass: each log scanned
    with open(job / "events-rank0.jsonl", "ab") as f:  # a new attempt begins before the second pass
        f.write(E.event_line(want[-1][0] + 1.0, 2, None, E.W_INIT, {}))
    got = [ev for batch in source() for ev in batch]
    assert [e[:4] for e in got] == [e[:4] for e in want]
    assert streamed(job)[-1][1] == 2  # the next read takes it
