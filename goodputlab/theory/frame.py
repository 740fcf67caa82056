"""The frame around the ledger: Google's ML Productivity Goodput, Meta's effective training time ratio, MFU.

The ledger (eight categories that sum to the wall time) measures one thing:
``goodput = productive / wall``. Two published frames put it in a larger
picture, and this module maps the ledger onto both:

- **Google's ML Productivity Goodput** (Google Cloud blog, April 2024;
  Wongpanich et al., "Machine Learning Fleet Efficiency", 2025) is a product of
  three shares::

      MPG = scheduling goodput x runtime goodput x program goodput

  *scheduling goodput*: the share of the time a job wants its accelerators in
  which it has all of them; *runtime goodput*: of the time it has them, the
  share spent making progress that is kept (the ledger's goodput, measured
  from the moment the job holds its machines); *program goodput*: the share
  of the hardware's peak the training program extracts, close to MFU.
- **Meta's effective training time ratio** (ETTR; Kokolis et al., HPCA 2025;
  Llama 3's "effective training time higher than 90%"): productive runtime
  over the available wall-clock time, where productive runtime leaves out the
  work redone after a failure and the (re)initialisation after each restart,
  and the wall clock includes time spent queued. The ledger's reading
  (:func:`effective_training_time_ratio`) counts blocking saves and data
  waits as training time, as a job's own step log does, so ETTR is at least
  the ledger's goodput.

Goodput multiplies with MFU (:func:`useful_flops_share`): the share of the
peak FLOPs paid for that became the final model.
"""

from __future__ import annotations

from typing import Mapping

from .. import validate
from ..categories import CATEGORIES, CHECKPOINT_RESTORE, DEGRADED, LOST_WORK, PRODUCTIVE, RESTART, STARTUP

#: Peak dense BF16 throughput of one NVIDIA H100 SXM (FLOP/s), the denominator of Llama 3's MFU.
H100_BF16_PEAK_FLOPS = 989e12

#: Llama 3 405B's measured throughput (Table 4 of the paper): (GPUs, TFLOPs per GPU, BF16 MFU).
LLAMA3_405B_THROUGHPUT = (
    (8_192, 430.0, 0.43),
    (16_384, 400.0, 0.41),
    (16_384, 380.0, 0.38),  # with 16-way context parallelism, 131,072-token sequences
)

#: What the two readings of a cluster's time mean, wherever the book prints them side by side (the command
#: line's tables and ``--json``, the chapters' panels, the website's calculators).
DEFINITIONS = {
    "goodput": "productive compute over the wall time: saves, restarts, restores, lost work and queueing are waste",
    "ettr": "effective training time ratio (Meta; Kokolis et al. 2025): the wall time less the lost work, restarts, "
            "queueing and restores, over the wall time; a save counts as training. What papers such as Llama 3 report",
}

#: The three senses of "goodput" and where the book treats each.
SENSES = (
    {
        "sense": "training (time)",
        "definition": "productive time over wall time: steps that survive into the final model",
        "chapters": "1-5, 10",
        "sources": "Google's ML Productivity Goodput; Meta's effective training time ratio",
    },
    {
        "sense": "statistical efficiency",
        "definition": "throughput x the progress each sample makes, which falls as the batch grows",
        "chapters": "8",
        "sources": "Pollux (OSDI 2021); McCandlish et al. 2018",
    },
    {
        "sense": "serving",
        "definition": "the highest request rate served within latency targets (TTFT, TPOT)",
        "chapters": "9",
        "sources": "DistServe (OSDI 2024)",
    },
)


def _buckets(buckets: Mapping[str, float]) -> dict[str, float]:
    unknown = sorted(set(buckets) - set(CATEGORIES))
    if unknown:
        validate.choice("category", unknown[0], CATEGORIES)
    out = {c: float(buckets.get(c, 0.0)) for c in CATEGORIES}
    for c, v in out.items():
        validate.seconds(c, v)
    return out


def runtime_goodput(buckets: Mapping[str, float]) -> float:
    """The ledger's goodput: ``productive / wall`` (seconds per category in, a share out)."""
    b = _buckets(buckets)
    wall = sum(b.values())
    validate.number("wall time", wall, 0, low_open=True, unit="seconds")
    return b[PRODUCTIVE] / wall


