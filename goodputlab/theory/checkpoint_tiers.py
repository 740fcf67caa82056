"""When is a checkpoint safe? Async saves that are not yet durable, and a RAM tier that dies with its node.

Two things a model that counts only a save's *blocking* part gets wrong
(times in **seconds**):

1. **The lag to durable.** An asynchronous save returns after its snapshot,
   but the checkpoint is durable only when the background persist ends, ``L``
   seconds later. A failure in between rolls back one checkpoint further. For
   one storage tier, :func:`goodputlab.theory.renewal.periodic_goodput` with
   ``durable_lag_s = L`` is exact (for Poisson failures the lag costs a factor
   ``exp(-L/M)``); :func:`async_goodput` names that case.
2. **A RAM tier is not storage.** An in-memory checkpoint survives the crash
   of a *process*, but not the loss of the machine that holds it: a failure
   that takes the node (a GPU or host fault that removes it from the job, a
   maintenance drain) rolls back to the last checkpoint in *storage*, which is
   written only every ``k``-th save. :func:`tiered_goodput` is the exact
   expected goodput of that two-tier scheme (a Markov chain over where in the
   storage cycle each restore lands), and :func:`simulate_tiered` the same
   scheme played out failure by failure, which tests and chapters set beside it.

The two-tier scheme, as the lab's ``memory`` strategy runs it: a snapshot every
``tau`` of compute (``blocking_s``), in RAM ``ram_lag_s`` after the snapshot;
every ``disk_every``-th one also written to storage, durable ``disk_lag_s``
after the snapshot (the count continues across restarts). A failure keeps the
node with probability ``1 - p`` (recovery ``ram_restart_s``: detect, restart,
reload from RAM) and takes it with probability ``p`` (``disk_restart_s``:
detect, restart, reload from storage). Failures form a renewal process with
mean ``M`` and Weibull ``shape`` (1: Poisson).

Which failures take the node is a judgement per cause: :func:`node_loss_share`
counts, in Llama 3's table of interruption causes, those that take a machine
out of the job (GPU and host hardware, host maintenance) against those a
restarted process survives on the same machines (software, network, timeouts).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .. import validate
from ..errors import check
from .renewal import _check_shape, cycle_times, periodic_goodput, weibull_scale

# Llama 3's interruption causes (theory.cluster's table) by whether a same-node RAM copy survives them.
#: Component groups whose failures take a machine out of the job (its RAM with it).
NODE_LOSS_COMPONENTS = frozenset({"GPU", "Host", "Unplanned maintenance"})
#: Component groups a restarted process survives on the same machines (planned maintenance is counted apart).
PROCESS_ONLY_COMPONENTS = frozenset({"Dependency", "Network", "Unknown"})


def node_loss_share(causes: Iterable[dict] | None = None, include_planned: bool = False) -> float:
    """Share of interruptions that take a node, and a same-node RAM copy with it.

    ``causes`` are rows with ``component`` and ``count`` (default: Llama 3's
    Table 5, :data:`goodputlab.theory.LLAMA3_INTERRUPTION_CAUSES`). Components in
    :data:`NODE_LOSS_COMPONENTS` count as node losses. For Llama 3's 419
    unexpected interruptions that is 268 GPU + 21 host + 32 host maintenance =
    321, 76.6%. With ``include_planned`` the 47 planned interruptions (firmware
    and configuration updates, which restart the job on the same machines)
    join the total as process-only: 321 / 466 = 68.9%.
    """
    from .cluster import LLAMA3_INTERRUPTION_CAUSES, LLAMA3_PLANNED_INTERRUPTIONS

    rows = list(LLAMA3_INTERRUPTION_CAUSES if causes is None else causes)
    lost = sum(r["count"] for r in rows if r["component"] in NODE_LOSS_COMPONENTS)
    total = sum(r["count"] for r in rows) + (LLAMA3_PLANNED_INTERRUPTIONS if include_planned else 0)
    check(total > 0, "causes", causes, "rows with a positive total count")
    return lost / total


def async_goodput(
    interval_s: float,
    blocking_s: float,
    persist_s: float,
    restart_s: float,
    mtbf_s: float,
    *,
    shape: float = 1.0,
    data_stall_fraction: float = 0.0,
) -> float:
    """Goodput of an asynchronous save to storage: blocks ``blocking_s``, durable ``persist_s`` later.

    Exact under renewal failures (:func:`goodputlab.theory.renewal.periodic_goodput`
    with ``durable_lag_s = persist_s``): a failure while a checkpoint is still
    being persisted rolls back to the one before it.
    """
    return periodic_goodput(
        interval_s, blocking_s, restart_s, mtbf_s, durable_lag_s=persist_s, shape=shape,
        data_stall_fraction=data_stall_fraction,
    )


def _survival(mtbf_s: float, shape: float):
    if shape == 1.0:
        return lambda t: np.exp(-np.maximum(t, 0.0) / mtbf_s)
    scale = weibull_scale(mtbf_s, shape)
    return lambda t: np.exp(-np.power(np.maximum(t, 0.0) / scale, shape))


def _at_least(first_s: float, cycle_s: float, survival, n_max: int) -> np.ndarray:
    """``P(N >= n)`` for n = 0..n_max, where checkpoint n is done at ``first_s + (n - 1) * cycle_s``."""
    n = np.arange(n_max + 1, dtype=float)
    a = survival(first_s + (n - 1.0) * cycle_s)
    a[0] = 1.0
    return a


def _terms_needed(first_s: float, cycle_s: float, survival) -> int:
    n = 64
    while survival(np.array([first_s + n * cycle_s]))[0] > 1e-15 and n < 20_000_000:
        n *= 2
    return n


def _poisson_state(
    j: int, r: float, first: float, cycle: float, ram_lag: float, disk_lag: float, mtbf: float, k: int, p: float, tau: float
) -> tuple[dict, float]:
    """One state's transitions and expected kept work for Poisson failures (geometric sums in closed form).

    ``P(N >= n) = A q^(n-1)`` with ``A = exp(-(r + c1 + L)/M)``, ``q = exp(-c/M)``.
    """
    q = math.exp(-cycle / mtbf)
    one_minus_q = -math.expm1(-cycle / mtbf)
    one_minus_qk = -math.expm1(-k * cycle / mtbf)
    a_ram = math.exp(-(r + first + ram_lag) / mtbf)
    a_disk = math.exp(-(r + first + disk_lag) / mtbf)
    row: dict = {}
    for residue in range(k):  # P(N = n) summed over n = residue (mod k)
        if residue == 0:
            prob = (1.0 - a_ram) + a_ram * one_minus_q * q ** (k - 1) / one_minus_qk
        else:
            prob = a_ram * one_minus_q * q ** (residue - 1) / one_minus_qk
        target = ((j + residue) % k, 0)
        row[target] = row.get(target, 0.0) + (1.0 - p) * prob
    row[(0, 1)] = row.get((0, 1), 0.0) + p
    kept_ram = a_ram / one_minus_q
    first_disk = (k - j) % k or k
    kept_disk = -j + k * a_disk * q ** (first_disk - 1) / one_minus_qk
    return row, tau * ((1.0 - p) * kept_ram + p * kept_disk)


def tiered_goodput(
    interval_s: float,
    blocking_s: float,
    ram_restart_s: float,
    disk_restart_s: float,
    mtbf_s: float,
    *,
    disk_every: int,
    node_loss_share: float,
    ram_lag_s: float = 0.0,
    disk_lag_s: float | None = None,
    shape: float = 1.0,
    data_stall_fraction: float = 0.0,
) -> float:
    """Expected goodput (a share) of a RAM tier with a storage copy every ``disk_every``-th save.

    Seconds: ``interval_s`` (compute between snapshots), ``blocking_s``,
    ``ram_restart_s`` and ``disk_restart_s`` (recovery from RAM, from storage),
    ``mtbf_s``, ``ram_lag_s`` and ``disk_lag_s`` (snapshot to durable in RAM,
    in storage; ``disk_lag_s`` defaults to ``ram_lag_s`` and must not exceed
    ``disk_every`` cycles). ``node_loss_share`` (p) is the share of failures
    that take the node and its RAM copy.

    The chain's state is where in the storage cycle the restored checkpoint
    sits (0 .. k-1) and which tier it came from (it sets the recovery time).
    From state ``(j, tier)`` an up period makes ``N`` checkpoints durable in RAM
    before it fails, with ``P(N >= n) = S(R_tier + c1 + (n-1) c + L_ram)``; a
    failure that keeps the node moves to ``((j + N) mod k, RAM)`` and keeps
    ``N tau``; one that takes it moves to ``(0, storage)`` and keeps
    ``tau (k floor((j + N_disk)/k) - j)``, which is negative when it rolls back
    past where the period began. Goodput is the stationary mean of the kept
    work over ``M`` (renewal-reward). Exact for renewal failures, with one
    simplification: a storage copy begun in an earlier up period counts as
    written (``disk_lag_s`` is taken to be short against the time between
    failures). With ``p = 0`` it is
    :func:`goodputlab.theory.renewal.periodic_goodput` from RAM; with
    ``disk_every = 1`` every checkpoint is in storage and only the recovery
    times mix.
    """
    validate.seconds("ram_restart_s", ram_restart_s)
    validate.seconds("disk_restart_s", disk_restart_s)
    validate.seconds("mtbf_s", mtbf_s, positive=True)
    k = validate.whole("disk_every", disk_every, 1)
    p = validate.share("node_loss_share", node_loss_share, high_open=False)
    validate.share("data_stall_fraction", data_stall_fraction)
    _check_shape(shape)
    disk_lag = ram_lag_s if disk_lag_s is None else disk_lag_s
    validate.seconds("disk_lag_s", disk_lag)
    first, cycle = cycle_times(interval_s, blocking_s, ram_lag_s)
    check(
        disk_lag <= first + (k - 1) * cycle,
        "disk_lag_s", disk_lag,
        f"at most disk_every cycles ({first + (k - 1) * cycle:g} s): one storage write in flight",
    )
    if disk_lag < ram_lag_s:
        disk_lag = ram_lag_s  # the storage copy is made from the RAM copy
    survival = _survival(mtbf_s, shape)
    restarts = (ram_restart_s, disk_restart_s)
    states = [(j, tier) for tier in (0, 1) for j in range(k)]
    index = {s: i for i, s in enumerate(states)}
    transition = np.zeros((2 * k, 2 * k))
    reward = np.zeros(2 * k)
    for (j, tier), i in index.items():
        r = restarts[tier]
        if shape == 1.0:  # Poisson: every sum is geometric, in closed form
            row, reward[i] = _poisson_state(j, r, first, cycle, ram_lag_s, disk_lag, mtbf_s, k, p, interval_s)
        else:
            row, reward[i] = _renewal_state(j, r, first, cycle, ram_lag_s, disk_lag, survival, k, p, interval_s)
        for target, prob in row.items():
            transition[i, index[target]] += prob
    # stationary distribution: pi (P - I) = 0, sum(pi) = 1
    a = np.vstack([(transition - np.eye(2 * k)).T, np.ones(2 * k)])
    b = np.zeros(2 * k + 1)
    b[-1] = 1.0
    pi = np.linalg.lstsq(a, b, rcond=None)[0]
    return (1.0 - data_stall_fraction) * float(pi @ reward) / mtbf_s


def _renewal_state(j: int, r: float, first: float, cycle: float, ram_lag: float, disk_lag: float, survival,
                   k: int, p: float, interval_s: float) -> tuple[dict[tuple[int, int], float], float]:
    """One state ``(j, tier)`` of :func:`tiered_goodput`'s chain under renewal failures: where a failure
    leaves the restored checkpoint (``{(j', tier'): probability}``) and the work kept, in seconds."""
    row: dict[tuple[int, int], float] = {}
    n_max = _terms_needed(r + first + ram_lag, cycle, survival)
    ram = _at_least(r + first + ram_lag, cycle, survival, n_max)
    p_n = ram - np.append(ram[1:], 0.0)  # P(N = n)
    # a failure that keeps the node: restore the newest RAM checkpoint
    kept_ram = float(ram[1:].sum())  # E[N]
    for residue in range(k):
        target = ((j + residue) % k, 0)
        row[target] = row.get(target, 0.0) + (1.0 - p) * float(p_n[residue::k].sum())
    # a failure that takes the node: back to the newest storage copy (crossed every k-th checkpoint)
    disk = _at_least(r + first + disk_lag, cycle, survival, n_max)
    first_disk = (k - j) % k or k  # checkpoint n of this period is a storage copy when (j + n) % k == 0
    kept_disk = -j + k * float(disk[first_disk::k].sum())
    row[(0, 1)] = row.get((0, 1), 0.0) + p
    return row, interval_s * ((1.0 - p) * kept_ram + p * kept_disk)


def simulate_tiered(
    interval_s: float,
    blocking_s: float,
    ram_restart_s: float,
    disk_restart_s: float,
    mtbf_s: float,
    *,
    disk_every: int,
    node_loss_share: float,
    ram_lag_s: float = 0.0,
    disk_lag_s: float | None = None,
    shape: float = 1.0,
    failures: int = 2000,
    trials: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """The two-tier scheme of :func:`tiered_goodput` played out, failure by failure (Monte Carlo).

    Each of ``trials`` jobs lives through ``failures`` up periods (Weibull or
    exponential gaps with mean ``mtbf_s``); the job keeps a global count of
    checkpoints, the newest one in RAM and the newest one in storage, and a
    storage copy counts only once it is durable (unlike the chain, a copy
    still in flight when any failure strikes is lost). Returns ``goodput``
    (kept compute over wall time, pooled over trials), its standard error
    ``goodput_se`` and ``failures`` per trial. Vectorised over trials, a loop
    over failures.
    """
    validate.whole("failures", failures, 1)
    validate.whole("trials", trials, 2)
    k = validate.whole("disk_every", disk_every, 1)
    p = validate.share("node_loss_share", node_loss_share, high_open=False)
    _check_shape(shape)
    disk_lag = max(ram_lag_s if disk_lag_s is None else disk_lag_s, ram_lag_s)
    first, cycle = cycle_times(interval_s, blocking_s, ram_lag_s)
    rng = np.random.default_rng(seed)
    scale = mtbf_s if shape == 1.0 else weibull_scale(mtbf_s, shape)
    index = np.zeros(trials, dtype=np.int64)  # the restored checkpoint's global number
    on_disk = np.zeros(trials, dtype=np.int64)  # the newest checkpoint durable in storage
    from_disk = np.zeros(trials, dtype=bool)  # this up period restores from storage
    wall = np.zeros(trials)

    def made(t: np.ndarray, lag: float) -> np.ndarray:
        """Checkpoints durable ``lag`` after their snapshot within ``t`` seconds of training."""
        return np.where(t >= first + lag, np.floor(np.maximum(t - first - lag, 0.0) / cycle) + 1.0, 0.0).astype(np.int64)

    for _ in range(failures):
        gap = (rng.standard_exponential(trials) if shape == 1.0 else rng.weibull(shape, trials)) * scale
        wall += gap
        train = gap - np.where(from_disk, disk_restart_s, ram_restart_s)
        in_ram = index + made(train, ram_lag_s)
        written = index + made(train, disk_lag)  # checkpoints whose storage copy (if any) is durable
        newest_copy = (written // k) * k  # a storage copy made in this up period, if above the restored one
        on_disk = np.where(newest_copy > index, np.maximum(on_disk, newest_copy), on_disk)
        node_lost = rng.random(trials) < p
        index = np.where(node_lost, on_disk, in_ram)
        from_disk = node_lost
    kept = index * interval_s
    per_trial = kept / wall
    return {
        "goodput": float(kept.sum() / wall.sum()),
        "goodput_se": float(np.std(per_trial, ddof=1) / math.sqrt(trials)),
        "failures": float(failures),
    }


def tiered_optimum(
    blocking_s: float,
    ram_restart_s: float,
    disk_restart_s: float,
    mtbf_s: float,
    *,
    disk_every: int,
    node_loss_share: float,
    ram_lag_s: float = 0.0,
    disk_lag_s: float | None = None,
    shape: float = 1.0,
    intervals_s: Iterable[float] | None = None,
) -> dict[str, float]:
    """The best interval (seconds) of :func:`tiered_goodput` on a log grid, refined; ``{interval_s, goodput}``.

    ``intervals_s`` defaults to 60 points from ``M/1e4`` to ``M``.
    """
    grid = list(intervals_s) if intervals_s is not None else list(np.logspace(math.log10(mtbf_s * 1e-4), math.log10(mtbf_s), 60))

    def g(tau: float) -> float:
        lag = ram_lag_s if disk_lag_s is None else disk_lag_s
        first, cycle = cycle_times(tau, blocking_s, ram_lag_s)
        if lag > first + (disk_every - 1) * cycle:
            return 0.0
        return tiered_goodput(
            tau, blocking_s, ram_restart_s, disk_restart_s, mtbf_s, disk_every=disk_every,
            node_loss_share=node_loss_share, ram_lag_s=ram_lag_s, disk_lag_s=disk_lag_s, shape=shape,
        )

    values = [g(t) for t in grid]
    k = int(np.argmax(values))
    best = _golden_max(g, float(grid[max(k - 1, 0)]), float(grid[min(k + 1, len(grid) - 1)]), rel=1e-6)
    return {"interval_s": best, "goodput": g(best)}


# ---------------------------------------------------------------------------
# the four strategies of chapter 4, each with its durability


def strategy_goodput(
    strategy: str,
    interval_s: float,
    blocking_s: float,
    durable_s: float,
    restart_s: float,
    mtbf_s: float,
    *,
    disk_every: int = 4,
    node_loss_share: float = 0.0,
    ram_restart_s: float | None = None,
    disk_lag_s: float | None = None,
) -> float:
    """Goodput of one of the lab's strategies with what makes its checkpoints safe.

    ``blocking_s``: the part of a save that blocks; ``durable_s``: from the start
    of the save until it is durable (in storage; for ``memory``, in RAM), so
    the lag is ``durable_s - blocking_s``; ``restart_s``: recovery when
    restoring from storage (``ram_restart_s``, default the same, from RAM).
    ``sync``, ``async`` and ``dcp`` are one storage tier
    (:func:`goodputlab.theory.renewal.periodic_goodput` with the lag);
    ``memory`` is :func:`tiered_goodput` with a storage copy every
    ``disk_every``-th save, durable ``disk_lag_s`` after its snapshot (default:
    the RAM lag), and ``node_loss_share`` of failures taking the RAM tier.
    """
    validate.choice("strategy", strategy, ("sync", "async", "dcp", "memory"))
    lag = max(0.0, durable_s - blocking_s)
    if strategy != "memory":
        return periodic_goodput(interval_s, blocking_s, restart_s, mtbf_s, durable_lag_s=lag)
    first, cycle = cycle_times(interval_s, blocking_s, lag)
    disk_lag = lag if disk_lag_s is None else disk_lag_s
    if disk_lag > first + (disk_every - 1) * cycle:
        return 0.0  # storage copies cannot keep up at this interval
    return tiered_goodput(
        interval_s, blocking_s, restart_s if ram_restart_s is None else ram_restart_s, restart_s, mtbf_s,
        disk_every=disk_every, node_loss_share=node_loss_share, ram_lag_s=lag, disk_lag_s=disk_lag,
    )


def strategy_optimum(strategy: str, blocking_s: float, durable_s: float, restart_s: float, mtbf_s: float, **memory) -> dict[str, float]:
    """The best interval of :func:`strategy_goodput` (seconds) and its goodput: ``{interval_s, goodput, save_s}``.

    A log grid from ``M/1e5`` to ``M`` brackets the best point; golden-section
    search refines it to a relative precision of about 1e-7.
    """
    validate.seconds("mtbf_s", mtbf_s, positive=True)

    def g(tau: float) -> float:
        return strategy_goodput(strategy, tau, blocking_s, durable_s, restart_s, mtbf_s, **memory)

    grid = np.logspace(math.log10(mtbf_s * 1e-5), math.log10(mtbf_s), 80)
    values = [g(t) for t in grid]
    k = int(np.argmax(values))
    best = _golden_max(g, float(grid[max(k - 1, 0)]), float(grid[min(k + 1, len(grid) - 1)]))
    return {"interval_s": best, "goodput": g(best), "save_s": blocking_s}


def _golden_max(f, a: float, b: float, rel: float = 1e-7) -> float:
    """The maximiser of a unimodal ``f`` on ``[a, b]`` by golden-section search."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = b - ratio * (b - a), a + ratio * (b - a)
    f1, f2 = f(x1), f(x2)
    while (b - a) > rel * b:
        if f1 >= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - ratio * (b - a)
            f1 = f(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + ratio * (b - a)
            f2 = f(x2)
    return 0.5 * (a + b)


def strategy_curves(
    costs: dict[str, dict[str, float]],
    restart_s: float,
    mtbf_s: float,
    intervals_s: Iterable[float],
    **memory,
) -> list[dict]:
    """Rows ``{strategy, interval_s, goodput, model}`` for each strategy and interval, two models each.

    ``costs`` maps a strategy to ``{"blocking_s", "durable_s"}`` (chapter 4's
    measured anatomy). ``model`` is ``"durable"`` (:func:`strategy_goodput`:
    the lag to durable, and for ``memory`` the failures that take the RAM
    tier) or ``"blocking only"`` (Daly's model with the blocking part alone,
    as if every save were durable the moment it returned).
    """
    rows = []
    intervals = list(intervals_s)
    for s, c in costs.items():
        for tau in intervals:
            rows.append({"strategy": s, "interval_s": tau, "model": "durable",
                         "goodput": strategy_goodput(s, tau, c["blocking_s"], c["durable_s"], restart_s, mtbf_s, **memory)})
            rows.append({"strategy": s, "interval_s": tau, "model": "blocking only",
                         "goodput": periodic_goodput(tau, c["blocking_s"], restart_s, mtbf_s)})
    return rows
