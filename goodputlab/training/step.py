"""One training step: forward, backward, optimizer and schedule. Written once: the worker's loop
and the stall benchmark (:mod:`goodputlab.experiments.checkpoint_stall`) both take it."""

from __future__ import annotations


def train_step(model, optimizer, scheduler, batch: dict, device, non_blocking: bool = False):
    """One optimisation step; returns the loss tensor (not yet synchronised)."""
    x = batch["x"].to(device, non_blocking=non_blocking)
    y = batch["y"].to(device, non_blocking=non_blocking)
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss
