"""Crafted logs against ``goodputlab report`` and ``gl.Recorder``: memory and time bombs, foreign and sparse logs,
extreme numbers, a followed log replaced under the reader (issue 41, items 3, 4, 11 and 15).

Each attack is built for real (real files, a real sparse file, a real rename) and run in a child process,
whose peak memory (``os.wait4``'s ``ru_maxrss``) is set beside the same child's on a genuine log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from goodputlab.measure import fold as F
from goodputlab.measure import fold_limits as L
from goodputlab.measure.recording import MAX_SORTED_EVENTS

INIT = b'{"t":0.0,"attempt":0,"step":null,"kind":"init","recorder":1}\n'
END = '{{"t":{t:.7f},"attempt":{a},"step":null,"kind":"end","completed":true,"clean":true}}\n'


def _write(folder: Path, lines) -> Path:
    folder.mkdir()
    with open(folder / "events.jsonl", "wb") as f:
        f.write(INIT)
        for line in lines:
            f.write(line.encode())
    return folder


def _steps(folder: Path, numbers, end: bool = True) -> Path:
    """Steps ``numbers`` of attempt 0, in that order, three lines each; ``end``: the run completes."""
    def lines():
        t = 0.0
        for s in numbers:
            for kind in ("data_wait", "compute", "step_end"):
                t += 1e-3
                loss = ',"loss":null' if kind == "step_end" else ""
                yield f'{{"t":{t:.7f},"attempt":0,"step":{s},"kind":"{kind}"{loss}}}\n'
        if end:
            yield END.format(t=t + 1, a=0)
    return _write(folder, lines())


def genuine(folder: Path, steps: int) -> Path:
    """A plain job of ``steps`` steps (three lines each), completed."""
    return _steps(folder, range(steps))


def attempt_every_step(folder: Path, attempts: int) -> Path:
    """Every step in an attempt of its own, each step number two past the last (the worst case for survival)."""
    def lines():
        t = 0.0
        for a in range(attempts):
            for kind in ("compute", "step_end"):
                t += 1e-3
                loss = ',"loss":null' if kind == "step_end" else ""
                yield f'{{"t":{t:.7f},"attempt":{a},"step":{2 * a},"kind":"{kind}"{loss}}}\n'
    return _write(folder, lines())


def out_of_order(folder: Path, events: int) -> Path:
    """Steps whose times go back once near the start: the log can only be sorted in memory."""
    def lines():
        yield '{"t":5.0,"attempt":0,"step":null,"kind":"warmup"}\n'
        t = 1.0
        for s in range(events // 3):
            for kind in ("data_wait", "compute", "step_end"):
                t += 1e-3
                loss = ',"loss":null' if kind == "step_end" else ""
                yield f'{{"t":{t:.7f},"attempt":0,"step":{s},"kind":"{kind}"{loss}}}\n'
    return _write(folder, lines())


def skipping_steps(folder: Path, steps: int) -> Path:
    """Step numbers 0, 2, 4, ...: each execution a range of its own."""
    return _steps(folder, range(0, 2 * steps, 2), end=False)


def lone_computes(folder: Path, steps: int) -> Path:
    """Computes that never end, each another step."""
    def lines():
        t = 0.0
        for s in range(steps):
            t += 1e-3
            yield f'{{"t":{t:.7f},"attempt":0,"step":{s},"kind":"compute"}}\n'
            t += 1e-3
            yield f'{{"t":{t:.7f},"attempt":0,"step":null,"kind":"loop"}}\n'
    return _write(folder, lines())


def descending(folder: Path, steps: int) -> Path:
    """Steps written from the highest down, consecutive: once quadratic (a chunk inserted in front per step)."""
    return _steps(folder, range(steps, 0, -1))


def _run_measured(cmd: list[str], timeout: float) -> tuple[int, str, str, float]:
    """Run ``cmd`` and reap it with ``os.wait4``: (exit code, stdout, stderr, peak RSS in MB)."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise AssertionError(f"{cmd} ran past {timeout} s")
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read().decode(), err.read().decode(), usage.ru_maxrss / 1024


