"""Chapter 10's capstone panel on the website: your cluster's levers to goodput, ETTR and the best interval, in Vega.

The Python model is :func:`goodputlab.theory.capstone.evaluate` (what the notebook's panel,
:class:`goodputlab.widgets.capstone.CapstonePanel`, draws). The page is a Vega spec (not Vega-Lite: it
needs datasets that feed one another) written here from the same formulas. Every figure is a field of a
row of the dataset ``search``, one row per setting (the page's one comes from its sliders), so a test
evaluates many settings in one Vega run; the page's numbers are signals that read that row:

- the checkpoint's cost, the job's MTBF, the spares' share (a Poisson sum over flattened rows,
  cumulated by ``window`` transforms) and the recovery are closed forms;
- goodput at an interval is :func:`goodputlab.theory.renewal.periodic_goodput` (sync, async) or, for
  the RAM tiers, :func:`goodputlab.theory.checkpoint_tiers.tiered_goodput`. The Python solves that
  Markov chain numerically; for Poisson failures its stationary law has a closed form (the restored
  checkpoint's place in the storage cycle is a geometric sum taken modulo ``disk_every``), which the
  page evaluates, and a test holds to the chain (1e-9 relative, 1e-12 absolute for a share);
- the best interval is found as the Python finds it: the same log grid (61 intervals, 50 for the RAM
  tiers: the page's curve), its argmax (an ``aggregate``), then golden-section steps unrolled into
  :data:`GOLDEN_STEPS` sets of formulas (each a pass-through once the bracket is within 1e-6), then the
  better of the two whole numbers of training steps around it. Each evaluation of goodput is a chain of
  small formulas (:func:`goodput_defs`), so no expression is written twice.

Why rows and not signals: a signal that reads a dataset is re-ranked by Vega with every signal that
depends on it, path by path, and a search unrolled into signals took minutes to start.
Nothing here is simulated: the panel is closed forms and a search, so no Monte Carlo grid is needed.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Callable, Mapping

from ..errors import ConfigError
from ..theory import capstone as cap
from ..theory.frame import DEFINITIONS
from ..theory.checkpoint_cost import bytes_per_parameter
from ..theory.checkpoint_tiers import node_loss_share
from ..theory.units import SECONDS_PER_DAY
from . import vega_formulas as vf
from .site_pages import VEGA_SCHEMA, Slider

DEFAULT = cap.ClusterScenario()
#: Failures that take a node (and its RAM copy): Llama 3's causes, planned ones included, as the Python uses.
NODE_LOSS = node_loss_share(include_planned=True)
GOLDEN_RATIO = (math.sqrt(5.0) - 1.0) / 2.0
#: Golden-section steps the page unrolls: the Python's loop stops within 28 from the grid's bracket (the test checks it converged).
GOLDEN_STEPS = 30
SPARES_MAX = 1000
#: The strategies under which "storage every" matters: only a RAM tier on the failing node loses its copy and
#: falls back to storage (a peer's copy survives; sync and async write every checkpoint to storage).
DISK_EVERY_STRATEGIES = ("memory, same node",)

SLIDERS = (
    Slider("params_b", "model size (billion parameters)", 1.0, 2000.0, DEFAULT.parameters / 1e9),
    Slider("gpus", "GPUs", 8, 2**17, DEFAULT.gpus, scale="pow2"),
    Slider("gpu_mtbf_years", "per-GPU MTBF (years)", 0.3, 50.0, DEFAULT.gpu_mtbf_years),
    Slider("storage_gbps", "storage bandwidth (GB/s)", 1.0, 20_000.0, DEFAULT.storage_bps / 1e9),
    Slider("strategy", "checkpoint strategy", 0, 0, DEFAULT.strategy, options=cap.STRATEGIES),
    Slider("disk_every", "RAM tier: storage every (saves)", 1, 100, DEFAULT.disk_every, scale="linear",
           shown_when=("strategy", DISK_EVERY_STRATEGIES)),
    Slider("detect_s", "detection (s)", 1.0, 1800.0, DEFAULT.detect_s),
    Slider("restart_min", "restart: reschedule, init (min)", 0.2, 120.0, DEFAULT.restart_s / 60.0),
    Slider("spares", "hot spares (interruptions absorbed)", 0, SPARES_MAX, DEFAULT.spares, scale="linear", step=10),
)


class Output:
    """A number the page shows (a signal of the spec) and how it is written (see ``Signal.kind``)."""

    def __init__(self, name: str, label: str, kind: str):
        self.name, self.label, self.kind = name, label, kind


OUTPUTS = (
    Output("goodput", "goodput at the best interval", "share"),
    Output("ettr", "effective training time ratio (ETTR)", "share"),
    Output("interval_s", "best checkpoint interval (a whole number of steps)", "duration"),
    Output("gpu_hours_lost_per_day", "GPU-hours lost per day", "count"),
    Output("job_mtbf_s", "job MTBF", "duration"),
    Output("failures_per_day", "interruptions per day", "number"),
    Output("checkpoint_tb", "checkpoint size (TB)", "number"),
    Output("blocking_s", "a save blocks training for", "duration"),
    Output("recovery_s", "recovery (detect, restart, restore)", "duration"),
    Output("spare_share", "failures absorbed by a hot spare", "share"),
)


def _r(x: float) -> str:
    return repr(float(x))


def scenario_defs() -> list[tuple[str, str]]:
    """The scenario's signals, in dependency order (seconds, bytes): from the sliders to what the search needs."""
    d = DEFAULT
    bpp = bytes_per_parameter(d.precision, d.optimizer).checkpoint
    return [
        ("parameters", "params_b * 1e9"),
        ("storage_bps", "storage_gbps * 1e9"),
        ("restart_cold_s", "restart_min * 60"),
        ("is_sync", "strategy == 'sync'"),
        ("is_async", "strategy == 'async'"),
        ("is_peer", "strategy == 'memory, peer copy'"),
        ("is_mem", "!is_sync && !is_async"),
        ("total_bytes", f"parameters * {_r(bpp)}"),
        ("rank_bytes", "total_bytes / gpus"),
        ("write_s", "total_bytes / storage_bps"),
        ("storage_restore_s", "total_bytes / storage_bps"),
        ("snapshot_s", f"rank_bytes / {_r(d.host_copy_bps)}"),
        ("M", f"gpu_mtbf_years * {_r(cap.SECONDS_PER_YEAR)} / gpus"),
        ("valid", "M >= 300"),
        ("failures_per_day", f"{_r(SECONDS_PER_DAY)} / M"),
        ("mu", f"{_r(d.days)} * failures_per_day"),
        ("spare_sum", "length(data('spare_sum')) ? data('spare_sum')[0].total : 0"),
        ("spare_share", "spares > 0 ? min(1, spare_sum / mu) : 0"),
        ("restart", f"detect_s + (spare_share * {_r(d.spare_swap_s)} + (1 - spare_share) * restart_cold_s)"),
        ("ram_restore_s", f"is_peer ? rank_bytes / {_r(d.peer_copy_bps)} : rank_bytes / {_r(d.host_copy_bps)}"),
        ("Lr", f"is_peer ? rank_bytes / {_r(d.peer_copy_bps)} : 0"),
        ("step_s", f"6 * parameters * {_r(d.batch_tokens)} / (gpus * {_r(d.peak_flops)} * {_r(d.mfu)})"),
        ("blk", "is_sync ? write_s : snapshot_s"),
        ("lag", "is_async ? write_s : 0"),
        ("R", "restart + storage_restore_s"),
        ("k", "disk_every"),
        ("p", f"strategy == 'memory, same node' ? {_r(NODE_LOSS)} : 0"),
        ("Ld", "max(Lr, write_s)"),
        ("R0", "restart + ram_restore_s"),
        ("R1", "restart + storage_restore_s"),
        ("recovery_s", "is_mem ? restart + (1 - p) * ram_restore_s + p * storage_restore_s : R"),
        ("blocking_s", "blk"),
        ("checkpoint_tb", "total_bytes / 1e12"),
        ("job_mtbf_s", "M"),
        # the search's log grid, as the Python's (optimal_interval; the RAM tiers' evaluate)
        ("grid_n", "is_mem ? 50 : 61"),
        ("grid_lo", "is_mem ? max(Ld / k, step_s, M * 1e-5) : M * 1e-5"),
        ("grid_hi", "is_mem ? max(M, 2 * grid_lo) : 3 * M"),
    ]


