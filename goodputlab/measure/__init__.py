"""Measure your own job: record any training loop's time and read back where it went (pure: no torch).

This subpackage is the part of goodputlab to use on a job of your own, and all that the light install
(``pip install goodputlab``, numpy only) needs. It writes the event log and books every second of it:

- :mod:`~goodputlab.measure.recorder`: :class:`~goodputlab.measure.recorder.Recorder` (``gl.Recorder``),
  the event log from any training loop; its files: :mod:`~goodputlab.measure.recorder_files`.
- :mod:`~goodputlab.measure.events`: the event log every process appends to (the source of truth);
  one line checked: :mod:`~goodputlab.measure.event_line`; a log read in batches:
  :mod:`~goodputlab.measure.logread`; the recorder's binary step records: :mod:`~goodputlab.measure.step_records`.
- :mod:`~goodputlab.measure.fold`: the ledger in one pass (its limits: :mod:`~goodputlab.measure.fold_limits`;
  which steps survive: :mod:`~goodputlab.measure.steps`); :mod:`~goodputlab.measure.ledger`: every second of
  the wall clock booked to one category.
- :mod:`~goodputlab.measure.merge` and :mod:`~goodputlab.measure.merge_stream`: one job's log from its ranks'.
- :mod:`~goodputlab.measure.recording`: a recorded folder read back; :mod:`~goodputlab.measure.follow`: a
  running job followed; :mod:`~goodputlab.measure.report`: the breakdown as text.

The run engine (:mod:`goodputlab.engine`) writes the same log from its supervisor and workers. Importing
the package loads nothing; each module loads on use.
"""
