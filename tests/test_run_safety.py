"""A run never loses the user's data, and tells the user what happened: real CLI runs, real files,
real signals, a real full disk (a size-limited tmpfs)."""

import hashlib
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from goodputlab.checkpoints.store import CheckpointStore
from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import EventWriter, read_events
from goodputlab.engine.run_dir import MARKER, RESERVE
from goodputlab.engine.supervisor import WorkerLog, run_supervised

from test_checkpoint_pickles import posix_path_payload
from test_untrusted_checkpoints import dotted_dcp_payload

TESTS = Path(__file__).resolve().parent


def run_cli(cli, env, *args, timeout=300):
    return subprocess.run([*cli, *args], capture_output=True, text=True, env=env, timeout=timeout)


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed) with its content hash or link target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def wait_for_training(out: Path, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ev = out / "events.jsonl"
        if ev.exists() and '"compute"' in ev.read_text(errors="replace"):
            return
        time.sleep(0.05)
    pytest.fail("the worker never started training")


def worker_processes(marker: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().decode(errors="replace")
                status = (p / "status").read_text()
            except OSError:
                continue
            if marker in cmd and "goodputlab.engine.worker" in cmd and "State:\tZ" not in status:
                pids.append(int(p.name))
    return pids


def strict_events(path: Path) -> list[dict]:
    """The event log, read with every warning an error: no line may be cut short."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return read_events(path)


# --- restore falls back, and the CLI says so ---------------------------------------------------
@pytest.mark.parametrize("attack, reason", [
    ("dotted global", "(a dotted name)"),
    ("class attribute", "BUILD on <class 'pathlib.PosixPath'> is not allowed"),
])
def test_cli_shows_the_fallback_when_a_dcp_checkpoint_carries_code(cli, cli_env, tmp_path, attack, reason):
    """The published attacks, end to end: the dotted-global .metadata never runs, the class-changing
    one (every Path of the worker would point at a victim folder) changes nothing, and the user
    reads on the terminal that the checkpoint was skipped and an older one restored: the resume completes."""
    out = tmp_path / "run"
    common = ["run", "--ckpt-every", "5", "--ckpt", "dcp", "--out", str(out), "--quiet"]
    first = run_cli(cli, cli_env, *common, "--steps", "10")
    assert first.returncode == 0, first.stderr  # checkpoints of steps 5 and 10
    path = out / "ckpt" / "step-00000010"
    if attack == "dotted global":
        payload = dotted_dcp_payload(tmp_path / "ran", (path / ".metadata").read_bytes())  # ends with the genuine metadata
    else:
        payload = posix_path_payload(tmp_path / "victim")
    (path / ".metadata").write_bytes(payload)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"][".metadata"] = {"sha256": hashlib.sha256(payload).hexdigest(), "bytes": len(payload)}
    (path / "manifest.json").write_text(json.dumps(manifest))

    second = run_cli(cli, cli_env, *common, "--steps", "15", "--resume")
    assert second.returncode == 0, second.stderr
    assert not (tmp_path / "ran").exists()
    warning = [line for line in second.stderr.splitlines() if line.startswith("goodputlab run: warning:")]
    assert len(warning) == 1, second.stderr
    assert "skipped damaged checkpoint of step 10" in warning[0] and reason in warning[0]
    assert "falls back to an older one" in warning[0] and "Traceback" not in second.stderr
    events = read_events(out / "events.jsonl")
    assert [e["ckpt_step"] for e in events if e["kind"] == "restored"] == [5]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] and summary["checkpoints_skipped_invalid"] == 1


# --- an existing folder is never emptied ---------------------------------------------------------
def _users_folder(root: Path) -> Path:
    """A folder with the user's own files under exactly the names a run writes."""
    root.mkdir()
    (root / "ckpt").mkdir()
    (root / "ckpt" / "model.bin").write_bytes(b"weights the user trained for a week")
    (root / "logs").mkdir()
    (root / "logs" / "notes.txt").write_text("lab notebook")
    for name in ("config.json", "events.jsonl", "summary.json", "thesis.tex"):
        (root / name).write_text(f"the user's {name}")
    return root


def test_an_existing_folder_is_never_emptied(cli, cli_env, tmp_path):
    folder = _users_folder(tmp_path / "mine")
    before = tree(folder)
    for out, cwd in ((str(folder), None), ("", None), (".", folder)):
        r = subprocess.run([*cli, "run", "--steps", "5", "--out", out], capture_output=True, text=True, env=cli_env, cwd=cwd, timeout=60)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"goodputlab run: error: --out {out or repr(out)} is invalid")
        assert "--overwrite" in lines[0] or "empty one" in lines[0]
        assert tree(folder) == before


def test_overwrite_replaces_only_goodputlabs_own_files(tmp_path):
    folder = _users_folder(tmp_path / "mine")
    summary = run_supervised(RunConfig(steps=3, ckpt_every=0, overwrite=True), folder)
    assert summary["completed"]
    assert (folder / "thesis.tex").read_text() == "the user's thesis.tex"  # not goodputlab's: untouched
    assert json.loads((folder / "summary.json").read_text())["completed"]
    assert (folder / MARKER).exists() and not (folder / RESERVE).exists()


def test_two_runs_cannot_share_a_folder_and_a_double_ctrl_c_keeps_the_summary(cli, cli_env, tmp_path):
    out = tmp_path / "shared"
    first = subprocess.Popen(
        [*cli, "run", "--steps", "100000", "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
    )
    try:
        wait_for_training(out)
        second = run_cli(cli, cli_env, "run", "--steps", "5", "--out", str(out), "--quiet", timeout=60)
        assert second.returncode == 2
        assert f"goodputlab pid {first.pid} is running in it" in second.stderr, second.stderr
        assert first.poll() is None and worker_processes(str(out))  # the first run goes on, untouched
        first.send_signal(signal.SIGINT)
        time.sleep(0.05)
        first.send_signal(signal.SIGINT)  # impatient: a second Ctrl-C 50 ms later must not cut the cleanup short
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    events = strict_events(out / "events.jsonl")
    assert events[-1]["kind"] == "end" and events[-1]["reason"] == "interrupted"
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "interrupted"
    time.sleep(0.3)
    assert worker_processes(str(out)) == []


# --- links are never followed --------------------------------------------------------------------
def test_links_planted_in_a_run_folder_are_never_followed(tmp_path):
    out = tmp_path / "run"
    run_supervised(RunConfig(steps=2, ckpt_every=0), out)  # an earlier run: the folder is a run folder
    victims = tmp_path / "victims"
    victims.mkdir()
    for name in ("summary.json.tmp", ".write-test", "config.json", "events.jsonl", "summary.json", "logs", "ckpt", "data"):
        target = victims / name.strip(".")
        if name in ("logs", "ckpt", "data"):
            target.mkdir()
            (target / "keep.txt").write_text("precious")
        else:
            target.write_text("precious")
        p = out / name
        if p.is_dir() and not p.is_symlink():
            import shutil

            shutil.rmtree(p)
        elif os.path.lexists(p):
            p.unlink()
        p.symlink_to(target)
    before = tree(victims)
    summary = run_supervised(RunConfig(steps=3, ckpt_every=2), out)
    assert summary["completed"] and summary["checkpoints"] == 2
    assert tree(victims) == before  # no target written, truncated or deleted
    for name in ("config.json", "events.jsonl", "summary.json", "logs", "ckpt", "data"):
        assert not (out / name).is_symlink()


def test_a_marker_or_ckpt_that_is_a_link_is_refused(cli, cli_env, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (tmp_path / "elsewhere").write_text("precious")
    (out / MARKER).symlink_to(tmp_path / "elsewhere")
    r = run_cli(cli, cli_env, "run", "--steps", "3", "--out", str(out), timeout=60)
    assert r.returncode == 2 and "symbolic link" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "elsewhere").read_text() == "precious"
    (out / MARKER).unlink()  # a run folder from before the marker: a run's config.json and events.jsonl
    (out / "config.json").write_text(RunConfig(steps=3).to_json())
    (out / "events.jsonl").write_text('{"t":0.0,"attempt":0,"step":null,"kind":"start"}\n')
    (tmp_path / "real-ckpt").mkdir()
    (out / "ckpt").symlink_to(tmp_path / "real-ckpt")
    r = run_cli(cli, cli_env, "run", "--steps", "3", "--resume", "--out", str(out), timeout=60)
    assert r.returncode == 2 and "ckpt is a folder, not a symbolic link" in r.stderr, r.stderr


# --- a full disk ---------------------------------------------------------------------------------
def full_disk_report(out: str) -> dict:
    """What a run left on its (full) disk: every name, the events, the checkpoints, the log."""
    out = Path(out)
    names = [str(p.relative_to(out)) for p in out.rglob("*")]
    report = {"names": names, "summary": None, "events_ok": False, "last_event": None, "valid": [], "log": ""}
    if (out / "summary.json").exists():
        report["summary"] = json.loads((out / "summary.json").read_text())
    try:
        events = strict_events(out / "events.jsonl")
        report["events_ok"], report["last_event"] = True, events[-1]["kind"]
    except Exception as e:  # reported, asserted on by the test
        report["events_error"] = str(e)
    store = CheckpointStore(out / "ckpt")
    for c in store.list():
        store.verify(c.path)  # raises if a committed checkpoint is damaged
        report["valid"].append(c.step)
    report["log"] = (out / "logs" / "attempt-000.log").read_text(errors="replace")
    return report


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True).returncode == 0


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def tiny_disk(tmp_path):
    """A 6 MB tmpfs: a real ENOSPC. Root mounts it here; otherwise the test runs inside a user+mount
    namespace (``unshare``) where mounting is allowed; skipped only when neither is possible."""
    where = tmp_path / "disk"
    if _mount_tmpfs(where, "6m"):
        yield where, None
        subprocess.run(["umount", "-l", str(where)], check=False)
    elif _can_unshare():
        yield where, "unshare"
    else:
        pytest.skip("no way to get a size-limited file system here: not root, and user namespaces are disabled")


@pytest.mark.parametrize("strategy", ["sync", "async"])
def test_a_full_disk_keeps_checkpoints_and_summary_and_says_so(cli, cli_env, tmp_path, tiny_disk, strategy):
    disk, mode = tiny_disk
    out = disk / "run"
    args = ["run", "--steps", "60", "--ckpt-every", "5", "--keep", "20", "--ckpt", strategy, "--out", str(out), "--quiet"]
    if mode is None:
        r = run_cli(cli, cli_env, *args)
        rc, err = r.returncode, r.stderr
        report = full_disk_report(str(out))
    else:  # mount, run and inspect inside one namespace; the results come back through tmp_path
        script = (
            f"mount -t tmpfs -o size=6m tmpfs {disk} && "
            f"{' '.join(cli)} {' '.join(args)} 2>{tmp_path}/err; echo $? >{tmp_path}/rc; "
            f"{sys.executable} -c 'import json,sys; sys.path.insert(0, sys.argv[1]); "
            f"from test_run_safety import full_disk_report; print(json.dumps(full_disk_report(sys.argv[2])))' "
            f"{TESTS} {out} >{tmp_path}/report"
        )
        subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], env=cli_env, timeout=300)
        rc, err = int((tmp_path / "rc").read_text()), (tmp_path / "err").read_text()
        report = json.loads((tmp_path / "report").read_text())
    lines = err.strip().splitlines()
    assert rc == 1, err
    assert lines[0].startswith("goodputlab run: the training worker crashed (exit code 1)")
    assert "No space left on device" in err and "is full; the checkpoints committed before are intact" in err
    assert "Traceback" not in err  # one clean message, not a supervisor traceback
    assert report["valid"] and all(s % 5 == 0 for s in report["valid"])  # every committed checkpoint verifies
    assert report["summary"] is not None and report["summary"]["stop_reason"] == "error: WorkerCrashed"
    assert report["summary"]["steps_completed"] == max(report["valid"])
    assert report["events_ok"] and report["last_event"] == "end", report.get("events_error")
    assert "No space left on device" in report["log"]  # the worker's log says why
    assert not [n for n in report["names"] if "tmp" in Path(n).name or Path(n).name == RESERVE], report["names"]