def goodput_defs(x: str, local: Callable[[str], str]) -> list[tuple[str, str]]:
    """Goodput at interval ``x`` (an expression, seconds) as named steps; ``local(name)`` refers to an earlier step.

    Sync and async: :func:`~goodputlab.theory.renewal.periodic_goodput` (``pg``). RAM tiers (``tg``): the
    closed form of :func:`~goodputlab.theory.checkpoint_tiers.tiered_goodput` for Poisson failures, 0 where
    the storage copies cannot keep up (as the capstone's search). The last step, ``g``, picks by strategy.
    """
    L = local
    e1 = vf.expm1
    v_pf, v_pl, v_tc, v_lr, v_e, v_tlog = (L(n) for n in ("pf", "pl", "tc", "lr", "e", "tlog"))
    return [
        ("pf", f"{x} + blk"),
        ("pl", f"{L('pf')} + max(0, lag - {x})"),
        ("pe", f"(R + {L('pf')} + lag) / M"),
        ("pg", f"{L('pe')} > 700 ? 0 : {x} * (exp(-{L('pe')}) / -{e1(f'-{v_pl} / M')}) / M"),
        ("tc", f"{L('pf')} + max(0, Lr - {x})"),
        ("ok", f"Ld <= {L('pf')} + (k - 1) * {L('tc')}"),
        ("q", f"exp(-{L('tc')} / M)"),
        ("omq", f"-{e1(f'-{v_tc} / M')}"),
        ("omqk", f"-{e1(f'-k * {v_tc} / M')}"),
        ("ar0", f"exp(-(R0 + {L('pf')} + Lr) / M)"),
        ("ar1", f"exp(-(R1 + {L('pf')} + Lr) / M)"),
        ("ad0", f"exp(-(R0 + {L('pf')} + Ld) / M)"),
        ("ad1", f"exp(-(R1 + {L('pf')} + Ld) / M)"),
        ("C", f"p + (1 - p) * {L('ar0')}"),
        ("e", f"{L('omq')} * p / {L('C')}"),
        ("rq", f"{L('omq')} * (1 - p) * {L('ar0')} / {L('C')}"),
        ("K", f"p * (1 - p) / {L('C')} * {L('omq')} * ((1 - p) * {L('ar0')} + p * {L('ar1')}) / {L('C')}"),
        ("P0", f"p * (1 - p) / {L('C')} * -{e1(f'-(R1 + {v_pf} + Lr) / M')}"),
        ("lr", vf.log1p(f"-{L('e')}")),
        ("omrk", f"-{e1(f'k * {v_lr}')}"),
        ("rk1", f"exp((k - 1) * {L('lr')})"),
        ("s1x", f"(k - 1) * {L('lr')} + {vf.log1p(f'(k - 1) * {v_e}')}"),
        ("S1", f"-{e1(L('s1x'))} / ({L('e')} * {L('e')})"),
        ("qk1", f"exp(-(k - 1) * {L('tc')} / M)"),
        ("tlog", vf.log1p(f"{L('rq')} / {L('q')}")),
        ("T", f"k == 1 ? 0 : {L('q')} == 0 ? exp((k - 2) * {L('lr')}) : {L('rq')} == 0 ? (k - 1) * exp(-(k - 2) * {L('tc')} / M)"
              f" : {L('qk1')} * {e1(f'(k - 1) * {v_tlog}')} / {L('rq')}"),
        ("rw", f"p > 0 ? p * ((1 - p) * {L('ar1')} / {L('omq')} + p * (k * {L('ad1')} * {L('qk1')} / {L('omqk')}))"
               f" + (1 - p) * (1 - p) * {L('ar0')} / {L('omq')}"
               f" + p * (-({L('K')} * {L('S1')} / {L('omrk')}) + k * {L('ad0')} / {L('omqk')}"
               f" * (({L('P0')} + {L('K')} * {L('rk1')} / {L('omrk')}) * {L('qk1')} + {L('K')} * {L('T')} / {L('omrk')}))"
               f" : {L('ar0')} / {L('omq')}"),
        ("tg", f"{L('ok')} ? {x} * {L('rw')} / M : 0"),
        ("g", f"is_mem ? {L('tg')} : {L('pg')}"),
    ]


