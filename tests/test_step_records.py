"""gl.Recorder's binary step records: the same ledger as the same events written as JSON lines.

The job is a real process killed with a real SIGKILL in the middle of a step; its attempts
write step records, JSON lines only, then step records again. Its log is then rewritten as
JSON lines only (every event, in the order the reader merged them) and both forms are
read: the summaries, the per-step rows and the events must be identical.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import goodputlab as gl
from goodputlab.measure import events as E
from goodputlab.measure import step_records as SR
from goodputlab.measure.follow import Follower
from goodputlab.measure.recorder import EventLogError, EventLogWarning, RecorderError
from goodputlab.measure.recording import Recording, read_log

# argv: run_dir total kill_at every records(0/1). SIGKILLs itself inside step kill_at's compute (-1: never).
JOB = r"""
import json, math, os, signal, sys, time
import goodputlab as gl
run_dir, total, kill_at, every, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
ck = os.path.join(run_dir, "ck.json")
with gl.Recorder(run_dir, total_steps=total, step_records=records) as rec:
    with rec.checkpoint_restore():
        step0 = json.load(open(ck))["step"] if os.path.exists(ck) else 0
    for step in range(step0, total):
        with rec.data_wait():
            pass
        if step % 7 == 3:
            time.sleep(0.0003)  # the loop's own code: a ``loop`` phase
        try:
            with rec.step(step) as s:
                if step == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                if step % 11 == 5:
                    raise RuntimeError("a step that fails")  # no step_end
                s.loss = None if step % 5 == 2 else (math.nan if step % 13 == 4 else 1.0 / (step + 1))
        except RuntimeError:
            pass
        if (step + 1) % every == 0:
            with rec.checkpoint_save(step):
                with open(ck, "w") as f:
                    json.dump({"step": step + 1}, f)
"""


def _job(run_dir, total, kill_at, records, every=10) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", JOB, str(run_dir), str(total), str(kill_at), str(every), str(int(records))],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def _as_json_lines(src, dst) -> None:
    """``src``'s recording with every event a JSON line, as ``step_records=False`` writes it."""
    dst.mkdir()
    shutil.copy(src / "recorder.json", dst / "recorder.json")
    lines = []
    for e in read_log(src / "events.jsonl"):
        fields = {k: v for k, v in e.items() if k not in ("t", "attempt", "step", "kind")}
        lines.append(E.event_line(e["t"], e["attempt"], e["step"], e["kind"], fields))
    (dst / "events.jsonl").write_bytes(b"".join(lines))


@pytest.fixture(scope="module")
def killed_job(tmp_path_factory):
    """Attempts: step records (killed in step 27), JSON lines only (killed in step 45), step records to the end."""
    run_dir = tmp_path_factory.mktemp("records") / "job"
    assert _job(run_dir, 60, 27, True).returncode == -9
    records = SR.records_path(run_dir / "events.jsonl")
    assert (records.stat().st_size - SR.RECORD_BYTES) % SR.RECORD_BYTES == 0  # a SIGKILL leaves records whole
    with open(records, "ab") as f:
        f.write(b"\x01" * 17)  # a record torn as a disk could leave it
    with pytest.warns(EventLogWarning, match="cut short"):
        torn = Recording(run_dir).summary()
    r = _job(run_dir, 60, 45, False)
    assert r.returncode == -9 and "dropped 17 bytes after the last whole record" in r.stderr
    assert _job(run_dir, 60, -1, True).returncode == 0
    return run_dir, torn


