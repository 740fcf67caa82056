"""Make the ledger corpus: real gl.Recorder jobs (killed, crashed, restarted, on two ranks, with
odd resume points) and the summary and per-step rows the ledger gave each of them.

    python tests/data/ledger_corpus/make_corpus.py

``lab/`` holds three lab runs' event logs and configurations (kept as they are; rerunning this
script recomputes only their reference), made by::

    goodputlab run --steps 90 --ckpt-every 20 --seed 7 --workers 2 --prefetch 2 --restart-delay 0.1 \
        --kill-at-steps 25,50,72 --threads 1 --out killed-prefetching    # the tests' killed run
    goodputlab run --steps 40 --ckpt-every 10 --seed 3 --nproc 2 --kill-at-steps 17 --threads 1 --out two-ranks-killed
    goodputlab run --steps 60 --ckpt-every 10 --ckpt async --seed 5 --kill-at-steps 33 --threads 1 --out async-killed

The reference (``reference.json``) was written by the in-memory ledger of commit ca5bff7, the
one before the streaming ledger; ``tests/test_ledger_stream.py`` holds today's ledger to it, and
to the summaries shipped with every recorded run in ``goodputlab/recorded/``. Rerunning this
script makes new jobs (new times) and a new reference from today's ledger.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

# argv: run_dir total kill_at every resume_offset raise_at. SIGKILLs itself after step kill_at (-1: never);
# raises in step raise_at (-1: never); resumes at the saved step + resume_offset.
LOOP = r"""
import json, os, signal, sys, time
import goodputlab as gl
run_dir, total, kill_at, every, offset, raise_at = sys.argv[1], *map(int, sys.argv[2:7])
ck = os.path.join(run_dir, "ck.json")
with gl.Recorder(run_dir, total_steps=total) as rec:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    while world > 1:
        logs = [os.path.join(run_dir, f"events-rank{r}.jsonl") for r in range(world)]
        mark = f'"attempt":{rec.attempt},"step":null,"kind":"init"'
        if all(os.path.exists(p) and mark in open(p).read() for p in logs):
            break
        time.sleep(0.005)
    with rec.checkpoint_restore():
        step0 = json.load(open(ck))["step"] + offset if os.path.exists(ck) else 0
    for step in range(max(0, step0), total):
        with rec.data_wait():
            time.sleep(0.001)
        with rec.step(step) as s:
            time.sleep(0.002)
            if step == raise_at:
                raise RuntimeError("boom")
            s.loss = 1.0 / (1 + step)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if (step + 1) % every == 0:
            with rec.checkpoint_save(step):
                tmp = f"{ck}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    json.dump({"step": step + 1}, f)
                os.replace(tmp, ck)