INPUTS = tuple(s.name for s in SLIDERS)
_SPLIT = "spare_sum"  # scenario_defs before it need no spares; from it on they read the spares' Poisson sum


def _datum(expr: str, names) -> str:
    """``expr`` with every bare scenario name made a field of the row (``M`` -> ``datum.M``); strings untouched."""
    return _name_pattern(tuple(names)).sub(r"datum.\1", expr)


@functools.lru_cache(maxsize=8)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern:
    """The pattern of :func:`_datum`, made once per set of names (a spec rewrites a thousand expressions)."""
    return re.compile(r"(?<![.\w'])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b(?!')")


def _names() -> list[str]:
    return [*INPUTS, "id", *(n for n, _ in scenario_defs())]


def _formulas(defs, names) -> list[dict]:
    return [{"type": "formula", "as": n, "expr": _datum(e, names)} for n, e in defs]


def _evaluate(prefix: str, x: str, names) -> tuple[list[dict], str]:
    """Formula transforms that evaluate goodput at ``x`` into fields ``prefix*``; returns them and the result's field."""
    defs = goodput_defs(x, lambda n: f"datum.{prefix}{n}")
    return _formulas([(f"{prefix}{n}", e) for n, e in defs], names), f"datum.{prefix}g"


def search_transforms(names) -> list[dict]:
    """The best interval as the Python finds it: golden section from the grid's bracket, then whole steps."""
    ratio = _r(GOLDEN_RATIO)
    out = [
        {"type": "formula", "as": "gs0_a", "expr": "datum.gold_a"},
        {"type": "formula", "as": "gs0_b", "expr": "datum.gold_b"},
        {"type": "formula", "as": "gs0_x1", "expr": f"datum.gs0_b - {ratio} * (datum.gs0_b - datum.gs0_a)"},
        {"type": "formula", "as": "gs0_x2", "expr": f"datum.gs0_a + {ratio} * (datum.gs0_b - datum.gs0_a)"},
    ]
    for field, x in (("gs0_f1", "datum.gs0_x1"), ("gs0_f2", "datum.gs0_x2")):
        chain, g = _evaluate(f"{field}_", x, names)
        out += chain + [{"type": "formula", "as": field, "expr": g}]
    for i in range(1, GOLDEN_STEPS + 1):
        s = lambda f: f"datum.gs{i - 1}_{f}"  # noqa: E731
        out += [
            {"type": "formula", "as": f"gm{i}", "expr": f"({s('b')} - {s('a')}) > 1e-6 * {s('b')}"},
            {"type": "formula", "as": f"gl{i}", "expr": f"{s('f1')} >= {s('f2')}"},
            {"type": "formula", "as": f"gx{i}",
             "expr": f"datum.gl{i} ? {s('x2')} - {ratio} * ({s('x2')} - {s('a')}) : {s('x1')} + {ratio} * ({s('b')} - {s('x1')})"},
        ]
        chain, fn = _evaluate(f"g{i}_", f"datum.gx{i}", names)
        out += chain
        left = {"a": s("a"), "b": s("x2"), "x1": f"datum.gx{i}", "f1": fn, "x2": s("x1"), "f2": s("f1")}
        right = {"a": s("x1"), "b": s("b"), "x1": s("x2"), "f1": s("f2"), "x2": f"datum.gx{i}", "f2": fn}
        out += [{"type": "formula", "as": f"gs{i}_{f}", "expr": f"datum.gm{i} ? (datum.gl{i} ? {left[f]} : {right[f]}) : {s(f)}"}
                for f in ("a", "b", "x1", "x2", "f1", "f2")]
    last = f"datum.gs{GOLDEN_STEPS}_"
    out += [
        {"type": "formula", "as": "search_converged", "expr": f"!(({last}b - {last}a) > 1e-6 * {last}b)"},
        {"type": "formula", "as": "best_s", "expr": f"0.5 * ({last}a + {last}b)"},
        {"type": "formula", "as": "below", "expr": "max(1, floor(datum.best_s / datum.step_s))"},
        {"type": "formula", "as": "cand1", "expr": "datum.below * datum.step_s"},
        {"type": "formula", "as": "cand2", "expr": "(datum.below + 1) * datum.step_s"},
    ]
    c1, g1 = _evaluate("c1_", "datum.cand1", names)
    c2, g2 = _evaluate("c2_", "datum.cand2", names)
    out += c1 + c2 + [
        {"type": "formula", "as": "tau", "expr": f"{g1} >= {g2} ? datum.cand1 : datum.cand2"},
        {"type": "formula", "as": "raw", "expr": f"{g1} >= {g2} ? {g1} : {g2}"},
    ]
    return out


