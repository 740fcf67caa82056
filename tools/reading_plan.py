"""Where tools/apply_reading.py puts each chapter's reading apparatus, and the captions of its charts.

Anchors are text, not cell numbers, so they survive cells added around them:

* a **heading** (``"## A hot spare"``): the cell whose text holds that heading line; what goes
  "before" it closes the section above.
* a **snippet** of a code cell's source (``"result.timeline_chart()"``): the chart cell a caption
  follows. A snippet must match exactly one code cell of its chapter.

What the apparatus *is* lives in the package: the diagrams (``goodputlab/charts/diagrams.py``: files,
alt text, captions), the self-check questions (``goodputlab/self_checks.py``). This file holds where
they go, the chart captions (each a sentence or two that states no measured number, so a re-run
cannot contradict it), and each chapter's "Under the hood" page.
"""

from __future__ import annotations

#: diagram name -> (the heading it goes before, the sentence that leads into it; {ref} is its link)
DIAGRAMS: dict[str, tuple[str, str]] = {
    "ledger-timeline": ("## A real run with failures",
                        "{ref} puts these categories on one run's wall clock, before a real run fills them in."),
    "poisson-one-over-n": ("## Many reliable parts make one unreliable machine",
                           "{ref} is the chapter in one picture: devices that each fail rarely make a job that "
                           "fails often."),
    "upside-down-u": ("## The trade-off, to first order",
                      "{ref} shows the trade-off this chapter works out: two wastes that move in opposite directions "
                      "with the interval."),
    "snapshot-then-persist": ("## The anatomy of a save",
                              "{ref} shows what makes a save cheap: only part of it needs to stop training."),
    "input-pipeline": ("## The lab's pipeline",
                       "{ref} shows the pipeline this chapter measures, from storage to the training step."),
    "kill-to-restore": ("## A hot spare",
                        "{ref} lays one failure out in time, from the kill to training again, with a cold restart "
                        "and with a hot spare."),
    "allreduce-barrier": ("## Two ranks under torchrun",
                          "{ref} shows why ranks hold each other back: every step ends at a barrier that the "
                          "slowest rank sets."),
    "batch-noise-scale": ("## Two effects of a bigger batch",
                          "{ref} shows the two effects of a bigger batch that this chapter measures, and where "
                          "their product peaks."),
    "prefill-decode": ("## The server",
                       "{ref} shows the two phases of answering a request, and two ways to lay them out on workers."),
    "cluster-levers": ("## The checkpoint, from bytes to seconds",
                       "{ref} lists what a cluster loses and the lever that cuts each loss: the map of this chapter."),
    "lighthouse-quorum-heal": ("## Two stories, the same failures",
                               "{ref} shows the pieces of in-job recovery: a lighthouse, replica groups that meet "
                               "in a quorum, and a heal from a peer."),
}

#: self-check key -> the heading it goes before (the end of the section it checks)
SELF_CHECKS: dict[str, str] = {
    "1-goodput": "## A real run with failures",
    "1-ratios": "## Restarts must not change the result",
    "1-ettr": "### Three senses of goodput",
    "2-mtbf": "## What breaks",
    "2-restart": "## Recovery at scale",
    "2-domains": "### Every recovery lever at once",
    "3-young": "## The worked example, and where the back-of-envelope misleads",
    "3-first-order": "## When failures are not Poisson",
    "3-restart": "## Move the curve",
    "4-snapshot": "## Four strategies at a cluster's ratios",
    "4-lag": "## Measured: what a process kill and a node kill leave of a RAM tier",
    "4-peer": "## Steer it",
    "5-supply": "## Overlap: workers and prefetch",
    "5-depth": "## When the workers and the step share the CPU",
    "5-cold": "## What to remember",
    "6-data": "## How a job fails",
    "6-hang": "## A hot spare",
    "6-spare": "## Try it",
    "7-stops": "### Every step waits for the slowest rank",
    "7-sharded": "## A job whose ranks fail and straggle",
    "7-straggle": "## The simulator on the same costs",
    "8-noise": "## Throughput rises and flattens, efficiency falls, goodput peaks",
    "8-best": "## Learning-rate rules",
    "8-multiply": "## Steer it",
    "9-ttft": "## Why throughput misleads",
    "9-capacity": "## Attainment against rate, and the goodput",
    "9-disagg": "## What two CPU cores can and cannot show",
    "10-bytes": "## Llama 3 405B, rebuilt from its parts",
    "10-ram": "## Every lever",
    "10-claim": "## What carries over from the lab",
    "11-degraded": "## What a degraded step costs the model",
    "11-batch": "## At Llama 3's scale",
    "11-limit": "## Run it yourself",
}

