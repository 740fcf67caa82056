"""Part 3 of vs_google_goodput.py: the features users rely on in Google's ml-goodput-measurement, side by side.

    python benchmarks/vs_google_goodput.py --sizes          # parts 1 and 3 (part 2 timed nothing)
    python benchmarks/vs_google_features.py [--steps 2000]  # part 3 alone

One job (vs_google_goodput.py's, with an evaluation of 0.4 s after every 250th step and every 97th step's
compute four times as long) is replayed into both recorders with identical timestamps. Then, side by side:

1. interval goodput over each quarter of the job: ``RunResult.interval`` (``goodputlab report --since
   --until``) against ``GoodputCalculator.get_job_goodput_interval``;
2. rolling goodput: ``RunResult.rolling`` (``report --window``) per tenth of the job, against Google's interval
   goodput over the same windows (Google has no rolling call: its monitoring queries intervals);
3. step-time deviation: goodputlab's median and p90 step time and its slow steps (over twice the median)
   against Google's ``get_step_deviation`` (ideal step time given: Google's own estimate ignores steps under
   1 s, and this job's are 30 ms) and its steps over twice the ideal;
4. custom badput: goodputlab's ``custom["eval"]`` against Google's ``CUSTOM_BADPUT_EVENTS``;
5. a threshold for CI: ``goodputlab report --fail-under`` exits 1 below it; Google's calculator has none.

Installs nothing: without ml-goodput-measurement it says so and stops.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_google_goodput import ROOT, T0, MemoryLogger, make_job, write_goodputlab, write_google  # noqa: E402

EVAL_EVERY, SLOW_EVERY = 250, 97


def features(steps: int, work: Path) -> None:
    """Print the five comparisons for a job of ``steps`` steps, its files in ``work``."""
    import goodputlab as gl
    from ml_goodput_measurement import goodput

    job = make_job(steps, eval_every=EVAL_EVERY, slow_every=SLOW_EVERY)
    folder = work / "features-job"
    write_goodputlab(job, folder)
    logger = MemoryLogger("replay-features")
    write_google(job, logger)
    calc = goodput.GoodputCalculator(logger.job_name, "replay", cloud_logger=logger, cache_dir=str(work / "g-features"))
    at = lambda t: dt.datetime.fromtimestamp(T0 + t, dt.timezone.utc)  # noqa: E731
    queries = iter(range(1_000_000))

    def google_interval(a: float, b: float) -> float:
        # a calculator per query: Google's interval cache reads on only forwards from the newest entry it has
        fresh = goodput.GoodputCalculator(logger.job_name, "replay", cloud_logger=logger,
                                          cache_dir=str(work / f"g-interval-{next(queries)}"))  # fmt: skip
        return fresh.get_job_goodput_interval(at(a), at(b))[0] / 100

    result = gl.load_run(folder)
    wall = result.summary["wall_s"]
    print(f"part 3: the features, on one job of {steps} steps with a crash, evaluations and slow steps ({wall:.1f} s)")

    print("\n1. interval goodput, each quarter of the job")
    print(f"{'interval (s)':<18}{'goodputlab':>12}{'Google':>10}")
    for i in range(4):
        a, b = wall * i / 4, wall * (i + 1) / 4
        ours = result.interval(a, b)["goodput"]
        theirs = google_interval(a, b)
        print(f"{a:>7.1f}-{b:<10.1f}{ours:>12.2%}{theirs:>10.2%}")

    print("\n2. rolling goodput, windows of a tenth of the job (Google: its interval call per window)")
    print(f"{'window (s)':<18}{'goodputlab':>12}{'Google':>10}{'median ms':>11}{'p90 ms':>9}{'slow':>6}")
    for w in result.rolling(wall / 10):
        theirs = google_interval(w["start_s"], w["end_s"])
        med = "-" if w["median_step_s"] is None else f"{1000 * w['median_step_s']:.1f}"
        p90 = "-" if w["p90_step_s"] is None else f"{1000 * w['p90_step_s']:.1f}"
        print(f"{w['start_s']:>7.1f}-{w['end_s']:<10.1f}{w['goodput']:>12.2%}{theirs:>10.2%}{med:>11}{p90:>9}{w['slow_steps']:>6}")

    print("\n3. step-time deviation over the whole job")
    (whole,) = result.rolling(wall * 2)
    ideal = whole["median_step_s"]
    deviations = calc.get_step_deviation(configured_ideal_step_time=ideal)
    google_slow = sum(1 for d in deviations.values() if d > ideal)  # slower than twice the ideal
    print(f"goodputlab: median step {1000 * whole['median_step_s']:.1f} ms, p90 {1000 * whole['p90_step_s']:.1f} ms, "
          f"{whole['slow_steps']} steps over twice the median")
    print(f"Google: {len(deviations)} step deviations from the ideal step time ({1000 * ideal:.1f} ms, given), "
          f"{google_slow} steps over twice the ideal; largest deviation {1000 * max(deviations.values()):.1f} ms")
    print(f"the job's slowed steps: {sum(1 for s in range(steps) if s % SLOW_EVERY == 7)} (some twice, "
          "re-executed after the crash), and each attempt's first step (3x: compilation)")

    print("\n4. custom badput (an evaluation of 0.4 s after every 250th step)")
    google_goodput = calc.get_job_goodput(include_badput_breakdown=True)[0] / 100
    details = calc.get_job_goodput_details()  # the details of the last get_job_goodput
    custom = details["badput_time"].get(goodput.BadputType.CUSTOM_BADPUT_EVENTS, 0.0)
    custom = sum(custom.values()) if isinstance(custom, dict) else custom
    print(f"goodputlab custom['eval'] {result.summary.get('custom', {}).get('eval', 0.0):.3f} s; Google "
          f"CUSTOM_BADPUT_EVENTS {custom:.3f} s; the job's evaluations: {job.truth.get('eval', 0.0):.3f} s")

    print("\n5. a threshold for CI")
    for threshold in (round(result.summary["goodput"] - 0.05, 2), round(result.summary["goodput"] + 0.05, 2)):
        r = subprocess.run([sys.executable, "-m", "goodputlab.cli", "report", str(folder), "--fail-under", str(threshold)],
                           capture_output=True, text=True, cwd=ROOT)  # fmt: skip
        print(f"goodputlab report --fail-under {threshold}: exit {r.returncode}{(': ' + r.stderr.strip()) if r.stderr else ''}")
    print(f"Google: no threshold; its goodput ({google_goodput:.2%}) is compared by the caller's own code")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000, help="steps of the job")
    args = p.parse_args(argv)
    try:
        import ml_goodput_measurement  # noqa: F401 (only whether it is there)
    except ImportError:
        print("ml-goodput-measurement is not installed: pip install 'goodputlab[google]' to run this comparison. "
              "Nothing was installed.")
        return 0
    import logging

    logging.disable(logging.WARNING)
    features(args.steps, Path(tempfile.mkdtemp(prefix="vs-google-features-")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
