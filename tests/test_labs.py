"""The lab checks pass right answers, refuse wrong ones with a hint, and never raise.

For every check of every lab (``goodputlab/labs/labNN.py``), called directly:

* the solution's answer passes;
* ``None``, the starter's answer, is "not yet" with the exercise's hint;
* each common mistake that ``labs/INSTRUCTOR.md`` lists fails with a message that addresses it
  (the guide's lists and the ones tested here are the same: a test compares them);
* answers of the wrong kind (text, a list, NaN, a bool) are "not yet", never an exception.

Then the notebooks: every lab's exercise notebook runs clean and passes no check, its solution
passes all of them (executed with papermill, shared with tests/test_notebooks.py), and the two
differ only in their answer cells. The run-based checks are tested on the recorded runs that
ship with the package, so they work on recordings as on real runs (Lab 1's also on a real one).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Callable

import numpy as np
import pytest

import goodputlab as gl
from goodputlab import categories as C
from goodputlab.engine.api import RunResult
from goodputlab.measure.ledger import surviving_executions
from goodputlab.experiments.interval_sweep import measure_timings
from goodputlab.labs import (
    CheckResult, Scoreboard, lab01, lab02, lab03, lab04, lab05, lab06, lab07, lab08, lab09, lab10, lab11,
)
from goodputlab.theory import optimal_ckpt_every, young_interval

from conftest import ROOT

GUIDE = ROOT / "labs" / "INSTRUCTOR.md"


@lru_cache(maxsize=None)
def rec(name: str) -> RunResult:
    return gl.recorded_run(name)


@dataclass
class Case:
    """One check: how to call it, the solution's answer, and the mistakes the guide lists for it."""

    lab: int
    exercise: int
    fn: Callable[..., CheckResult]
    args: tuple = ()
    right: Any = None
    mistakes: list[tuple[str, Any, str]] = ()  # (the guide's words, the wrong answer, a phrase the feedback must contain)
    also_right: tuple = ()  # the right answer as the text rounds it (0.68 for the book's "68%"): passes too

    def check(self, answer: Any) -> CheckResult:
        return self.fn(answer, *self.args)

    @property
    def id(self) -> str:
        return f"lab{self.lab:02d}-{self.exercise}-{self.fn.check_name}"


def _phases(result):
    return [e for e in sorted(result.events, key=lambda e: e["t"]) if e["kind"] in gl.PHASES]


def lab01_cases() -> list[Case]:
    r = rec("lab01")
    phases = _phases(r)
    data_wait = sum(n["t"] - c["t"] for c, n in zip(phases, phases[1:]) if c["kind"] == "data_wait")
    t = measure_timings(r.events)
    steps, mtbf = r.config.steps, 20.0
    executed = [(e["attempt"], e["step"]) for e in r.events if e["kind"] == "compute"]
    lost = set(executed) - surviving_executions(r.events)
    redone = {(a, s) for a, s in executed if a > 0 and s in {ls for _, ls in lost}}
    best = optimal_ckpt_every(t, steps, mtbf)
    return [
        Case(1, 1, lab01.check_data_wait, args=(r,), right=data_wait, mistakes=[
            ("summing the `t` values of the data_wait events instead of their durations",
             sum(e["t"] for e in r.events if e["kind"] == "data_wait"), "start times"),
        ]),
        Case(1, 2, lab01.check_lost_executions, args=(r,), right=lost, mistakes=[
            ("listing the re-executions of the second attempt instead of the executions they repeated", redone,
             "re-executions"),
            ("a set of step numbers instead of (attempt, step) pairs", {s for _, s in lost}, "(attempt, step) pairs"),
        ]),
        Case(1, 3, lab01.check_young_steps, args=(t, mtbf,), right=young_interval(t.save_s, mtbf) / t.step_s, mistakes=[
            ("answering in seconds", young_interval(t.save_s, mtbf), "in seconds"),
            ("dividing by the compute time instead of the whole step", young_interval(t.save_s, mtbf) / t.compute_s,
             "whole step"),
        ]),
        Case(1, 4, lab01.check_interval_choice, args=(t, steps, mtbf,), right=best, mistakes=[
            ("checkpointing every step", 1, "less often"),
            ("saving only at the end (an interval of the whole run)", steps, "more often"),
            ("a fraction of a step", 2.5, "whole number"),
        ]),
    ]


def lab02_cases() -> list[Case]:
    years = 365 * gl.theory.SECONDS_PER_DAY
    device = lab02.device_mtbf_s()
    sim = gl.simulate(gl.SimConfig(
        devices=gl.theory.LLAMA3_GPUS, duration_s=gl.theory.LLAMA3_DURATION_S,
        failure_causes=gl.theory.llama3_cause_table(), causes_reference_s=gl.theory.LLAMA3_DURATION_S,
        causes_reference_devices=gl.theory.LLAMA3_GPUS, interval_s=7200.0, save_s=5.0, restore_s=60.0,
        restart_s=1800.0, trials=50, seed=0))
    waste = {c: s for c, s in sim.buckets.items() if c != C.PRODUCTIVE}
    ranked = sorted(waste, key=waste.get, reverse=True)
    x = 1024 * gl.theory.SECONDS_PER_DAY / device
    return [
        Case(2, 1, lab02.check_device_mtbf, right=device / years, mistakes=[
            ("the job's MTBF instead of one GPU's", gl.theory.LLAMA3_DURATION_S / 466 / years, "each of the 16,384 GPUs"),
            ("counting only the 419 unexpected interruptions", lab02.device_mtbf_s(419) / years, "419"),
            ("answering in hours", device / 3600, "hours"),
        ]),
        Case(2, 2, lab02.check_job_mtbf, right=device / 4096 / 3600, mistakes=[
            ("multiplying by N instead of dividing", device * 4096 / 3600, "divide"),
            ("using Llama 3's 16,384 GPUs", device / 16384 / 3600, "16,384"),
            ("answering in minutes", device / 4096 / 60, "minutes"),
        ]),
        Case(2, 3, lab02.check_p_fail_day, right=1 - math.exp(-x), mistakes=[
            ("the expected number of failures N T / M instead of a probability", x, "expected *number*"),
            ("the chance that no GPU fails", math.exp(-x), "*no* GPU"),
            ("a percentage instead of a share", 100 * (1 - math.exp(-x)), "percentage"),
        ]),
        Case(2, 4, lab02.check_restart_budget, right=lab02.restart_budget_s() / 60, mistakes=[
            ("using the first-order model instead of Daly's", lab02.restart_budget_s(model=gl.expected_goodput) / 60,
             "first-order"),
            ("answering in seconds", lab02.restart_budget_s(), "seconds"),
        ]),
        Case(2, 5, lab02.check_biggest_waste, args=(sim,), right=ranked[0], mistakes=[
            ("answering productive", "productive", "useful part"),
            ("naming the second-biggest waste", ranked[1], "another waste category holds more"),
        ]),
    ]


def lab03_cases() -> list[Case]:
    M, save = gl.theory.WORKED_EXAMPLE_MTBF_S, 60.0
    runs = {k: rec(f"lab03-every-{k}") for k in (5, 25, 100)}
    r = runs[100]
    lost, failures = r.buckets[C.LOST_WORK], r.summary["failures"]
    best = max(runs, key=lambda k: runs[k].goodput)
    least_lost = min(runs, key=lambda k: runs[k].buckets[C.LOST_WORK])
    assert least_lost != best, "the recordings no longer show the mistake exercise 5 is about"
    return [
        Case(3, 1, lab03.check_young_s, right=math.sqrt(2 * save * M), mistakes=[
            ("forgetting the 2 under the root", math.sqrt(save * M), "factor 2"),
            ("answering in minutes, or with the MTBF in hours", math.sqrt(2 * save * M) / 60, "60 times too small"),
            ("giving Daly's interval", gl.daly_interval(save, M), "Daly"),
        ]),
        Case(3, 2, lab03.check_save_factor, right=2.0, mistakes=[
            ("4: taking the interval as proportional to the save cost", 4.0, "square root"),
            ("0.5: thinking a costlier save should be made more often", 0.5, "*less* often"),
        ]),
        Case(3, 3, lab03.check_exact_2h, right=gl.exact_goodput_free(7200, M), also_right=(0.68, 0.684), mistakes=[
            ("the first-order value 1 - tau/2M", 1 - 7200 / (2 * M), "first-order"),
            ("a percentage instead of a share", 100 * gl.exact_goodput_free(7200, M), "percentage"),
        ]),
        Case(3, 4, lab03.check_lost_per_failure, args=(r,), right=lost / failures, mistakes=[
            ("the total lost work, not per failure", lost, "total"),
            ("dividing by the attempts instead of the failures", lost / r.summary["attempts"], "attempts"),
        ]),
        Case(3, 5, lab03.check_best_interval, args=(runs,), right=best, mistakes=[
            ("the interval that lost the least work", least_lost, "lost the least work"),
            ("the best run's goodput instead of its interval", runs[best].goodput, "whole number"),
        ]),
    ]


def lab04_cases() -> list[Case]:
    runs = {s: rec(f"strategy-{s}") for s in ("sync", "async", "dcp", "memory")}
    sync_s = lab04.typical_save_s(runs["sync"])
    speedup = sync_s / lab04.typical_save_s(runs["async"])
    commits = [e for e in runs["memory"].events if e["kind"] == "ckpt_commit"]
    mtbf = 86400 / 8.6
    return [
        Case(4, 1, lab04.check_sync_save_ms, args=(runs["sync"],), right=1000 * sync_s, mistakes=[
            ("every save together (the run's checkpoint_save total)", 1000 * runs["sync"].buckets[C.CHECKPOINT_SAVE],
             "every save together"),
            ("answering in seconds", sync_s, "seconds"),
        ]),
        Case(4, 2, lab04.check_speedup, args=(runs,), right=speedup, mistakes=[
            ("async over sync (upside down)", 1 / speedup, "upside down"),
            ("comparing the runs' checkpoint_save totals",
             runs["sync"].buckets[C.CHECKPOINT_SAVE] / runs["async"].buckets[C.CHECKPOINT_SAVE], "totals"),
        ]),
        Case(4, 3, lab04.check_disk_commits, args=(runs["memory"],), right=sum("disk" in e["tier"] for e in commits), mistakes=[
            ("counting every checkpoint", len(commits), "every checkpoint"),
            ("counting only the tier named 'disk'", sum(e["tier"] == "disk" for e in commits), "memory+disk"),
        ]),
        Case(4, 4, lab04.check_blocking_half, right="snapshot", mistakes=[
            ("persist", "persist", "background"),
        ]),
        Case(4, 5, lab04.check_async_optimum_min, right=gl.daly_interval(10, mtbf) / 60, mistakes=[
            ("using the sync save's 5 minutes", gl.daly_interval(300, mtbf) / 60, "*sync* save"),
            ("answering in seconds", gl.daly_interval(10, mtbf), "seconds"),
        ]),
    ]


