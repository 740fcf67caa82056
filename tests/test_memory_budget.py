"""Containers: a small /dev/shm (Docker and Binder give 64 MB) and about 2 GB of memory (Binder).

- The RAM tier of ``--ckpt memory`` checks the free space before it maps its slots there, and
  falls back to a directory that fits, saying so in the run's event log and in a warning. Tested
  with a real small tmpfs (mounted as root; GOODPUTLAB_SHM_DIR points the tier at it).
- Panels offer only the model sizes whose run fits in the machine's available memory, and say why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from goodputlab.checkpoints.ram_tier import SHM_DIR_ENV, choose_memory_root, free_bytes, tier_bytes
from goodputlab.training.workload import PRESETS
from goodputlab.widgets.checkpoints import CheckpointPanel
from goodputlab.widgets.common import available_memory_bytes, models_that_fit

MiB = 1 << 20


@pytest.fixture
def small_shm(tmp_path):
    """A real 4 MiB tmpfs, like a container's small /dev/shm (needs root to mount)."""
    mount = tmp_path / "shm"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=1777", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        if os.geteuid() == 0 and os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs as root: {proc.stderr.strip()}")
        pytest.skip(f"mounting a tmpfs needs root: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_tier_goes_where_it_fits(small_shm, tmp_path, monkeypatch):
    monkeypatch.setenv(SHM_DIR_ENV, str(small_shm))
    assert 3 * MiB < free_bytes(small_shm) <= 4 * MiB
    # fits: stays in the (small) shared memory
    root, note = choose_memory_root(2 * MiB)
    assert root == small_shm and note is None
    # does not fit: the first fallback with room, and a note that says why
    fallback = tmp_path / "run"
    fallback.mkdir()
    root, note = choose_memory_root(tier_bytes(PRESETS["small"].state_bytes), fallbacks=(fallback,))
    assert root == fallback
    assert str(small_shm) in note and "--shm-size" in note and str(fallback) in note
    # nowhere has the room: a clear error, naming what it needed and what each place had
    with pytest.raises(OSError, match=r"needs \d+ MiB and no directory has the room.*--ckpt async"):
        choose_memory_root(1 << 62, fallbacks=(fallback,))


def test_memory_run_with_a_small_shm_falls_back_and_says_so(small_shm, tmp_path):
    """A real run with --ckpt memory, killed once, while the tier's two slots (about 10 MiB for the tiny
    model) do not fit in a 4 MiB /dev/shm: without the check its first save would die with SIGBUS."""
    out = tmp_path / "run"
    code = (
        "import json, warnings, resource, goodputlab as gl\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    r = gl.run(steps=12, ckpt='memory', ckpt_every=3, kill_at_steps=(7,), seed=3, out={str(out)!r}, progress=False)\n"
        "print(json.dumps({'completed': r.summary['completed'], 'warnings': [str(x.message) for x in w],"
        " 'peak_child_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
    )
    env = {**os.environ, SHM_DIR_ENV: str(small_shm)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["completed"]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    (tier,) = [e for e in events if e["kind"] == "memory_tier"]
    assert not tier["path"].startswith(str(small_shm)), "the tier went where it fits"
    assert tier["needed_bytes"] == tier_bytes(PRESETS["tiny"].state_bytes) > free_bytes(small_shm)
    assert "64 MB" in tier["fallback"] and str(small_shm) in tier["fallback"]
    assert any("RAM tier needs" in w for w in report["warnings"]), report["warnings"]
    # the fallback tier still does its job: the restarted worker restored from it, not from disk
    restored = [e for e in events if e["kind"] == "restored"]
    assert restored and restored[0]["source"] == "memory"
    assert not list(small_shm.iterdir()), "nothing left in the small shared memory"
    # the memory estimate the panels use bounds what the run really took (worker, supervisor)
    assert report["peak_child_kb"] * 1024 <= PRESETS["tiny"].run_memory_bytes


# --- memory for panels ------------------------------------------------------------------------------
def _files(tmp_path, meminfo_kb: int, **cgroup: str) -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "meminfo"
    proc.write_text(f"MemTotal:       24000000 kB\nMemFree:        1000 kB\nMemAvailable:   {meminfo_kb} kB\n")
    root = tmp_path / "cgroup"
    for name, text in cgroup.items():
        path = root / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return proc, root


def test_available_memory_reads_the_container_limit(tmp_path):
    # no container limit: the system's MemAvailable
    proc, root = _files(tmp_path / "a", 8_000_000, **{"memory.max": "max\n", "memory.current": "123\n"})
    assert available_memory_bytes(proc, root) == 8_000_000 * 1024
    # cgroup v2 (Binder): 2 GiB limit, 1.2 GiB used of which 0.2 GiB is page cache it can drop
    proc, root = _files(tmp_path / "b", 8_000_000, **{
        "memory.max": f"{2 << 30}\n", "memory.current": f"{int(1.2 * (1 << 30))}\n",
        "memory.stat": f"anon 1\ninactive_file {int(0.2 * (1 << 30))}\nactive_file 5\n"})
    assert available_memory_bytes(proc, root) == pytest.approx(1 << 30, abs=2)
    # cgroup v1, with a limit
    proc, root = _files(tmp_path / "c", 8_000_000, **{
        "memory__memory.limit_in_bytes": f"{3 << 30}\n", "memory__memory.usage_in_bytes": f"{1 << 30}\n",
        "memory__memory.stat": "total_inactive_file 0\n"})
    assert available_memory_bytes(proc, root) == 2 << 30
    # this machine: something sensible
    here = available_memory_bytes()
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < here <= total


def test_models_that_fit_a_binder_machine():
    fit, note = models_that_fit(("tiny", "small", "medium"), available_bytes=int(1.5e9))
    assert fit == ["tiny", "small"]
    assert note.startswith("Not offered: medium (474 MB state) needs about 3.8 GB") and "1.5 GB" in note
    assert models_that_fit(("tiny", "small", "medium"), available_bytes=64 << 30) == (["tiny", "small", "medium"], "")
    # nothing fits: the smallest is still offered, and the note says the others do not fit
    fit, note = models_that_fit(("small", "medium"), available_bytes=1)
    assert fit == ["small"] and "medium" in note


def test_checkpoint_panel_offers_only_what_fits():
    costs = {"sync": 0.1, "async": 0.01, "dcp": 0.05, "memory": 0.005}
    models = ("tiny", "small", "medium")
    p = CheckpointPanel(steps=40, models=models, save_costs={m: costs for m in models}, memory_bytes=int(1.5e9))
    assert [v for _, v in p.model.options] == ["tiny", "small"]
    assert "medium" in p.memory_note.value and "not offered" in p.memory_note.value.lower()
    roomy = CheckpointPanel(steps=40, models=models, save_costs={m: costs for m in models}, memory_bytes=64 << 30)
    assert [v for _, v in roomy.model.options] == list(models) and roomy.memory_note.value == ""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert p.config().model == "tiny"
