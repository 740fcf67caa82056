"""The supervisor: runs an experiment under supervision, one worker process at a time or ``torchrun``'s ranks.

:func:`run_supervised` is the entry point (``goodputlab run``, ``gl.run``). It claims the run's folder
and hands the run to one of two supervisions:

- :mod:`goodputlab.engine.supervision`: a single worker process, killed at failure times and relaunched
  (or replaced by a hot spare);
- :mod:`goodputlab.engine.torchrun_supervision`: ``nproc`` ranks under ``torchrun``, which restarts the
  group after the supervisor kills a rank.

How a worker process is started, its log and its exit: :mod:`goodputlab.engine.launch`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from .config import RunConfig
from ..errors import ConfigError
from .interrupts import StopSignals
from .launch import WorkerCrashed, WorkerLog
from .run_dir import RunDir, claim_run_dir
from ..recovery.disk_full import check_fillable
from ..recovery.modes import DISK_FULL
from .supervision import Progress, ProgressCallback, Supervision, poisson_failure_rng
from .torchft_supervision import INSTALL_HINT, TorchftSupervision, lighthouse_command
from .torchrun_supervision import TorchrunSupervision

__all__ = ["Progress", "ProgressCallback", "WorkerCrashed", "WorkerLog", "poisson_failure_rng", "run_supervised"]


def run_supervised(
    config: RunConfig,
    out: Path | str,
    progress: ProgressCallback | None = None,
    resume: bool = False,
    python: str = sys.executable,
    announce: Callable[[str], None] | None = None,
) -> dict:
    """Run ``config`` to completion (or to its failure budget) and return the summary.

    Writes ``out/config.json``, ``out/events.jsonl``, ``out/summary.json``,
    ``out/ckpt/`` and one log per attempt in ``out/logs/``. With ``resume`` the
    checkpoints already in ``out/ckpt`` are kept and the first worker resumes
    from the newest valid one; otherwise ``out`` starts clean. Which folders may
    be used, and the lock that keeps two runs out of one folder: :mod:`goodputlab.engine.run_dir`
    (a refused folder raises :class:`~goodputlab.errors.ConfigError` before anything starts).

    Ctrl-C, SIGTERM and SIGHUP stop the run the same way: the worker is killed, the
    RAM tier removed, the summary written, then :class:`~goodputlab.engine.interrupts.RunInterrupted`
    is raised; further signals during that cleanup are ignored. A damaged checkpoint
    that a restore skips is reported as a :class:`~goodputlab.checkpoints.store.CheckpointWarning`.
    ``announce`` is given the run's first line once it has been accepted (the model, the steps and
    the torch threads chosen for it, :func:`~goodputlab.engine.launch.choose_threads`).
    """
    if config.fault_tolerance == "torchft" and lighthouse_command() is None:
        raise ConfigError("fault_tolerance", config.fault_tolerance, INSTALL_HINT)  # one line, before the folder is claimed
    if config.failure_mode == DISK_FULL:
        check_fillable(out)  # before the folder is claimed: a refused run touches nothing
    from ..distributed.launch import check_fits_machine

    check_fits_machine(config)  # ranks against this machine's cores and free memory, before the folder is claimed
    if config.emulate_nodes >= 2:
        from ..distributed.netns import check_privilege

        check_privilege(config.emulate_nodes)  # before the folder is claimed: one line, exit 2
    with StopSignals():
        run_dir = claim_run_dir(out, overwrite=config.overwrite, resume=resume)
        try:
            from ..distributed.launch import uses_torchrun

            if config.fault_tolerance == "torchft":
                return TorchftSupervision(config, run_dir, progress, resume, python, announce).run()
            if config.emulate_nodes >= 2:
                from .emulated_supervision import EmulatedNodesSupervision

                return EmulatedNodesSupervision(config, run_dir, progress, resume, python, announce).run()
            if uses_torchrun(config):
                return TorchrunSupervision(config, run_dir, progress, resume, python, announce).run()
            return _supervise(config, run_dir, progress, resume, python, announce)
        finally:
            run_dir.release()


def _supervise(
    config: RunConfig, run_dir: RunDir, progress: ProgressCallback | None, resume: bool, python: str, announce=None
) -> dict:
    return Supervision(config, run_dir, progress, resume, python, announce).run()