def report(*args: str, timeout: float = 240) -> tuple[int, str, str, float]:
    return _run_measured([sys.executable, "-m", "goodputlab.cli", "report", *args], timeout)


@pytest.fixture(scope="module")
def genuine_rss(tmp_path_factory) -> float:
    """Peak RSS (MB) of reporting a genuine 100,000-step job: what a crafted log is held to."""
    folder = genuine(tmp_path_factory.mktemp("genuine") / "job", 100_000)
    code, out, err, rss = report("--json", str(folder))
    assert code == 0 and json.loads(out)["steps_completed"] == 100_000, err
    return rss


# --- memory and time bombs (item 3) ---------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("attack,size,refusal", [
    (attempt_every_step, 100_000, f"more than {L.MAX_ATTEMPTS:,} attempts"),
    (out_of_order, 600_000, f"longer than {MAX_SORTED_EVENTS:,} events"),
    (skipping_steps, 150_000, f"more than {L.MAX_STEP_RANGES:,} runs of consecutive step numbers"),
    (lone_computes, 150_000, f"more than {L.MAX_OPEN:,} steps begun and never ended"),
], ids=["attempt-every-step", "out-of-order", "skipping-steps", "lone-computes"])  # fmt: skip
def test_a_crafted_log_is_refused_in_one_line_in_the_memory_of_a_genuine_one(tmp_path, genuine_rss, attack, size, refusal):
    folder = attack(tmp_path / "crafted", size)
    for args in ([], ["--json"], ["--steps-csv", str(tmp_path / "steps.csv")]):
        code, out, err, rss = report(*args, str(folder))
        assert code == 2 and out == "", (args, err)
        assert err.startswith("goodputlab report: error: ") and refusal in err and err.count("\n") == 1, err
        # before the limits: 100,000 attempts took about 190 MB, 600,000 unsorted events about 650 MB
        assert rss < genuine_rss + 48, f"{attack.__name__}: {rss:.0f} MB against {genuine_rss:.0f} MB for a genuine log"