def lab05_cases() -> list[Case]:
    L, T, R, S, H = 45.0, 10.0, 0.4, 15.0, 1.0
    r = rec("pipeline-0-workers")
    seg = r.ledger.segments
    waits = sum(s.duration for s in seg if s.kind == "data_wait")
    loop = sum(s.duration for s in seg if s.kind in ("data_wait", "compute", "step_end"))
    return [
        Case(5, 1, lab05.check_wait_ms, args=(L, T, R, S, H, 2), right=max(H, (L + T + R) / 2 - S), mistakes=[
            ("forgetting to subtract the step", (L + T + R) / 2, "subtract"),
            ("the formula for no workers", L + T + R, "no workers"),
            ("subtracting the hand-off too", (L + T + R) / 2 - S - H, "floor"),
            ("leaving out the read t_read", (L + T) / 2 - S, "(t_read)"),
        ]),
        Case(5, 2, lab05.check_workers, args=(L, T, R, S,), right=math.ceil(1.2 * (L + T + R) / S), mistakes=[
            ("no headroom: just keeping pace", math.ceil((L + T + R) / S), "headroom"),
            ("W before rounding up", 1.2 * (L + T + R) / S, "round up"),
        ]),
        Case(5, 3, lab05.check_wait_share, args=(r,), right=waits / loop, mistakes=[
            ("dividing by the whole wall time", r.buckets[C.DATA_WAIT] / r.summary["wall_s"], "wall time"),
            ("data wait over compute", r.buckets[C.DATA_WAIT] / r.buckets[C.PRODUCTIVE], "over compute"),
        ]),
        Case(5, 4, lab05.check_memory_mb, args=(38.5, 4, 4, True,), right=38.5 * 4 * 4 * 2, mistakes=[
            ("forgetting the pinned copy", 38.5 * 16, "double"),
            ("forgetting the prefetch per worker", 38.5 * 4 * 2, "`prefetch` batches"),
            ("answering in GB", 38.5 * 32 / 1000, "GB"),
        ]),
    ]


def _gradient_draws(draws: int = 1000, seed: int = 0):
    rng = np.random.default_rng(seed)
    d, s = 10, 0.7
    delta = 0.3 * np.linspace(-1, 1, d)
    x = rng.standard_normal((draws, 32, d))
    g = x * (x @ delta - s * rng.standard_normal((draws, 32)))[..., None]
    small = 0.5 * ((g[:, :16].mean(1) ** 2).sum(-1) + (g[:, 16:].mean(1) ** 2).sum(-1))
    return small, (g.mean(1) ** 2).sum(-1)


def lab06_cases() -> list[Case]:
    runs = {name: rec(f"lab06-{name}") for name in lab06.RUNS}
    ref = runs["reference"].summary["final_state_sha256"]
    same = {n for n, r in runs.items() if n != "reference" and r.summary["final_state_sha256"] == ref}
    assert same == {"cold"}, "the recordings no longer show what exercise 1 is about"
    gaps = lab06.watched_gaps(runs["reference"])
    first = sorted((e for e in runs["reference"].events if e["attempt"] == 0), key=lambda e: e["t"])
    startup_gap = max(b["t"] - a["t"] for a, b in zip(first, first[1:]))
    assert startup_gap > max(gaps), "the recording's longest gap is no longer in the start-up"
    cold = runs["cold"]
    k2f = lab06.kill_to_first_step_s(cold)
    fails = [e for e in cold.events if e["kind"] == "failure"]
    restore = [next(e for e in cold.events if e["attempt"] == f["attempt"] + 1 and e["kind"] == "restore")["t"] - f["t"]
               for f in fails]
    gain = lab06.spare_gain(1800, 30, 600, 60, 3 * 3600)
    return [
        Case(6, 1, lab06.check_same_model, args=(runs,), right={"cold"}, mistakes=[
            ("adding rng: the random states look harmless", {"cold", "rng"}, "other random draws"),
            ("adding optimizer: the weights seem to be all that matters", {"cold", "optimizer"}, "full-size steps"),
            ("none: thinking no restarted run can match", set(), "a run is missing"),
            ("a single name instead of a set", "cold", "a set of run names"),
        ]),
        Case(6, 2, lab06.check_longest_silence, args=(runs["reference"],), right=max(gaps), mistakes=[
            ("including the start-up before the first compute", startup_gap, "armed at the first compute"),
            ("the mean gap instead of the longest", sum(gaps) / len(gaps), "*longest*"),
            ("answering in milliseconds", 1000 * max(gaps), "milliseconds"),
        ]),
        Case(6, 3, lab06.check_cold_restart_s, args=(cold,), right=sum(k2f) / len(k2f), mistakes=[
            ("stopping at the restore (the ledger's restart bucket)", sum(restore) / len(restore), "stops at the restore"),
            ("answering in milliseconds", 1000 * sum(k2f) / len(k2f), "milliseconds"),
        ]),
        Case(6, 4, lab06.check_spare_gain, right=gain, mistakes=[
            ("using the first-order model instead of Daly's", lab06.spare_gain(1800, 30, 600, 60, 3 * 3600,
                                                                              model=gl.theory.expected_goodput), "first-order"),
            ("percentage points instead of a share", 100 * gain, "percentage points"),
            ("the ratio of the goodputs", gl.daly_goodput(1800, 30, 60, 10800) / gl.daly_goodput(1800, 30, 600, 10800), "ratio"),
            ("the goodput with the spare alone", gl.daly_goodput(1800, 30, 60, 10800), "subtract"),
            ("the subtraction the wrong way round", -gain, "negative"),
        ]),
        Case(6, 5, lab06.check_no_restart_modes, right={"loader-death", "disk-full"}, mistakes=[
            ("only loader-death", {"loader-death"}, "1 more mode"),
            ("including hang", {"loader-death", "disk-full", "hang"}, "must be killed"),
            ("including exception", {"loader-death", "disk-full", "exception"}, "exits with the error"),
            ("a single name instead of a set", "loader-death", "a set of mode names"),
        ]),
    ]


