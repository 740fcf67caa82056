"""The conceptual diagrams of chapters 7 to 11: many ranks, the batch size, serving, a cluster, in-job recovery.

Drawn with :mod:`goodputlab.charts.svg_draw`; :mod:`goodputlab.charts.diagrams` lists them with their
alt text and captions.
"""

from __future__ import annotations

import math

from ..categories import COLORS as C
from .diagrams_job import key
from .svg_draw import INK, MUTED, Drawing, text_width


# --- chapter 7: ranks and the all-reduce barrier -------------------------------------------------
def allreduce_barrier() -> Drawing:
    d = Drawing(290)
    h = 26
    reduce_c, opt = "#7f7f7f", "#98df8a"
    rows = {"rank 0": 40, "rank 1": 92, "job": 172}
    for name, y in rows.items():
        d.text(8, y + 18, name, 14, bold=name == "job")
    x0 = 70
    # two steps: rank 1 is slow on the first, on time on the second
    for start, slow in ((x0, 96), (x0 + 196, 0)):
        fast = 60
        barrier = start + fast + slow
        d.rect(start, rows["rank 0"], fast, h, C["productive"])
        if slow:
            d.rect(start + fast, rows["rank 0"], slow, h, C["straggler_wait"])
        d.rect(start, rows["rank 1"], fast + slow, h, C["productive"])
        for y in (rows["rank 0"], rows["rank 1"]):
            d.rect(barrier, y, 14, h, reduce_c)
            d.rect(barrier + 14, y, 18, h, opt)
        d.line(barrier, 28, barrier, rows["rank 1"] + h + 10, INK, 1.5, dash="4 3")
        d.rect(start, rows["job"], fast, h, C["productive"])
        if slow:
            d.rect(start + fast, rows["job"], slow, h, C["straggler_wait"])
        d.rect(barrier, rows["job"], 32, h, C["productive"])
    d.text(70 + 60 + 96, 22, "all-reduce: no rank leaves before the last joins", 13, "middle")
    d.text(178, rows["rank 0"] + 44, "rank 0 waits", 13, "middle", color="#0e7c86")
    d.text(178, rows["rank 1"] + 44, "rank 1 is slow on this step", 13, "middle")
    d.line(8, 222, 432, 222, MUTED, 1.2, arrow=True)
    key(d, 248, [("compute", C["productive"]), ("straggler wait", C["straggler_wait"]), ("all-reduce", reduce_c),
                 ("optimizer", opt)], columns=2)
    return d


# --- chapter 8: the batch size against the noise scale ----------------------------------------------
def batch_noise_scale() -> Drawing:
    d = Drawing(292)
    knee, noise = 4.0, 64.0  # alpha/beta and B_noise, in samples; the best batch is sqrt of their product
    b0 = 1.0
    left, right, top, bottom = 40, 424, 32, 200
    lo, hi = 1.0, 4096.0

    def px(b: float) -> float:
        return left + math.log(b / lo) / math.log(hi / lo) * (right - left)

    def py(v: float) -> float:
        return bottom - v * (bottom - top)

    bs = [lo * (hi / lo) ** (i / 160) for i in range(161)]
    through = [b / (knee + b) for b in bs]  # B / t_step(B), as a share of its limit 1/beta
    eff = [(noise + b0) / (noise + b) for b in bs]
    good = [t * e for t, e in zip(through, eff)]
    d.line(left, bottom, right, bottom, INK, 1.5)
    d.line(left, bottom, left, top - 6, INK, 1.5)
    d.polyline([(px(b), py(t)) for b, t in zip(bs, through)], C["checkpoint_save"], 2.5, dash="6 4")
    d.polyline([(px(b), py(e)) for b, e in zip(bs, eff)], C["data_wait"], 2.5, dash="6 4")
    d.polyline([(px(b), py(g)) for b, g in zip(bs, good)], C["productive"], 3)
    best = math.sqrt(noise * knee)
    for b, label in ((knee, "knee α/β"), (best, "B*"), (noise, "B_{noise}")):
        d.line(px(b), bottom, px(b), top + 4, MUTED, 1.2, dash="3 3")
        d.text(px(b), bottom + 18, label, 13, "middle")
    d.text(right, top - 8, "throughput", 14, "end", color=C["checkpoint_save"])
    d.text(left + 4, top - 8, "statistical efficiency", 14, "start", color="#c25e00")
    d.text(px(best), py(0.45), "goodput", 15, "middle", bold=True, color="#1b7a1b")
    d.text((left + right) / 2, bottom + 40, "batch size B (log scale)", 13, "middle")
    d.lines(8, bottom + 64, ["goodput = throughput × efficiency, highest at", "B* = √(B_{noise} × knee)"], 14)
    return d