@pytest.mark.timeout(300)
def test_a_log_just_inside_every_limit_reports_in_bounded_memory(tmp_path, genuine_rss):
    """The largest logs each limit lets through: 9,999 attempts (every attempt's steps apart), 99,000 steps
    that skip numbers written from the top down, 99,000 computes that never end."""
    for name, attack, size in [("attempts", attempt_every_step, L.MAX_ATTEMPTS - 1),
                               ("skipping", lambda d, n: _descending_gaps(d, n), L.MAX_STEP_RANGES // 2 - 1000),
                               ("lone", lone_computes, L.MAX_OPEN - 1000)]:  # fmt: skip
        folder = attack(tmp_path / name, size)
        code, out, err, rss = report("--json", str(folder))
        assert code == 0, err
        assert rss < genuine_rss + 64, f"{name}: {rss:.0f} MB against {genuine_rss:.0f} MB"


def _descending_gaps(folder: Path, steps: int) -> Path:
    return _steps(folder, range(2 * steps, 0, -2))


def test_steps_written_from_the_top_down_keep_one_chunk(tmp_path):
    """The quadratic case: each step below the first chunk used to insert a chunk in front (``list.insert(0)``).
    Now the first chunk reaches down, so the fold keeps one chunk whatever the order, and the ledger is exact."""
    import goodputlab as gl

    down = descending(tmp_path / "down", 20_000)
    fold = F.LedgerFold()
    from goodputlab.measure.logread import event_batches

    for batch in event_batches(down / "events.jsonl", runs=True):
        fold.feed(batch)
    assert [len(A.starts) for A in fold.attempts.values()] == [1]
    summary = gl.load_run(down).summary
    assert summary["steps_executed"] == 20_000 and summary["failures"] == 0
    assert summary["buckets"]["productive"] == pytest.approx(20_000 * 1e-3, rel=1e-6)


def test_survival_of_many_attempts_is_a_sweep_not_a_copy_per_attempt():
    """Survival's structure holds each range once (the old one copied the union of every later attempt's
    steps for each attempt: 20,000 attempts took 3.2 GB and two minutes)."""
    from goodputlab.measure.steps import StepSet, Survival

    n = 5000
    computed = {a: StepSet([(2 * a, 2 * a)]) for a in range(n)}
    computed[n] = StepSet([(0, 2 * n)])  # the last attempt redoes everything
    survival = Survival(computed, computed, None)
    assert sum(len(s.los) for s in survival.owned.values()) == 1
    assert not any(survival.survives(a, 2 * a) for a in range(n)) and survival.survives(n, 17)
    assert survival.bounds(3) == [] and survival.bounds(n) == [0, 2 * n + 1]


# --- numbers at the edge of a float (item 11) -------------------------------------------------------------
def _edge_log(folder: Path, t_first: str, t_last: str, loss: str) -> Path:
    folder.mkdir()
    (folder / "events.jsonl").write_text(
        f'{{"t":{t_first},"attempt":0,"step":null,"kind":"init","recorder":1}}\n'
        f'{{"t":{t_last},"attempt":0,"step":0,"kind":"compute"}}\n'
        f'{{"t":{t_last},"attempt":0,"step":0,"kind":"step_end","loss":{loss}}}\n'
        f'{{"t":{t_last},"attempt":0,"step":null,"kind":"end","completed":true,"clean":true}}\n'
    )
    return folder


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args", [[], ["--json"], ["--follow", "--json"]], ids=["text", "json", "follow-json"])
def test_times_of_1e308_are_refused_in_one_line(tmp_path, args):
    folder = _edge_log(tmp_path / "huge", "-1e308", "1e308", "1.0")
    code, out, err, _ = report(*args, str(folder), timeout=60)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "'t' is -1e+308, not a finite number of seconds within ±1e16" in err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args", [[], ["--json"], ["--follow", "--json"]], ids=["text", "json", "follow-json"])
def test_the_largest_times_and_a_nan_loss_print_finite_numbers(tmp_path, args):
    """Times just inside the bound and a loss that diverged: every figure printed is finite, and --json writes
    the NaN loss as null (JSON has no NaN)."""
    folder = _edge_log(tmp_path / "edge", "-9e15", "9e15", "NaN")
    code, out, err, _ = report(*args, str(folder), timeout=60)
    assert code == 0, err
    assert "inf" not in out.lower() and "nan%" not in out.lower()
    if args:
        summary = json.loads(out.splitlines()[0] if "--follow" in args else out)
        summary = summary.get("summary", summary)
        assert summary["final_loss"] is None and summary["wall_s"] == pytest.approx(1.8e16)
    else:
        assert "goodput 0.0%" in out


def test_step_records_with_a_huge_time_are_refused(tmp_path):
    import goodputlab as gl
    from goodputlab.measure import step_records as SR
    from goodputlab.measure.logread import EventLogError

    with gl.Recorder(tmp_path / "job") as rec:
        with rec.step(0):
            pass
    records = SR.records_path(tmp_path / "job" / "events.jsonl")
    data = bytearray(records.read_bytes())
    SR.RECORD.pack_into(data, SR.RECORD_BYTES, 1e308, 0, 0.0, 2, 0, SR.DATA_WAIT, 0)
    records.write_bytes(bytes(data))
    with pytest.raises(EventLogError, match=r"record 1: 't' is 1e\+308, not a finite number of seconds within ±1e16"):
        gl.load_run(tmp_path / "job").summary


# --- a followed log replaced under the reader (item 15) -------------------------------------------------------
def _killed_recording(folder: Path) -> None:
    """A recording whose attempt never closed: ``--follow`` waits on it."""
    script = ("import os, signal, sys, goodputlab as gl\n"
              "rec = gl.Recorder(sys.argv[1])\n"
              "with rec.step(0):\n    pass\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", script, str(folder)], timeout=60).returncode == -9