def lab07_cases() -> list[Case]:
    r = rec("lab07-straggler")
    b = r.buckets
    wait = b[C.STRAGGLER_WAIT] / (b[C.STRAGGLER_WAIT] + b[C.PRODUCTIVE] + b[C.LOST_WORK])
    q = 1 - 0.999 ** 1024
    save = 2.0 + (140e9 / 64) / (20e9 / 64)
    return [
        Case(7, 1, lab07.check_interval_factor, right=0.25, mistakes=[
            ("taking the interval as proportional to the MTBF (1/16)", 1 / 16, "square root"),
            ("the interval growing with the GPUs (4)", 4.0, "*more* often"),
        ]),
        Case(7, 2, lab07.check_slowed_share, right=q, mistakes=[
            ("adding the ranks' probabilities (k x p)", 1024 * 0.001, "adds the ranks' probabilities"),
            ("the chance that every rank is on time", 0.999 ** 1024, "*every* rank is on time"),
            ("one rank's share", 0.001, "one rank's share"),
            ("a percentage instead of a share", 100 * q, "percentage"),
        ]),
        Case(7, 3, lab07.check_measured_wait_share, args=(r,), right=wait, mistakes=[
            ("dividing by the wall time", b[C.STRAGGLER_WAIT] / r.summary["wall_s"], "wall time"),
            ("dividing by the productive time alone", b[C.STRAGGLER_WAIT] / b[C.PRODUCTIVE], "productive time alone"),
        ]),
        Case(7, 4, lab07.check_sharded_save_s, right=save, mistakes=[
            ("forgetting the fixed cost", save - 2.0, "fixed cost"),
            ("every rank at its own 2 GB/s", 2.0 + 140e9 / 64 / 2e9, "own 2 GB/s path"),
            ("one rank with the whole shared path", 2.0 + 140e9 / 64 / 20e9, "whole shared path"),
            ("the whole state through one rank's path", 2.0 + 140e9 / 2e9, "whole state"),
        ]),
        Case(7, 5, lab07.check_late_batch, right="data_wait", mistakes=[
            ("straggler_wait", "straggler_wait", "not slow at computing"),
            ("sync_wait, the phase, instead of a category", "sync_wait", "not a ledger category"),
        ]),
    ]


def lab08_cases() -> list[Case]:
    small, big = _gradient_draws()
    delta = 0.3 * np.linspace(-1, 1, 10)
    exact = (11 * (delta @ delta) + 10 * 0.7**2) / (delta @ delta)
    S, B = small.mean(), big.mean()
    grad, trace = (32 * B - 16 * S) / 16, (S - B) / (1 / 16 - 1 / 32)
    g_each, t_each = (32 * big - 16 * small) / 16, (small - big) / (1 / 16 - 1 / 32)
    g_sw, t_sw = (32 * S - 16 * B) / 16, (B - S) / (1 / 16 - 1 / 32)
    knee = 2 / 0.35
    return [
        Case(8, 1, lab08.check_efficiency, args=(48, 8, 128,), right=56 / 176, mistakes=[
            ("B_0 / B, the efficiency of a noiseless gradient", 8 / 128, "noiseless"),
            ("B_noise / B", 48 / 128, "base batch"),
            ("upside down, (B_noise + B) / (B_noise + B_0)", 176 / 56, "upside down"),
        ]),
        Case(8, 2, lab08.check_best_batch, args=(48, 2, 0.35,), right=math.sqrt(48 * knee), also_right=(17, 16.6), mistakes=[
            ("forgetting the square root", 48 * knee, "square root"),
            ("the knee upside down (beta / alpha)", math.sqrt(48 * 0.35 / 2), "alpha / beta"),
            ("the noise scale alone", 48.0, "noise scale alone"),
        ]),
        Case(8, 3, lab08.check_noise_scale, args=(small, big, 16, 32, exact), right=trace / grad, mistakes=[
            ("the exact noise scale of the problem instead of the estimate from the draws", exact, "estimate it from the draws"),
            ("the mean of each draw's ratio instead of the ratio of the means", float(np.mean(t_each / g_each)),
             "average the norms first"),
            ("small and big swapped", t_sw / g_sw, "swapped"),
            ("tr(Sigma) alone", trace, "tr(Sigma)"),
        ]),
        Case(8, 4, lab08.check_time_to_target, args=(7000, 2000, 0.8,), right=7000 / (2000 * 0.8), mistakes=[
            ("multiplying by the ledger's goodput instead of dividing", 7000 / 2000 * 0.8, "*longer*"),
            ("ignoring the ledger", 7000 / 2000, "ignores the ledger"),
        ]),
    ]


