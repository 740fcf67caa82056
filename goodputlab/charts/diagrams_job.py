"""The conceptual diagrams of chapters 1 to 6: one job's time, its failures, its saves and its data.

Drawn with :mod:`goodputlab.charts.svg_draw`; :mod:`goodputlab.charts.diagrams` lists them with their
alt text and captions.
"""

from __future__ import annotations

import math

from ..categories import COLORS as C
from .svg_draw import INK, MUTED, Drawing

SLIVER = 3  # a data wait between two steps, drawn inside a productive stretch


def _productive(d: Drawing, x0: float, x1: float, y: float, h: float, every: float = 22) -> None:
    """A stretch of steps: productive compute with a thin data wait before each step."""
    d.rect(x0, y, x1 - x0, h, C["productive"])
    x = x0 + every / 2
    while x < x1 - 4:
        d.rect(x, y, SLIVER, h, C["data_wait"])
        x += every


def key(d: Drawing, y: float, items: list[tuple[str, str]], columns: int = 4) -> None:
    """A key of colour swatches and names, ``columns`` to a row, from baseline ``y``."""
    step = (d.width - 16) / columns
    for i, (name, color) in enumerate(items):
        x, yy = 8 + (i % columns) * step, y + (i // columns) * 22
        d.rect(x, yy - 11, 13, 13, color)
        d.text(x + 18, yy, name, 13)


# --- chapter 1: the ledger ----------------------------------------------------------------------
def ledger_timeline() -> Drawing:
    d = Drawing(252)
    h, y0, y1 = 30, 28, 116
    d.text(8, 20, "attempt 0", 14, bold=True)
    d.rect(8, y0, 44, h, C["startup"])
    _productive(d, 52, 116, y0, h)
    d.rect(116, y0, 10, h, C["checkpoint_save"])
    _productive(d, 126, 188, y0, h)
    d.rect(188, y0, 10, h, C["checkpoint_save"])
    d.rect(198, y0, 60, h, C["lost_work"])
    d.cross(266, y0 + h / 2)
    d.text(280, y0 + h / 2 + 5, "failure", 14, color=C["lost_work"], bold=True)
    d.text(8, y1 - 8, "attempt 1", 14, bold=True)
    d.rect(258, y1, 46, h, C["restart"])
    d.rect(304, y1, 16, h, C["checkpoint_restore"])
    _productive(d, 320, 432, y1, h)
    d.path(f"M228,{y0 + h + 3} C228,{y0 + h + 40} 326,{y1 - 34} 326,{y1 - 4}", C["lost_work"], 1.5, dash="4 3",
           arrow=True)
    d.lines(432, y1 - 40, ["the lost steps,", "computed again"], 13, "end", color=C["lost_work"])
    d.line(8, y1 + h + 18, 432, y1 + h + 18, INK, 1.5, arrow=True)
    d.text(8, y1 + h + 36, "wall clock: each second in exactly one category", 13, color=MUTED)
    key(d, y1 + h + 64, [("startup", C["startup"]), ("productive", C["productive"]), ("data wait", C["data_wait"]),
                         ("save", C["checkpoint_save"]), ("lost work", C["lost_work"]), ("restart", C["restart"]),
                         ("restore", C["checkpoint_restore"])])
    return d


# --- chapter 2: failures at scale -----------------------------------------------------------------
def poisson_one_over_n() -> Drawing:
    d = Drawing(284)
    x0, x1 = 96, 430
    # four devices' failure times (seeded by hand: a failure every so often on each)
    devices = [(0.62,), (0.18, 0.91), (0.47,), (0.33, 0.78)]
    y = 26
    d.text(8, 14, "each device: rare failures", 13, color=MUTED)
    for i, fails in enumerate(devices):
        yy = y + i * 30
        d.text(8, yy + 5, f"device {i + 1}", 13)
        d.line(x0, yy, x1, yy, "#999999", 1.5)
        for f in fails:
            d.cross(x0 + f * (x1 - x0), yy, 6, width=2.5)
    yj = y + 4 * 30 + 28
    d.text(8, yj - 22, "the job stops at every one of them", 13, color=MUTED)
    d.text(8, yj + 5, "job", 14, bold=True)
    d.line(x0, yj, x1, yj, INK, 2)
    for fails in devices:
        for f in fails:
            d.cross(x0 + f * (x1 - x0), yj, 7)
            d.line(x0 + f * (x1 - x0), y, x0 + f * (x1 - x0), yj - 9, "#d62728", 1, dash="2 3")
    d.line(x0, yj + 24, x1, yj + 24, INK, 1.5, arrow=True)
    d.text(x1, yj + 40, "time", 13, "end", color=MUTED)
    d.text(8, yj + 62, "N devices, each with an MTBF of M_{dev}:", 14)
    d.text(8, yj + 82, "the job's MTBF is M = M_{dev} / N", 14, bold=True)
    return d


# --- chapter 3: the upside-down U -----------------------------------------------------------------
def upside_down_u() -> Drawing:
    from ..theory import young_interval

    d = Drawing(300)
    save, restart, mtbf = 60.0, 300.0, 10_000.0  # a 1-minute save, a 5-minute restart, MTBF 2.8 h
    left, right, top, bottom = 54, 428, 20, 214
    lo, hi = 60.0, 40_000.0  # the interval axis, log scale, seconds

    def px(tau: float) -> float:
        return left + (math.log(tau) - math.log(lo)) / (math.log(hi) - math.log(lo)) * (right - left)

    def py(share: float) -> float:
        return bottom - share * (bottom - top)

    taus = [lo * (hi / lo) ** (i / 120) for i in range(121)]
    save_waste = [min(1.0, save / t) for t in taus]
    fail_waste = [min(1.0, (t / 2 + restart) / mtbf) for t in taus]
    goodput = [max(0.0, 1 - s - f) for s, f in zip(save_waste, fail_waste)]
    d.line(left, bottom, right, bottom, INK, 1.5)
    d.line(left, bottom, left, top - 6, INK, 1.5)
    d.text(left - 6, py(1) + 5, "100%", 13, "end")
    d.text(left - 6, bottom + 5, "0", 13, "end")
    d.polyline([(px(t), py(g)) for t, g in zip(taus, goodput)], C["productive"], 3)
    d.polyline([(px(t), py(s)) for t, s in zip(taus, save_waste)], C["checkpoint_save"], 2.5, dash="6 4")
    d.polyline([(px(t), py(f)) for t, f in zip(taus, fail_waste)], C["lost_work"], 2.5, dash="6 4")
    best = young_interval(save, mtbf)
    d.line(px(best), bottom, px(best), top, MUTED, 1.5, dash="3 3")
    d.text(px(best) + 4, top + 10, "τ* = √(2δM)", 14, bold=True)
    d.text(px(120), py(0.62), "saves: δ / τ", 14, color=C["checkpoint_save"])
    d.lines(px(2500), py(0.45), ["failures:", "(τ/2 + R) / M"], 14, "middle", color=C["lost_work"])
    d.text(px(5500), py(0.82), "goodput", 15, "start", bold=True, color="#1b7a1b")
    d.text((left + right) / 2, bottom + 22, "checkpoint interval τ (log scale)", 13, "middle")
    d.text(left, bottom + 44, "too often: saves eat the time", 13, color=C["checkpoint_save"])
    d.text(right, bottom + 62, "too rarely: failures throw work away", 13, "end", color=C["lost_work"])
    return d


# --- chapter 4: snapshot, then persist -------------------------------------------------------------
def steps(d: Drawing, x0: float, x1: float, y: float, h: float, width: float = 30) -> None:
    """Training steps from ``x0`` to ``x1``: green blocks with a white gap between them."""
    x = x0
    while x < x1 - 1:
        d.rect(x, y, min(width, x1 - x) - 2, h, C["productive"])
        x += width


def snapshot_then_persist() -> Drawing:
    d = Drawing(292)
    h = 28
    light = "#aec7e8"
    d.text(8, 20, "sync: the whole save blocks training", 14, bold=True)
    steps(d, 8, 98, 28, h)
    d.rect(98, 28, 30, h, C["checkpoint_save"])
    d.rect(128, 28, 100, h, C["checkpoint_save"])
    d.text(163, 47, "snapshot + persist", 13, "middle", color="white")
    steps(d, 228, 432, 28, h)
    d.text(8, 98, "async: only the snapshot blocks", 14, bold=True)
    steps(d, 8, 98, 106, h)
    d.rect(98, 106, 30, h, C["checkpoint_save"])
    steps(d, 128, 432, 106, h)
    d.rect(128, 142, 100, 22, light)
    d.text(178, 158, "persist", 13, "middle")
    d.line(228, 100, 228, 176, "#1b7a1b", 2)
    d.text(232, 190, "durable", 13, bold=True, color="#1b7a1b")
    d.line(128, 176, 226, 176, MUTED, 1.2, arrow=True, arrow_start=True)
    d.text(178, 190, "lag L", 13, "middle", color=MUTED)
    d.rect(8, 211, 13, 13, C["checkpoint_save"])
    d.lines(28, 222, ["snapshot: copy the state into memory that", "training will not touch (training waits)"], 13)
    d.rect(8, 251, 13, 13, light)
    d.lines(28, 262, ["persist: serialise, write, fsync, commit", "(a background thread; training goes on)"], 13)
    return d


# --- chapter 5: the input pipeline -----------------------------------------------------------------
def input_pipeline() -> Drawing:
    d = Drawing(250)
    y = 24
    d.box(8, y + 22, 72, 62, "storage", "#eeeeee", size=13)
    d.text(44, y + 104, "fetch t_{io}", 13, "middle", color=MUTED)
    for i, name in enumerate(("worker 1", "worker 2", "worker W")):
        d.box(104, y + i * 36, 90, 30, name, "#fff3e0", "#ff7f0e", size=13)
    d.text(149, y + 124, "prep t_{cpu}", 13, "middle", color=MUTED)
    for yy in (15, 51, 87):
        d.line(80, y + 53, 102, y + yy, MUTED, 1.2, arrow=True)
        d.line(194, y + yy, 216, y + 50, MUTED, 1.2, arrow=True)
    for r in range(3):
        for c in range(3):
            d.rect(220 + c * 20, y + 22 + r * 20, 16, 16, "#ffbb78", "#ff7f0e")
    d.text(248, y + 12, "W × p", 13, "middle")
    d.text(248, y + 100, "in flight", 13, "middle")
    d.line(282, y + 50, 340, y + 50, MUTED, 1.5, arrow=True)
    d.text(310, y + 70, "hand-off", 13, "middle", color=MUTED)
    d.rect(346, y + 22, 86, 56, "#e8f5e9", C["productive"], rx=6)
    d.lines(389, y + 46, ["training", "step t_{step}"], 13, "middle", leading=1.3)
    d.text(8, 176, "supply = W t_{step} / (t_{io} + t_{cpu})", 14, bold=True)
    d.lines(8, 198, ["Below 1, the step waits on every step, whatever", "the depth. Above it, depth W × p rides out slow",
                     "reads, and every batch in flight costs memory."], 13)
    return d


# --- chapter 6: a failure and its recovery ---------------------------------------------------------
def kill_to_restore() -> Drawing:
    d = Drawing(300)
    h = 28

    def row(y: float, title: str, relaunch: float, relaunch_label: list[str]) -> None:
        d.text(8, y - 8, title, 14, bold=True)
        steps(d, 8, 68, y, h)
        d.rect(68, y, 46, h, C["lost_work"])
        d.cross(121, y + h / 2, 6)
        d.rect(128, y, 30, h, C["restart"])
        d.text(143, y - 8, "detect", 13, "middle", color=C["restart"])
        d.rect(158, y, relaunch, h, C["restart"], opacity=0.7)
        d.lines(158 + relaunch / 2, y + h + 16, relaunch_label, 13, "middle")
        x = 158 + relaunch
        d.rect(x, y, 20, h, C["checkpoint_restore"])
        steps(d, x + 20, 432, y, h)
        d.text(91, y + h + 16, "lost", 13, "middle", color=C["lost_work"])

    row(30, "cold restart", 150, ["a new process:", "start, import, build"])
    row(140, "hot spare", 24, ["handover"])
    d.lines(8, 230, ["detect: a kill is seen at once; a hang only when the",
                     "watchdog's timeout runs out. Then relaunch (or hand",
                     "over to a spare), restore, and train again."], 13)
    for i, (name, cat) in enumerate((("restart", "restart"), ("restore", "checkpoint_restore"), ("lost work", "lost_work"))):
        d.rect(8 + i * 92, 279, 13, 13, C[cat])
        d.text(26 + i * 92, 291, name, 13)
    return d