@pytest.mark.timeout(120)
@pytest.mark.parametrize("replacement", ["renamed-over", "folder"])
def test_follow_notices_its_log_replaced(tmp_path, replacement):
    import goodputlab as gl

    folder = tmp_path / "job"
    _killed_recording(folder)
    log = folder / "events.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "goodputlab.cli", "report", str(folder), "--follow", "--json",
                             "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        first = proc.stdout.readline()  # it has read the log once
        assert json.loads(first)["summary"]["completed"] is False
        if replacement == "renamed-over":
            done = tmp_path / "done"
            with gl.Recorder(done, total_steps=1, step_records=False) as rec:
                with rec.step(0):
                    pass
            os.rename(done / "events.jsonl", tmp_path / "new.jsonl")
            (folder / "events.steps.bin").unlink()
            os.rename(tmp_path / "new.jsonl", log)
        else:
            os.rename(log, tmp_path / "old.jsonl")
            log.mkdir()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    if replacement == "renamed-over":
        assert proc.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["summary"]["completed"] is True
    else:
        assert proc.returncode == 2 and err.count("\n") == 1 and "events.jsonl" in err and "not a regular file" in err, err


# --- the recorder appends only to its own log, and reads a bounded tail (item 4) ---------------------------
RECORDER_CHILD = ("import sys, goodputlab as gl\n"
                  "from goodputlab.measure.recorder import RecorderError\n"
                  "try:\n    gl.Recorder(sys.argv[1]).close()\n"
                  "except RecorderError as e:\n    print(f'RecorderError: {e}', file=sys.stderr); sys.exit(2)\n")  # fmt: skip


def recorder_in_child(folder: Path) -> tuple[int, str, str, float]:
    return _run_measured([sys.executable, "-c", RECORDER_CHILD, str(folder)], 120)


def test_the_recorder_refuses_another_tools_log_and_leaves_the_folder_as_it_was(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir()
    log = folder / "events.jsonl"
    log.write_bytes(b"".join(b'{"ts": %d, "event": "batch", "loss": 0.5}\n' % i for i in range(100_000)))
    before = log.read_bytes()
    code, _, err, _ = recorder_in_child(folder)
    assert code == 2 and err.count("\n") == 1
    assert err == (f"RecorderError: {log} was not written by gl.Recorder (its first line is not a gl.Recorder's "
                   "start); a recorder appends only to its own log: record into another folder\n")
    assert log.read_bytes() == before  # not truncated, not appended to
    assert sorted(p.name for p in folder.iterdir()) == ["events.jsonl"]  # no recorder.json, no lock left


@pytest.mark.timeout(120)
def test_the_recorder_reads_a_bounded_tail_of_a_sparse_log(tmp_path):
    """A 2 GiB sparse log that begins as a recorder's: its tail repair used to read the whole file (3.1 GB)."""
    small = tmp_path / "small"
    with gl_recorder(small) as rec:
        with rec.step(0):
            pass
    code, _, err, genuine = recorder_in_child(small)
    assert code == 0, err
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    with open(sparse / "events.jsonl", "wb") as f:
        f.write(INIT)
        f.truncate(2 << 30)
    code, _, err, rss = recorder_in_child(sparse)
    assert code == 2 and err.count("\n") == 1 and "hold no whole line" in err, err
    assert (sparse / "events.jsonl").stat().st_size == 2 << 30  # nothing cut
    assert rss < genuine + 16, f"{rss:.0f} MB against {genuine:.0f} MB for a genuine log"


def test_the_recorder_never_cuts_back_past_a_whole_line(tmp_path):
    """Only bytes after the last newline are a write cut short; a last whole line that is not an event is
    refused, not cut (the old repair cut back to the last line that parsed)."""
    from goodputlab.measure.recorder import RecorderError

    folder = tmp_path / "job"
    with gl_recorder(folder) as rec:
        with rec.step(0):
            pass
    log = folder / "events.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"note": "appended by another tool"}\n')
    before = log.read_bytes()
    with pytest.raises(RecorderError, match="its last whole line is not an event"):
        gl_recorder(folder)
    assert log.read_bytes() == before


def gl_recorder(folder: Path, **kw):
    import goodputlab as gl

    return gl.Recorder(folder, **kw)