def breakdown_defs() -> list[tuple[str, str]]:
    """:func:`goodputlab.theory.capstone.expected_breakdown` at the best interval, and the headline figures."""
    surv = lambda r: f"(-M * {vf.expm1(f'-({r}) / M')})"  # noqa: E731  (integral of the survival over a recovery)
    return [
        ("bd_cycle", "tau + blk + max(0, lag - tau)"),
        ("bd_restart", surv("restart")),
        ("bd_recovery", f"is_mem ? (1 - p) * {surv('restart + ram_restore_s')} + p * {surv('restart + storage_restore_s')}"
                        f" : 1 * {surv('restart + storage_restore_s')} + 0 * {surv('restart + 0')}"),
        ("bd_training", "M - bd_recovery"),
        ("bd_compute", "bd_training * tau / bd_cycle"),
        ("bd_kept", "raw * M"),
        ("share_restart", "bd_restart / M"),
        ("share_restore", "(bd_recovery - bd_restart) / M"),
        ("share_save", "(bd_training - bd_compute) / M"),
        ("share_lost", "max(bd_compute - bd_kept, 0) / M"),
        ("goodput", "valid ? (1 - 0) * raw : NaN"),
        ("ettr", "valid ? 1 - share_lost - share_restart - share_restore : NaN"),
        ("interval_s", "valid ? tau : NaN"),
        ("gpu_hours_lost_per_day", "valid ? gpus * 24 * (1 - goodput) : NaN"),
    ]