def test_the_records_and_the_json_lines_give_the_same_ledger(killed_job, tmp_path):
    run_dir, torn = killed_job
    merged = read_log(run_dir / "events.jsonl")
    kinds = [e["kind"] for e in merged]
    assert [e["t"] for e in merged] == sorted(e["t"] for e in merged)  # each record in its place among the lines
    assert all(kinds[i - 1] == "compute" and merged[i - 1]["step"] == e["step"]
               for i, e in enumerate(merged) if e["kind"] == "step_end")  # fmt: skip
    assert kinds.count(E.R_LOOP) >= 5 and kinds.count(E.SUP_FAILURE) == 2  # the loop's gaps, the two kills
    assert 20 < len((run_dir / "events.jsonl").read_bytes().splitlines()) < len(kinds) // 2  # most events are records
    plain = tmp_path / "plain"
    _as_json_lines(run_dir, plain)
    a, b = Recording(run_dir), Recording(plain)
    sa, sb = a.summary(), b.summary()
    assert sa == sb
    assert sum(sa["buckets"].values()) == pytest.approx(sa["wall_s"], rel=1e-9)
    assert sa["completed"] and sa["attempts"] == 3 and sa["failures"] == 2 and sa["buckets"]["lost_work"] > 0
    assert a.per_step() == b.per_step() and a.events() == b.events()
    assert Follower(run_dir).update().summary == sa  # --follow and gl.watch read both files too
    assert torn["attempts"] == 1 and torn["failures"] == 1  # the torn record was left out, the ledger closed
    assert sum(torn["buckets"].values()) == pytest.approx(torn["wall_s"], rel=1e-9)


def test_a_live_log_is_followed_across_both_files(tmp_path):
    follow = Follower(tmp_path)
    rec = gl.Recorder(tmp_path, total_steps=40)
    for step in range(40):
        with rec.data_wait():
            pass
        with rec.step(step) as s:
            s.loss = 0.5
        if step in (9, 19):
            with rec.checkpoint_save(step):
                pass
            u = follow.update()
            assert not u.whole and u.summary["steps_completed"] == step + 1
    rec.close()
    u = follow.update()
    assert u.finished and not u.whole and u.summary == Recording(tmp_path).summary()


def _one_step(run_dir):
    with gl.Recorder(run_dir) as rec:
        for step in range(3):
            with rec.data_wait():
                pass
            with rec.step(step):
                pass


@pytest.mark.parametrize("damage", ["version", "kind", "not-records"])
def test_damaged_records_are_an_error_naming_the_file(tmp_path, cli, cli_env, damage):
    _one_step(tmp_path)
    path = SR.records_path(tmp_path / "events.jsonl")
    data = bytearray(path.read_bytes())
    if damage == "version":
        data[8] = 2
        match = "version 2"
    elif damage == "kind":
        data[2 * SR.RECORD_BYTES + 36] = 9  # the second record's kind code
        match = "record 2: kind code 9"
    else:
        data[:8] = b"garbage!"
        match = "not a file of step records"
    path.write_bytes(bytes(data))
    with pytest.raises(EventLogError, match=match):
        gl.load_run(tmp_path)
    r = subprocess.run([*cli, "report", str(tmp_path)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and path.name in r.stderr
    if damage != "kind":
        with pytest.raises(RecorderError, match=match):
            gl.Recorder(tmp_path)  # never appended to


def test_json_lines_only_when_asked(tmp_path):
    with gl.Recorder(tmp_path, step_records=False) as rec:
        with rec.step(0):
            pass
    assert not SR.records_path(tmp_path / "events.jsonl").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [e["kind"] for e in read_log(tmp_path / "events.jsonl")][-3:] == ["step_end", "finish", "end"]


def test_the_tear_benchmark_counts_its_kills_and_where_a_cut_falls(tmp_path):
    """benchmarks/sigkill_tear.py, small: every kill counted; a record cut short ends at a page boundary."""
    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "sigkill_tear.py"
    r = subprocess.run([sys.executable, str(bench), "--kills", "25", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    head, *cuts = r.stdout.splitlines()
    assert head.startswith("25 kills of a writer of 40-byte records") and head.endswith("with a record cut short")
    n = int(head.split(": ")[1].split()[0])
    assert len([c for c in cuts if c.startswith("  size")]) == n
    assert all("size mod 4096 = 0" in c for c in cuts if c.startswith("  size"))
    assert not list(tmp_path.iterdir())  # its files removed
    bad = subprocess.run([sys.executable, str(bench), "--kills", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--kills must be at least 1" in bad.stderr
