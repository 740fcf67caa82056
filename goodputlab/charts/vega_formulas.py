"""The website calculators' formulas as Vega expressions, written once in Python.

Each function here takes the *expressions* of its arguments (strings: a signal's name such as
``"mtbf_s"``, a data field such as ``"datum.interval_s"``, or a number) and returns the Vega
expression that computes what the :mod:`goodputlab.theory` function of the same name computes.
The same text is used three ways: as a signal of a calculator page (its numbers), as a
``calculate`` transform of the page's chart (its curves), and by ``tests/test_site_calculators.py``,
which evaluates it with Vega itself (``vl_convert.vega_to_scenegraph``) at sampled inputs and holds
it to the Python model to 1e-9 relative. All times are in seconds.

Vega's expression language has ``exp`` but no ``expm1``: :func:`expm1` writes Kahan's form of it, so the
page keeps the model's precision where ``exp(x) - 1`` would lose digits.
"""

from __future__ import annotations

from ..theory.units import SECONDS_PER_DAY

def _p(x: str | float) -> str:
    """An argument, parenthesised so it can sit inside any expression."""
    return f"({x})"


def expm1(x: str) -> str:
    """``exp(x) - 1`` to a few ulps, also near 0 (Kahan's ``(u - 1) x / log(u)``, ``u = exp(x)``).

    Plain ``exp(x) - 1`` loses ``log10(1/|x|)`` digits, and a lost share ``1 - goodput`` loses as
    many again: with goodput 0.9999 the page would be 1e-9 off the Python model.
    """
    x = _p(x)
    return f"(exp({x}) == 1 ? {x} : abs({x}) < 1 ? (exp({x}) - 1) * {x} / log(exp({x})) : exp({x}) - 1)"


def log1p(x: str) -> str:
    """``log(1 + x)`` to a few ulps, also near 0 (Kahan's ``log(u) x / (u - 1)``, ``u = 1 + x``); Vega has no log1p."""
    x = _p(x)
    return f"(1 + {x} == 1 ? {x} : log(1 + {x}) * {x} / ((1 + {x}) - 1))"


# --- chapter 3: checkpoint interval (goodputlab.theory.closed_forms) --------------------------


def young_interval(save_s: str, mtbf_s: str) -> str:
    """:func:`goodputlab.theory.young_interval`: ``sqrt(2 delta M)`` seconds."""
    return f"sqrt(2 * {_p(save_s)} * {_p(mtbf_s)})"


def daly_interval(save_s: str, mtbf_s: str) -> str:
    """:func:`goodputlab.theory.daly_interval`: Daly's higher-order optimum, seconds (``M`` when ``delta >= 2M``)."""
    d, m = _p(save_s), _p(mtbf_s)
    ratio = f"({d} / (2 * {m}))"
    return f"({d} >= 2 * {m} ? {m} : sqrt(2 * {d} * {m}) * (1 + sqrt({ratio}) / 3 + {ratio} / 9) - {d})"


def expected_goodput(interval_s: str, save_s: str, restart_s: str, mtbf_s: str) -> str:
    """:func:`goodputlab.theory.expected_goodput` (no data stall): the first-order share, clamped at 0."""
    t, d, r, m = _p(interval_s), _p(save_s), _p(restart_s), _p(mtbf_s)
    return f"max(0, 1 - ({d} / {t} + ({t} / 2 + {r}) / {m}))"


def daly_goodput(interval_s: str, save_s: str, restart_s: str, mtbf_s: str) -> str:
    """:func:`goodputlab.theory.daly_goodput` (no data stall): ``tau / (M e^(R/M) (e^((tau+delta)/M) - 1))``.

    0 where the exponent passes 700, as the Python model (whose wall time is then infinite).
    """
    t, d, r, m = _p(interval_s), _p(save_s), _p(restart_s), _p(mtbf_s)
    exponent = f"({r} / {m} + ({t} + {d}) / {m})"
    return f"({exponent} > 700 ? 0 : {t} / ({m} * exp({r} / {m}) * {expm1(f'({t} + {d}) / {m}')}))"


def daly_ettr(interval_s: str, save_s: str, restart_s: str, mtbf_s: str) -> str:
    """:func:`goodputlab.theory.daly_ettr`: Daly's goodput times ``(tau + delta + M (e^(delta/M) - 1 - delta/M)) / tau``
    (every save counted as training, even one a failure cut short); 0 where the save's exponent passes 700."""
    t, d, m = _p(interval_s), _p(save_s), _p(mtbf_s)
    x = f"({d} / {m})"
    cut = f"({m} * ({expm1(x)} - {x}))"
    return f"({x} >= 700 ? 0 : {daly_goodput(interval_s, save_s, restart_s, mtbf_s)} * ({t} + {d} + {cut}) / {t})"


