"""The book's conceptual diagrams, one or more a chapter: the idea drawn before any measurement.

Each :class:`Diagram` names its chapter, its file (``book/figures/<name>.svg``), its alt text and
its caption, and draws itself from code (:mod:`goodputlab.charts.svg_draw`), so a diagram that shows
a formula's shape draws it from the package's own formula. ``tools/apply_reading.py`` writes the
files and puts each into its chapter with its caption; ``tests/test_diagrams.py`` holds the
committed files to this code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import diagrams_job as job
from . import diagrams_scale as scale
from .svg_draw import WIDTH, Drawing


@dataclass(frozen=True)
class Diagram:
    """A conceptual figure of chapter ``chapter``: ``draw()`` returns its SVG (``alt`` as its title)."""

    name: str  # the file's stem, and the figure's label after "fig-"
    chapter: int
    alt: str
    caption: str
    draw_body: Callable[[], Drawing]

    @property
    def label(self) -> str:
        return f"fig-{self.name}"

    @property
    def path(self) -> str:
        """Where the file lives, relative to ``book/``."""
        return f"figures/{self.name}.svg"

    def svg(self) -> str:
        return self.draw_body().svg(self.alt)


DIAGRAMS: tuple[Diagram, ...] = (
    Diagram(
        "ledger-timeline", 1,
        "A run's wall clock as two rows. Attempt 0: startup, productive steps with thin data waits, two saves, "
        "then steps after the last save, marked lost work, and a failure. Attempt 1: restart, restore, then the "
        "lost steps computed again as productive work.",
        "The ledger of a run with one failure. Every second of the wall clock is booked to one category: the "
        "steps since the last checkpoint become lost work, and attempt 1 computes them again.",
        job.ledger_timeline,
    ),
    Diagram(
        "poisson-one-over-n", 2,
        "Four device timelines, each with one or two failures marked by crosses, and below them the job's "
        "timeline, which collects every device's failures: N devices fail N times as often as one.",
        "A synchronous job stops whenever any of its devices fails. Independent failures add up, so the job's "
        "MTBF is a device's divided by the number of devices.",
        job.poisson_one_over_n,
    ),
    Diagram(
        "upside-down-u", 3,
        "Goodput against the checkpoint interval on a log axis: a green upside-down U. A blue dashed curve, the "
        "save waste, falls with the interval; a red dashed curve, the failure waste, rises. The top is marked at "
        "Young's interval, the square root of two times the save cost times the MTBF.",
        "The two wastes of checkpointing. Saves cost δ/τ and fall with the interval; failures cost (τ/2 + R)/M "
        "and rise with it. Goodput is what is left, highest at Young's interval.",
        job.upside_down_u,
    ),
    Diagram(
        "snapshot-then-persist", 4,
        "Two timelines of training steps. Sync: a save of snapshot and persist blocks training for its whole length. "
        "Async: only the short snapshot blocks; the persist runs in a background lane, and the checkpoint becomes "
        "durable when it ends, a lag L later.",
        "A save in two halves. The snapshot must block training; the persist need not. Async saves block for the "
        "snapshot alone, and the checkpoint is durable only a lag L later.",
        job.snapshot_then_persist,
    ),
    Diagram(
        "input-pipeline", 5,
        "Storage feeds W worker processes, which fetch and transform batches; up to W times p batches wait in a "
        "queue; each is handed off to the training step.",
        "The input pipeline. Workers fetch from storage and prepare batches; up to W × p wait in flight. The step "
        "waits for data when the workers cannot keep up, or when a slow read drains the queue.",
        job.input_pipeline,
    ),
    Diagram(
        "kill-to-restore", 6,
        "Two timelines of the same failure. Both lose the steps since the last checkpoint, then spend time "
        "detecting the failure. The cold restart then starts a new process, a long stretch; the hot spare hands "
        "over in a short one. Both restore and train again.",
        "One failure, two recoveries. Detection, relaunch and restore are all booked as restart or restore; a hot "
        "spare removes the new process's start-up.",
        job.kill_to_restore,
    ),
    Diagram(
        "allreduce-barrier", 7,
        "Two ranks' timelines over two steps. On the first step rank 1 computes longer; rank 0 finishes its backward "
        "pass and waits in the all-reduce, a turquoise stretch, until rank 1 joins. A dashed line marks the barrier. "
        "The job's row books the wait as straggler wait.",
        "Every step ends in an all-reduce of the gradients, which no rank leaves before the slowest has joined. The "
        "faster ranks' wait is booked as straggler wait.",
        scale.allreduce_barrier,
    ),
    Diagram(
        "batch-noise-scale", 8,
        "Three curves against the batch size on a log axis: throughput rises and flattens past the knee; "
        "statistical efficiency falls past the noise scale; goodput, their product, peaks between the two, at "
        "the square root of their product.",
        "Two effects of a bigger batch. Throughput flattens past the knee α/β; each sample is worth less past the "
        "noise scale. Their product, goodput, peaks in between.",
        scale.batch_noise_scale,
    ),
    Diagram(
        "prefill-decode", 9,
        "Top: one worker's timeline of short decode steps, interrupted by a long prefill; a streaming request's "
        "tokens show a long gap there. Bottom: a prefill worker and a decode worker; the prefill hands the KV "
        "cache over, and the decode steps follow each other without gaps.",
        "Prefill and decode on one worker, and on two. Colocated, every new prompt's prefill stalls the requests "
        "that are streaming; disaggregated, the decode worker never stops, and the KV cache travels between them.",
        scale.prefill_decode,
    ),
    Diagram(
        "cluster-levers", 10,
        "A list of what a cluster loses, each beside the lever that cuts it. The failures a day: scale and "
        "reliability. Detection: the watchdog. Restart: hot spares. Restore: a RAM tier or a peer's copy. "
        "Lost work: a shorter interval. Blocking saves: async saves. Data stalls: a deeper pipeline.",
        "A cluster's levers. Each failure costs detection, a restart, a restore and the work since the checkpoint; "
        "each interval a save; each step any stall. Each lever cuts one of them.",
        scale.cluster_levers,
    ),
    Diagram(
        "lighthouse-quorum-heal", 11,
        "A lighthouse process above two replica groups, each joining a quorum every step. Replica group 1 is "
        "killed, and heals by fetching the live state from group 0. Below, the two groups' timelines: group 0 "
        "trains throughout; group 1 trains, is killed, is away (degraded), heals and trains again.",
        "In-job recovery with torchft. The lighthouse forms a quorum of the live replica groups at every step; a "
        "killed group relaunches, heals from a healthy peer and rejoins, while the others train on.",
        scale.lighthouse_quorum_heal,
    ),
)


def by_chapter(chapter: int) -> list[Diagram]:
    """The diagrams of ``chapter``, in the order they appear."""
    return [d for d in DIAGRAMS if d.chapter == chapter]


def width() -> int:
    """Every diagram's width in user units (and its largest width on a page, in CSS pixels)."""
    return WIDTH
