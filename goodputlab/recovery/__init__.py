"""Recovery: how a run fails, how the failure is noticed, and how the job comes back.

What lives here, one idea per module:

* :mod:`~goodputlab.recovery.modes`: the failure modes (``kill``, ``hang``, ``exception``,
  ``loader-death``, ``disk-full``): what each does, who injects it, how it is detected,
  how the ledger books it; and :class:`~goodputlab.recovery.modes.FailureClock`, when
  the next failure strikes (a seeded Poisson process over the time a worker is exposed,
  plus failures at given steps).
* :mod:`~goodputlab.recovery.booking`: the event kinds recovery adds to the event log and
  the category the ledger books each one to (the rules of ``docs/ARCHITECTURE.md``).
* :mod:`~goodputlab.recovery.watchdog`: the heartbeat watchdog that declares a worker
  hung when it shows no progress for ``--hang-timeout`` seconds.
* :mod:`~goodputlab.recovery.control`: the pipe on which the supervisor talks to a worker:
  it activates a hot spare (``go <attempt>``) and asks for a failure to be injected.
* :mod:`~goodputlab.recovery.inject`: the worker's side of injection: an error raised in
  a step, a main loop that stops making progress, stragglers, a DataLoader worker killed
  and the loader rebuilt.
* :mod:`~goodputlab.recovery.disk_full`: a real ``ENOSPC``: fill a small file system
  (leaving room for the log, not for a checkpoint), free it again; mount a size-limited
  tmpfs where the machine allows it.
* :mod:`~goodputlab.recovery.omit`: ``--ckpt-omit``: checkpoints that leave out the
  optimizer, the data position or the RNG states (to show what goes wrong), and the
  count of samples a run repeated or skipped.
* :mod:`~goodputlab.recovery.standby`: the hot spare's side: a worker that has started,
  imported torch and built its model waits for the supervisor's word, off the job's
  critical path (its events are kept until it is activated).
* :mod:`~goodputlab.recovery.resume`: ``--resume``: continuing a stopped run in the same
  event log, and refusing a configuration that does not match the run's checkpoints.

Nothing here imports torch at module level; the pure modules (``modes``, ``booking``,
``watchdog``, ``omit``, ``resume``) import nothing that launches or trains.
"""
