"""The streaming ledger gives what the in-memory ledger gave, on every recorded run and on real
gl.Recorder jobs (tests/data/ledger_corpus: its reference was written by the ledger of ca5bff7),
reads a log in one pass with memory that does not grow with the steps, and reads lines exactly as
``json.loads`` does."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import pytest

import goodputlab as gl
from goodputlab.measure import events as E
from goodputlab.measure.fold import LedgerFold, OutOfOrder
from goodputlab.measure.ledger import summarize
from goodputlab.measure.logread import EventLogError, LogReader, event_batches, parse_event

CORPUS = Path(__file__).resolve().parent / "data" / "ledger_corpus"
sys.path.insert(0, str(CORPUS))
from make_corpus import lab_entry, lab_run, recorded_entry, unpack  # noqa: E402

REFERENCE = json.loads((CORPUS / "reference.json").read_text())


# categories added to the ledger after the reference was taken (at ca5bff7): none of its runs can
# book them, so each must be there at zero
NEW_CATEGORIES = {"degraded"}
# fields added to a per-step row after the reference was taken: each step's end time (issue 46)
NEW_ROW_FIELDS = {"t_end_s"}


def same(want, got, path=""):
    """Equal, floats to 1e-9 (sums taken in another order)."""
    if isinstance(want, dict):
        newer = {k for k in set(got) - set(want) if (k in NEW_CATEGORIES and got[k] == 0) or k in NEW_ROW_FIELDS}
        assert set(want) == set(got) - newer, (path, set(want) ^ set(got))
        for k in want:
            same(want[k], got[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(want) == len(got), (path, len(want), len(got))
        for i, (a, b) in enumerate(zip(want, got)):
            same(a, b, f"{path}[{i}]")
    elif isinstance(want, float) and isinstance(got, float):
        assert math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9), (path, want, got)
    else:
        assert want == got, (path, want, got)


@pytest.mark.parametrize("name", sorted(REFERENCE["jobs"]))
def test_a_recorded_job_gets_the_summary_and_rows_of_the_old_ledger(name, tmp_path):
    folder = unpack(CORPUS / "jobs" / name, tmp_path / name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # steps-backwards warns, as it should
        result = gl.load_run(folder)
        rows = [{k: (round(v, 9) if isinstance(v, float) else v) for k, v in r.items()} for r in result.per_step()]
    want = REFERENCE["jobs"][name]
    same(want["summary"], json.loads(json.dumps(result.summary)))
    same(want["per_step"], rows)
    # the events in memory give the same summary as the stream
    same(json.loads(json.dumps(result.summary)), json.loads(json.dumps(summarize(result.events, result.summary["config"]))))


@pytest.mark.parametrize("name", sorted(REFERENCE["recorded"]))
def test_a_recorded_run_gets_the_summary_rows_and_samples_of_the_old_ledger(name):
    got = recorded_entry(gl.recorded_run(name))
    same(REFERENCE["recorded"][name], json.loads(json.dumps(got)))


@pytest.mark.parametrize("name", sorted(REFERENCE["lab"]))
def test_a_lab_run_gets_the_summary_rows_and_samples_of_the_old_ledger(name, tmp_path):
    events, config = lab_run(CORPUS / "lab" / name)
    want = REFERENCE["lab"][name]
    same(want, json.loads(json.dumps(lab_entry(events, config))))
    # the same log read from a folder without summary.json: the reader's batches, the fold, the summary
    folder = unpack(CORPUS / "lab" / name, tmp_path / name)
    same(want["summary"], json.loads(json.dumps(gl.load_run(folder).summary)))


def _fold_file(path: Path, runs: bool = False) -> LedgerFold:
    fold = LedgerFold()
    for batch in event_batches(path, runs=runs):
        fold.feed(batch)
    return fold


def test_a_restart_from_a_step_no_checkpoint_recorded_takes_a_second_pass(tmp_path):
    folder = unpack(CORPUS / "jobs" / "resume-one-early", tmp_path / "j")
    assert _fold_file(folder / "events.jsonl").result().partial  # one pass cannot split its chunk
    kill_restart = unpack(CORPUS / "jobs" / "kill-restart", tmp_path / "k")
    assert not _fold_file(kill_restart / "events.jsonl").result().partial  # resumed at a checkpoint: one pass


def _synthetic_log(path: Path, steps: int, kill_at: int, every: int) -> None:
    """A recorder's log of ``steps`` steps in two attempts, killed after ``kill_at`` (written with event_line)."""
    t, lines = 0.0, []

    def emit(attempt, step, kind, **f):
        nonlocal t
        t += 0.001
        lines.append(E.event_line(t, attempt, step, kind, f))

    emit(0, None, E.W_INIT, total_steps=steps)
    resume = 0
    for attempt, (first, last) in enumerate([(0, kill_at), (None, steps - 1)]):
        if attempt:
            emit(0, None, E.SUP_FAILURE, cause="killed")
            emit(1, None, E.W_INIT, total_steps=steps)
            first = resume
        for s in range(first, last + 1):
            emit(attempt, s, E.W_DATA_WAIT)
            emit(attempt, s, E.W_COMPUTE)
            emit(attempt, s, E.W_STEP_END, loss=1.0)
            if (s + 1) % every == 0 and s < last:
                emit(attempt, s, E.W_CKPT_SAVE)
                emit(attempt, s, E.M_CKPT_COMMIT, ckpt_step=s + 1)
                resume = s + 1
    emit(1, None, E.SUP_END, completed=True, clean=True, reason="completed")
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize("steps", [2_000, 40_000])
def test_what_the_fold_keeps_grows_with_checkpoints_not_steps(tmp_path, steps):
    every = steps // 20
    _synthetic_log(tmp_path / "events.jsonl", steps, kill_at=steps // 2 + every // 2, every=every)
    fold = _fold_file(tmp_path / "events.jsonl")
    done = fold.result()
    assert not done.partial and done.completed and done.failures == 1
    kept = {a: (len(A.starts), len(A.computed.los), len(A.done.los), len(A.pending)) for a, A in fold.attempts.items()}
    assert kept[0] == (1 + 10, 1, 1, 0)  # a chunk per checkpoint, one range of steps
    assert kept[1][1:] == (1, 1, 0) and kept[1][0] <= 11
    lost_steps = (steps // 2 + every // 2) - (steps // 2) + 1
    assert done.steps_executed == steps + lost_steps
    same(summarize([e for b in event_batches(tmp_path / "events.jsonl") for e in map(_as_dict, b)], {"steps": steps})["buckets"],
         done.buckets)
    # a step's three lines read as columns and booked at once: the same ledger
    fast = _fold_file(tmp_path / "events.jsonl", runs=True)
    same(json.loads(json.dumps({**done.__dict__, "survival": None})), json.loads(json.dumps({**fast.result().__dict__, "survival": None})))
    assert {a: len(A.starts) for a, A in fast.attempts.items()} == {a: len(A.starts) for a, A in fold.attempts.items()}


def _as_dict(ev):
    from goodputlab.measure.logread import as_dict

    return as_dict(ev)


@pytest.mark.parametrize(
    "line",
    [
        b'{"t":12.3456789,"attempt":0,"step":41,"kind":"compute"}',
        b'{"t":0.0,"attempt":3,"step":null,"kind":"warmup"}',
        b'{"t":1.5000000,"attempt":0,"step":7,"kind":"step_end","loss":2.25}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"step_end","loss":1e-05}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"step_end","loss":null}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"step_end","loss":NaN}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"step_end","loss":3}',
        b'{"t":1e-05,"attempt":0,"step":7,"kind":"compute"}',
        b'{"t":-2.5,"attempt":0,"step":7,"kind":"compute"}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"ckpt_commit","ckpt_step":8,"tier":"user"}',
        b'{"t":1.5,"attempt":0,"step":null,"kind":"ckpt_commit","ckpt_step":0,"tier":"ram"}',
        b'{"t":1.5,"attempt":2,"step":null,"kind":"restored","ckpt_step":8,"tier":"user"}',
        b'{"t":1.5,"attempt":0,"step":null,"kind":"compute","ckpt_step":8,"tier":"user"}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"ckpt_commit","ckpt_step":08,"tier":"user"}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"ckpt_commit","ckpt_step":8,"tier":"us\\u0065r"}',
        b'{"t":1.5, "attempt":0,"step":7,"kind":"compute"}',
        b'{"t":1.5,"attempt":0,"step":7,"kind":"compute","t":2.5}',
        b'{"t":12345678901234567.5,"attempt":0,"step":7,"kind":"compute"}',
        b'{"t":1.5,"attempt":0,"step":007,"kind":"compute"}',
        b'{"t":1.5,"attempt":0,"step":null,"kind":"compute"}',
        b'{"t":1.5,"attempt":0,"step":null,"kind":"ckpt_commit"}',
        b'{"t":1.5,"attempt":0,"step":9,"kind":"step_end","loss":1.5e999}',
    ],
)
def test_the_fast_reader_reads_every_line_as_json_loads_does(tmp_path, line):
    path = tmp_path / "events.jsonl"
    path.write_bytes(line + b"\n")
    try:
        want = parse_event(line)
    except ValueError as e:
        with pytest.raises(EventLogError, match="line 1: " + __import__("re").escape(str(e))):
            list(event_batches(path))
        return
    ((got,),) = list(event_batches(path))
    t, attempt, step, kind, fields = got
    assert (t, attempt, step, kind) == (want["t"], want["attempt"], want["step"], want["kind"])
    for k, v in want.items():
        if k not in ("t", "attempt", "step", "kind"):
            assert fields[k] == v or (v != v and fields[k] != fields[k]), k
            assert type(fields[k]) is type(v), k


def test_an_event_earlier_than_the_one_before_is_out_of_order():
    fold = LedgerFold()
    with pytest.raises(OutOfOrder):
        fold.feed([(1.0, 0, None, E.W_INIT, {}), (0.5, 0, None, E.W_WARMUP, {})])


def test_a_log_out_of_time_order_is_sorted_and_gives_the_same_ledger(tmp_path):
    folder = unpack(CORPUS / "jobs" / "kill-restart", tmp_path / "a")
    want = gl.load_run(folder).summary
    lines = (folder / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines[5], lines[6] = lines[6], lines[5]  # two writers' lines crossing, as in a lab run's log
    (folder / "events.jsonl").write_bytes(b"".join(lines))
    got = gl.load_run(folder).summary
    same(json.loads(json.dumps(want)), json.loads(json.dumps(got)))


def test_a_reader_reads_on_from_where_it_stopped(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"t":0.0,"attempt":0,"step":null,"kind":"init"}\n{"t":0.1,"attempt":0,"st')
    reader = LogReader(path)
    assert [e[3] for b in reader.batches(stop_at_partial=True) for e in b] == ["init"]
    with open(path, "ab") as f:
        f.write(b'ep":0,"kind":"compute"}\n')
    assert [e[3] for b in reader.batches(stop_at_partial=True) for e in b] == ["compute"]
    assert reader.lineno == 2 and reader.offset == path.stat().st_size
    reader.close()
