"""Calculators that live on the static website: sliders that redraw in the browser, with no kernel.

``make book`` calls :func:`write_site` (``book/conf.py``, when Sphinx has finished): it writes one
small HTML page per calculator (:mod:`goodputlab.charts.site_pages` writes them) into
``<site>/calculators/``, with the Vega bundle and ``calculator.js`` they share.

Every number a page shows is a Vega signal whose expression comes from
:mod:`goodputlab.charts.vega_formulas` (Python that writes the expression of each
:mod:`goodputlab.theory` function); each :class:`Output` also names the Python model it stands
for, and ``tests/test_site_calculators.py`` evaluates every output with Vega at sampled inputs and
holds it to that model to 1e-9 relative, so the page and the book cannot drift apart.
Why Vega and not Pyodide: Pyodide's core alone is about 13 MB (npm ``pyodide``), its numpy is
fetched from a CDN at run time, and it starts in seconds; the formulas are closed forms, which
Vega's expression language evaluates as they are written, in a bundle that every page shares.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from .. import theory
from ..theory import data_stall
from ..theory.capstone import LLAMA3_GPU_MTBF_YEARS, SECONDS_PER_YEAR
from . import vega_formulas as vf
from .site_capstone import CAPSTONE, DEFINITIONS_HTML
from .site_claim import CLAIM
from .site_claim import write_page as write_claim_page
from .site_recorded import write_page as write_recorded_page
from .site_pages import (  # noqa: F401  (the pages' API, re-exported: conf.py and the tests use it from here)
    BUNDLE, PAGES_DIR, SHELL_BODY, SHELL_TITLE, STATIC, STATIC_DIR, Calculator, Extra, Refs, Signal, Slider,
    chapter_banner, page_path, vega_bundle, write_pages,
)


def _line_curve(x_field: str, x_title: str, y_title: str, series: list[tuple[str, object]], marks: list[dict]) -> dict:
    return {
        "layer": [
            {
                "transform": [{"fold": [name for name, _ in series], "as": ["model", "goodput"]}],
                "mark": {"type": "line", "clip": True},
                "encoding": {
                    "x": {"field": x_field, "type": "quantitative", "scale": {"type": "log"}, "title": x_title},
                    "y": {"field": "goodput", "type": "quantitative", "scale": {"domain": [0, 1]},
                          "axis": {"format": "%"}, "title": y_title},
                    "color": {"field": "model", "type": "nominal", "legend": {"orient": "bottom", "title": None}},
                },
            },
            *marks,
        ],
    }


# --- chapter 3: the checkpoint interval ---------------------------------------------------------

_CURVE_MODELS = (
    ("first order", lambda t, r: vf.expected_goodput(t, r["save_s"], r["restart_s"], r["mtbf_s"])),
    ("Daly (exact, Poisson)", lambda t, r: vf.daly_goodput(t, r["save_s"], r["restart_s"], r["mtbf_s"])),
    ("free saves and restarts", lambda t, r: vf.exact_goodput_free(t, r["mtbf_s"])),
)


def _interval_chart() -> dict:
    refs = {n: n for n in ("save_s", "restart_s", "mtbf_s")}
    curve = _line_curve(
        "interval_min", "checkpoint interval (minutes, log scale)", "goodput",
        [(name, None) for name, _ in _CURVE_MODELS],
        [
            {
                "data": {"values": [{}]},
                "transform": [{"calculate": "interval_s / 60", "as": "x"}],
                "mark": {"type": "rule", "strokeDash": [4, 3], "color": "#444"},
                "encoding": {"x": {"field": "x", "type": "quantitative"}},
            }
        ],
    )
    curve["layer"][0]["data"] = {"sequence": {"start": 0, "stop": 1.0001, "step": 0.005, "as": "t"}}
    curve["layer"][0]["transform"][:0] = [
        {"calculate": "exp(log(curve_lo_s) + datum.t * (log(curve_hi_s) - log(curve_lo_s)))", "as": "interval_s"},
        {"calculate": "datum.interval_s / 60", "as": "interval_min"},
        *({"calculate": model("datum.interval_s", refs), "as": name} for name, model in _CURVE_MODELS),
    ]
    return curve


INTERVAL = Calculator(
    slug="checkpoint_interval",
    title="How often to checkpoint",
    chapter="book/03_checkpoint_interval",
    intro=("Move the sliders: the optimal intervals (Young's and Daly's) and the goodput at your interval "
           "follow, and so does the curve of goodput against the interval under three models. "
           "Defaults: chapter 3's example (8.6 failures a day, a 1-minute save, a 10-minute restart) at a "
           "30-minute interval. Set the save and the restart to 0 for the worked example's free saves."),
    sliders=(
        Slider("interval_min", "checkpoint every (min)", 1.0, 720.0, 30.0),
        Slider("save_s", "save cost (s)", 1.0, 1800.0, 60.0, zero=True),
        Slider("mtbf_h", "job MTBF (hours)", 0.25, 200.0, theory.WORKED_EXAMPLE_MTBF_S / 3600.0),
        Slider("restart_min", "restart (min)", 0.5, 120.0, 10.0, zero=True),
    ),
    signals=(
        Signal("interval_s", lambda r: f"{r['interval_min']} * 60", lambda v: v["interval_min"] * 60.0),
        Signal("restart_s", lambda r: f"{r['restart_min']} * 60", lambda v: v["restart_min"] * 60.0),
        Signal("mtbf_s", lambda r: f"{r['mtbf_h']} * 3600", lambda v: v["mtbf_h"] * 3600.0),
        Signal("daly_goodput", lambda r: vf.daly_goodput(r["interval_s"], r["save_s"], r["restart_s"], r["mtbf_s"]),
               lambda v: theory.daly_goodput(v["interval_s"], v["save_s"], v["restart_s"], v["mtbf_s"]),
               "goodput at this interval (Daly, exact for Poisson failures)", "share"),
        Signal("daly_ettr", lambda r: vf.daly_ettr(r["interval_s"], r["save_s"], r["restart_s"], r["mtbf_s"]),
               lambda v: theory.daly_ettr(v["interval_s"], v["save_s"], v["restart_s"], v["mtbf_s"]),
               "ETTR at this interval (Daly: a save counts as training)", "share"),
        Signal("first_order", lambda r: vf.expected_goodput(r["interval_s"], r["save_s"], r["restart_s"], r["mtbf_s"]),
               lambda v: theory.expected_goodput(v["interval_s"], v["save_s"], v["restart_s"], v["mtbf_s"]),
               "goodput, first order", "share"),
        Signal("free_goodput", lambda r: vf.exact_goodput_free(r["interval_s"], r["mtbf_s"]),
               lambda v: theory.exact_goodput_free(v["interval_s"], v["mtbf_s"]),
               "goodput with free saves and restarts (exact Poisson)", "share"),
        Signal("young_s", lambda r: vf.young_interval(r["save_s"], r["mtbf_s"]),
               lambda v: theory.young_interval(v["save_s"], v["mtbf_s"]), "Young's optimum", "duration"),
        Signal("daly_s", lambda r: vf.daly_interval(r["save_s"], r["mtbf_s"]),
               lambda v: theory.daly_interval(v["save_s"], v["mtbf_s"]), "Daly's optimum", "duration"),
        Signal("hours_lost_per_day", lambda r: f"24 * (1 - {r['daly_goodput']})",
               lambda v: 24.0 * (1.0 - v["daly_goodput"]), "hours lost per day (Daly)", "number"),
        # the curve's span, as the notebook's panel draws it
        Signal("curve_lo_s", lambda r: f"min(60, {r['interval_s']} / 2)", lambda v: min(60.0, v["interval_s"] / 2)),
        Signal("curve_hi_s", lambda r: f"max(4 * {r['mtbf_s']}, 2 * {r['interval_s']})",
               lambda v: max(4.0 * v["mtbf_s"], 2.0 * v["interval_s"])),
    ),
    chart=_interval_chart,
    note=("The formulas are <code>goodputlab.theory</code>'s closed forms (Young 1974, Daly 2006, the renewal "
          "argument), evaluated by Vega in this page; a test holds them to the Python package to 1e-9. "
          "The notebook also simulates a long job at your interval (Monte Carlo), which needs a kernel. "
          + DEFINITIONS_HTML),
)


# --- chapter 2: failures at scale -----------------------------------------------------------------


def _cluster_chart() -> dict:
    return {
        "data": {"sequence": {"start": 0, "stop": 18, "as": "k"}},
        "transform": [
            {"calculate": "pow(2, datum.k)", "as": "devices"},
            {"calculate": f"{vf.cluster_mtbf('datum.devices', 'device_mtbf_s')} / 3600", "as": "job MTBF (hours)"},
        ],
        "layer": [
            {
                "mark": {"type": "line", "point": True},
                "encoding": {
                    "x": {"field": "devices", "type": "quantitative", "scale": {"type": "log", "base": 2},
                          "axis": {"format": ","}, "title": "devices (log scale)"},
                    "y": {"field": "job MTBF (hours)", "type": "quantitative", "scale": {"type": "log"},
                          "title": "job MTBF (hours, log scale)"},
                },
            },
            {
                "data": {"values": [{}]},
                "transform": [{"calculate": "devices", "as": "devices"},
                              {"calculate": "job_mtbf_s / 3600", "as": "job MTBF (hours)"}],
                "mark": {"type": "point", "filled": True, "size": 120, "color": "#d62728"},
                "encoding": {"x": {"field": "devices", "type": "quantitative"},
                             "y": {"field": "job MTBF (hours)", "type": "quantitative"}},
            },
        ],
    }


CLUSTER = Calculator(
    slug="cluster",
    title="Failures at scale: your cluster",
    chapter="book/02_failures_at_scale",
    intro=("A synchronous job stops when any one device fails, so its MTBF is the device's divided by the "
           "number of devices. Defaults: Llama 3's pretraining (16,384 GPUs, 466 interruptions in 54 days, "
           "about 5.2 years per GPU). The save and restart give the checkpoint interval to use and what it costs."),
    sliders=(
        Slider("devices", "devices", 1, 2**17, theory.LLAMA3_GPUS, scale="pow2"),
        Slider("device_mtbf_years", "per-device MTBF (years)", 0.1, 100.0, LLAMA3_GPU_MTBF_YEARS),
        Slider("days", "job length (days)", 1, 120, theory.LLAMA3_DAYS, scale="linear"),
        Slider("save_s", "blocking save (s)", 1.0, 1800.0, 30.0, zero=True),
        Slider("restart_min", "restart + reload (min)", 0.5, 120.0, 10.0, zero=True),
    ),
    signals=(
        Signal("device_mtbf_s", lambda r: f"{r['device_mtbf_years']} * {SECONDS_PER_YEAR!r}",
               lambda v: v["device_mtbf_years"] * SECONDS_PER_YEAR),
        Signal("duration_s", lambda r: f"{r['days']} * {theory.SECONDS_PER_DAY!r}",
               lambda v: v["days"] * theory.SECONDS_PER_DAY),
        Signal("restart_s", lambda r: f"{r['restart_min']} * 60", lambda v: v["restart_min"] * 60.0),
        Signal("job_mtbf_s", lambda r: vf.cluster_mtbf(r["devices"], r["device_mtbf_s"]),
               lambda v: theory.cluster_mtbf(int(v["devices"]), v["device_mtbf_s"]), "job MTBF", "duration"),
        Signal("failures_per_day", lambda r: vf.failures_per_day(r["devices"], r["device_mtbf_s"]),
               lambda v: theory.expected_failures(int(v["devices"]), v["device_mtbf_s"], theory.SECONDS_PER_DAY),
               "interruptions per day", "number"),
        Signal("failures_in_job", lambda r: vf.expected_failures(r["devices"], r["device_mtbf_s"], r["duration_s"]),
               lambda v: theory.expected_failures(int(v["devices"]), v["device_mtbf_s"], v["duration_s"]),
               "interruptions over the job", "number"),
        Signal("p_failure_day", lambda r: vf.p_any_failure(r["devices"], r["device_mtbf_s"], repr(theory.SECONDS_PER_DAY)),
               lambda v: theory.p_any_failure(int(v["devices"]), v["device_mtbf_s"], theory.SECONDS_PER_DAY),
               "chance of at least one interruption in a day", "share"),
        Signal("young_s", lambda r: vf.young_interval(r["save_s"], r["job_mtbf_s"]),
               lambda v: theory.young_interval(v["save_s"], v["job_mtbf_s"]), "Young's interval", "duration"),
        Signal("daly_s", lambda r: vf.daly_interval(r["save_s"], r["job_mtbf_s"]),
               lambda v: theory.daly_interval(v["save_s"], v["job_mtbf_s"]), "Daly's interval", "duration"),
        Signal("goodput", lambda r: vf.goodput_at_daly(r["save_s"], r["restart_s"], r["job_mtbf_s"]),
               lambda v: (theory.daly_goodput(v["daly_s"], v["save_s"], v["restart_s"], v["job_mtbf_s"])
                          if v["daly_s"] > 0 else math.exp(-v["restart_s"] / v["job_mtbf_s"])),
               "goodput at Daly's interval", "share"),
        Signal("ettr", lambda r: vf.ettr_at_daly(r["save_s"], r["restart_s"], r["job_mtbf_s"]),
               lambda v: (theory.daly_ettr(v["daly_s"], v["save_s"], v["restart_s"], v["job_mtbf_s"])
                          if v["daly_s"] > 0 else math.exp(-v["restart_s"] / v["job_mtbf_s"])),
               "ETTR at Daly's interval (a save counts as training)", "share"),
        Signal("device_hours_lost_per_day", lambda r: f"(1 - {r['goodput']}) * 24 * {r['devices']}",
               lambda v: (1.0 - v["goodput"]) * 24.0 * int(v["devices"]), "device-hours lost per day", "count"),
    ),
    chart=_cluster_chart,
    note=("Closed forms of <code>goodputlab.theory.cluster</code> and <code>closed_forms</code>, evaluated by Vega "
          "in this page (a test holds them to the Python package to 1e-9). The notebook's panel also simulates "
          "the whole job (Monte Carlo, failures in Llama 3's proportions of causes), which needs a kernel. "
          + DEFINITIONS_HTML),
)

# --- chapter 5: how deep must my pipeline be ----------------------------------------------------


def _pipeline_chart() -> dict:
    share = "datum.wait_s / (datum.wait_s + step_s)"
    return {
        "data": {"sequence": {"start": 1, "stop": 65, "as": "workers"}},
        "transform": [
            {"calculate": vf.steady_state_wait_s("load_s", "transform_s", "datum.workers", "step_s"), "as": "wait_s"},
            {"calculate": share, "as": "data wait"},
            {"calculate": "datum.workers == workers", "as": "yours"},
        ],
        "layer": [
            {"mark": {"type": "line", "interpolate": "step-after"},
             "encoding": {
                 "x": {"field": "workers", "type": "quantitative", "scale": {"type": "log", "base": 2},
                       "title": "workers (log scale)"},
                 "y": {"field": "data wait", "type": "quantitative", "scale": {"domain": [0, 1]},
                       "axis": {"format": "%"}, "title": "data-wait share of the step (no jitter)"}}},
            {"transform": [{"filter": "datum.yours"}],
             "mark": {"type": "point", "filled": True, "size": 120, "color": "#d62728"},
             "encoding": {"x": {"field": "workers", "type": "quantitative"},
                          "y": {"field": "data wait", "type": "quantitative"}}},
        ],
    }


def _memory_gb(r: Refs) -> str:
    batch_bytes = f"round({r['batch_mb']} * 1000000)"  # the notebook's int(round(MB * 1e6))
    return f"{vf.pipeline_memory_bytes(batch_bytes, r['workers'], r['prefetch'])} / 1e9"


#: the notebook's depth calculator (widgets.pipeline.DepthCalculator): its deepest prefetch, its reads
DEPTH_MAX_PREFETCH, DEPTH_STEPS, DEPTH_SEED = 32, 2000, 0


@functools.lru_cache(maxsize=256)
def _depth_advice(target_pct: float, load_s: float, transform_s: float, workers: int, step_s: float,
                  jitter: float) -> data_stall.DepthAdvice:
    return data_stall.depth_for_share(target_pct / 100, load_s, transform_s, workers, step_s, jitter=jitter,
                                      max_prefetch=DEPTH_MAX_PREFETCH, steps=DEPTH_STEPS, seed=DEPTH_SEED)


def _depth(v: Mapping[str, float]) -> data_stall.DepthAdvice:
    return _depth_advice(v["target_pct"], v["load_s"], v["transform_s"], int(v["workers"]), v["step_s"], v["jitter"])


def _depth_draws() -> dict:
    """The standard normal draws behind the emulated storage's reads (``read_latency_s``), for depth.js."""
    draws = [float(np.random.default_rng([DEPTH_SEED, step, 0x10]).standard_normal()) for step in range(DEPTH_STEPS)]
    return {"draws": draws, "max_prefetch": DEPTH_MAX_PREFETCH}