def data(rows: list[dict] | None = None) -> list[dict]:
    """The datasets: ``scenario`` (one row per setting: the page's one from its signals, or ``rows``), the
    spares' Poisson sums, the search's grid and its best point, and ``search``: every output, a field per row."""
    names = _names()
    defs = scenario_defs()
    cut = [n for n, _ in defs].index(_SPLIT)
    if rows is None:
        source = {"name": "scenario", "values": [{"id": 0}],
                  "transform": [{"type": "formula", "as": n, "expr": n} for n in INPUTS]}
    else:
        source = {"name": "scenario", "values": rows, "transform": []}
    source["transform"] += _formulas(defs[:cut], names)
    grid_chain, _ = _evaluate("", "datum.tau", names)
    later = [n for n, _ in defs[cut + 1:]] + [n for n, _ in breakdown_defs()]
    return [
        source,
        {"name": "spare_terms", "source": "scenario", "transform": [
            {"type": "formula", "as": "ns", "expr": "sequence(0, datum.spares)"},
            {"type": "flatten", "fields": ["ns"], "as": ["n"]},
            {"type": "formula", "as": "logn", "expr": "datum.n > 0 ? log(datum.n) : 0"},
            {"type": "window", "groupby": ["id"], "sort": {"field": "n"}, "ops": ["sum"], "fields": ["logn"], "as": ["lgamma"]},
            {"type": "formula", "as": "term", "expr": "exp(datum.n * log(datum.mu) - datum.mu - datum.lgamma)"},
            {"type": "window", "groupby": ["id"], "sort": {"field": "n"}, "ops": ["sum"], "fields": ["term"], "as": ["cdf"]},
            {"type": "formula", "as": "tail", "expr": "1 - min(1, datum.cdf)"},
        ]},
        {"name": "spare_sum", "source": "spare_terms",
         "transform": [{"type": "aggregate", "groupby": ["id"], "ops": ["sum"], "fields": ["tail"], "as": ["total"]}]},
        {"name": "scenario2", "source": "scenario", "transform": [
            {"type": "lookup", "from": "spare_sum", "key": "id", "fields": ["id"], "values": ["total"], "as": ["spare_sum"],
             "default": 0},
            *_formulas(defs[cut + 1:], names),
        ]},
        {"name": "grid", "source": "scenario2", "transform": [
            {"type": "formula", "as": "gi", "expr": "sequence(0, datum.grid_n)"},
            {"type": "flatten", "fields": ["gi"], "as": ["i"]},
            # numpy's logspace: i * step + start, the last point exactly the end
            {"type": "formula", "as": "y", "expr": "datum.i == datum.grid_n - 1 ? log(datum.grid_hi) / LN10 : datum.i * "
             "((log(datum.grid_hi) / LN10 - log(datum.grid_lo) / LN10) / (datum.grid_n - 1)) + log(datum.grid_lo) / LN10"},
            {"type": "formula", "as": "tau", "expr": "pow(10, datum.y)"},
            *grid_chain,
            {"type": "formula", "as": "minutes", "expr": "datum.tau / 60"},
            {"type": "window", "groupby": ["id"], "sort": {"field": "i"}, "ops": ["lag", "lead"], "fields": ["tau", "tau"],
             "as": ["tau_prev", "tau_next"]},
        ]},
        {"name": "grid_best", "source": "grid", "transform": [
            {"type": "aggregate", "groupby": ["id"], "ops": ["argmax"], "fields": ["g"], "as": ["best"]},
            {"type": "formula", "as": "gold_a", "expr": "datum.best.tau_prev != null ? datum.best.tau_prev : datum.best.tau"},
            {"type": "formula", "as": "gold_b", "expr": "datum.best.tau_next != null ? datum.best.tau_next : datum.best.tau"},
            {"type": "formula", "as": "grid_k", "expr": "datum.best.i"},
        ]},
        {"name": "search", "source": "scenario2", "transform": [
            {"type": "lookup", "from": "grid_best", "key": "id", "fields": ["id"], "values": ["gold_a", "gold_b", "grid_k"]},
            *search_transforms(names),
            *_formulas(breakdown_defs(), names + later + ["tau", "raw"]),
        ]},
    ]