#: chapter -> (snippet of the chart cell, figure label, caption), in the chapter's order
CAPTIONS: dict[int, list[tuple[str, str, str]]] = {
    1: [
        ("result.timeline_chart()", "fig-run-timeline",
         "The run as a timeline: one strip per attempt, coloured by category, with a dashed red line at each failure."),
        ("result.breakdown_chart()", "fig-run-breakdown", "Where the run's wall time went, by category."),
        ("result.loss_chart()", "fig-run-loss",
         "The training loss step by step. Executions that a failure rolled back are drawn in red."),
        ('"without failures": clean.summary', "fig-with-without",
         "The same seed with failures and without: where each run's wall time went."),
        ("gl.widgets.RunPanel(", "fig-run-panel",
         "The run panel after one run at its settings. With a kernel, Run starts a new real experiment, and the "
         "bottom chart keeps your last runs side by side."),
        ("mine.timeline_chart(", "fig-my-job-timeline",
         "A loop of your own, recorded with gl.Recorder: the first attempt crashes between two checkpoints, and the "
         "second resumes from the newest."),
        ('"my job (gl.Recorder)"', "fig-lab-and-mine",
         "The lab's run and the recorded loop, booked in the same categories."),
    ],
    2: [
        ("cluster_mtbf_chart(", "fig-mtbf-one-over-n",
         "The job's MTBF against the number of devices, on log-log axes, for three per-device reliabilities."),
        ("cause_chart()", "fig-llama3-causes",
         "Llama 3's 419 unexpected interruptions by root cause, from Table 5 of the paper."),
        ('sim.breakdown_rows("simulated Llama 3', "fig-llama3-simulated",
         "Where 54 days of 16,384 GPUs went, as the simulator's mean: with the chapter's costs, and with 2-hour "
         "checkpoints and 30-minute restarts."),
        ("goodput_grid_chart(", "fig-cost-grid",
         "Daly's goodput at Llama 3's failure rate for each checkpoint interval and restart time. The outlined "
         "cells reach 90%."),
        ("what recovery costs (simulated mean)", "fig-recovery-levers",
         "The same 54 days with 5-minute restarts, with a 10-minute watchdog before each, and with 300 hot spares."),
        ("gl.widgets.RecoveryPanel(", "fig-recovery-panel",
         "The recovery panel at its defaults: the 54 days simulated with every recovery lever on a slider, and "
         "each lever alone from the closed form."),
        ("gl.widgets.ClusterPanel(", "fig-cluster-panel",
         "The cluster panel at its defaults: cluster size, per-device MTBF, interval, save and restart, simulated."),
    ],
    3: [
        ("gl.charts.theory.goodput_curve(save, restart, mtbf", "fig-goodput-curve",
         "Goodput against the checkpoint interval for a 1-minute save, a 10-minute restart and the worked example's "
         "MTBF, with Young's and Daly's optima."),
        ("first order vs exact (diamonds: simulator)", "fig-first-order-vs-exact",
         "Free saves and restarts: the first-order model against the exact one, with the simulator's answers "
         "(diamonds)."),
        ("(circles: simulator)", "fig-weibull",
         "Goodput against the interval for Weibull failures of three shapes with the same mean. The circles are the "
         "simulator at each shape's optimum."),
        ("recovery_charts.policy_chart(", "fig-timer-or-progress",
         "Checkpointing after τ of progress against a wall-clock timer: the two exact answers, and the simulator's."),
        ("gl.widgets.PolicyPanel(", "fig-policy-panel",
         "The policy panel: both policies at one interval, and how often each saves."),
        ("gl.widgets.IntervalPanel(", "fig-interval-panel",
         "The interval panel at the worked example: goodput against the interval under both models, with the "
         "optima dashed."),
        ("gl.widgets.CheckpointCalculator(", "fig-checkpoint-calculator",
         "The checkpoint calculator for a cluster like Llama 3's: the job's MTBF, the optimal intervals, and what "
         "they keep."),
        ("lab_goodput_curve(", "fig-measured-curve",
         "Measured goodput at each interval (points) over the lab model's curve. The band is where a point should "
         "fall if the model is right."),
        ('summary_rows(middle.summary, "measured")', "fig-three-ways",
         "One run's time three ways: measured, modelled (expected, and through this run's own failures) and "
         "simulated."),
    ],
    4: [
        ("save_anatomy(", "fig-save-anatomy",
         "One save with each strategy. The dark part blocks training; the light part runs in the background until "
         "the save is durable."),
        ("strategy_timelines(", "fig-strategy-timelines",
         "The first seconds of the same run four times, one per strategy, on the same failure draws. Blue stripes "
         "are blocking saves, purple ones restores."),
        ("r.summary for name, r in runs.items()", "fig-strategy-breakdown",
         "Where each strategy's run spent its wall time."),
        ("durability.goodput_vs_interval(", "fig-durable-curves",
         "Goodput against the interval for each strategy. Solid curves count the lag to durable, dashed ones only "
         "the blocking part; circles are real runs."),
        ("gl.widgets.CheckpointPanel(", "fig-checkpoint-panel",
         "The checkpoint panel after one async run. The curves follow the settings; Run adds a real run as a circle, "
         "with its timeline."),
        ("auto_interval_chart(", "fig-auto-interval",
         "The interval a run chose after every save with --ckpt-every auto. The dashed line is Daly's optimum for "
         "the run's true MTBF; the red rules are its failures."),
    ],
    5: [
        ("anatomy_chart(", "fig-step-anatomy",
         "The anatomy of a step with no workers: compute alone, then with the transform (the prep stall), then "
         "with storage too (the fetch stall)."),
        ("gl.charts.pipeline.timelines(", "fig-pipeline-timelines",
         "The first seconds of three training loops on the same storage: no workers, 2 workers one batch ahead, "
         "4 workers four batches ahead."),
        ("depth_curve(", "fig-depth-curve",
         "The model's data-wait share against the pipeline depth for three worker counts, on this chapter's "
         "jittery storage."),
        ("gl.widgets.PipelinePanel(", "fig-pipeline-panel",
         "The pipeline panel after one run: the model's prediction, the run's timeline, and every run against the "
         "model."),
        ("gl.widgets.DepthCalculator(", "fig-depth-calculator",
         "The depth calculator at its defaults: the supply, the prefetch that meets the target, and the host memory "
         "it holds."),
        ("deep.timeline_chart()", "fig-cold-pipeline",
         "The deep pipeline at the cluster's ratios. Each later attempt's restart ends with the warm-up of a cold "
         "pipeline."),
    ],
    6: [
        ("loss_around_restart(", "fig-loss-after-restart",
         "The loss around the restart: the complete checkpoint, and each one that leaves a part out, against the "
         "failure-free run."),
        ("samples_chart(", "fig-samples-twice",
         "Samples seen twice and samples never seen, against the failure-free run, for each kind of checkpoint."),
        ("r.summary for name, r in modes.items()", "fig-mode-breakdown",
         "One run per failure mode, and one with stragglers: where each run's time went."),
        ('modes["hang"].timeline_chart()', "fig-hang-timeline",
         "The hang's timeline. Training stops, the watchdog waits out its timeout (booked as restart), then the "
         "supervisor kills the worker."),
        ("restart_strip(", "fig-cold-hot",
         "From a failure to the first resumed step: a cold restart against a hot spare."),
        ("hot.timeline_chart()", "fig-hot-timeline", "The run with a hot spare: each restart is a short handover."),
        ("RecoveryRunPanel(", "fig-recovery-run-panel",
         "The recovery panel: what the checkpoint leaves out, the failure mode and the hot spare, with where the "
         "time went and the loss beside the reference's."),
    ],
    7: [
        ('{"1 process": one, "2 ranks": two}', "fig-one-vs-two",
         "The same work on one process and on two ranks under torchrun: where the time went."),
        ("save_per_rank_chart(", "fig-save-per-rank",
         "A sharded save: what each rank writes, and how long training waits, against one process's torch.save."),
        ("failing.timeline_chart()", "fig-failing-ranks",
         "The two-rank job with random rank failures and a straggler. Every failure restarts both ranks."),
        ("job_mtbf_chart(", "fig-job-mtbf-ranks",
         "The job's MTBF against the number of ranks, a rank's MTBF divided by N, with this run's measured point."),
        ("rank_timelines(", "fig-six-steps",
         "Six steps of each rank and of the job. Rank 0 waits in the all-reduce while rank 1 still computes."),
        ("straggler_chart(", "fig-straggler-model",
         "The healthy rank's wait, measured and modelled, without a straggler and with one."),
        ("ScalingPanel.from_run(", "fig-scaling-panel",
         "The scaling panel: the same job simulated at any number of ranks, starting from this run's costs."),
    ],
    8: [
        ("factors_chart(", "fig-three-factors",
         "Throughput, statistical efficiency and their product, goodput, against the batch size: measured, fitted "
         "and predicted from the noise scale."),
        ("noise_scale_chart(", "fig-noise-scale",
         "Each run's estimate of the gradient noise scale against its held-out loss; training goes from left to "
         "right."),
        ("tradeoff_chart(", "fig-critical-batch",
         "Left, the held-out loss against the samples seen. Right, each batch size's steps and samples to the "
         "target, with McCandlish's curve fitted to them."),
        ("rules_chart(", "fig-lr-rules",
         "The time each batch size needs to reach the target under three learning-rate rules. A cross is a batch "
         "size that never got there."),
        ("adaptivity_chart(", "fig-adaptivity",
         "The best batch size at each loss level: predicted from the noise scale at that moment, and measured for "
         "the stretch before it."),
        ("gl.widgets.EfficiencyPanel(", "fig-efficiency-panel",
         "The efficiency panel at the largest batch: the measured sweeps read again for a rule, a batch size and a "
         "target loss."),
    ],
    9: [
        ('request_scatter(first["colocated"])', "fig-requests",
         "Every request at the first rate both searches measured, colocated and disaggregated. The green box is the "
         "SLO."),
        ("throughput_vs_rate(rows)", "fig-throughput-misleads",
         "Throughput against the arrival rate for every rate measured, and the latencies against the objectives."),
        ("search_path(", "fig-search",
         "Attainment against rate for both modes, with the target and each mode's goodput (dashed), and each "
         "search's probes in order."),
        ("token_gaps(", "fig-token-gaps",
         "Half a second of the workers at the highest rate both searches measured (orange prefill, green decode, "
         "purple hand-over), and the gaps between tokens."),
        ("gl.widgets.ServingPanel(", "fig-serving-panel",
         "The serving panel after one more run: every measurement scored against the objectives, and the panel's "
         "own run."),
    ],
    10: [
        ('"model (renewal-reward)"', "fig-llama3-rebuilt",
         "Llama 3 405B's 54 days rebuilt from its parts: the model's breakdown beside the simulator's."),
        ("gl.widgets.CapstonePanel(", "fig-capstone-panel",
         "The cluster panel at Llama 3's defaults: the goodput, the curve against the interval, the breakdown, and "
         "the lab's costs beside the cluster's."),
        ("gl.widgets.ClaimPanel(", "fig-claim-panel",
         "The claim explainer at its first example: what the claim implies about the cluster, and the verdict."),
        ("ratio_chart(", "fig-lab-ratios",
         "What carries over: the lab's ratios of save, recovery and interval to the MTBF, beside the cluster's."),
    ],
    11: [
        ("replica_timeline(", "fig-replica-timelines",
         "Each replica's time on the same failure draws at a cluster's ratios: restarting from a checkpoint, and "
         "recovering in-job."),
        ("gl.charts.runs.breakdown(ij.books_rows(recording))", "fig-two-stories-books", "Both runs' books, category by category."),
        ("goodput_by_groups(", "fig-groups-goodput",
         "At Llama 3's scale: goodput against the number of replica groups, simulated and in closed form, beside "
         "restarting from checkpoints. Dashed: the closed form with the collective's timeout and the all-reduce "
         "across groups."),
        ("where_the_rest_went(", "fig-groups-rest",
         "Where the time that was not productive went, for each number of replica groups."),
        ("gl.widgets.InJobPanel(", "fig-in-job-panel",
         "The in-job panel with the two runs above. With a kernel, choose the mode, the kills and the replica "
         "groups, and Run."),
    ],
}

#: chapter -> (the docs page on the site, from book/, and what the link says)
UNDER_THE_HOOD: dict[int, tuple[str, str]] = {
    1: ("../docs/ARCHITECTURE.md#the-ledger", "how the ledger is built from a run's event log"),
    2: ("../docs/ARCHITECTURE.md#theory-beside-measurement", "the models and the simulator behind this chapter"),
    3: ("../docs/ARCHITECTURE.md#theory-beside-measurement", "the models this chapter sets beside its runs"),
    4: ("../docs/CHECKPOINTS.md", "the checkpoint strategies, their guarantees and their layouts on disk"),
    5: ("../docs/ARCHITECTURE.md#the-input-pipeline-goodputlab-pipeline", "the lab's input pipeline"),
    6: ("../docs/ARCHITECTURE.md#failures-and-recovery-goodputlab-recovery", "how each failure is injected, noticed and booked"),
    7: ("../docs/DISTRIBUTED.md", "distributed runs: torchrun, ranks and the wait for the slowest"),
    8: ("../docs/ARCHITECTURE.md#module-map", "where the batch sweep and the noise-scale estimator live"),
    9: ("../docs/ARCHITECTURE.md#serving-goodputlab-serving", "the lab's server, its workers and its goodput search"),
    10: ("../docs/ARCHITECTURE.md#theory-beside-measurement", "the cluster model and the claim explainer"),
    11: ("../docs/IN_JOB_RECOVERY.md", "in-job recovery: the simulator, its closed form and the degraded category"),
}
#: the heading the "Under the hood" line goes before
UNDER_THE_HOOD_BEFORE = "## Exercises"
