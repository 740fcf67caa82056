"""What this machine offers a run now: its cores and its free memory (pure: reads ``/proc`` and the cgroup files).

A container's limit counts, at every level of this process's own cgroup (cgroup v2, or v1's ``memory``
controller): a run inside a 3 GB cgroup of a 24 GB machine has 3 GB, not 24.
"""

from __future__ import annotations

import os
from pathlib import Path


def cores() -> int:
    """The CPU cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (cgroup v2, no limit) is not a number


def _stat(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key and v.strip().isdigit():
                return int(v)
    except OSError:
        pass
    return 0


def _own_cgroups(self_cgroup: Path) -> tuple[str, str]:
    """This process's cgroup path in the v2 hierarchy and in v1's ``memory`` controller (``""``: the root)."""
    v2 = v1 = ""
    try:
        for line in self_cgroup.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                v2 = path
            elif "memory" in controllers.split(","):
                v1 = path
    except (OSError, ValueError):
        pass
    return v2.strip("/"), v1.strip("/")


def _levels(root: Path, path: str) -> list[Path]:
    """``root/path`` and every folder above it up to ``root``."""
    parts = [p for p in path.split("/") if p and p != ".."]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def available_memory_bytes(proc: Path = Path("/proc/meminfo"), cgroup: Path = Path("/sys/fs/cgroup"),
                           self_cgroup: Path = Path("/proc/self/cgroup")) -> int:
    """Memory a new run can use now (bytes): the system's ``MemAvailable``, or less when this process's
    container (cgroup v2 or v1, at any level of its own cgroup) has a limit: the limit minus what that
    cgroup uses, page cache it can drop not counted."""
    avail = None
    try:
        for line in proc.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    if avail is None:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    v2, v1 = _own_cgroups(self_cgroup)
    places = [(level, "memory.max", "memory.current", "inactive_file") for level in _levels(cgroup, v2)]
    places += [(level, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
               for level in _levels(cgroup / "memory", v1)]
    for level, limit_name, usage_name, cache_key in places:
        limit, usage = _read_int(level / limit_name), _read_int(level / usage_name)
        if limit is None or usage is None or limit >= 1 << 60:
            continue
        in_use = max(0, usage - _stat(level / "memory.stat", cache_key))
        avail = min(avail, max(0, limit - in_use))
    return avail