"""


def attempt(run_dir, total, kill_at=-1, every=5, offset=0, raise_at=-1, env=None, wait=True):
    p = subprocess.Popen(
        [sys.executable, "-c", LOOP, str(run_dir), str(total), str(kill_at), str(every), str(offset), str(raise_at)],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, stderr=subprocess.DEVNULL,
    )
    if wait:
        p.wait(timeout=120)
    time.sleep(0.05)
    return p


JOBS = {
    # killed between two checkpoints, restarted, completed
    "kill-restart": lambda d: (attempt(d, 30, kill_at=13), attempt(d, 30)),
    # killed and never restarted: stopped at its newest checkpoint
    "killed-stopped": lambda d: attempt(d, 20, kill_at=13),
    # killed before its first checkpoint: the restart begins at step 0
    "kill-before-first-checkpoint": lambda d: (attempt(d, 15, kill_at=3), attempt(d, 15)),
    # a step raises (the attempt closes as failed), then a restart completes
    "exception-restart": lambda d: (attempt(d, 20, raise_at=12), attempt(d, 20)),
    # the second attempt dies before it reaches where the first got; the third completes
    "killed-twice": lambda d: (attempt(d, 40, kill_at=23), attempt(d, 40, kill_at=22), attempt(d, 40)),
    # the second attempt dies short of the first's last step, and the job stops there
    "killed-twice-stopped": lambda d: (attempt(d, 40, kill_at=23, every=10), attempt(d, 40, kill_at=21, every=10)),
    # the job resumes one step before the saved resume point (it re-executes the step it saved after)
    "resume-one-early": lambda d: (attempt(d, 30, kill_at=16, offset=-1), attempt(d, 30, offset=-1)),
    # the job resumes three steps past the saved point (it skips steps): a gap in what survives
    "resume-past-checkpoint": lambda d: (attempt(d, 30, kill_at=16), attempt(d, 30, offset=3)),
    # two ranks (WORLD_SIZE=2), both killed after step 7, restarted
    "two-ranks": lambda d: (
        [p.wait(timeout=120) for p in [attempt(d, 14, kill_at=7, env={"RANK": str(r), "WORLD_SIZE": "2"}, wait=False) for r in (0, 1)]],
        [p.wait(timeout=120) for p in [attempt(d, 14, env={"RANK": str(r), "WORLD_SIZE": "2"}, wait=False) for r in (0, 1)]],
    ),
}


def in_process_jobs(d: Path) -> None:
    """Jobs whose loop is odd: steps that go backwards, a step recorded twice in one attempt."""
    import warnings

    import goodputlab as gl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gl.Recorder(d / "steps-backwards", total_steps=10) as rec:
            for step in (0, 1, 2, 5, 6, 3, 4, 7, 8, 9):
                with rec.data_wait():
                    time.sleep(0.001)
                with rec.step(step) as s:
                    time.sleep(0.002)
                    s.loss = float(step)
                if step == 6:
                    with rec.checkpoint_save(step):
                        time.sleep(0.002)
        with gl.Recorder(d / "step-twice", total_steps=6) as rec:
            for step in (0, 1, 2, 2, 3, 4, 5):
                with rec.step(step) as s:
                    time.sleep(0.002)
                    s.loss = float(step)


def reference(folder: Path) -> dict:
    import goodputlab as gl

    result = gl.load_run(folder)
    rows = [{k: (round(v, 9) if isinstance(v, float) else v) for k, v in r.items()} for r in result.per_step()]
    return {"summary": result.summary, "per_step": rows}


def main() -> int:
    out = HERE / "jobs"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name, make in JOBS.items():
        make(out / name)
    in_process_jobs(out)
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        for p in folder.iterdir():  # keep the logs and recorder.json only
            if p.name.startswith("events") or p.name == "recorder.json":
                if p.name.endswith(".jsonl"):
                    p.with_name(p.name + ".gz").write_bytes(gzip.compress(p.read_bytes(), mtime=0))
                    p.unlink()
            else:
                p.unlink()
    ref = {"jobs": compute(out), "recorded": recorded(), "lab": lab()}
    (HERE / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
    return 0


def digest(value) -> str:
    """sha256 of a value's JSON (for lists too long to keep in the reference)."""
    import hashlib

    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def recorded() -> dict:
    """Every recorded run of goodputlab/recorded/: its summary, and its per-step rows and samples in short."""
    import goodputlab as gl

    return {name: recorded_entry(gl.recorded_run(name)) for name in gl.recorded_runs()}


def lab() -> dict:
    """The lab runs of ``lab/``: each one's reference, from its events and configuration."""
    return {folder.name: lab_entry(*lab_run(folder)) for folder in sorted((HERE / "lab").iterdir())}


def lab_run(folder: Path) -> tuple[list[dict], dict]:
    """A lab run of ``lab/``: its events (in file order) and its configuration."""
    from goodputlab.measure.events import parse_event

    lines = gzip.decompress((folder / "events.jsonl.gz").read_bytes()).splitlines()
    return [parse_event(line) for line in lines], json.loads((folder / "config.json").read_text())


def lab_entry(events: list[dict], config: dict) -> dict:
    """A lab run's reference, from its events and configuration."""
    from goodputlab.measure.ledger import per_step, surviving_samples

    return entry(events, config, per_step(events), surviving_samples(events))


def recorded_entry(result) -> dict:
    """One recorded run's reference: its summary recomputed from its events, per-step rows and samples in short."""
    from goodputlab.measure.ledger import surviving_samples

    return entry(result.events, result.summary["config"], result.per_step(), surviving_samples(result.events))


def entry(events: list[dict], config: dict, rows: list[dict], samples: list) -> dict:
    """A run's reference: its summary, and its per-step rows and samples in short."""
    from goodputlab.measure.ledger import summarize

    return {
        "summary": summarize(events, config),
        "per_step": {
            "rows": len(rows),
            "survived": digest([[r["attempt"], r["step"]] for r in rows if r["survived"]]),
            "lost": digest([[r["attempt"], r["step"]] for r in rows if not r["survived"]]),
            "data_wait_s": sum(r["data_wait_s"] for r in rows),
            "compute_s": sum(r["compute_s"] for r in rows),
            "losses": digest([r["loss"] for r in rows]),
        },
        "samples": digest(samples),
    }


def unpack(folder: Path, dest: Path) -> Path:
    """A corpus job's folder as gl.Recorder left it (the logs are stored gzipped)."""
    dest.mkdir(parents=True, exist_ok=True)
    for p in folder.iterdir():
        data = p.read_bytes()
        if p.name.endswith(".gz"):
            (dest / p.name[:-3]).write_bytes(gzip.decompress(data))
        else:
            (dest / p.name).write_bytes(data)
    return dest


def compute(jobs: Path) -> dict:
    import tempfile
    import warnings

    ref = {}
    with tempfile.TemporaryDirectory() as tmp:
        for folder in sorted(p for p in jobs.iterdir() if p.is_dir()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref[folder.name] = reference(unpack(folder, Path(tmp) / folder.name))
    return ref


if __name__ == "__main__":
    sys.exit(main())