@pytest.fixture
def full_tmpfs(tmp_path):
    where = tmp_path / "disk"
    if not _mount_tmpfs(where, "1m"):
        pytest.skip("mounting a tmpfs needs root (the end-to-end full-disk test also runs in a user namespace)")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_an_event_the_disk_cuts_short_is_taken_back(full_tmpfs):
    log = full_tmpfs / "events.jsonl"
    ev = EventWriter(log, time.monotonic(), attempt=0, create=True)
    while log.stat().st_size < 4096 - 200:  # leave ~100 bytes of the page: the next line fits only in part
        ev.emit("step_end", step=1, loss=1.0)
    ev.emit("data_wait", step=1)
    before = log.read_bytes()
    filler = _fill(full_tmpfs)
    with pytest.raises(OSError, match="No space left"):
        ev.emit("step_end", step=2, loss=2.0, samples=list(range(60)))
    assert log.read_bytes() == before  # no half line left in the log
    filler.unlink()
    ev.emit("compute", step=2)
    ev.close()
    assert strict_events(log)[-1]["kind"] == "compute"


def test_a_worker_log_the_disk_refuses_is_kept_and_written_later(full_tmpfs):
    log = WorkerLog(full_tmpfs / "attempt-000.log")
    worker_end = os.dup(log.write_fd)
    log.start()
    filler = _fill(full_tmpfs)
    os.write(worker_end, b"Traceback (most recent call last):\nOSError: [Errno 28] No space left on device\n" * 100)
    os.close(worker_end)  # the worker exits
    log.drain()
    assert "No space left on device" in log.tail_text()  # the user's message does not depend on the disk
    filler.unlink()  # the run frees its reserve
    log.close()
    assert (full_tmpfs / "attempt-000.log").read_text().count("No space left on device") == 100


