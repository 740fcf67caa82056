"""What is trained: the workload, the model, the objects that train it, one training step.

- :mod:`~goodputlab.training.workload`: the size presets and the seeded Markov source the
  data comes from (numpy only: the configuration reads the presets without torch).
- :mod:`~goodputlab.training.model`: a small GPT.
- :mod:`~goodputlab.training.objects`: model, optimizer and LR schedule built from a run's
  configuration; the device; deterministic seeding.
- :mod:`~goodputlab.training.step`: one step (forward, backward, optimizer, schedule), shared
  by the worker's loop and the stall benchmark.
"""
