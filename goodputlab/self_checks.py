"""The chapters' self-check questions: two or three a chapter, each inside the section it checks.

A chapter shows one with ``gl.widgets.self_check("3-young")`` (``tools/apply_reading.py`` puts the
cells in place, at the end of the section each checks: ``tools/reading_plan.py``). In JupyterLab it is a small widget that says "Right" or
"Not yet" and explains (:mod:`goodputlab.widgets.self_check`); without a kernel (the site, GitHub) it
is the question with its answer folded away (:func:`static_markdown`).

Pure: no widgets, no IPython.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from .prose import to_html


@dataclass(frozen=True)
class Question:
    """A multiple-choice question: ``options[answer]`` is right; ``explanation`` says why; ``hint``
    nudges a reader who chose another without giving the answer away."""

    key: str  # "<chapter>-<word>": how a chapter's cell names it
    chapter: int
    prompt: str
    options: tuple[str, ...]
    answer: int
    explanation: str
    hint: str

    def __post_init__(self) -> None:
        if not 2 <= len(self.options) <= 5:
            raise ValueError(f"question {self.key}: options has {len(self.options)} entries, allowed 2 to 5")
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"question {self.key}: answer {self.answer} is not an option (0 to {len(self.options) - 1})")


LETTERS = "ABCDE"


def _q(key, prompt, options, answer, explanation, hint) -> Question:
    """A question whose options are listed right answer first (``answer`` 0 here), then turned by an amount
    the key fixes, so the right answer's letter differs from question to question but never from run to run."""
    turn = zlib.crc32(key.encode()) % len(options)
    shown = list(options[turn:]) + list(options[:turn])
    return Question(key, int(key.split("-")[0]), prompt, tuple(shown), shown.index(options[answer]),
                    explanation, hint)


