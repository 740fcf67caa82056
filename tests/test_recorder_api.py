"""The recorder's API for frameworks and real loops (issue 46, item 1): nested blocks (gradient accumulation),
``rec.data(loader)``, custom badput, ``begin``/``end``, ``mark``, the per-step time column, the lock of a
Recorder that was dropped without ``close()``, and ``cuda_sync`` where CUDA is absent."""

from __future__ import annotations

import csv
import gc
import json
import subprocess
import sys
import time

import pytest

import goodputlab as gl
from goodputlab.measure.recorder import RecorderError
from goodputlab.measure.recording import read_log


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("step_records", [True, False], ids=["records", "json-lines"])
def test_gradient_accumulation_books_each_micro_batch_wait_to_its_step(tmp_path, step_records):
    """Micro-batches fetched inside each optimizer step (torchtitan's and Hugging Face's loop): each fetch is the
    step's data wait, the rest of the step its compute. Before, such a job reported goodput 0%, other 50%."""
    steps, micro, wait, work = 4, 3, 0.02, 0.01

    def slow_loader():
        for i in range(micro):
            time.sleep(wait)  # storage latency inside next()
            yield i

    with gl.Recorder(tmp_path, total_steps=steps, step_records=step_records) as rec:
        for step in range(steps):
            with rec.step(step):
                for _ in rec.data(slow_loader()):
                    _busy(work)
    run = gl.load_run(tmp_path)
    s = run.summary
    rows = {r["step"]: r for r in run.per_step()}
    for step in range(steps):
        assert rows[step]["data_wait_s"] >= micro * wait  # every micro-batch's wait, booked to its step
        assert rows[step]["compute_s"] >= micro * work
    assert s["buckets"]["data_wait"] >= steps * micro * wait
    assert s["buckets"]["productive"] >= steps * micro * work
    assert s["buckets"]["other"] < 0.2 * s["wall_s"]  # before: the waits made half the job "other", goodput 0%
    kinds = [e["kind"] for e in read_log(tmp_path / "events.jsonl") if e.get("step") == 1]
    # each next() is a wait, the one that finds the loader exhausted too
    assert kinds == ["compute"] + ["data_wait", "compute"] * (micro + 1) + ["step_end"]


def test_custom_badput_is_other_and_shown_by_name(tmp_path, cli, cli_env):
    with gl.Recorder(tmp_path, total_steps=3) as rec:
        for step in range(3):
            with rec.step(step):
                _busy(0.002)
            if step == 1:
                with rec.custom("eval"):
                    time.sleep(0.05)
        with rec.custom("compile"):
            time.sleep(0.01)
    s = gl.load_run(tmp_path).summary
    assert set(s["custom"]) == {"eval", "compile"}
    assert s["custom"]["eval"] >= 0.05 and s["custom"]["compile"] >= 0.01
    assert s["buckets"]["other"] >= s["custom"]["eval"] + s["custom"]["compile"]  # a part of other
    text = subprocess.run([*cli, "report", str(tmp_path)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert "of which eval" in text.stdout and "of which compile" in text.stdout
    js = subprocess.run([*cli, "report", str(tmp_path), "--json"], capture_output=True, text=True, env=cli_env, timeout=60)
    assert json.loads(js.stdout)["custom"]["eval"] == pytest.approx(s["custom"]["eval"])
    with pytest.raises(ValueError, match="custom badput name 'Eval!'"):
        gl.Recorder(tmp_path / "other").custom("Eval!")


def test_begin_and_end_write_what_the_blocks_write(tmp_path):
    def with_blocks(rec):
        with rec.checkpoint_restore():
            pass
        for step in range(2):
            with rec.data_wait():
                pass
            with rec.step(step) as s:
                s.loss = 0.5
            with rec.checkpoint_save(step):
                pass

    def with_calls(rec):
        rec.begin("checkpoint_restore")
        rec.end("checkpoint_restore")
        for step in range(2):
            rec.begin("data_wait")
            rec.end("data_wait")
            rec.begin("step", step)
            rec.end("step", loss=0.5)
            rec.begin("checkpoint_save", step)
            rec.end("checkpoint_save")

    kinds = []
    for name, body in (("blocks", with_blocks), ("calls", with_calls)):
        with gl.Recorder(tmp_path / name, total_steps=2, step_records=False) as rec:
            body(rec)
        kinds.append([(e["kind"], e["step"], e.get("loss")) for e in read_log(tmp_path / name / "events.jsonl")
                      if e["kind"] not in ("init", "loop")])  # fmt: skip
    assert kinds[0] == kinds[1]
    with pytest.raises(ValueError, match="kind 'stpe' is invalid"):
        gl.Recorder(tmp_path / "bad").begin("stpe", 0)


def test_mark_books_a_save_a_hook_reports_after_it(tmp_path):
    with gl.Recorder(tmp_path, total_steps=2, step_records=False) as rec:
        with rec.step(0):
            pass
        began = time.monotonic()
        time.sleep(0.03)  # the save happened here; the hook fires after it
        rec.mark("checkpoint_save", began, time.monotonic(), step=0)
        with pytest.raises(ValueError, match="after the last block recorded"):
            rec.mark("custom", began, time.monotonic(), name="eval")  # before what was recorded since
        with rec.step(1):
            pass
    s = gl.load_run(tmp_path).summary
    assert s["checkpoints"] == 1 and s["buckets"]["checkpoint_save"] >= 0.03


def test_steps_csv_has_each_steps_end_time(tmp_path, cli, cli_env):
    with gl.Recorder(tmp_path / "job", total_steps=4) as rec:
        for step in range(4):
            with rec.step(step):
                time.sleep(0.002)
    out = tmp_path / "steps.csv"
    r = subprocess.run([*cli, "report", str(tmp_path / "job"), "--steps-csv", str(out)], capture_output=True,
                       text=True, env=cli_env, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    ends = [float(row["t_end_s"]) for row in rows]
    assert len(ends) == 4 and ends == sorted(ends) and ends[-1] - ends[0] >= 3 * 0.002


def test_a_recorder_dropped_without_close_releases_its_lock(tmp_path):
    rec = gl.Recorder(tmp_path)
    with pytest.raises(RecorderError, match=r"one of this process that was not closed: call its close\(\)"):
        gl.Recorder(tmp_path)
    with rec.step(0):
        pass
    del rec
    gc.collect()
    again = gl.Recorder(tmp_path)  # the lock was released with the dropped Recorder
    again.close()
    s = gl.load_run(tmp_path).summary
    assert s["attempts"] == 2 and s["failures"] == 1  # the dropped attempt reads as one that did not close


def test_cuda_sync_on_a_machine_without_cuda_records_as_without_it(tmp_path):
    """``cuda_sync=True`` synchronises only when the job's torch has initialised CUDA; here (CPU torch) it
    records the same events. The GPU check is benchmarks/cuda_sync.py (not run here: no GPU)."""
    script = ("import sys, torch, goodputlab as gl\n"
              "with gl.Recorder(sys.argv[1], total_steps=3, cuda_sync=True) as rec:\n"
              "    for s in range(3):\n"
              "        with rec.step(s):\n"
              "            torch.ones(64, 64) @ torch.ones(64, 64)\n"
              "print(torch.cuda.is_initialized())\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    s = gl.load_run(tmp_path).summary
    assert s["completed"] and s["steps_executed"] == 3
