"""What in-job recovery costs besides a missing group's share: a degraded step, the timeout that finds a dead peer, more groups.

Times in **seconds**, sizes in **bytes**, batch sizes in samples. In-job recovery (torchft,
:mod:`goodputlab.theory.in_job`) books a missing replica group as ``degraded``; three costs lie
outside that share, and each has a closed form here.

**1. What a degraded step is worth.** While ``k`` of ``G`` groups are away, torchft's
``Manager`` averages the gradients over the groups that took part and keeps the learning rate:
the step has the batch ``B = B0 (G - k) / G`` at the full batch ``B0``'s learning rate. In
McCandlish et al.'s model (2018, eq. 2.6) a step of learning rate ``eps`` on a batch ``B`` lowers
the loss by ``dL = eps |G|^2 - (eps^2 / 2) G'HG (1 + B_noise / B)``, whose best learning rate is
``eps_max / (1 + B_noise / B)``. At the full batch's best learning rate, ``eps0 = eps_max / (1 +
B_noise / B0)``, the degraded step makes, in full steps::

    r_fixed = dL(eps0, B) / dL(eps0, B0) = 2 - (1 + B_noise / B) / (1 + B_noise / B0)

(:func:`degraded_step_progress` with ``learning_rate="fixed"``): 0.50 for half the batch at
``B_noise = B0``, 1 when the gradient has no noise, and 0 for half the batch as the noise grows;
below 0 (the step makes the loss worse) when ``B`` is less than half ``B0`` and the noise large.
The form ``r = (B / B0)(B_noise + B0) / (B_noise + B) = (1 + B_noise/B0) / (1 + B_noise/B)``
(AdaScale's gain) is the same step at *its own* best learning rate; it applies where the learning
rate is rescaled each step for the batch that took part (AdaScale, or a schedule that follows the
participants), not to torchft's default (``learning_rate="retuned"``; 0.67 at half the batch and
``B_noise = B0``). :func:`degraded_steps_cost` turns a count of degraded steps into the full steps
they cost.

**2. The timeout that finds a dead peer.** When a group dies inside a collective, the survivors
learn it only when the collective times out: torchft's ``Manager`` waits 60 s by default
(``timeout``), NCCL's process group 10 minutes. The whole job stalls meanwhile, so a failure
costs every group the timeout ``d``. Stalls of failures less than ``d`` apart overlap, so the job
is stalled exactly when a failure lies in the last ``d`` seconds: a share
``1 - e^{-lambda d}`` of the time (:func:`detection_stall_share`; exact for Poisson failures). At
Llama 3's 466 failures in 54 days and a 60 s timeout, 0.60% of the time: more than the missing
groups take with eight groups (0.45%, :func:`goodputlab.theory.in_job.away_share` with a 6-minute
relaunch and heal).

**3. More groups are not free** (:func:`replica_group_costs`). With ``G`` groups over ``N``
devices each group holds a whole replica on ``N / G`` devices, so each device holds ``G / N`` of
the model's state (``bytes_per_parameter x P x G / N``: the memory a group needs grows with
``G``), and every step the groups average their gradients in a cross-group all-reduce: each
device exchanges its shard, ``2 (G - 1) / G x gradient_bytes x P x G / N`` bytes (a ring), at its
share of the network. The part not hidden behind compute is a steady per-step overhead, the
``step_overhead_share`` of :func:`goodputlab.theory.in_job.in_job_goodput` and the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import validate

#: torchft's Manager: the default timeout of its operations, the collectives included (torchft 0.2.0).
TORCHFT_DEFAULT_TIMEOUT_S = 60.0

#: How a degraded step's learning rate is set: torchft's default keeps it (``fixed``); ``retuned`` is
#: the step at its own batch's best learning rate (AdaScale's form).
LEARNING_RATES = ("fixed", "retuned")


def degraded_step_progress(batch: float, full_batch: float, noise_scale: float, learning_rate: str = "fixed") -> float:
    """The full steps of progress one step on ``batch`` samples makes, against a step on ``full_batch``.

    McCandlish et al.'s model of one SGD step, ``noise_scale`` its ``B_noise`` (samples; ``inf``: all
    noise). ``learning_rate="fixed"``: at the full batch's best learning rate (torchft averages over
    the groups that took part and keeps the rate): ``2 - (1 + B_noise/B) / (1 + B_noise/B0)``, which
    can be negative. ``"retuned"``: at the smaller batch's own best learning rate:
    ``(1 + B_noise/B0) / (1 + B_noise/B)`` (AdaScale's gain). The derivation is the module's docstring.
    """
    b = validate.number("batch", batch, 0, low_open=True, unit="samples")
    b0 = validate.number("full_batch", full_batch, 0, low_open=True, unit="samples")
    validate.number("batch", b, 0, b0, low_open=True, unit="samples", note="at most the full batch")
    noise = validate.number("noise_scale", noise_scale, 0, unit="samples", allow_inf=True, note="inf for all noise")
    validate.choice("learning_rate", learning_rate, LEARNING_RATES)
    if math.isinf(noise):  # the limits: (1 + n/B)/(1 + n/B0) -> B0/B
        ratio = b0 / b
    else:
        ratio = (1.0 + noise / b) / (1.0 + noise / b0)
    return 2.0 - ratio if learning_rate == "fixed" else 1.0 / ratio


def degraded_steps_cost(degraded_steps: float, survivors: int, groups: int, noise_scale_over_batch: float,
                        learning_rate: str = "fixed") -> float:
    """The full steps that ``degraded_steps`` steps on ``survivors`` of ``groups`` groups cost the model.

    ``degraded_steps x (1 - r)``, with ``r`` :func:`degraded_step_progress` at the batch
    ``survivors / groups`` of the full one and the noise scale ``noise_scale_over_batch`` times the
    full batch. More than ``degraded_steps`` when ``r < 0``.
    """
    steps = validate.number("degraded_steps", degraded_steps, 0, unit="steps")
    g = validate.whole("groups", groups, 2)
    s = validate.whole("survivors", survivors, 1, g - 1, note="fewer than the groups: a step is degraded")
    return steps * (1.0 - degraded_step_progress(s / g, 1.0, noise_scale_over_batch, learning_rate))


def detection_stall_share(failure_rate_per_s: float, timeout_s: float = TORCHFT_DEFAULT_TIMEOUT_S) -> float:
    """Share of the time the whole job stalls in a collective, waiting for a dead peer's timeout: ``1 - e^{-lambda d}``.

    ``failure_rate_per_s``: the job's failures that leave it training (lambda); ``timeout_s``: the
    collective's timeout (d; torchft's Manager: 60 s). Exact for Poisson failures: the job is
    stalled exactly when a failure fell within the last ``d`` seconds.
    """
    rate = validate.number("failure_rate_per_s", failure_rate_per_s, 0, unit="failures per second")
    d = validate.seconds("timeout_s", timeout_s)
    return -math.expm1(-rate * d)


@dataclass(frozen=True)
class GroupCosts:
    """What ``G`` replica groups cost each device: ``state_bytes_per_device`` (the model's state held),
    ``allreduce_bytes_per_device`` and ``allreduce_s`` (the cross-group all-reduce of each step),
    ``step_overhead_share`` (its part not hidden behind compute, over the step and it), and
    ``fits`` (the state fits the memory given)."""

    groups: int
    state_bytes_per_device: float
    allreduce_bytes_per_device: float
    allreduce_s: float
    step_overhead_share: float
    fits: bool


def replica_group_costs(
    parameters: float,
    devices: int,
    groups: int,
    step_s: float,
    network_bps_per_device: float,
    *,
    state_bytes_per_parameter: float = 16.0,
    gradient_bytes_per_parameter: float = 2.0,
    hidden_share: float = 0.0,
    memory_bytes_per_device: float = 80e9,
) -> GroupCosts:
    """The costs of ``groups`` replica groups over ``devices`` devices, a model of ``parameters`` parameters.

    Each group shards a whole replica over ``devices / groups`` devices, so a device holds
    ``state_bytes_per_parameter x parameters x groups / devices`` bytes (16: mixed-precision Adam)
    and, every step, exchanges its gradient shard with the other groups in a ring all-reduce:
    ``2 (G - 1) / G x gradient_bytes_per_parameter x parameters x groups / devices`` bytes at
    ``network_bps_per_device`` (bytes per second). A share ``hidden_share`` of it overlaps the
    ``step_s`` seconds of compute; the rest adds to every step. One group needs no cross-group
    all-reduce. ``memory_bytes_per_device`` (80 GB: an H100) is what the state must fit in.
    """
    p = validate.number("parameters", parameters, 0, low_open=True)
    n = validate.whole("devices", devices, 1)
    g = validate.whole("groups", groups, 1, n, note="each a whole replica; at most one per device")
    step = validate.seconds("step_s", step_s, positive=True)
    bw = validate.number("network_bps_per_device", network_bps_per_device, 0, low_open=True, unit="bytes per second")
    state = validate.number("state_bytes_per_parameter", state_bytes_per_parameter, 0, low_open=True)
    grad = validate.number("gradient_bytes_per_parameter", gradient_bytes_per_parameter, 0, low_open=True)
    hidden = validate.share("hidden_share", hidden_share, high_open=False)
    memory = validate.number("memory_bytes_per_device", memory_bytes_per_device, 0, low_open=True, unit="bytes")
    held = state * p * g / n
    moved = 2.0 * (g - 1) / g * grad * p * g / n
    seconds = moved / bw
    exposed = (1.0 - hidden) * seconds
    return GroupCosts(groups=g, state_bytes_per_device=held, allreduce_bytes_per_device=moved, allreduce_s=seconds,
                      step_overhead_share=exposed / (step + exposed), fits=held <= memory)