QUESTIONS: tuple[Question, ...] = (
    # chapter 1
    _q("1-goodput",
       "A job ran for 10 hours. Its ledger books 1 hour to restart, 30 minutes to lost work and the rest to "
       "productive. What is its goodput?",
       ["85%", "90%", "95%"], 0,
       "Productive time is 10 − 1 − 0.5 = 8.5 hours, and goodput is productive time over wall time: 85%.",
       "Goodput is productive time over wall time. Take every other category off the wall time first."),
    _q("1-ratios",
       "A cluster restarts in 10 minutes and fails every 2.8 hours. Which lab setting stands for it?",
       ["a 1 s restart and a 17 s MTBF", "a 10 s restart and a 20 s MTBF", "a 10 min restart and a 17 s MTBF"], 0,
       "Goodput depends on restart over MTBF: 10 minutes over 2.8 hours is 0.06, and so is 1 s over 17 s. "
       "The seconds do not carry over; the ratios do.",
       "Compare the ratio of restart to MTBF, not the seconds."),
    _q("1-ettr",
       "Which of these does Meta's effective training time ratio, as this book reads it, count as training time, "
       "while goodput does not?",
       ["lost work", "blocking checkpoint saves", "restarts"], 1,
       "ETTR leaves out lost work, restarts, restores and start-up. It counts blocking saves and data waits as "
       "training time, so ETTR is never below goodput.",
       "A job's own step log counts a step that waited for its save as a step."),
    # chapter 2
    _q("2-mtbf",
       "Each GPU fails about once every 5 years. About how often does a synchronous job on 16,384 of them fail?",
       ["every few hours", "every few days", "every few minutes"], 0,
       "Independent failures add up: 5 years is about 43,800 hours, and 43,800 / 16,384 is about 2.7 hours.",
       "The job stops when any device fails: divide a device's MTBF by the number of devices."),
    _q("2-restart",
       "Llama 3's run saw 466 interruptions in 54 days on 16,384 GPUs. Why does each minute of restart matter so much?",
       ["it is paid at every interruption, by every GPU", "a restart also loses the work since the checkpoint",
        "a restart makes the next failure more likely"], 0,
       "One minute at each of 466 interruptions is 466 minutes of the whole cluster, about 0.6% of 54 days.",
       "Multiply one minute by the number of interruptions, and compare it with the run's length."),
    _q("2-domains",
       "The same number of GPUs fails, but half of them are lost as whole 8-GPU hosts. What happens to the number "
       "of interruptions?",
       ["it falls", "it stays the same", "it rises"], 0,
       "A synchronous job stops once per event, whatever the event took. Losing GPUs eight at a time means fewer, "
       "larger interruptions, and a longer job MTBF.",
       "Count the events that stop the job, not the GPUs they take."),
    # chapter 3
    _q("3-young",
       "A blocking save becomes four times as expensive. What happens to Young's optimal interval?",
       ["it doubles", "it quadruples", "it stays the same"], 0,
       "Young's interval is √(2δM): four times the save cost δ gives twice the interval.",
       "Look at how the save cost enters Young's formula."),
    _q("3-first-order",
       "The checkpoint interval is as long as the MTBF. How does the first-order model's goodput compare with the "
       "exact model's?",
       ["it is lower", "it is higher", "it is the same"], 0,
       "First order charges every failure half an interval. Late ages are rarer than early ones, so the exact loss "
       "per failure is below τ/2, and first order is pessimistic.",
       "Think about how often a segment lives long enough to reach a late age."),
    _q("3-restart",
       "The restart time R doubles. To first order, what happens to the best checkpoint interval?",
       ["it stays the same", "it gets shorter", "it gets longer"], 0,
       "R adds the constant R/M to the waste at every interval: it lowers the whole curve but does not move its top.",
       "Does R/M change with τ?"),
    # chapter 4
    _q("4-snapshot",
       "Why must training wait for the snapshot but not for the persist?",
       ["the next step would change the state while it is copied", "the persist is the faster half",
        "the persist needs no memory"], 0,
       "An optimizer step during the copy would mix two steps in one checkpoint. Once copied, the state can be "
       "written while training goes on.",
       "Ask what the next optimizer step does to the tensors being saved."),
    _q("4-lag",
       "An async save becomes durable L seconds after it returns. For Poisson failures, what does that lag cost?",
       ["a factor e^(−L/M) on goodput, like extra restart time", "nothing: the save has returned",
        "it doubles the blocking time"], 0,
       "A failure during the lag rolls back one checkpoint further. For Poisson failures that costs exactly "
       "e^(−L/M), which lowers the curve and, while L < τ, does not move the optimum.",
       "What happens when a failure strikes before the persist has finished?"),
    _q("4-peer",
       "Where must a RAM copy of the checkpoint live to survive the loss of the machine that trains?",
       ["in the RAM of another machine", "in the training process's own memory", "in the same node's shared memory"], 0,
       "A machine that loses power loses its RAM. A copy in a neighbour's memory survives, as Gemini places them.",
       "Which of these does a power cut on the training machine leave intact?"),
    # chapter 5
    _q("5-supply",
       "A batch takes 45 ms to read and 10 ms to transform, and a step takes 15 ms. How many workers supply the step?",
       ["4", "2", "1, with a deep prefetch"], 0,
       "Supply is W × 15 / 55: 3 workers give 0.82, 4 give 1.09. No prefetch depth makes up for too few workers.",
       "Each worker delivers one batch every 55 ms; the step takes one every 15 ms."),
    _q("5-depth",
       "The workers already supply 1.5 times the step's appetite, but reads vary a lot. What helps, and what does "
       "it cost?",
       ["more prefetch per worker, paid in host memory", "fewer workers, which saves CPU", "a faster step"], 0,
       "Depth rides out the slow reads. Every batch in flight is held in host memory, twice that with pinned memory.",
       "Supply is enough on average; what absorbs a slow read?"),
    _q("5-cold",
       "A failure restarts the job. Why does a deeper pipeline not shorten the warm-up after the restart?",
       ["the new workers start empty and must read the first batch", "the ledger books the warm-up as data wait",
        "persistent workers keep their batches"], 0,
       "A killed process takes its workers and their batches with it. The first step waits for the resume step's "
       "batch from storage, booked as restart.",
       "What survives of the old workers when the process is killed?"),
    # chapter 6
    _q("6-data",
       "A checkpoint leaves out the data position, and the job resumes without an error. What goes wrong?",
       ["it trains on some samples twice and never sees others", "the optimizer starts from zero",
        "nothing: the weights are saved"], 0,
       "The restarted loader starts the stream over. Samples already trained on come again, and with a fixed number "
       "of steps the last ones are never seen.",
       "Where does the restarted loader begin reading?"),
    _q("6-hang",
       "Why does a hang cost more than a kill?",
       ["it is noticed only when a watchdog's timeout runs out", "it loses more checkpoints",
        "it damages the checkpoint"], 0,
       "A killed process exits and is seen at once. A hung one lives on, so only a watchdog on progress notices it, "
       "after its timeout, at every hang.",
       "How does the supervisor learn that each has happened?"),
    _q("6-spare",
       "What does a hot spare remove from a restart?",
       ["the new process's start-up", "the detection of the failure", "the work lost since the checkpoint"], 0,
       "The standby has already started, imported PyTorch and built its model. Detection and the lost work remain; "
       "chapter 3's interval controls the latter.",
       "What has the standby done before the failure?"),
    # chapter 7
    _q("7-stops",
       "Each rank fails once every 80 s on average. How often does a synchronous job of two ranks fail?",
       ["every 40 s", "every 80 s", "every 160 s"], 0,
       "The job stops at the first failure of either rank: its MTBF is a rank's divided by the number of ranks.",
       "Two ranks, each failing independently: add their rates."),
    _q("7-sharded",
       "When is a sharded checkpoint valid?",
       ["when every rank's part and the index are on disk", "when rank 0 has written its part",
        "when half the ranks are done"], 0,
       "Rank 0 renames the folder into place only when every rank's part and the index are there. A job killed "
       "before that leaves nothing a restore would read.",
       "What would a restore need from each rank?"),
    _q("7-straggle",
       "Each of 1,000 ranks is slow on 1 step in 1,000. About what share of the job's steps has a slow rank?",
       ["about 63%", "about 0.1%", "all of them"], 0,
       "q = 1 − (1 − 0.001)^1000, about 0.63: a rare hiccup on one device becomes a tax on most steps.",
       "Work out the chance that none of the 1,000 ranks is slow on a step."),
    # chapter 8
    _q("8-noise",
       "A batch far above the gradient noise scale is doubled. What happens to the steps and samples needed to "
       "reach a given loss?",
       ["about the same steps, twice the samples", "half the steps, the same samples", "half the steps and samples"], 0,
       "Far above the noise scale the gradient is already nearly exact: doubling the batch saves hardly a step, so "
       "it doubles the samples.",
       "How much noise is left to average away?"),
    _q("8-best",
       "The throughput's knee α/β is 4 samples and the noise scale is 64. Which batch size maximises goodput?",
       ["16", "64", "4"], 0,
       "The best batch is √(B_noise × knee) = √(64 × 4) = 16: big enough to amortise the step's fixed cost, small "
       "enough not to waste samples.",
       "The best batch is the geometric mean of two numbers."),
    _q("8-multiply",
       "Job A keeps 95% of its time productive at a statistical efficiency of 0.4; job B 80% at 0.9. At the same "
       "throughput, which reaches a given loss sooner?",
       ["B", "A", "neither: they tie"], 0,
       "The two goodputs multiply: A gets 0.95 × 0.4 = 0.38, B gets 0.80 × 0.9 = 0.72.",
       "Multiply each job's two goodputs."),
    # chapter 9
    _q("9-ttft",
       "A request waits 2 s in a queue, then streams its answer quickly. Which objective does it miss?",
       ["TTFT", "TPOT", "both"], 0,
       "TTFT runs from arrival to the first token and includes the queue. TPOT is the gap between later tokens, "
       "which was short.",
       "Which of the two includes the time before the first token?"),
    _q("9-capacity",
       "Past its capacity, what does a server's throughput do?",
       ["it flattens while every request's TTFT grows", "it falls to zero", "it keeps following the arrivals"], 0,
       "The server still serves requests at its capacity, while the queue, and with it every TTFT, grows for as "
       "long as the overload lasts.",
       "What happens to the requests the server cannot get to?"),
    _q("9-disagg",
       "What does disaggregating prefill and decode cost?",
       ["one worker does every prefill, and each KV cache must travel", "decode steps stall for prefills",
        "nothing: it is faster in every way"], 0,
       "TTFT queues behind one prefill worker instead of two, and every prompt's KV cache crosses from the "
       "prefill worker to the decode worker.",
       "What does the decode worker need that it no longer computes itself?"),
    # chapter 10
    _q("10-bytes",
       "Mixed-precision Adam holds 16 bytes per parameter. Why does a checkpoint keep only 14?",
       ["the gradients are recomputed at the next step", "the fp32 master copy is left out",
        "the optimizer's moments are compressed"], 0,
       "The bf16 gradients (2 bytes) are computed again by the next backward pass; weights, master copy and moments "
       "must be kept.",
       "Which of the five parts does the next step produce anew?"),
    _q("10-ram",
       "Why does a RAM tier on the same node pay less than a copy on a peer?",
       ["many interruptions take the machine, and its RAM with it", "a peer's memory is faster",
        "the node's own RAM is too small"], 0,
       "This book counts most of Llama 3's interruptions as taking a machine away. A copy on that machine goes with "
       "it; a copy on a peer survives.",
       "What happens to the RAM of a machine that leaves the job?"),
    _q("10-claim",
       "A talk says a lever took goodput from B% to A%. What can such a claim pin down?",
       ["two unknowns: the failure rate and the lever's old setting", "only the job's MTBF", "nothing testable"], 0,
       "Two goodputs give two equations, so they pin two unknowns; each is then held against published ranges.",
       "Count the numbers the claim gives you."),
    # chapter 11
    _q("11-degraded",
       "In a torchft job of 4 replica groups, one group is away relaunching. How is each second booked meanwhile?",
       ["a quarter degraded, the rest as training", "all of it restart", "all of it productive"], 0,
       "Each second splits into one equal share per replica group: the missing group's share is degraded, the "
       "survivors' shares are booked as any training.",
       "Split each second into one share per replica group."),
    _q("11-batch",
       "Why is a degraded step worth less to the model than a full step?",
       ["its gradient averages over a smaller global batch", "it is never committed", "it is booked as lost work"], 0,
       "With a group missing, the survivors average over part of the global batch at the same learning rate. That "
       "noisier step makes less progress, unless the gradient has no noise at all.",
       "How big is the batch a degraded step averages over?"),
    _q("11-limit",
       "When must a job with in-job recovery still restart from its checkpoint?",
       ["when every replica group is down at once", "at every failure", "never"], 0,
       "Healing needs a live peer. When every group is down, as when one failure domain spans them, the job "
       "restarts from its last durable checkpoint.",
       "What does a group heal from?"),
)

