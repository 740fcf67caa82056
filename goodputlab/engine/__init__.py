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
- :mod:`~goodputlab.engine.run_dir`: which folders a run may use, and its lock.
- :mod:`~goodputlab.engine.interrupts`: Ctrl-C, SIGTERM and SIGHUP stop a run the same way.
- What a run writes is read by :mod:`goodputlab.measure` (the event log, the ledger, the report, the
  recorder for your own loop): the engine runs a job, ``measure`` measures one.

Importing the package loads nothing; each module loads on use, torch only in the worker.
"""