DEPTH = Extra(
    script="depth.js",
    model="DepthModel",
    inputs=("target_pct", "load_s", "transform_s", "workers", "step_s", "jitter"),
    outputs=(
        Signal("prefetch_needed", lambda r: "", lambda v: float(_depth(v).prefetch) if _depth(v).feasible else math.nan,
               "prefetch per worker for the target, jittery reads (simulated)", "count"),
        Signal("jitter_share", lambda r: "", lambda v: _depth(v).predicted_share,
               "its data-wait share (or the deepest's, when none is enough)", "share"),
    ),
    data=_depth_draws,
    none=f"none up to {DEPTH_MAX_PREFETCH}: add workers",
)

PIPELINE = Calculator(
    slug="pipeline_depth",
    title="How deep must my pipeline be?",
    chapter="book/05_input_pipeline",
    intro=("Supply first: the workers must deliver batches at least as fast as the step consumes them "
           "(supply above 1; 1.2x leaves room for jitter), or the loop waits on every step whatever the depth. "
           "Then jitter: reads that vary need batches in flight to ride out the slow ones, and the page finds the "
           "prefetch that keeps the data wait under your target. Every batch in flight (workers x prefetch) is held "
           "in host memory. Defaults: the chapter's example (a 250 ms step, 400 ms reads with a jitter of 1, 300 ms "
           "of transform, 4 workers, batches of 38.5 MB, a 2% target)."),
    sliders=(
        Slider("step_ms", "step time S (ms)", 10.0, 2000.0, 250.0),
        Slider("latency_ms", "storage latency L (ms)", 1.0, 5000.0, 400.0, zero=True),
        Slider("transform_ms", "transform T (ms)", 1.0, 5000.0, 300.0, zero=True),
        Slider("workers", "workers W", 1, 64, 4, scale="linear"),
        Slider("prefetch", "prefetch per worker p", 1, 32, 2, scale="linear"),
        Slider("batch_mb", "batch size (MB)", 0.1, 1000.0, 38.5),
        Slider("jitter", "latency jitter (CV)", 0.0, 3.0, 1.0, scale="linear", step=0.1),
        Slider("target_pct", "target data wait (%)", 0.5, 20.0, 2.0, scale="linear", step=0.5),
    ),
    signals=(
        Signal("step_s", lambda r: f"{r['step_ms']} / 1000", lambda v: v["step_ms"] / 1000),
        Signal("load_s", lambda r: f"{r['latency_ms']} / 1000", lambda v: v["latency_ms"] / 1000),
        Signal("transform_s", lambda r: f"{r['transform_ms']} / 1000", lambda v: v["transform_ms"] / 1000),
        Signal("supply", lambda r: vf.supply_ratio(r["load_s"], r["transform_s"], r["workers"], r["step_s"]),
               lambda v: data_stall.supply_ratio(v["load_s"], v["transform_s"], int(v["workers"]), v["step_s"]),
               "supply over the step's appetite (W S / (L + T))", "number"),
        Signal("workers_needed", lambda r: vf.workers_needed(r["load_s"], r["transform_s"], r["step_s"]),
               lambda v: float(data_stall.workers_needed(v["load_s"], v["transform_s"], v["step_s"], headroom=1.2)),
               "workers for 1.2x the appetite", "count"),
        Signal("wait_s", lambda r: vf.steady_state_wait_s(r["load_s"], r["transform_s"], r["workers"], r["step_s"]),
               lambda v: data_stall.steady_state_wait_s(v["load_s"], v["transform_s"], int(v["workers"]), v["step_s"]),
               "data wait per step, steady state (s)", "number"),
        Signal("wait_share", lambda r: f"{r['wait_s']} / ({r['wait_s']} + {r['step_s']})",
               lambda v: v["wait_s"] / (v["wait_s"] + v["step_s"]), "data-wait share, steady state", "share"),
        Signal("depth", lambda r: f"{r['workers']} * {r['prefetch']}", lambda v: float(int(v["workers"]) * int(v["prefetch"])),
               "batches in flight (W x p)", "count"),
        Signal("memory_gb", lambda r: _memory_gb(r),
               lambda v: data_stall.pipeline_memory_bytes(int(round(v["batch_mb"] * 1e6)), int(v["workers"]),
                                                          int(v["prefetch"])) / 1e9,
               "host memory held (GB; twice with pinned memory)", "number"),
    ),
    chart=_pipeline_chart,
    note=("The steady state without jitter, from <code>goodputlab.theory.data_stall</code>'s closed forms, "
          "evaluated by Vega in this page. How much prefetch rides out <em>jittery</em> reads is the chapter's "
          "simulation (<code>depth_for_share</code>: the same 2,000 seeded reads replayed through the DataLoader's "
          "rules, for prefetch 1 to 32), run in this page by <code>depth.js</code>. Tests hold both to the Python "
          "package to 1e-9. The notebook adds real runs of the pipeline to set these against."),
    extra=DEPTH,
)

