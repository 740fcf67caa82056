"""Periodic checkpoints of an in-job recovery run (``--fault-tolerance torchft --ckpt-every K``) and its ``--resume``.

In-job recovery needs no checkpoint while one replica group lives: a relaunched group heals from a
peer. A checkpoint is for the rest: a run stopped on purpose (Ctrl-C, SIGTERM), or one where every
group died at once (the machine, the lighthouse), continues with ``--resume`` from the newest valid one.

Who saves: after every ``K``-th committed step, one replica group, the first participant of the step's
quorum (``Manager.participating_rank() == 0``), on its rank 0 only. The groups at the newest step hold
the same model, optimizer and schedule: torchft's ``should_commit`` is a vote within one group (groups may
differ), and a group that did not commit a step is behind in step count and heals from one that did at
its next quorum. So one copy from a group at the newest step is the whole state, and ``G`` copies would
only multiply the writes by ``G``; torchft's own guidance is likewise one checkpoint per replica group. The
saving group's time is booked ``checkpoint_save``; the others wait for it in the next quorum
(``straggler_wait``). The format is the one-process engine's (:func:`~goodputlab.checkpoints.state.capture_state`,
committed atomically with a manifest by :class:`~goodputlab.checkpoints.store.CheckpointStore`), the RNG
states the saver's: every group draws the same dropout masks from the same seed, step by step.

On ``--resume`` every group's first launch loads the newest valid checkpoint (booked
``checkpoint_restore``) and sets its manager's step to it, so the first quorum finds every group at
that step and nobody heals; a group relaunched later in the run heals from a peer as always.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable

from ..measure import events as E


def is_due(config, step_done: int) -> bool:
    """Is a checkpoint due after ``step_done`` committed steps (``--ckpt-every``; none after the last)?"""
    k = config.ckpt_every
    return isinstance(k, int) and k > 0 and step_done % k == 0 and step_done < config.steps


def save(run_dir: Path, config, events, built, step_done: int, batch_size: int) -> None:
    """Save the state after ``step_done`` steps (this group is the saver): ``ckpt_save``, then ``ckpt_commit``."""
    from ..checkpoints.state import capture_state
    from ..checkpoints.store import CheckpointStore, state_file_cap

    events.emit(E.W_CKPT_SAVE, step=step_done)
    state = capture_state(built.model, built.optimizer, built.scheduler, step_done, {"batch_size": batch_size})
    path = CheckpointStore.of_run(run_dir, config.keep, state_file_cap(built.preset.state_bytes)).save(state, step_done)
    events.emit(E.M_CKPT_COMMIT, ckpt_step=step_done, tier="disk", path=str(path))


def restore(run_dir: Path, config, events, built) -> int:
    """Load the newest valid checkpoint into ``built`` (booked ``restore``); its step, or 0 when none loads.
    A damaged one is skipped (``ckpt_invalid``) for the next older one."""
    from ..checkpoints.state import apply_state, check_training_state
    from ..checkpoints.store import CheckpointStore, state_file_cap

    events.emit(E.W_RESTORE, step=0)
    # this job's checkpoints only; a file listed as larger than this model's state allows is refused unread
    store = CheckpointStore.of_run(run_dir, config.keep, state_file_cap(built.preset.state_bytes))
    found = store.load_newest_valid(
        on_invalid=lambda c, why: events.emit(E.M_CKPT_INVALID, ckpt_step=c.step, tier="disk", reason=why),
        accept=lambda c, state: check_training_state(state, c.step, built.model, built.optimizer),
    )
    if found is None:
        return 0
    checkpoint, state = found
    step = apply_state(state, built.model, built.optimizer, built.scheduler)
    events.emit(E.M_RESTORED, step=step, ckpt_step=step, source="disk", path=str(checkpoint.path))
    return step


class ResumeNews:
    """A resumed run's restore, told as it happens, each as one :class:`~goodputlab.checkpoints.store.CheckpointWarning`:
    no checkpoint in ``ckpt`` verifies (``resume_step`` 0), each damaged checkpoint a replica skipped (once, in the
    words of ``describe_invalid``), and a first step trained with nothing restored at all."""

    def __init__(self, ckpt: Path, resume_step: int, describe_invalid: Callable[[dict], str]):
        from ..checkpoints.store import CheckpointWarning

        self.warning, self.ckpt, self.resume_step, self.describe = CheckpointWarning, ckpt, resume_step, describe_invalid
        self.said: set = set()  # the damaged steps told, and "restored" once a replica restored one
        if resume_step == 0 and any(ckpt.glob("step-*")):
            warnings.warn(f"--resume: no checkpoint in {ckpt} verifies (each is damaged): the run trains from step 0",
                          self.warning, stacklevel=3)

    def seen(self, e: dict) -> None:
        """An event of a replica's first launch."""
        if e["kind"] == E.M_CKPT_INVALID and e["ckpt_step"] not in self.said:
            self.said.add(e["ckpt_step"])
            warnings.warn(self.describe(e), self.warning, stacklevel=4)
        elif e["kind"] == E.M_RESTORED and e.get("source") == "disk":
            self.said.add("restored")
        elif e["kind"] == E.W_STEP_END and self.resume_step > 0 and not {"restored", "nothing"} & self.said:
            self.said.add("nothing")
            warnings.warn(f"--resume: no replica could restore a checkpoint of {self.ckpt} (each was damaged): the run "
                          "trains from step 0", self.warning, stacklevel=4)


def resumed_step(replicas: dict[int, list[dict]]) -> int:
    """The step the replicas' first launches restored from disk (the lowest, if they differ; 0: none)."""
    return min((e["ckpt_step"] for events in replicas.values() for e in events
                if e["kind"] == E.M_RESTORED and e["attempt"] == 0 and e.get("source") == "disk"), default=0)
