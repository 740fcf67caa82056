"""What the claim explainer reads a claim against: published ranges, from the slowest cluster to the fastest,
and what a claim leaves unsaid (the book's defaults, :class:`ClaimCluster`, and what the user pins, :class:`Pins`).

Each :class:`Range` spans real, published clusters, each end with its source (an anchor in
``book/references.md``, and an entry under ``ranges`` in ``book/data/cited.json``). A claim is called
implausible only when it needs a value more than :data:`TOLERANCE` times outside every published
cluster, or a contradiction (:mod:`goodputlab.theory.claim`). Times in seconds, rates per GPU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import validate
from ..errors import ConfigError
from .checkpoint_cost import H200_HOST_COPY_BPS, LLAMA3_STORAGE_PEAK_BPS, LLAMA3_STORAGE_SUSTAINED_BPS, llama3_405b_checkpoint
from .cluster import LLAMA3_DURATION_S, LLAMA3_GPUS
from .failure_rates import KOKOLIS_MEASURED_MTTF_S
from .recovery_at_scale import NCCL_DEFAULT_TIMEOUT_S

HOUR = 3600.0
#: A published span is widened by this factor each way before a value is called implausible.
TOLERANCE = 3.0


@dataclass(frozen=True)
class Range:
    """A published span of a quantity (``low`` to ``high``, in ``unit``) and where each end comes from.

    ``published``: the span in words with its sources; ``refs``: anchors in ``book/references.md``;
    ``low_source`` and ``high_source``: each end in words (the cluster and the paper).
    """

    quantity: str
    unit: str
    low: float
    high: float
    published: str
    refs: tuple[str, ...]
    low_source: str = ""
    high_source: str = ""

    def plausible(self, value: float) -> bool:
        """Within the span widened by :data:`TOLERANCE` each way (a zero low end stays zero)."""
        return self.low / TOLERANCE <= value <= self.high * TOLERANCE


#: The least reliable published GPUs: Kokolis et al.'s 1,024-GPU jobs failing every 7.9 hours (RSC-1).
KOKOLIS_1024_DEVICE_MTBF_H = 1024 * KOKOLIS_MEASURED_MTTF_S[1024] / HOUR
#: The most reliable reading: Llama 3's GPU faults alone (268 of its interruptions), about 79,000 hours.
LLAMA3_GPU_ONLY_MTBF_H = LLAMA3_GPUS * LLAMA3_DURATION_S / HOUR / 268
#: The fastest published save: Llama 3 405B's checkpoint (mixed-precision Adam) at Tectonic's 7 TB/s peak.
LLAMA3_PEAK_SAVE_S = llama3_405b_checkpoint(LLAMA3_STORAGE_PEAK_BPS).write_s
#: The slowest published save: a 7B model's synchronous checkpoint (PyTorch's async-checkpointing blog).
PYTORCH_BLOG_SYNC_SAVE_S = 148.8
#: The same model's save made asynchronous: the downtime left.
PYTORCH_BLOG_ASYNC_SAVE_S = 6.3
#: PyTorch's NCCL timeout before version 2.2 (pull request 110947 brought it to 10 minutes).
NCCL_OLD_TIMEOUT_S = 1800.0

RANGES = {
    "device_mtbf_h": Range(
        "device MTBF", "hours per GPU", KOKOLIS_1024_DEVICE_MTBF_H, LLAMA3_GPU_ONLY_MTBF_H,
        f"about {KOKOLIS_1024_DEVICE_MTBF_H:,.0f} h per GPU (Kokolis et al. 2025: jobs of 1,024 GPUs failing every 7.9 "
        f"hours) to {LLAMA3_GPU_ONLY_MTBF_H:,.0f} h (Llama 3's GPU faults alone; every cause: 45,600 h)",
        ("kokolis-2025", "llama3-2024"),
        "Kokolis et al. 2025: RSC-1's 1,024-GPU jobs, a measured MTTF of 7.9 hours",
        "Llama 3 2024: 268 GPU faults in 54 days on 16,384 GPUs"),
    "save_s": Range(
        "synchronous save", "seconds", LLAMA3_PEAK_SAVE_S, PYTORCH_BLOG_SYNC_SAVE_S,
        f"{LLAMA3_PEAK_SAVE_S:.1f} s (Llama 3 405B's checkpoint at Tectonic's 7 TB/s peak) to "
        f"{PYTORCH_BLOG_SYNC_SAVE_S:g} s (a 7B model's synchronous save in PyTorch's async-checkpointing blog, "
        f"{PYTORCH_BLOG_ASYNC_SAVE_S:g} s once asynchronous)",
        ("llama3-2024", "pytorch-async-dcp-2024"),
        "Llama 3 2024: a 405B model's checkpoint at Tectonic's 7 TB/s peak",
        "PyTorch's async-checkpointing blog 2024: a 7B model's synchronous save, 148.8 s"),
    "restart_s": Range(
        "restart", "seconds", 40.0, 2 * HOUR,
        "40 s (a hot swap, DeadPool 2026) to hours (OPT-175B's logbook: replacing a machine through the cloud "
        "could take hours; Crusoe's AutoClusters replace a node in 5 minutes, FlashRecovery restores 4,800 devices "
        "in 150 s)",
        ("deadpool-2026", "opt-logbook-2022", "crusoe-autoclusters", "flashrecovery-2025"),
        "DeadPool 2026: a failed node hot-swapped in under 40 s",
        "OPT-175B's logbook 2022: replacing a machine could take hours (read as 2 hours)"),
    "detect_s": Range(
        "detection", "seconds", 0.0, NCCL_OLD_TIMEOUT_S,
        "a crash is seen in seconds; a hang when the watchdog gives up: 10 minutes by PyTorch's default since "
        "version 2.2, 30 minutes before",
        ("pytorch-nccl-timeout",),
        "a crash: the process exits and is seen at once",
        f"PyTorch's NCCL timeout before 2.2: 30 minutes ({NCCL_DEFAULT_TIMEOUT_S / 60:g} since)"),
}

#: Each lever in words (the panel's list, the website's).
WHAT = {"async": "asynchronous saves", "memory": "a RAM copy on a peer", "hot-spare": "hot spares",
        "interval": "the best interval", "detection": "faster detection", "restart": "faster restarts"}

#: How each lever is read: what the explainer takes it to have changed, stated in every explanation.
READING = {
    "async": "asynchronous saves: a snapshot into host memory blocks training and the write to storage runs behind "
             "it; a restart still reads the checkpoint from storage",
    "memory": "a 'RAM tier' is read as a RAM copy of each checkpoint on a peer machine, which survives the loss of "
              "a node, with every 10th checkpoint also written to storage; a restart reads the peer's copy",
    "hot-spare": "hot spares: a warm standby takes over from every failed machine in a minute instead of a cold "
                 "reschedule",
    "interval": "only the checkpoint interval changed, to the best one for the job",
    "detection": "failures found sooner than a hang's watchdog (10 minutes by PyTorch's default)",
    "restart": "a faster restart (reschedule and initialise) than the assumed 5 minutes",
}

#: How each implied value reads in a table (chapter 10's panel, the website's page): (label, unit).
LABELS = {
    "device_mtbf_h": ("device MTBF", "h per GPU"), "job_mtbf_h": ("job MTBF", "h"),
    "storage_gbps": ("storage bandwidth", "GB/s in all"), "storage_per_gpu_mbps": ("per GPU", "MB/s"),
    "save_s": ("a synchronous save", "s"), "restart_s": ("cold restart before the spares", "s"),
    "restart_after_s": ("restart after", "s"), "detect_after_s": ("detection after", "s"),
    "interval_before_min": ("best interval before", "min"), "interval_after_min": ("best interval after", "min"),
    "interval_before_long_min": ("interval before (too rare)", "min"),
    "interval_before_short_min": ("interval before (too often)", "min"),
}


# --- the cluster a claim is read against -----------------------------------------------------------


@dataclass(frozen=True)
class ClaimCluster:
    """What a claim leaves unsaid, set to the book's defaults (chapter 10's Llama 3 scenario, per GPU).

    ``storage_bps_per_gpu``: Llama 3's sustained 2 TB/s over its 16,384 GPUs; ``detect_s``,
    ``restart_s``: 90 s to notice a failure, 5 minutes to reschedule and initialise; ``watchdog_s``:
    detection before a faster-detection lever (PyTorch's NCCL default); ``spare_swap_s``: a hot
    spare taking over; ``host_copy_bps``, ``peer_copy_bps``: a snapshot into host memory, and one
    GPU's share of the network to a peer (a RAM copy on another machine); ``disk_every``: a RAM tier
    also writes every k-th checkpoint to storage, and that write must keep up.
    """

    storage_bps_per_gpu: float = LLAMA3_STORAGE_SUSTAINED_BPS / LLAMA3_GPUS
    detect_s: float = 90.0
    restart_s: float = 300.0
    watchdog_s: float = NCCL_DEFAULT_TIMEOUT_S
    spare_swap_s: float = 60.0
    host_copy_bps: float = H200_HOST_COPY_BPS
    peer_copy_bps: float = 25e9
    disk_every: int = 10

    def __post_init__(self) -> None:
        validate.whole("disk_every", self.disk_every, 1)
        validate.number("storage_bps_per_gpu", self.storage_bps_per_gpu, 0, low_open=True, unit="bytes per second")
        for name in ("detect_s", "restart_s", "watchdog_s", "spare_swap_s"):
            validate.seconds(name, getattr(self, name))
        validate.number("host_copy_bps", self.host_copy_bps, 0, low_open=True, unit="bytes per second")
        validate.number("peer_copy_bps", self.peer_copy_bps, 0, low_open=True, unit="bytes per second")


@dataclass(frozen=True)
class Pins:
    """What the user knows of the cluster as it was before the lever (``None``: the book's default).

    ``storage_gbps`` (the storage's aggregate bandwidth, GB/s) or ``save_s`` (a synchronous save,
    seconds): at most one; ``restart_s``: the cold restart (reschedule and initialise, seconds);
    ``detect_s``: the time to notice a failure (seconds; for the detection lever, the detection
    before it). A pin on the setting a lever solves for (the storage for ``async`` and ``memory``,
    the cold restart for ``hot-spare``) leaves one unknown for two goodputs: the after state fixes
    the failure rate, and the before state becomes a check.
    """

    storage_gbps: float | None = None
    save_s: float | None = None
    restart_s: float | None = None
    detect_s: float | None = None

    def __post_init__(self) -> None:
        if self.storage_gbps is not None and self.save_s is not None:
            raise ConfigError("save_s", self.save_s, "not with storage_gbps: pin the storage or the save, not both")
        if self.storage_gbps is not None:
            validate.number("storage_gbps", self.storage_gbps, 0, 1e9, low_open=True, unit="GB/s")
        if self.save_s is not None:
            validate.number("save_s", self.save_s, 0, 1e7, low_open=True, unit="seconds")
        for name in ("restart_s", "detect_s"):
            if getattr(self, name) is not None:
                validate.number(name, getattr(self, name), 0, 1e7, unit="seconds")

    def given(self) -> dict[str, float]:
        """The pinned values only."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