CALCULATORS = (CLUSTER, INTERVAL, PIPELINE, CAPSTONE)
#: Every page that runs in the browser: the calculators and the claim explainer (JavaScript: ``site_claim``).
PAGES = (*CALCULATORS, CLAIM)


def for_chapter(pagename: str) -> list:
    """The live pages of a chapter's page (``book/03_checkpoint_interval``): calculators and the claim explainer."""
    return [c for c in PAGES if c.chapter == pagename]


def write_site(site: str | Path, chapter_titles: Mapping[str, str] | None = None,
               cache: str | Path | None = None, shell: str | None = None) -> list[Path]:
    """Write every calculator page, the claim explainer's, the recorded runs' and their JavaScript into a built site; returns the pages.

    ``chapter_titles`` maps a chapter's page name to the title its link shows (Sphinx's titles);
    ``cache``: a folder that keeps the Vega bundle between builds (:func:`vega_bundle`); ``shell``: a page
    of the book's theme the pages are written into (its header and sidebar; ``book/conf.py`` makes it).
    """
    return [*write_pages(site, CALCULATORS, chapter_titles, cache, shell), write_claim_page(site, chapter_titles, shell=shell),
            write_recorded_page(site, chapter_titles, cache=Path(cache) / "recorded" if cache is not None else None,
                                shell=shell)]