def test_a_save_cut_short_by_the_end_of_a_run_leaves_no_temporary(tmp_path):
    out = tmp_path / "run"
    run_supervised(RunConfig(steps=12, ckpt_every=5, kill_at_steps=(7,), max_failures=0), out)
    ckpt = out / "ckpt"
    (ckpt / ".tmp-step-00000010-4242-deadbeef").mkdir()  # what a kill in the middle of a save leaves
    (ckpt / ".tmp-step-00000010-4242-deadbeef" / "state.pt").write_bytes(b"half a state")
    (ckpt / ".trash-step-00000005-cafe0000").mkdir()
    summary = run_supervised(RunConfig(steps=12, ckpt_every=0, kill_at_steps=(8,), max_failures=0), out, resume=True)
    assert not summary["completed"] and summary["steps_completed"] == 5
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-00000005"]


# --- SIGTERM and SIGHUP behave as Ctrl-C does ----------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_a_run_as_ctrl_c_does(cli, cli_env, tmp_path, sig):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*cli, "run", "--steps", "100000", "--ckpt", "memory", "--ckpt-every", "20", "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
    )
    try:
        wait_for_training(out)
        tiers = list(Path("/dev/shm").glob(f"goodputlab-mem-{proc.pid}-*"))
        assert len(tiers) == 1  # the RAM tier of this run
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, err
    assert f"interrupted ({name}); no process left running" in err and "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == f"interrupted by {name}" and not summary["completed"]
    assert strict_events(out / "events.jsonl")[-1]["kind"] == "end"
    assert not tiers[0].exists()  # /dev/shm does not leak
    time.sleep(0.3)
    assert worker_processes(str(out)) == []


def test_a_forged_empty_marker_is_not_trusted_and_a_real_one_carries_the_runs_id(cli, cli_env, tmp_path):
    """`touch .goodputlab-run` in someone's folder does not make it a run folder whose files may be
    replaced; a run's own marker carries a random run id, kept while later runs reuse the folder."""
    folder = _users_folder(tmp_path / "mine")
    (folder / MARKER).touch()
    before = tree(folder)
    r = run_cli(cli, cli_env, "run", "--steps", "3", "--out", str(folder), timeout=60)
    assert r.returncode == 2 and "holds other files" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert tree(folder) == before
    out = tmp_path / "run"
    run_id = None
    for _ in range(2):
        summary = run_supervised(RunConfig(steps=2, ckpt_every=0, threads=1), out)
        assert summary["completed"]
        marker = json.loads((out / MARKER).read_text())
        assert len(marker["run_id"]) == 32 and marker["run_id"] == (run_id or marker["run_id"])
        run_id = marker["run_id"]
