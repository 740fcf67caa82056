"""Scratch folders (goodputlab.engine.scratch): a notebook's run files go when its kernel does, and
those of a kernel that was killed go with the next one's first folder. Real processes, real kills."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT
from goodputlab.engine.scratch import MARKER, scratch_dir, sweep

MAKE = "from goodputlab.engine.scratch import scratch_dir; import sys; print(scratch_dir('goodputlab-t-', sys.argv[1]), flush=True)"


def _python(code: str, *args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, env=env, **kw)


def test_a_scratch_folder_goes_when_its_process_exits(tmp_path):
    p = _python(MAKE + "; import pathlib; pathlib.Path(sys.argv[1], 'seen').touch()", str(tmp_path))
    out, _ = p.communicate(timeout=60)
    made = tmp_path / out.strip().rsplit("/", 1)[1]
    assert p.returncode == 0
    assert made.name.startswith(f"goodputlab-t-{p.pid}-")
    assert not made.exists()  # removed at exit
    assert (tmp_path / "seen").exists()  # the parent is left alone


def test_the_folder_of_a_killed_process_goes_with_the_next_folder(tmp_path):
    p = _python(MAKE + "; import time; time.sleep(600)", str(tmp_path))
    made = tmp_path / p.stdout.readline().strip().rsplit("/", 1)[1]
    (made / "ckpt.pt").write_bytes(b"x" * 1000)
    mark = json.loads((made / MARKER).read_text())
    assert mark["pid"] == p.pid
    mine = scratch_dir("goodputlab-t-", tmp_path)  # its process is alive: kept
    assert made.exists() and mine.exists()
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert made.exists()  # a kill runs no clean-up
    other = tmp_path / "goodputlab-not-scratch"  # no marker: not ours to judge
    other.mkdir()
    assert sweep(tmp_path) == [made]
    assert not made.exists() and mine.exists() and other.exists()


def test_a_reused_process_number_does_not_keep_a_folder(tmp_path):
    d = tmp_path / "goodputlab-t-1-abc"
    d.mkdir()
    # this process's number, but another start time: the process that made it is gone
    (d / MARKER).write_text(json.dumps({"pid": os.getppid(), "started": "0"}))
    if not os.path.exists(f"/proc/{os.getppid()}/stat"):
        pytest.skip("no /proc: start times unknown here")
    assert sweep(tmp_path) == [d]


def test_the_prefix_must_be_one_the_sweep_finds(tmp_path):
    with pytest.raises(ValueError, match="starts with 'goodputlab'"):
        scratch_dir("my-job-", tmp_path)


def test_a_python_run_without_out_leaves_nothing_after_the_process(tmp_path):
    code = ("import goodputlab as gl, sys; r = gl.run(steps=3, threads=1, progress=False);"
            "print(r.out); assert (r.out / 'summary.json').exists()")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith(str(tmp_path / f"goodputlab-runs-{os.geteuid()}" / "goodputlab-"))
    time.sleep(0.1)
    assert not os.path.exists(out)
    assert list((tmp_path / f"goodputlab-runs-{os.geteuid()}").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="the attacker is another user (root here)")
def test_a_runs_parent_that_another_user_made_first_is_not_used(tmp_path):
    """uid 65534 makes ``goodputlab-runs-0`` first in a shared temporary directory (sticky and writable by all, as
    /tmp): its owner could swap root's scratch folder in it for a link, and root's next run folder would land where
    that user chose. Root's ``gl.run()`` now takes a private folder of its own beside it; the other's stays empty."""
    shared = Path(tempfile.mkdtemp(prefix="goodputlab-test-shared-tmp-", dir="/tmp"))  # reachable by every user
    os.chmod(shared, 0o1777)
    try:
        _attack_the_runs_parent(shared)
    finally:
        shutil.rmtree(shared)


def _attack_the_runs_parent(shared: Path) -> None:
    planted = shared / f"goodputlab-runs-{os.geteuid()}"
    subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "mkdir", "-m", "777", str(planted)],
                   check=True)
    code = "import goodputlab as gl; r = gl.run(steps=3, threads=1, progress=False); print(r.out)"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(shared))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = Path(r.stdout.strip().splitlines()[-1])
    assert planted not in out.parents and out.parents[1].parent == shared, out
    parent = out.parents[1]
    assert parent.name.startswith(planted.name + "-") and parent.stat().st_uid == 0 and parent.stat().st_mode & 0o077 == 0
    assert list(planted.iterdir()) == []


def test_a_kernels_scratch_folder_goes_when_the_kernel_shuts_down(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import goodputlab as gl\nprint(gl.scratch_dir('goodputlab-k-', {str(tmp_path)!r}))")]
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(ROOT)}}).execute()
    made = nb.cells[0].outputs[0]["text"].strip()
    assert made.startswith(str(tmp_path / "goodputlab-k-"))
    for _ in range(50):  # the kernel's process exits just after the shutdown reply
        if not os.path.exists(made):
            break
        time.sleep(0.1)
    assert not os.path.exists(made)


# --- attacks: the temporary directory is everyone's ------------------------------------------------
SWEEP = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30));"
         "from pathlib import Path; from goodputlab.engine.scratch import scratch_dir, sweep;"
         "print(sorted(p.name for p in sweep(Path(sys.argv[1])))); print(scratch_dir('goodputlab-t-', sys.argv[1]))")


def test_a_planted_fifo_or_dev_zero_marker_neither_hangs_nor_blows_memory(tmp_path):
    """A FIFO as the marker (a read would block forever) and a link to /dev/zero (a read never ends),
    swept by a child limited to 2 GB of address space and 60 s: both folders are left alone."""
    fifo_dir = tmp_path / "goodputlab-t-fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / MARKER)
    zero_dir = tmp_path / "goodputlab-t-zero"
    zero_dir.mkdir()
    (zero_dir / MARKER).symlink_to("/dev/zero")
    p = _python(SWEEP, str(tmp_path), stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    removed, made = out.strip().splitlines()
    assert removed == "[]" and fifo_dir.exists() and zero_dir.exists()
    assert made.startswith(str(tmp_path / "goodputlab-t-"))


def _lock_holder(marker):
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX);"
            "print('held', flush=True); time.sleep(600)")
    p = _python(code, str(marker))
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_folder_whose_lock_another_process_holds_is_kept_whatever_its_pid_says(tmp_path):
    d = tmp_path / "goodputlab-t-locked"
    d.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (d / MARKER).write_text(json.dumps({"pid": dead.pid, "started": "0"}))  # by its pid, long gone
    holder = _lock_holder(d / MARKER)
    try:
        assert sweep(tmp_path) == [] and d.exists()
    finally:
        holder.kill()
        holder.wait()
    assert sweep(tmp_path) == [d] and not d.exists()


def test_a_live_kernel_in_another_pid_namespace_keeps_its_folder(tmp_path):
    """Its pid means another process here (or none): judged by pid, its folder was deleted while it
    ran. The lock it holds is seen from this namespace too."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare to make a PID namespace")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", MAKE + "; import time; time.sleep(600)",
                          str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        made = tmp_path / p.stdout.readline().strip().rsplit("/", 1)[1]
        mark = json.loads((made / MARKER).read_text())
        assert mark["pid"] != p.pid  # its pid in its own namespace
        fd = os.open(made / MARKER, os.O_RDONLY)
        try:
            from goodputlab.engine.scratch import _alive_by_pid

            assert not _alive_by_pid(fd)  # the old rule's verdict: gone
        finally:
            os.close(fd)
        assert sweep(tmp_path) == [] and made.exists()
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    # unshare is reaped; its child (pid 1 in the namespace, the lock's holder) may die a moment later
    deadline, swept = time.monotonic() + 10, []
    while not swept and time.monotonic() < deadline:
        swept = sweep(tmp_path)
        time.sleep(0.05)
    assert swept == [made]
