"""Measure a job that a framework trains: callbacks that drive :class:`goodputlab.Recorder` from its hooks.

- :mod:`~goodputlab.integrations.huggingface`: ``GoodputCallback``, a Hugging Face ``TrainerCallback``.
- :mod:`~goodputlab.integrations.lightning`: ``GoodputCallback``, a Lightning ``Callback`` (and its
  ``CheckpointIO`` wrapper, which times saves and restores exactly).
- :mod:`~goodputlab.integrations.hooks`: what both share: a hook's time turned into the recorder's blocks.

Each module imports its framework, so import only the one you use; the rest of goodputlab needs neither.
docs/RECORDER.md ("Frameworks") says what each books, and how.
"""
