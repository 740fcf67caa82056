"""Which job wrote a checkpoint, and which checkpoints a job may restore.

A run folder outlives the processes that write into it. A *job* is one start of a run's supervisor
(``goodputlab run``, ``gl.run()``, a ``--resume`` too): :func:`~goodputlab.engine.run_dir.claim_run_dir`
gives it a fresh random id and writes it into the folder's marker (:data:`MARKER`), beside the folder's
run id, with the time the job started and whether it resumes. Every checkpoint the job's processes
commit carries that id in its manifest (``job_id``). A job restores

* a checkpoint its own processes wrote, and
* with ``--resume``, one committed before the job started: an earlier job's, or one from before
  job ids existed (no ``job_id``), which is how such checkpoints stay readable by the runs that own them.

Anything else is ignored, with a :class:`~goodputlab.checkpoints.store.CheckpointWarning`: a checkpoint
that appears while the job runs with another job's id, or with none. That is what a rank orphaned by
a SIGKILLed supervisor would commit (a new run in the folder restored an orphan's step 250 after its
own step 100); ranks now die with their supervisor (:mod:`goodputlab.procs`), and this check holds
even where they could not. A checkpoint someone crafts can carry any id: that is no defence against
whoever can write the folder (docs/SECURITY.md), only against a job's processes mixing with another's.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..safe_io import read_regular

MARKER = ".goodputlab-run"  # marks a run folder; flock-ed by the run using it (engine.run_dir)
MARKER_MAX_BYTES = 4096
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class CheckpointOwner:
    """The job that writes into a run folder now: its id, when it started (Unix seconds), whether it resumes."""

    job_id: str
    started_unix: float
    resume: bool

    @classmethod
    def of_run(cls, run_dir: Path | str) -> CheckpointOwner | None:
        """The job named by ``run_dir``'s marker, or ``None`` (no marker with a job id: a folder from before job
        ids, or one no supervisor claimed, whose checkpoints are then neither stamped nor filtered)."""
        try:
            owner = json.loads(read_regular(Path(run_dir) / MARKER, MARKER_MAX_BYTES))
        except (OSError, ValueError):
            return None
        if not isinstance(owner, dict):
            return None
        job, started, resume = owner.get("job_id"), owner.get("started_unix"), owner.get("resume", False)
        if not (isinstance(job, str) and JOB_ID.match(job) and _is_time(started) and isinstance(resume, bool)):
            return None
        return cls(job, float(started), resume)

    def refusal(self, manifest: dict[str, Any]) -> str | None:
        """Why this job may not restore the checkpoint of ``manifest``, or ``None`` when it may."""
        job = manifest.get("job_id")
        if job == self.job_id:
            return None
        created = manifest.get("created_unix")
        earlier = _is_time(created) and created < self.started_unix
        if self.resume and earlier:
            return None  # the run this job resumes: an earlier job's, or from before job ids
        writer = f"job {job}" if isinstance(job, str) else "a writer that named no job"
        why = "after this job started" if not earlier else "before this job, which does not resume (--resume)"
        return f"written by {writer} {why}, not by this job ({self.job_id})"


def _is_time(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