def _requests():
    R = gl.serving.RequestRecord
    times = [
        (0.100, 5, (0.450, 0.461, 0.472, 0.484, 0.495)), (0.200, 4, (0.380, 0.390, 0.400, 0.410)),
        (0.300, 3, (0.900, 0.910, 0.920)), (0.400, 4, (0.600, 0.620, 0.640, 0.660)), (0.500, 3, (0.700, 0.711, 0.722)),
        (0.600, 6, (0.950, 0.960, 0.970, 0.980, 0.990, 1.000)), (0.700, 2, (1.400, 1.430)),
        (0.800, 4, (1.100, 1.111, 1.122, 1.133)), (0.900, 6, (1.200, 1.212)), (1.000, 3, (1.250, 1.260, 1.270)),
    ]
    return [R(i, arrival_s=a, prompt_len=150, output_len=n, token_times_s=t) for i, (a, n, t) in enumerate(times)]


def lab09_cases() -> list[Case]:
    reqs, slo = _requests(), gl.serving.SLO(400, 12)
    first = reqs[0]
    probes = [(2.0, 1.00), (4.0, 0.97), (8.0, 0.93), (16.0, 0.62), (12.0, 0.91), (14.0, 0.84)]
    ttfts = sorted(1000 * r.ttft_s for r in reqs)
    return [
        Case(9, 1, lab09.check_ttft, args=(first,), right=350.0, mistakes=[
            ("TTFT in seconds", 0.35, "seconds"),
            ("TTFT from the start of the measurement, not from the arrival", 450.0, "subtract the arrival"),
        ]),
        Case(9, 1, lab09.check_tpot, args=(first,), right=11.25, mistakes=[
            ("TPOT divided by the tokens instead of the gaps between them", 45 / 5, "gaps"),
            ("TPOT counted from the arrival", 395 / 5, "not at the arrival"),
        ]),
        Case(9, 2, lab09.check_attainment, args=(reqs, slo,), right=0.6, mistakes=[
            ("leaving the unfinished request out", 6 / 9, "unfinished"),
            ("counting only TTFT", 0.8, "only TTFT"),
            ("counting only TPOT", 0.7, "only TPOT"),
        ]),
        Case(9, 3, lab09.check_p90_ttft, args=(reqs,), right=600.0, mistakes=[
            ("an interpolated percentile (numpy's default)", float(np.percentile(ttfts, 90)), "interpolated"),
            ("the mean", sum(ttfts) / len(ttfts), "mean"),
        ]),
        Case(9, 4, lab09.check_goodput, args=(probes, 0.9,), right=12.0, mistakes=[
            ("interpolating between measured rates", 13.0, "never interpolated"),
            ("the highest measured rate", 16.0, "busy is not useful"),
        ]),
    ]


