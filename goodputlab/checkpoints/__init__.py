"""Checkpoints: complete, atomic, verified, saved by one of several strategies, at an interval.

- :mod:`~goodputlab.checkpoints.store`: the checkpoint folder on disk (manifest, atomic
  commit, verification, keep-newest-k); reads trust nothing in it.
- :mod:`~goodputlab.checkpoints.state`: what a checkpoint holds (model, optimizer,
  schedule, data position, every RNG) and putting it back, bit-exactly.
- :mod:`~goodputlab.checkpoints.snapshot`: copying a state's tensors out (host buffers).
- :mod:`~goodputlab.checkpoints.background`: the writer thread of the strategies that persist later.
- :mod:`~goodputlab.checkpoints.registry` and :mod:`~goodputlab.checkpoints.strategies`: the
  strategies (sync, async, dcp, memory), one file each, and how one plugs into a run.
- :mod:`~goodputlab.checkpoints.ram_tier`: the memory strategy's RAM tier, written and read;
  :mod:`~goodputlab.checkpoints.ram_tier_layout`: where it lives, its owner, its slots' layout.
- :mod:`~goodputlab.checkpoints.dcp_layout`: reading the dcp strategy's files safely.
- :mod:`~goodputlab.checkpoints.safe_unpickle`: the allow-lists every pickle passes.
- :mod:`~goodputlab.checkpoints.restore`: the newest valid state, RAM tier first.
- :mod:`~goodputlab.checkpoints.interval`: ``--ckpt-every auto``, Daly's interval from measured costs.

Importing the package loads nothing; each module loads on use.
"""