def vega_spec() -> dict:
    """The page's Vega spec: the sliders are signals, every output a signal read from the ``search`` row."""
    signals = [{"name": "width", "init": "containerSize()[0] > 40 ? containerSize()[0] - 10 : 520",
                "on": [{"events": "window:resize", "update": "max(200, containerSize()[0] - 10)"}]}]
    signals += [{"name": s.name, "value": s.value} for s in SLIDERS]
    signals += [{"name": o.name, "update": f"length(data('search')) ? data('search')[0].{o.name} : NaN"} for o in OUTPUTS]
    return {
        "$schema": VEGA_SCHEMA,
        "height": 260,
        "padding": 5,
        "autosize": {"type": "fit-x", "contains": "padding", "resize": True},
        "signals": signals,
        "data": data(),
        "scales": [
            {"name": "x", "type": "log", "domain": {"data": "grid", "field": "minutes"}, "range": "width"},
            {"name": "y", "type": "linear", "domain": [0, 1], "range": "height"},
        ],
        "axes": [
            {"orient": "bottom", "scale": "x", "title": "checkpoint interval (minutes, log; the search's grid)", "tickCount": 5},
            {"orient": "left", "scale": "y", "format": "%", "title": "goodput"},
        ],
        "marks": [
            {"type": "line", "from": {"data": "grid"},
             "encode": {"update": {"x": {"scale": "x", "field": "minutes"}, "y": {"scale": "y", "field": "g"},
                                   "stroke": {"value": "#1f77b4"}, "strokeWidth": {"value": 2}}}},
            {"type": "symbol", "from": {"data": "search"},
             "encode": {"update": {"x": {"scale": "x", "signal": "datum.tau / 60"}, "y": {"scale": "y", "field": "raw"},
                                   "shape": {"value": "diamond"}, "size": {"value": 140}, "fill": {"value": "#d62728"}}}},
        ],
    }


