"""The input pipeline: what feeds the training loop, and how deep it reads ahead.

- :mod:`~goodputlab.pipeline.loader`: the data set behind emulated slow storage (a seeded
  latency per batch, a transform that burns real CPU), the step-indexed sampler that makes
  the data position the step, and the DataLoader (workers, prefetch, pinned memory);
- :mod:`~goodputlab.pipeline.prefetch`: overlapping the host-to-device copy with compute.

The model of the stall it causes is pure theory (:mod:`goodputlab.theory.data_stall`);
measuring it on real runs, an experiment (:mod:`goodputlab.experiments.data_stall`).
"""
