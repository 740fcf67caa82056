"""How many torch threads a run's workers use: one for the small models, the free cores for the others.

On a CPU a tiny or small model's matrix products take microseconds: a second thread only adds
synchronisation, and on a busy machine (a laptop with a browser, Binder, a shared CI runner) a
thread that waits for a core a neighbour holds stalls every step (a tiny step took 16x as long with
two threads as with one beside two busy loops on 2 cores: benchmarks/threads.py). Pure: no torch.
"""

from __future__ import annotations

import os


#: presets whose steps are too small to share among threads: one torch thread each (on CPU a second
#: thread only adds synchronisation, and on a busy machine its spin-waits cost tenfold)
ONE_THREAD_PRESETS = ("tiny", "small")


def default_threads(model: str, cores_free: int, ranks: int = 1) -> int:
    """torch's intra-op threads for a run of ``model`` when ``--threads`` is not given.

    One for the tiny and small presets (their matrix products are a few microseconds: splitting
    them gains nothing, and a thread that waits on a core a neighbour holds stalls every step);
    for the larger ones the cores no one else is using (``cores_free``), shared among the run's
    ``ranks`` on this machine, at least one each.
    """
    if model in ONE_THREAD_PRESETS:
        return 1
    return max(1, cores_free // max(1, ranks))


def cores_free() -> int:
    """Cores this process may use that others are not using now: the CPUs it may run on, less the
    one-minute load average (the runnable processes of everyone else), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, round(cores - busy)))


def choose_threads(config) -> tuple[int, str]:
    """The torch threads each worker of ``config`` (a :class:`~goodputlab.engine.config.RunConfig`) runs
    with, and why: ``--threads`` when given, else :func:`default_threads` for the model and the cores free now."""
    if config.threads:
        return config.threads, "--threads"
    ranks = config.nproc if config.nproc > 1 else 1
    if config.model in ONE_THREAD_PRESETS:
        return 1, f"the default for the {config.model} model"
    free = cores_free()
    n = default_threads(config.model, free, ranks)
    return n, f"the default for the {config.model} model: {free} core{'s' if free != 1 else ''} free" + (
        f", {ranks} ranks" if ranks > 1 else "")