def lab10_cases() -> list[Case]:
    tb, save = 70e9 * 14 / 1e12, 70e9 * 14 / 2e11
    base, faster, stalled = lab10.llama3(), lab10.llama3(restart_s=120.0), lab10.llama3(data_stall_share=0.05)
    saved = base.gpu_hours_lost_per_day - faster.gpu_hours_lost_per_day
    b = stalled.breakdown
    ettr = 1 - b[C.LOST_WORK] - b[C.RESTART] - b[C.CHECKPOINT_RESTORE]
    t = measure_timings(rec("lab01").events)
    m = base.scenario.job_mtbf_s
    claim = gl.theory.claim.explain(**lab10.CLAIM)
    implied = claim.implied
    return [
        Case(10, 1, lab10.check_checkpoint_tb, right=tb, mistakes=[
            ("counting the gradients (16 bytes per parameter)", 70e9 * 16 / 1e12, "gradients"),
            ("the bf16 weights alone", 70e9 * 2 / 1e12, "weights alone"),
            ("forgetting the fp32 master copy", 70e9 * 10 / 1e12, "master copy"),
            ("answering in GB", tb * 1000, "gigabytes"),
        ]),
        Case(10, 2, lab10.check_save_s, right=save, mistakes=[
            ("one rank's share at the whole system's bandwidth", save / 2048, "one rank's share"),
            ("writing the gradients too", 70e9 * 16 / 2e11, "gradients"),
            ("reading 200 GB/s as bits", 8 * save, "bits"),
            ("answering in minutes", save / 60, "minutes"),
        ]),
        Case(10, 3, lab10.check_lever_gpu_hours, args=(base, faster), right=saved, mistakes=[
            ("what the faster restart still loses, not the difference", faster.gpu_hours_lost_per_day, "*difference*"),
            ("what the defaults lose", base.gpu_hours_lost_per_day, "subtract"),
            ("answering in GPU-days", saved / 24, "GPU-days"),
            ("the change of goodput instead of GPU-hours", faster.goodput - base.goodput, "change of goodput"),
            ("per GPU instead of the whole cluster", saved / base.scenario.gpus, "per GPU"),
            ("the subtraction the wrong way round", -saved, "wrong way round"),
        ]),
        Case(10, 4, lab10.check_ettr, args=(stalled,), right=ettr, mistakes=[
            ("the goodput (the productive share)", b[C.PRODUCTIVE], "that is the goodput"),
            ("charging the data waits", ettr - b[C.DATA_WAIT], "data waits"),
            ("leaving out only the lost work", 1 - b[C.LOST_WORK], "restarts and the restores"),
            ("forgetting the restores", 1 - b[C.LOST_WORK] - b[C.RESTART], "restore"),
            ("a percentage instead of a share", 100 * ettr, "percentage"),
        ]),
        Case(10, 5, lab10.check_lab_save_at_cluster, args=(t.save_s, 20.0, base), right=t.save_s / 20.0 * m, mistakes=[
            ("the ratio save / MTBF itself", t.save_s / 20.0, "ratio save / MTBF itself"),
            ("the cluster's MTBF in hours", t.save_s / 20.0 * m / 3600, "in hours"),
            ("the cluster's own save", base.blocking_s, "cluster's own save"),
            ("the ratio upside down", 20.0 / t.save_s * m, "upside down"),
        ]),
        Case(10, 6, lab10.check_claim_storage, right=implied["storage_per_gpu_mbps"], mistakes=[
            ("the whole cluster's bandwidth in GB/s", implied["storage_gbps"], "per GPU, in MB/s"),
            ("the whole cluster's bandwidth in MB/s", 1000 * implied["storage_gbps"], "divide by"),
            ("GB/s per GPU instead of MB/s", implied["storage_per_gpu_mbps"] / 1000, "give MB/s"),
            ("the implied save time", implied["save_s"], "save, in seconds"),
        ]),
        # a 42 s save is an ordinary one (the ranges span the slowest published clusters): the claim is plausible
        Case(10, 6, lab10.check_claim_verdict, right="plausible" if claim.plausible else "implausible", mistakes=[
            ("implausible, though every value is within its range", "implausible", "look at claim.checks again"),
        ] if claim.plausible else [("plausible because its failure rate is", "plausible", "every implied value")]),
    ]


def lab11_cases() -> list[Case]:
    ft = gl.experiments.in_job.load_recording(gl.experiments.in_job.find_recording(ROOT))["runs"]["torchft"]["summary"]
    own = [r[C.DEGRADED] for r in ft["replicas"].values()]
    lam, w = lab11.llama3_rate_per_s(), lab11.RELAUNCH_S + lab11.HEAL_S
    q = lab11.away_share(8)
    cycle = lab11.INTERVAL_S / (lab11.INTERVAL_S + lab11.BLOCKING_S)
    rows = [{"recovery": "restart", "replica_groups": 1, "job_restarts_mean": 460.0},
            {"recovery": "in-job", "replica_groups": 2, "job_restarts_mean": 8.0},
            {"recovery": "in-job", "replica_groups": 4, "job_restarts_mean": 0.0},
            {"recovery": "in-job", "replica_groups": 8, "job_restarts_mean": 0.0}]
    return [
        Case(11, 1, lab11.check_job_degraded_s, args=(ft,), right=sum(own) / len(own), mistakes=[
            ("adding the replicas' degraded seconds instead of taking their mean", sum(own), "take the mean"),
            ("a share of the wall time instead of seconds", sum(own) / len(own) / ft["wall_s"], "seconds"),
        ]),
        Case(11, 2, lab11.check_away_share, right=q, mistakes=[
            ("the job's rate instead of one group's", 1 - math.exp(-lam * w), "lambda / G"),
            ("counting only the heal", 1 - math.exp(-lam * lab11.HEAL_S / 8), "only the heal"),
            ("counting only the relaunch", 1 - math.exp(-lam * lab11.RELAUNCH_S / 8), "only the relaunch"),
            ("the first-order lambda W / G", lam * w / 8, "first-order"),
        ]),
        Case(11, 3, lab11.check_in_job_goodput, right=(1 - q) * cycle, mistakes=[
            ("leaving out the saves", 1 - q, "leaves out the checkpoint saves"),
            ("the saves alone", cycle, "saves alone"),
            ("blocking for the whole persist", (1 - q) * lab11.INTERVAL_S / (lab11.INTERVAL_S + lab11.PERSIST_S),
             "whole persist"),
        ]),
        # half the batch, the noise scale twice the full batch, torchft's fixed learning rate: 2 - 5/3
        Case(11, 4, lab11.check_degraded_gain, right=1 / 3, mistakes=[
            ("AdaScale's gain: the step at its own best learning rate", 0.6, "AdaScale"),
            ("the batch ratio B / B0", 0.5, "batch ratio"),
            ("what the step loses instead of what it makes", 2 / 3, "loses"),
        ]),
        Case(11, 5, lab11.check_fewest_groups, args=(rows,), right=4, mistakes=[
            ("the first in-job setting, which still restarts", 2, "still restarts"),
            ("a larger setting that never restarts either", 8, "the fewest"),
        ]),
    ]


