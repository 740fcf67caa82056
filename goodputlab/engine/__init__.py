"""The run engine: a real training job, killed and restarted, every second of it booked.

- :mod:`~goodputlab.engine.config`: :class:`RunConfig`, everything that defines a run (each
  field declared once: default, rule, help; the CLI's ``run`` flags are generated from it).
- :mod:`~goodputlab.engine.api`: :func:`run`, :class:`RunResult`, :func:`load_run`.
- :mod:`~goodputlab.engine.supervisor`: ``run_supervised``, the entry point: it hands a run to
  :mod:`~goodputlab.engine.supervision` (one worker, killed at failure times and relaunched) or
  :mod:`~goodputlab.engine.torchrun_supervision` (ranks under torchrun); a worker's process, its log
  and its exit: :mod:`~goodputlab.engine.launch`.
- :mod:`~goodputlab.engine.worker`: one attempt, ``python -m goodputlab.engine.worker``: resume,
  then the training loop.
- :mod:`~goodputlab.engine.events`: the event log every process appends to (the source of truth).
- :mod:`~goodputlab.engine.ledger`: every second of the wall clock booked to one category.
- :mod:`~goodputlab.engine.report`: the breakdown as text.
- :mod:`~goodputlab.engine.run_dir`: which folders a run may use, and its lock.
- :mod:`~goodputlab.engine.interrupts`: Ctrl-C, SIGTERM and SIGHUP stop a run the same way.
- :mod:`~goodputlab.engine.recorder`: the same event log from any training loop (``gl.Recorder``);
  :mod:`~goodputlab.engine.recording` reads it back.
- :mod:`~goodputlab.engine.merge`: one job's log from the logs of its ranks.

Importing the package loads nothing; each module loads on use, torch only in the worker.
"""