# --- chapter 9: prefill and decode -----------------------------------------------------------------
def prefill_decode() -> Drawing:
    d = Drawing(300)
    h = 24
    prefill, decode, hand = C["data_wait"], C["productive"], C["checkpoint_restore"]
    d.text(8, 20, "colocated: one worker does both", 14, bold=True)
    x = 8
    for i in range(11):
        if i == 4:
            d.rect(x, 30, 90, h, prefill)
            d.text(x + 45, 47, "prefill", 13, "middle", color="white")
            x += 92
        d.rect(x, 30, 20, h, decode)
        x += 22
    d.text(8, 76, "a streaming request's tokens:", 13, color=MUTED)
    x = 8
    for i in range(11):
        if i == 4:
            d.line(x - 2, 96, x + 92, 96, "#d62728", 1.5, arrow=True, arrow_start=True)
            d.text(x + 45, 112, "a long gap", 13, "middle", color="#d62728")
            x += 92
        d.line(x + 20, 86, x + 20, 100, INK, 2)
        x += 22
    d.text(8, 146, "disaggregated: two workers", 14, bold=True)
    d.text(8, 172, "prefill", 13)
    d.rect(74, 156, 90, h, prefill)
    d.rect(250, 156, 90, h, prefill)
    d.text(8, 224, "decode", 13)
    x = 74
    while x + 20 <= 432:
        d.rect(x, 208, 20, h, decode)
        x += 22
    d.path("M164,182 C180,200 186,196 196,206", hand, 2, arrow=True)
    d.text(198, 196, "KV cache", 13, color=hand)
    d.lines(8, 258, ["TTFT: arrival to first token (queue + prefill).",
                     "TPOT: the gap between later tokens."], 13)
    return d


# --- chapter 10: a cluster's levers ----------------------------------------------------------------
def cluster_levers() -> Drawing:
    rows = [
        ("failures a day", "#555555", "scale, reliability: N / M_{dev}"),
        ("detect", C["restart"], "a shorter watchdog"),
        ("restart", C["restart"], "hot spares, a fast reschedule"),
        ("restore", C["checkpoint_restore"], "a RAM tier, a peer's copy"),
        ("lost work ≈ τ / 2", C["lost_work"], "a shorter interval τ"),
        ("blocking saves", C["checkpoint_save"], "async saves, fast storage"),
        ("data stalls", C["data_wait"], "a deeper input pipeline"),
    ]
    d = Drawing(36 + 34 * len(rows) + 56)
    d.text(8, 20, "what a cluster loses", 14, bold=True)
    d.text(432, 20, "the lever that cuts it", 14, "end", bold=True)
    for i, (cost, color, lever) in enumerate(rows):
        y = 34 + i * 34
        d.rect(8, y, 150, 26, color, rx=4)
        d.text(16, y + 18, cost, 13, color="white")
        d.line(432 - text_width(lever, 13) - 6, y + 13, 164, y + 13, MUTED, 1.2, arrow=True)
        d.text(432, y + 18, lever, 13, "end")
    y = 34 + len(rows) * 34 + 18
    d.lines(8, y, ["each failure: detect + restart + restore + lost work;", "each interval: a save; each step: a stall"],
            13, color=MUTED)
    return d


# --- chapter 11: torchft ---------------------------------------------------------------------------
def lighthouse_quorum_heal() -> Drawing:
    d = Drawing(356)
    d.box(150, 10, 140, 40, "lighthouse", "#fff8dc", "#b8860b", size=14, bold=True)
    groups = ((30, "replica group 0"), (250, "replica group 1"))
    for x, name in groups:
        d.box(x, 110, 160, 52, name, "#eef6ee", C["productive"], size=13)
        d.line(x + 80, 108, 220 + (x - 140) * 0.25, 52, "#b8860b", 1.5, dash="5 3", arrow=True)
    d.lines(220, 80, ["quorum,", "every step"], 13, "middle", color="#8a6508")
    d.cross(410, 118, 7)
    d.path("M192,146 C210,168 236,168 248,148", C["checkpoint_restore"], 2.5, arrow=True)
    d.text(220, 186, "heal: the live state", 13, "middle", color=C["checkpoint_restore"])
    d.text(220, 202, "from a healthy peer", 13, "middle", color=C["checkpoint_restore"])
    h, x0, x1 = 22, 120, 432
    d.text(8, 240, "group 0", 13)
    d.rect(x0, 226, x1 - x0, h, C["productive"])
    d.text(8, 278, "group 1", 13)
    d.rect(x0, 264, 70, h, C["productive"])
    d.cross(x0 + 74, 264 + h / 2, 6)
    d.rect(x0 + 80, 264, 96, h, C["degraded"])
    d.rect(x0 + 176, 264, 22, h, C["checkpoint_restore"])
    d.rect(x0 + 198, 264, x1 - x0 - 198, h, C["productive"])
    key(d, 316, [("training", C["productive"]), ("degraded", C["degraded"]), ("heal", C["checkpoint_restore"])],
        columns=3)
    d.text(8, 346, "A kill takes one group out; the others train on.", 13, color=MUTED)
    return d