def scenario(inputs: Mapping[str, object]) -> cap.ClusterScenario:
    """The Python scenario of the page's sliders (as the notebook's panel builds it)."""
    return cap.ClusterScenario(
        parameters=float(inputs["params_b"]) * 1e9, gpus=int(inputs["gpus"]), gpu_mtbf_years=float(inputs["gpu_mtbf_years"]),
        storage_bps=float(inputs["storage_gbps"]) * 1e9, strategy=str(inputs["strategy"]), disk_every=int(inputs["disk_every"]),
        spares=int(inputs["spares"]), detect_s=float(inputs["detect_s"]), restart_s=float(inputs["restart_min"]) * 60.0,
    )


def model(inputs: Mapping[str, object]) -> dict[str, float]:
    """Every output, by :func:`goodputlab.theory.capstone.evaluate` (NaN where the scenario is refused)."""
    try:
        r = cap.evaluate(scenario(inputs))
    except ConfigError:
        return {o.name: math.nan for o in OUTPUTS}
    f = r.figures()
    return {
        "goodput": r.goodput, "ettr": r.ettr, "interval_s": r.interval_s,
        "gpu_hours_lost_per_day": r.gpu_hours_lost_per_day, "job_mtbf_s": r.scenario.job_mtbf_s,
        "failures_per_day": f["failures_per_day"], "checkpoint_tb": f["checkpoint_tb"], "blocking_s": r.blocking_s,
        "recovery_s": r.recovery_s, "spare_share": r.spare_share,
    }


#: What goodput and ETTR mean, one click away under every calculator that prints both (a ``<details>``).
DEFINITIONS_HTML = ("<details><summary>goodput and ETTR</summary><b>goodput</b>: " + DEFINITIONS["goodput"]
                    + ". <b>ETTR</b>: " + DEFINITIONS["ettr"] + ".</details>")


class CapstoneCalculator:
    """Chapter 10's panel as a page: the same attributes as :class:`~goodputlab.charts.site_pages.Calculator`."""

    slug = "your_cluster"
    title = "Your cluster: every lever, one goodput"
    chapter = "book/10_your_cluster"
    intro = ("Model size, GPUs, their reliability, the storage, the checkpoint strategy, detection, restart and "
             "hot spares: the page finds the best checkpoint interval (a whole number of training steps) and the "
             "goodput, effective training time and GPU-hours lost there. Defaults: Llama 3 405B's pretraining "
             "(16,384 H100s, 466 interruptions in 54 days, storage at 2 TB/s), with a 90 s detection and a 5-minute "
             "restart; MFU 40%, 16M-token batches, no data stall.")
    note = ("The model is <code>goodputlab.theory.capstone.evaluate</code>, the notebook's panel: closed forms "
            "(the checkpoint's cost, Poisson failures, the spares' share, the renewal model of sync and async saves, "
            "and the RAM tiers' Markov chain in closed form), evaluated by Vega in this page. The best interval is "
            "searched as the Python searches it: a log grid of 61 intervals (50 for the RAM tiers, the curve drawn "
            "here), its best point refined by golden-section steps to 1e-6, then rounded to whole steps. A test holds "
            "every number to the Python package (goodput and ETTR to 1e-9; the interval to the search's 1e-6 and one step). "
            "Nothing here is simulated. The notebook's panel adds the data stall, MFU and price, and the lab's "
            "measured ratios beside the cluster's, which need a kernel. " + DEFINITIONS_HTML)
    sliders = SLIDERS
    signals = OUTPUTS
    extra = None  # every output is a row of its Vega dataset: no page script (site_pages.Extra)

    def spec(self) -> dict:
        return vega_spec()

    def model(self, inputs: Mapping[str, object]) -> dict[str, float]:
        return model(inputs)


CAPSTONE = CapstoneCalculator()