def exact_goodput_free(interval_s: str, mtbf_s: str) -> str:
    """:func:`goodputlab.theory.exact_goodput_free`: ``x / (e^x - 1)`` with ``x = tau / M``."""
    x = f"({_p(interval_s)} / {_p(mtbf_s)})"
    return f"({x} > 700 ? 0 : {x} / {expm1(x)})"


def goodput_at_daly(save_s: str, restart_s: str, mtbf_s: str) -> str:
    """Goodput at Daly's interval, as chapter 3's "your cluster" calculator gives it.

    ``daly_goodput(daly_interval, ...)``, or ``exp(-R/M)`` when saves are free (interval 0:
    checkpoint continuously, only the restarts cost).
    """
    tau = daly_interval(save_s, mtbf_s)
    return f"({tau} > 0 ? {daly_goodput(tau, save_s, restart_s, mtbf_s)} : exp(-{_p(restart_s)} / {_p(mtbf_s)}))"


def ettr_at_daly(save_s: str, restart_s: str, mtbf_s: str) -> str:
    """The effective training time ratio at Daly's interval (:func:`daly_ettr`), or ``exp(-R/M)`` with free saves."""
    tau = daly_interval(save_s, mtbf_s)
    return f"({tau} > 0 ? {daly_ettr(tau, save_s, restart_s, mtbf_s)} : exp(-{_p(restart_s)} / {_p(mtbf_s)}))"


# --- chapter 2: clusters (goodputlab.theory.cluster) ---------------------------------------------


def cluster_mtbf(n_devices: str, device_mtbf_s: str) -> str:
    """:func:`goodputlab.theory.cluster_mtbf`: the job's MTBF, ``M_device / N`` seconds."""
    return f"({_p(device_mtbf_s)} / {_p(n_devices)})"


def expected_failures(n_devices: str, device_mtbf_s: str, duration_s: str) -> str:
    """:func:`goodputlab.theory.expected_failures`: ``T / M_job`` failures in ``duration_s``."""
    return f"({_p(duration_s)} / {cluster_mtbf(n_devices, device_mtbf_s)})"


def p_any_failure(n_devices: str, device_mtbf_s: str, duration_s: str) -> str:
    """:func:`goodputlab.theory.p_any_failure`: ``1 - exp(-N T / M_device)``."""
    return f"(-{expm1('-' + expected_failures(n_devices, device_mtbf_s, duration_s))})"


def failures_per_day(n_devices: str, device_mtbf_s: str) -> str:
    """Expected job failures in one day (:func:`expected_failures` over 86,400 s)."""
    return expected_failures(n_devices, device_mtbf_s, repr(SECONDS_PER_DAY))


# --- chapter 5: the input pipeline (goodputlab.theory.data_stall) --------------------------------


def supply_ratio(load_s: str, transform_s: str, workers: str, step_s: str) -> str:
    """:func:`goodputlab.theory.data_stall.supply_ratio` (``W >= 1``, ``R = 0``): ``W S / (L + T)``."""
    per_batch = f"({_p(load_s)} + {_p(transform_s)})"
    return f"({per_batch} == 0 ? 1 / 0 : {_p(workers)} * {_p(step_s)} / {per_batch})"


def workers_needed(load_s: str, transform_s: str, step_s: str, headroom: float = 1.2) -> str:
    """:func:`goodputlab.theory.data_stall.workers_needed` (``R = 0``): ``ceil(headroom (L + T) / S)``, at least 1."""
    return f"max(1, ceil({headroom!r} * ({_p(load_s)} + {_p(transform_s)}) / {_p(step_s)} - 1e-9))"


def steady_state_wait_s(load_s: str, transform_s: str, workers: str, step_s: str) -> str:
    """:func:`goodputlab.theory.data_stall.steady_state_wait_s` (``W >= 1``, no hand-off): ``max(S, (L + T) / W) - S``."""
    s = _p(step_s)
    return f"(max({s} + 0, ({_p(load_s)} + {_p(transform_s)}) / {_p(workers)}) - {s})"


def pipeline_memory_bytes(batch_nbytes: str, workers: str, prefetch: str) -> str:
    """:func:`goodputlab.theory.data_stall.pipeline_memory_bytes` (not pinned): ``bytes W p``."""
    return f"({_p(batch_nbytes)} * {_p(workers)} * {_p(prefetch)})"
