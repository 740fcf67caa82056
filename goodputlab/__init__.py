"""goodputlab: measure, model and teach training goodput.

The chapters and labs use this small API (``import goodputlab as gl``)::

    result = gl.run(steps=400, ckpt_every=50, mtbf=4, seed=1)   # a real run, killed and restarted
    result.goodput, result.buckets                               # productive / wall, the categories
    gl.daly_interval(save_s=60, mtbf_s=10_000)                   # the theory beside it

Running and reading runs:

- :func:`run`: run a real, supervised training job; returns a :class:`RunResult`.
- :func:`load_run`: read a finished run's directory back as a :class:`RunResult`.
- :class:`RunConfig`: everything that defines a run (validated; the CLI's flags).
- :class:`RunResult`: a run's summary, event log, ledger and charts.
- :data:`CATEGORIES`: the ledger's categories (ten: straggler_wait for jobs of many ranks, degraded for in-job recovery), in order.
- :data:`PHASES`: the event kinds that start a phase (the others are markers).
- :class:`ConfigError`: a bad value; names the field, the value and what is allowed.
- :func:`measure_timings`: a run's phase costs read from its event log (:class:`RunTimings`).
- :class:`Recorder`: records any training loop (your own) into the same event log and ledger.
- :func:`watch`: a running job's breakdown in a notebook, redrawn from what its log gained.
- :class:`Follower`: a running job's ledger, updated from what its log gained (``update()`` returns its
  summary now); what ``watch`` and ``report --follow`` draw, for an exporter of your own.
- :func:`recorded_run`, :func:`recorded_runs`: real runs that ship with the package, read back as a
  :class:`RunResult` without training (for slow machines and phones).

The theory (all of it in :mod:`goodputlab.theory`; the ones the chapters use most here):

- :func:`young_interval`, :func:`daly_interval`, :func:`optimal_interval_numeric`:
  the optimal checkpoint interval, seconds.
- :func:`expected_goodput` (first order), :func:`daly_goodput` (Daly's complete model),
  :func:`exact_goodput_free` (free saves and restarts): goodput at an interval.
- :func:`predict_run`, :class:`RunTimings`: the model of this lab's runs.
- :func:`simulate`, :class:`SimConfig`, :class:`SimResult`: the cluster-scale simulator.
- :func:`human_duration`: ``"1h 12m"`` from seconds.

Namespaces: :mod:`theory` (pure models), :mod:`experiments` (real runs set beside
the theory), :mod:`efficiency` (goodput as statistical efficiency), :mod:`serving`
(goodput in serving), :mod:`charts` (Altair), :mod:`widgets` (ipywidgets panels),
:mod:`labs` (the workshop's checks); :func:`say` and :mod:`prose`, a sentence rendered from the
numbers it states (a chapter never types a measured figure); and :func:`record_metrics`, the line a
notebook prints for its tests.

Importing the package is cheap and never imports torch: every name above loads
on first use, so the worker process and the CLI start fast and ``import
goodputlab`` in a notebook costs nothing until a run starts.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> (module, attribute); attribute None: the module itself
_API: dict[str, tuple[str, str | None]] = {
    # running and reading runs
    "run": (".engine.api", "run"),
    "load_run": (".engine.api", "load_run"),
    "RunConfig": (".engine.config", "RunConfig"),
    "RunResult": (".engine.api", "RunResult"),
    "CATEGORIES": (".categories", "CATEGORIES"),
    "PHASES": (".measure.events", "PHASES"),
    "ConfigError": (".errors", "ConfigError"),
    "measure_timings": (".experiments.interval_sweep", "measure_timings"),
    "Recorder": (".measure.recorder", "Recorder"),
    "watch": (".widgets.watch", "watch"),
    "Follower": (".measure.follow", "Follower"),
    "recorded_run": (".engine.recorded", "recorded_run"),
    "recorded_runs": (".engine.recorded", "recorded_runs"),
    "scratch_dir": (".engine.scratch", "scratch_dir"),
    # the lab as a scale model of a cluster
    "scale_model": (".experiments.scale_model", "scale_model"),
    "calibrate": (".experiments.scale_model", "calibrate"),
    "ratio_table": (".experiments.scale_model", "ratio_table"),
    "goodput_stderr": (".experiments.scale_model", "goodput_stderr"),
    "ClusterCosts": (".theory.scale_model", "ClusterCosts"),
    "llama3_cluster": (".theory.scale_model", "llama3_cluster"),
    # the theory
    "young_interval": (".theory", "young_interval"),
    "daly_interval": (".theory", "daly_interval"),
    "optimal_interval_numeric": (".theory", "optimal_interval_numeric"),
    "expected_goodput": (".theory", "expected_goodput"),
    "daly_goodput": (".theory", "daly_goodput"),
    "exact_goodput_free": (".theory", "exact_goodput_free"),
    "predict_run": (".theory", "predict_run"),
    "RunTimings": (".theory", "RunTimings"),
    "simulate": (".theory", "simulate"),
    "SimConfig": (".theory", "SimConfig"),
    "SimResult": (".theory", "SimResult"),
    "human_duration": (".theory", "human_duration"),
    # the book
    "record_metrics": (".notebook", "record_metrics"),
    "say": (".prose", "say"),
    "prose": (".prose", None),
    # namespaces
    "theory": (".theory", None),
    "experiments": (".experiments", None),
    "recovery": (".recovery", None),
    "charts": (".charts", None),
    "widgets": (".widgets", None),
    "labs": (".labs", None),
    "efficiency": (".efficiency", None),
    "serving": (".serving", None),
}


#: the names through which a notebook gets a RunResult (a run, a recording, an experiment's runs, a
#: panel's): handing one out first names the charts that draw it (the engine does not import them)
_GIVES_RUNS = {"run", "load_run", "RunResult", "recorded_run", "recorded_runs", "measure_timings",
               "experiments", "charts", "widgets", "labs"}


def _run_charts():
    return importlib.import_module(".charts.runs", __name__)


def __getattr__(name: str):
    try:
        module, attribute = _API[name]
    except KeyError:
        raise AttributeError(f"module 'goodputlab' has no attribute {name!r}") from None
    if name in _GIVES_RUNS:
        importlib.import_module(".engine.api", __name__).draw_runs_with(_run_charts)
    loaded = importlib.import_module(module, __name__)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


__all__ = sorted(_API) + ["__version__"]