CASES = [c for make in (lab01_cases, lab02_cases, lab03_cases, lab04_cases, lab05_cases, lab06_cases, lab07_cases,
                        lab08_cases, lab09_cases, lab10_cases, lab11_cases)
         for c in make()]
MISTAKES = [(c, m) for c in CASES for m in c.mistakes]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_solution_passes(case):
    result = case.check(case.right)
    assert isinstance(result, CheckResult) and result.passed, result


@pytest.mark.parametrize("case", [c for c in CASES if c.also_right], ids=lambda c: c.id)
def test_the_answer_rounded_as_the_text_rounds_it_passes(case):
    for answer in case.also_right:
        assert case.check(answer).passed, (answer, case.check(answer))
    assert not case.check(round(case.right, 1) if case.right < 1 else round(case.right) + 3).passed


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_hint_waits_for_a_first_try(case):
    """The starter's answer (None) gets no hint (it often holds the formula); a wrong answer gets it."""
    from goodputlab.labs.checks import UNANSWERED

    result = case.check(None)
    assert not result.passed and result.message == UNANSWERED and len(case.fn.hint) > 15
    for _, wrong, _ in case.mistakes:
        assert case.fn.hint in case.check(wrong).message, (case.id, wrong)


@pytest.mark.parametrize("case,mistake", MISTAKES, ids=lambda x: x.id if isinstance(x, Case) else x[0][:40])
def test_each_common_mistake_fails_with_a_message_about_it(case, mistake):
    words, wrong, phrase = mistake
    result = case.check(wrong)
    assert not result.passed, f"{words!r} passed"
    assert phrase in result.message, f"{words!r}: {result.message!r}"


JUNK = ["twelve", [1, 2], {"a": 1}, float("nan"), True, object()]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_answers_of_the_wrong_kind_never_raise(case):
    for junk in JUNK:
        result = case.check(junk)
        assert isinstance(result, CheckResult) and not result.passed, (junk, result)
        assert result.message


def test_feedback_on_a_wrong_answer_never_gives_the_answer_away():
    """A wrong answer's message must not print the right one (to the precision shown)."""
    for case in CASES:
        right = case.right
        if not isinstance(right, (int, float)) or isinstance(right, bool) or right == 0:
            continue
        for words, wrong, _ in case.mistakes:
            message = case.check(wrong).message
            for digits in (1, 2, 3):
                assert f"{right:.{digits}f}" not in message, (case.id, words, message)


# --- the instructor guide lists exactly the mistakes tested here ---------------------------------------------


def guide_mistakes() -> dict[tuple[int, int], set[str]]:
    """(lab, exercise) -> the mistakes the guide's tables list (third column, separated by '; ')."""
    found: dict[tuple[int, int], set[str]] = {}
    lab = None
    for line in GUIDE.read_text().splitlines():
        m = re.match(r"## Lab (\d+)", line)
        if m:
            lab = int(m.group(1))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if lab is not None and len(cells) >= 3 and re.match(r"\d+\. ", cells[0]):
            exercise = int(cells[0].split(".")[0])
            found.setdefault((lab, exercise), set()).update(m.strip() for m in cells[2].split(";") if m.strip())
    return found


def test_the_guide_lists_the_tested_mistakes_and_no_others():
    tested: dict[tuple[int, int], set[str]] = {}
    for case in CASES:
        tested.setdefault((case.lab, case.exercise), set()).update(words for words, _, _ in case.mistakes)
    listed = guide_mistakes()
    assert {k: v for k, v in listed.items() if k[0] in {c.lab for c in CASES}} == tested


# --- the checks on a real run, and the lab's runs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def result(killed_run, tmp_path_factory):
    summary, events = killed_run
    return RunResult(tmp_path_factory.mktemp("lab"), summary, events)


def test_lab_1_checks_on_a_real_run(result):
    """The same checks on a real run killed three times (the fixture of the resume tests)."""
    right = result.buckets[C.DATA_WAIT]
    assert lab01.check_data_wait(right, result).passed
    near = lab01.check_data_wait(right * 1.01, result)
    assert not near.passed and "phase" in near.message
    executed = {(e["attempt"], e["step"]) for e in result.events if e["kind"] == "compute"}
    lost = executed - surviving_executions(result.events)
    assert lost and lab01.check_lost_executions(lost, result).passed
    assert not lab01.check_lost_executions(set(list(lost)[1:]), result).passed
    t = measure_timings(result.events)
    assert lab01.check_young_steps(young_interval(t.save_s, 20.0) / t.step_s, t, 20.0).passed
    assert lab01.check_interval_choice(optimal_ckpt_every(t, 90, 20.0), t, 90, 20.0).passed


