"""Just-in-time checkpoints (Gupta et al., EuroSys 2024) in the restart model's exact closed form, with a queue.

Times in **seconds**. A just-in-time (JIT) checkpoint is a save taken *after* a failure is
detected: in a data-parallel job the healthy replicas still hold the whole state, so one of them
saves it before the job restarts, and the restart resumes from the step of the failure instead of
the last periodic checkpoint (the lab's ``--ckpt-jit``, ``goodputlab/distributed/jit.py``). It
cannot help when the failure takes the state with it (every replica on the failed machine, a
power loss), so a share ``p`` (``jit_share``) of failures is covered and the rest fall back to the
periodic checkpoints.

The model is the simulator's (``SimConfig.jit_share``, ``jit_save_s``, ``step_s``, ``queue_s``):
Poisson failures at rate ``1/M`` of the running time. After each failure the job waits ``q`` in
the queue, then, when the failure is covered, takes the JIT save ``J``; no failure strikes either
(the queue holds no machines, and the save takes seconds). Then it recovers for ``R`` (restart and
restore; a failure there starts them again) and trains, its checkpoint cycle starting afresh. A
covered failure keeps every step but the one in flight (``U``, uniform over ``step_s``); an
uncovered one keeps the durable checkpoints. Every failure starts a new cycle, so by renewal-reward,
with ``T`` the training time after a recovery (exponential with mean ``M``, reached with probability
``e^{-R/M}``)::

    goodput = e^{-R/M} (p (E[C] - E[min(C, U)]) + (1 - p) E[D]) / (M + q + p J)

``E[C] = M (1 - e^{-tau/M}) (1 + e^{-c1/M} / (1 - e^{-c/M}))`` is the compute done by the failure
(``tau`` of each cycle, the first ``c1``, the later ``c``); ``E[min(C, U)] = M (1 - (M/s)(1 - e^{-s/M}))``
the step lost, exact when a step is no longer than an interval (then ``C = T`` wherever
``C < U``); ``E[D] = tau e^{-(c1 + L)/M} / (1 - e^{-c/M})`` the compute of the durable checkpoints
(``L`` an async save's lag). With ``p = q = 0`` it is Daly's model
(:func:`goodputlab.theory.renewal.periodic_goodput`, Poisson). The effective training time ratio
counts the saves (the JIT save too) as training time: ``ETTR = (e^{-R/M} M - E[lost] + p J) / (M + q + p J)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import validate
from ..errors import check
from .renewal import cycle_times


@dataclass(frozen=True)
class RestartPrediction:
    """What :func:`restart_goodput` predicts for a long job: ``goodput`` and ``ettr`` (shares of the wall),
    ``lost_per_failure_s`` (compute redone per failure) and ``failures_per_s`` (per second of wall time)."""

    goodput: float
    ettr: float
    lost_per_failure_s: float
    failures_per_s: float


def restart_goodput(
    interval_s: float,
    blocking_s: float,
    restart_s: float,
    mtbf_s: float,
    *,
    durable_lag_s: float = 0.0,
    queue_s: float = 0.0,
    jit_share: float = 0.0,
    jit_save_s: float = 0.0,
    step_s: float = 0.0,
) -> RestartPrediction:
    """Exact goodput and ETTR of restart from a checkpoint with Poisson failures, a queue and JIT checkpoints.

    ``interval_s`` (tau) compute between periodic checkpoints, ``blocking_s`` the blocking part of a
    save, ``durable_lag_s`` an async save's persist after it; ``restart_s`` the recovery (restart and
    restore, ``R``); ``mtbf_s`` the job's mean running time between failures; ``queue_s`` the wait
    to be scheduled after each failure; ``jit_share`` the share of failures a JIT save covers,
    ``jit_save_s`` its duration and ``step_s`` one training step (a covered failure loses the step
    in flight, at most ``interval_s``). The derivation is the module's docstring.
    """
    tau = validate.seconds("interval_s", interval_s, positive=True)
    lag = validate.seconds("durable_lag_s", durable_lag_s)
    rec = validate.seconds("restart_s", restart_s)
    m = validate.seconds("mtbf_s", mtbf_s, positive=True)
    q = validate.seconds("queue_s", queue_s)
    p = validate.share("jit_share", jit_share, high_open=False)
    jit = validate.seconds("jit_save_s", jit_save_s)
    step = validate.seconds("step_s", step_s)
    check(step <= tau, "step_s", step, f"at most the interval ({tau:g} s): a step is part of one")
    first, later = cycle_times(tau, blocking_s, lag)
    reach = math.exp(-rec / m) if rec / m < 700 else 0.0  # P(the recovery completes before the next failure)
    survive_cycle = -math.expm1(-later / m)
    computed = m * -math.expm1(-tau / m) * (1.0 + math.exp(-first / m) / survive_cycle)
    durable = tau * math.exp(-(first + lag) / m) / survive_cycle if (first + lag) / m < 700 else 0.0
    in_flight = 0.0 if step == 0 else m * (1.0 - m / step * -math.expm1(-step / m))
    kept = reach * (p * (computed - in_flight) + (1.0 - p) * durable)
    lost = reach * (p * in_flight + (1.0 - p) * (computed - durable))
    cycle = m + q + p * jit
    return RestartPrediction(
        goodput=kept / cycle,
        ettr=(reach * m - lost + p * jit) / cycle,
        lost_per_failure_s=lost,
        failures_per_s=1.0 / cycle,
    )