def effective_training_time_ratio(buckets: Mapping[str, float], queue_s: float = 0.0) -> float:
    """Meta's ETTR read off a ledger: time not lost to failures and (re)initialisation, over wall + queue.

    ``(wall - lost_work - restart - checkpoint_restore - startup - degraded) / (wall + queue_s)``:
    the work redone after a failure, detecting it and restarting, reloading the
    checkpoint and the first launch are unproductive, and so is a missing replica
    group's share while it relaunches (``degraded``, in-job recovery's restart);
    saves, data waits and bookkeeping between steps count as training time, as
    they do in a job's own step log. At least :func:`runtime_goodput` when
    ``queue_s`` is 0. ``queue_s``: seconds queued that the ledger's wall leaves out
    (the simulator books its queue inside ``restart``, so pass 0 for its ledgers).
    """
    b = _buckets(buckets)
    validate.seconds("queue_s", queue_s)
    wall = sum(b.values())
    validate.number("wall time", wall, 0, low_open=True, unit="seconds")
    unproductive = b[LOST_WORK] + b[RESTART] + b[CHECKPOINT_RESTORE] + b[STARTUP] + b[DEGRADED]
    return (wall - unproductive) / (wall + queue_s)


def ml_productivity_goodput(scheduling: float, runtime: float, program: float) -> float:
    """Google's ML Productivity Goodput: ``scheduling x runtime x program`` (each a share in [0, 1])."""
    for name, value in (("scheduling", scheduling), ("runtime", runtime), ("program", program)):
        validate.share(name, value, high_open=False)
    return scheduling * runtime * program


def scheduling_goodput(wanted_s: float, held_s: float) -> float:
    """Share of the time a job wanted its accelerators in which it held all of them: ``held / wanted``."""
    validate.seconds("wanted_s", wanted_s, positive=True)
    validate.number("held_s", held_s, 0, wanted_s, unit="seconds", note="at most wanted_s")
    return held_s / wanted_s


def model_flops_utilization(tokens_per_s: float, parameters: float, devices: int, peak_flops_per_device: float) -> float:
    """MFU of dense transformer training: ``6 * parameters * tokens_per_s / (devices * peak)``.

    ``6 N`` FLOPs per token is the forward and backward pass of a dense model
    with ``N`` parameters (attention's share left out). A share; it can exceed
    neither 1 nor the program goodput it approximates.
    """
    validate.number("tokens_per_s", tokens_per_s, 0)
    validate.number("parameters", parameters, 0, low_open=True)
    validate.whole("devices", devices, 1)
    validate.number("peak_flops_per_device", peak_flops_per_device, 0, low_open=True)
    return 6.0 * parameters * tokens_per_s / (devices * peak_flops_per_device)


def useful_flops_share(goodput: float, mfu: float, scheduling: float = 1.0) -> float:
    """Share of the peak FLOPs paid for that became the final model: ``scheduling x goodput x MFU``.

    Llama 3 405B: effective training time above 0.90 and BF16 MFU of 0.38 to
    0.43 put it at most at 0.34 to 0.39 of the H100s' peak, before any time
    spent waiting for the machines.
    """
    return ml_productivity_goodput(scheduling, goodput, mfu)


def ledger_frame(buckets: Mapping[str, float], mfu: float, queue_s: float = 0.0) -> list[dict]:
    """One run's ledger in both frames: rows ``{metric, value, reads}`` for a table.

    ``mfu`` is the run's program goodput (a share), ``queue_s`` the seconds it
    waited for its machines before starting (scheduling goodput
    ``wall / (wall + queue_s)``).
    """
    b = _buckets(buckets)
    wall = sum(b.values())
    runtime = runtime_goodput(b)
    sched = scheduling_goodput(wall + queue_s, wall) if queue_s > 0 else 1.0
    validate.share("mfu", mfu, high_open=False)
    return [
        {"metric": "scheduling goodput", "value": sched, "reads": "held the machines / wanted them (queue time)"},
        {"metric": "runtime goodput (the ledger)", "value": runtime, "reads": "productive / wall"},
        {"metric": "program goodput (~MFU)", "value": mfu, "reads": "useful FLOPs / peak FLOPs during a step"},
        {"metric": "ML Productivity Goodput", "value": ml_productivity_goodput(sched, runtime, mfu), "reads": "the product of the three"},
        {"metric": "effective training time ratio", "value": effective_training_time_ratio(b, queue_s),
         "reads": "(wall - lost work - restarts - restores - start-up - degraded) / (wall + queue)"},
    ]