def test_a_kill_during_a_step_loses_that_step_too():
    """Random failures cut steps short: leaving the cut step out of the lost set gets its own hint."""
    r = rec("every-25")
    executed = [(e["attempt"], e["step"]) for e in r.events if e["kind"] == "compute"]
    finished = {(e["attempt"], e["step"]) for e in r.events if e["kind"] == "step_end"}
    lost = set(executed) - surviving_executions(r.events)
    cut = {x for x in lost if x not in finished}
    assert cut, "the recording has no step cut short by a kill"
    result = lab01.check_lost_executions(lost - cut, r)
    assert not result.passed and "cut short by the kill" in result.message


def test_interval_choice_depends_on_the_save_against_the_step():
    # a 20 ms save against a 16 ms step: every step is far from the best; against a 2 s step it is close
    t = measure_timings(rec("lab01").events)
    fast = replace(t, compute_s=0.016, save_s=0.020, data_wait_s=0.0, step_other_s=0.0)
    assert not lab01.check_interval_choice(1, fast, 90, 20.0).passed
    assert lab01.check_interval_choice(optimal_ckpt_every(fast, 90, 20.0), fast, 90, 20.0).passed
    assert lab01.check_interval_choice(1, replace(fast, compute_s=2.0), 90, 20.0).passed


def test_lab_10_a_rounded_ettr_is_close_but_not_exact():
    stalled = lab10.llama3(data_stall_share=0.05)
    result = lab10.check_ettr(round(stalled.ettr, 3), stalled)
    assert not result.passed and "without rounding" in result.message
    assert lab10.check_ettr(stalled.ettr, stalled).passed


def test_lab_run_trains_for_real_or_loads_the_recording(tmp_path, capsys):
    recorded = gl.labs.lab_run("no-failures", recorded=True)
    assert "recorded run 'no-failures'" in capsys.readouterr().out
    assert recorded.summary == gl.recorded_run("no-failures").summary
    real = gl.labs.lab_run("no-failures", steps=12, ckpt_every=6, progress=False, out=tmp_path / "run")
    assert "running 'no-failures'" in capsys.readouterr().out
    assert real.summary["completed"] and real.config.steps == 12 and real.config.seed == recorded.config.seed
    assert real.config.io_latency_ms == recorded.config.io_latency_ms
    with pytest.raises(gl.ConfigError, match="recorded run"):
        gl.labs.lab_run("no-such-run", recorded=True)


def test_scoreboard_counts():
    board = Scoreboard()
    board.add(CheckResult("a", True, ""))
    board.add(CheckResult("b", False, ""))
    board.add(CheckResult("a", True, "again"))  # re-running a check replaces it
    assert board.metrics() == {"checks": 2, "passed": 1, "passed_names": ["a"]}
    assert "1 of 2" in board._repr_html_()


# --- the notebooks -------------------------------------------------------------------------------------------

LABS = sorted(p.name for p in (ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
CHECKS_PER_LAB = {"01": 4, "02": 5, "03": 5, "04": 5, "05": 4, "06": 5, "07": 5, "08": 4, "09": 5, "10": 7, "11": 5}


def _cells(path) -> list[tuple[str, str]]:
    """The notebook's cells as (kind, source), without the launch link (tools/launch_links.py: it names the
    file) and the run's caption (tools/execute_notebooks.py: it names the run's date and seconds)."""
    nb = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]
            if not {"launch-link", "run-caption"} & set(c.get("metadata", {}).get("tags", []))]


def test_every_lab_has_a_solution_and_checks():
    assert LABS, "no labs"
    for name in LABS:
        assert (ROOT / "labs" / "solutions" / name).exists(), name
        number = name[:2]
        assert (ROOT / "goodputlab" / "labs" / f"lab{number}.py").exists(), name
        assert number in CHECKS_PER_LAB, f"{name}: how many checks does it have? (CHECKS_PER_LAB)"


@pytest.mark.parametrize("name", LABS)
def test_exercise_and_solution_differ_only_in_the_answers(name):
    """Same cells in the same order; the solution fills in the cells whose starter answer is None."""
    exercise, solution = _cells(ROOT / "labs" / name), _cells(ROOT / "labs" / "solutions" / name)
    assert len(exercise) == len(solution)
    answers = 0
    for i, ((kind, mine), (_, theirs)) in enumerate(zip(exercise, solution)):
        if i == 0:  # titled as a solution ("# Solution to lab 3: ..."), so the site's sidebar tells them apart
            title = re.sub(r"^# Solution to lab (\d+):", r"# Lab \1:", theirs)
            assert theirs.startswith("# Solution to lab ") and title.replace("\n\n*Solution notebook (for instructors).*", "") == mine
        elif mine != theirs:
            assert kind == "code" and re.search(r"= None +# your answer", mine), (i, mine)
            answers += 1
        else:
            assert "# your answer" not in mine, (i, "an answer cell the solution does not fill in")
    assert answers >= 1


@pytest.mark.notebooks
@pytest.mark.parametrize("name", LABS)
def test_lab_exercise_runs_clean_and_solution_passes_every_check(name, executed_notebook):
    _, exercise, _ = executed_notebook(f"labs/{name}")
    _, solution, _ = executed_notebook(f"labs/solutions/{name}")
    checks = CHECKS_PER_LAB[name[:2]]
    assert exercise["checks"] == checks and exercise["passed"] == 0
    assert solution["checks"] == checks and solution["passed"] == checks
