"""A supervisor SIGKILLed (as the OOM killer does) takes every process of its run with it, and a job restores only the
checkpoints it may: its own, and with ``--resume`` those committed before it started.

Before: after a SIGKILL of the supervisor, the agents and ranks of an emulated or torchrun job trained on and committed
``ckpt/step-*``; a new run in that folder, killed at step 120, restored an orphan's step 250 and reported success. Now
every process asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``, goodputlab/procs.py), and every
manifest names the job that wrote it (goodputlab/checkpoints/ownership.py). Real runs, real SIGKILLs, a real checkpoint
of another job planted while a run trains.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from goodputlab.checkpoints.ownership import CheckpointOwner
from goodputlab.checkpoints.store import CheckpointStore, CheckpointWarning

GOODPUTLAB = [sys.executable, "-m", "goodputlab.cli"]
TINY = ["--model", "tiny", "--device", "cpu", "--quiet"]
NETNS = os.geteuid() == 0 and shutil.which("ip") is not None


def run_processes(folder: Path, but: int) -> set[int]:
    """The live processes whose command line names ``folder`` (agents, ranks, warm agents, loaders), but ``but``."""
    found = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != but:
            try:
                if str(folder).encode() in (p / "cmdline").read_bytes() and _running(int(p.name)):
                    found.add(int(p.name))
            except OSError:
                continue
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def checkpoints(out: Path) -> list[str]:
    try:
        return sorted(p.name for p in (out / "ckpt").iterdir())
    except FileNotFoundError:
        return []


LAUNCHES = {
    "torchrun": ["--nproc", "2", "--workers", "1"],
    "emulated": ["--emulate-nodes", "2", "--nproc", "1", "--spare-nodes", "1"],  # warm agents too
}


@pytest.mark.parametrize("launch", sorted(LAUNCHES))
def test_a_sigkilled_supervisor_takes_every_agent_and_rank_with_it_and_nothing_commits_after(launch, tmp_path):
    if launch == "emulated" and not NETNS:
        pytest.skip("emulated nodes need root (network namespaces) and iproute2; CI runs as root")
    out = tmp_path / launch
    proc = subprocess.Popen([*GOODPUTLAB, "run", *LAUNCHES[launch], *TINY, "--steps", "100000", "--ckpt-every", "20",
                             "--io-latency-ms", "100", "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while "step-00000020" not in checkpoints(out) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.2)
        assert "step-00000020" in checkpoints(out)
        before = run_processes(out, but=proc.pid)
        assert len(before) >= 3, before  # torchrun: the agent, 2 ranks, their loaders; emulated: 2 agents, 2 ranks, a warm one
    finally:
        proc.kill()  # SIGKILL: no handler, no teardown
        proc.wait()
    deadline = time.monotonic() + 20
    while run_processes(out, but=proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not run_processes(out, but=proc.pid), "processes of the run outlived its supervisor"
    committed = checkpoints(out)
    time.sleep(3)  # the ranks stepped every 0.1 s and committed every 20 steps: an orphan would have committed twice
    assert checkpoints(out) == committed
    if launch == "emulated":  # the namespaces stay until a later run sweeps them: the lock died with the supervisor
        from goodputlab.distributed import netns

        assert proc.pid in netns.remove_leftovers()
        assert not [ns for ns in netns.namespaces() if ns.startswith(f"gpl-{proc.pid}-")]


def rank_events(out: Path) -> list[dict]:
    try:
        text = (out / "ranks" / "events-rank0.jsonl").read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def test_a_checkpoint_another_job_commits_into_the_folder_while_a_run_trains_is_never_restored(tmp_path):
    """Job A trains to step 300; its step 250 is moved into job B's ``ckpt/``, stamped with the time of the move, once B
    has committed step 100 (as A's orphaned ranks committed theirs). B is killed after step 120 and restores its own
    step 100, not A's 250."""
    common = ["--nproc", "2", *TINY, "--steps", "300", "--ckpt-every", "50"]
    a, b = tmp_path / "a", tmp_path / "b"
    done = subprocess.run([*GOODPUTLAB, "run", *common, "--out", str(a)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    foreign = json.loads((a / "ckpt" / "step-00000250" / "manifest.json").read_text())
    assert len(foreign["job_id"]) == 32
    proc = subprocess.Popen([*GOODPUTLAB, "run", *common, "--io-latency-ms", "50", "--kill-at-steps", "120", "--json",
                             "--out", str(b)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not any(e["kind"] == "ckpt_commit" and e["ckpt_step"] == 100 for e in rank_events(b)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    shutil.copytree(a / "ckpt" / "step-00000250", b / "ckpt" / ".incoming")
    stamped = b / "ckpt" / ".incoming" / "manifest.json"  # committed now, as an orphan of A would commit it
    stamped.write_text(json.dumps({**foreign, "created_unix": time.time()}, indent=1))
    os.rename(b / "ckpt" / ".incoming", b / "ckpt" / "step-00000250")  # whole, at once: as a commit lands
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout)
    events = [json.loads(line) for line in (b / "events.jsonl").read_text().splitlines()]
    failure = next(e for e in events if e["kind"] == "failure")
    restored = [e for e in events if e["kind"] == "restored"]
    assert summary["completed"] and summary["failures"] == 1 and failure["attempt"] == 0
    assert {e["ckpt_step"] for e in restored} == {100}, restored  # every rank: its own job's newest
    job_b = json.loads((b / ".goodputlab-run").read_text())["job_id"]
    assert job_b != foreign["job_id"]
    # the restoring attempt's rank 0 saw A's step 250 in the folder and ignored it
    restoring = "".join(p.read_text(errors="replace") for p in (b / "logs").rglob("attempt_1/0/stderr.log"))
    assert f"ignoring checkpoint step-00000250: written by job {foreign['job_id']} after this job started" in restoring


def test_resume_restores_the_checkpoints_of_a_run_from_before_job_ids(tmp_path):
    """A run stopped after its checkpoint at 20 (its failure budget spent), its manifests and marker made as the
    code before job ids wrote them: ``--resume`` restores that checkpoint and completes. (A resume of a run with job
    ids, an earlier job's checkpoints: tests/test_recovery.py, ``test_a_stopped_run_resumes_in_the_same_log...``.)"""
    out = tmp_path / "r"
    first = subprocess.run([*GOODPUTLAB, "run", *TINY, "--steps", "60", "--ckpt-every", "20", "--kill-at-steps", "25",
                            "--max-failures", "0", "--json", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert not json.loads(first.stdout)["completed"], first.stderr[-2000:]
    marker = json.loads((out / ".goodputlab-run").read_text())
    kept = sorted(p.name for p in (out / "ckpt").glob("step-*"))
    for manifest in (out / "ckpt").glob("step-*/manifest.json"):
        m = json.loads(manifest.read_text())
        del m["job_id"]
        manifest.write_text(json.dumps(m, indent=1))
    (out / ".goodputlab-run").write_text(json.dumps({k: v for k, v in marker.items() if k not in ("job_id", "resume")}))
    second = subprocess.run([*GOODPUTLAB, "run", "--resume", str(out), "--json", "--quiet"], capture_output=True,
                            text=True, timeout=300)
    assert second.returncode == 0 and json.loads(second.stdout)["completed"], second.stderr[-2000:]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    restored = [e["ckpt_step"] for e in events if e["kind"] == "restored"]
    assert restored == [int(kept[-1].split("-")[1])], (restored, kept)


# --- the rule itself, on real checkpoints ------------------------------------------------------------------
def _save(store: CheckpointStore, step: int) -> None:
    store.commit(step, lambda f: f.write(b"not read by list()"))


def test_a_store_lists_its_jobs_checkpoints_and_with_resume_those_from_before_the_job(tmp_path):
    earlier = CheckpointOwner("a" * 32, time.time() - 3600, resume=False)
    _save(CheckpointStore(tmp_path, owner=earlier, keep=10), 10)
    _save(CheckpointStore(tmp_path, keep=10), 20)  # from before job ids: no job_id
    now = time.time()
    fresh, resumed = CheckpointOwner("b" * 32, now, resume=False), CheckpointOwner("c" * 32, now, resume=True)
    assert [c.step for c in CheckpointStore(tmp_path, owner=resumed).list()] == [20, 10]
    with pytest.warns(CheckpointWarning, match="before this job, which does not resume"):
        assert CheckpointStore(tmp_path, owner=fresh).list() == []
    time.sleep(0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CheckpointWarning)  # its prune sees step 20, from after its own start
        _save(CheckpointStore(tmp_path, owner=earlier, keep=10), 30)  # another job commits after these started
    with pytest.warns(CheckpointWarning, match=f"step-00000030: written by job {'a' * 32} after this job started"):
        assert [c.step for c in CheckpointStore(tmp_path, owner=resumed).list()] == [20, 10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CheckpointWarning)  # step 30, seen again by the prune of this save
        _save(CheckpointStore(tmp_path, owner=resumed, keep=10), 40)
        assert [c.step for c in CheckpointStore(tmp_path, owner=resumed).list()] == [40, 20, 10]
        assert [c.step for c in CheckpointStore(tmp_path).list()] == [40, 30, 20, 10]  # no owner: every one
    assert json.loads((tmp_path / "step-00000040" / "manifest.json").read_text())["job_id"] == "c" * 32


# --- item 13: what --overwrite replaces, said in full ---------------------------------------------------------------
def test_the_refusal_names_every_file_a_run_with_overwrite_replaces_or_adds_to(tmp_path):
    """A folder of a user's own files, each named as a run's: the refusal without ``--overwrite`` must name every one
    of them that a run with ``--overwrite`` then replaces (``ranks/`` was missing: a user's ``ranks/`` went unsaid),
    and ``data/``, which the run adds its data set to."""
    out = tmp_path / "mine"
    names = ["ckpt", "logs", "ranks", "data", "events.jsonl", "summary.json", "config.json", "notes.txt"]
    for name in names:
        (out / name).mkdir(parents=True) if "." not in name else None
        (out / (f"{name}/mine.txt" if "." not in name else name)).write_text("the user's own\n")
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    refused = subprocess.run([*GOODPUTLAB, "run", *TINY, "--steps", "2", "--out", str(out)], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    ran = subprocess.run([*GOODPUTLAB, "run", *TINY, "--steps", "2", "--overwrite", "--out", str(out)], capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    touched = {name.split("/")[0] for name, data in before.items() if after.get(name) != data}
    added = {name.split("/")[0] for name in after if name not in before and "/" in name}
    assert touched and "notes.txt" not in touched and "data/mine.txt" in after  # the rest is left as it was
    for name in touched | added:
        shown = f"{name}/" if "." not in name else name
        assert shown in refused.stderr, (shown, refused.stderr)