BY_KEY: dict[str, Question] = {q.key: q for q in QUESTIONS}


def question(key: str) -> Question:
    """The question named ``key`` (``"3-young"``); an unknown key raises ``KeyError`` listing the known ones."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"no self-check {key!r}; known: {', '.join(BY_KEY)}") from None


def for_chapter(chapter: int) -> list[Question]:
    """The questions of ``chapter``, in order."""
    return [q for q in QUESTIONS if q.chapter == chapter]


def static_markdown(q: Question) -> str:
    """The question as a reader without a kernel sees it: the options, and the answer folded away."""
    options = "\n".join(f"* **{LETTERS[i]}.** {text}" for i, text in enumerate(q.options))
    return (f"**Check yourself.** {q.prompt}\n\n{options}\n\n<details><summary>Answer</summary>\n\n"
            f"**{LETTERS[q.answer]}.** {q.explanation}\n\n</details>")


def static_html(q: Question) -> str:
    """The same as HTML (GitHub and nbviewer draw HTML outputs)."""
    options = "".join(f"<li><strong>{LETTERS[i]}.</strong> {to_html(t)[3:-4]}</li>" for i, t in enumerate(q.options))
    return (f"<p><strong>Check yourself.</strong> {to_html(q.prompt)[3:-4]}</p><ul>{options}</ul>"
            f"<details><summary>Answer</summary><p><strong>{LETTERS[q.answer]}.</strong> "
            f"{to_html(q.explanation)[3:-4]}</p></details>")


def verdict(q: Question, chosen: int | None) -> tuple[bool | None, str]:
    """What the widget says for ``chosen`` (an option's index): (right, the words)."""
    if chosen is None:
        return None, "Pick an answer first."
    if chosen == q.answer:
        return True, f"Right. {q.explanation}"
    return False, f"Not yet. {q.hint}"
