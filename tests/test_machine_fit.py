"""Ranks against this machine's cores and free memory (``--oversubscribe`` to go past them), for real.

Before: ``--nproc 1024`` on 2 cores, ``--emulate-nodes 8 --nproc 1024`` and torchft ``--nproc 512 --group-size 16``
were accepted, and inside a 3 GB cgroup ``--nproc 64`` hit the limit in 20 s: the OOM killer took the supervisor.
Now a job of two or more ranks is refused in one line (exit 2, nothing started, no folder made) past 2 ranks a core
or past its free memory, counted at every level of this process's own cgroup. A real cgroup with a 1 GiB limit holds
the CLI in the memory test.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from goodputlab.distributed.launch import RANKS_PER_CORE, check_fits_machine
from goodputlab.engine.config import RunConfig
from goodputlab.errors import ConfigError
from goodputlab.machine import available_memory_bytes, cores
from goodputlab.training.workload import PRESETS

GOODPUTLAB = [sys.executable, "-m", "goodputlab.cli"]


def refused(cmd: list[str], out: Path, prefix: list[str] = ()) -> str:
    proc = subprocess.run([*prefix, *GOODPUTLAB, "run", *cmd, "--model", "tiny", "--steps", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "--oversubscribe starts them anyway" in proc.stderr, proc.stderr
    assert not out.exists()  # refused before the folder was made
    return proc.stderr


@pytest.mark.parametrize("flags, shown", [
    (["--nproc", "1024", "--batch-size", "1024"], "not 1024;"),
    (["--emulate-nodes", "8", "--nproc", "1024", "--batch-size", "8192"], "not 8192 (--emulate-nodes 8 x --nproc 1024)"),
    (["--fault-tolerance", "torchft", "--nproc", "512", "--group-size", "16", "--batch-size", "8192", "--ckpt-every", "0"],
     "not 8192 (--nproc 512 x --group-size 16)"),
])
def test_the_red_teams_process_counts_are_refused_in_one_line_before_anything_starts(flags, shown, tmp_path):
    if "--fault-tolerance" in flags:
        pytest.importorskip("torchft", reason="the ft extra: pip install 'goodputlab[ft]'")
    if "--emulate-nodes" in flags and os.geteuid() != 0:
        pytest.skip("emulated nodes need root")
    line = refused(flags, tmp_path / "r")
    assert f"{RANKS_PER_CORE} a core of its {cores()}," in line and shown in line, line


@pytest.fixture
def one_gib_cgroup():
    """A real memory cgroup of this process's own one, limited to 1 GiB (cgroup v2 or v1), removed afterwards."""
    own = {c: p for _, c, p in (line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines())}
    v1 = next((p for c, p in own.items() if "memory" in c.split(",")), None)
    if v1 is not None:
        folder, limit = Path("/sys/fs/cgroup/memory") / v1.strip("/") / f"goodputlab-test-{os.getpid()}", "memory.limit_in_bytes"
    else:
        folder, limit = Path("/sys/fs/cgroup") / own.get("", "/").strip("/") / f"goodputlab-test-{os.getpid()}", "memory.max"
    try:
        folder.mkdir()
        (folder / limit).write_text(str(1 << 30))
    except OSError as e:
        pytest.skip(f"no memory cgroup can be made here ({e.strerror})")
    try:
        yield folder
    finally:
        folder.rmdir()


def test_a_job_past_its_containers_memory_is_refused_and_oversubscribe_starts_one_past_the_cores(one_gib_cgroup, tmp_path):
    enter = ["sh", "-c", f'echo $$ > {one_gib_cgroup / "cgroup.procs"} && exec "$@"', "sh"]
    ranks = 4  # 4 x the tiny model's 0.48 GB: more than 1 GiB, and within 2 ranks a core of 2 cores
    line = refused(["--nproc", str(ranks)], tmp_path / "r", prefix=enter)
    held = float(re.search(r"and ([0-9.]+) GB of free memory", line)[1])
    assert held <= 1.08 and f"not {ranks};" in line, line  # the cgroup's limit, not the machine's memory
    # the same number of ranks, outside the cgroup, with --oversubscribe past the cores as well: it runs
    many = 2 * RANKS_PER_CORE * cores()
    if many * PRESETS["tiny"].run_memory_bytes > available_memory_bytes() or many > 16:
        pytest.skip(f"this machine cannot hold {many} tiny ranks to show the override")
    refused(["--nproc", str(many), "--batch-size", str(many * 2)], tmp_path / "no")
    proc = subprocess.run([*GOODPUTLAB, "run", "--nproc", str(many), "--batch-size", str(many * 2), "--oversubscribe",
                           "--model", "tiny", "--steps", "2", "--threads", "1", "--json", "--quiet", "--out", str(tmp_path / "yes")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_rule_counts_every_training_process_and_a_single_process_is_never_refused():
    tiny = PRESETS["tiny"].run_memory_bytes
    check_fits_machine(RunConfig(nproc=1, model="medium"), cores=1, free_bytes=1)  # one process: as before
    check_fits_machine(RunConfig(nproc=4, batch_size=16), cores=2, free_bytes=4 * tiny)
    with pytest.raises(ConfigError, match="at most 4 ranks here .* not 8;"):
        check_fits_machine(RunConfig(nproc=8, batch_size=16), cores=2, free_bytes=100 * tiny)
    with pytest.raises(ConfigError, match="at most 3 ranks here .* not 4;"):
        check_fits_machine(RunConfig(nproc=4, batch_size=16), cores=8, free_bytes=3 * tiny + 1)
    with pytest.raises(ConfigError, match=r"not 5 \(--nproc 4 x --group-size 1 \+ a hot spare\)"):
        check_fits_machine(RunConfig(nproc=4, batch_size=16, fault_tolerance="torchft", hot_spare=True, ckpt_every=0),
                           cores=2, free_bytes=100 * tiny)
    check_fits_machine(RunConfig(nproc=8, batch_size=16, oversubscribe=True), cores=1, free_bytes=1)
