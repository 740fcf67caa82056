"""What a server is asked to do: seeded Poisson arrivals with a mix of prompt and output lengths.

numpy only (no torch), so the command line can validate its input and build a workload
before any worker starts.

Arrivals use common random numbers across rates: request ``i`` of a seed arrives at
``E_i / rate`` where ``E_i`` is a fixed sum of unit exponentials, and its prompt and output
lengths depend on ``i`` alone. The workload at twice the rate is the same requests arriving
twice as fast, so a curve of attainment against rate compares like with like instead of
mixing two kinds of noise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import ConfigError, check
from ..training.workload import PRESETS, ModelPreset

#: Model sizes the server runs: the lab's GPT (``goodputlab.training.model.GPT``) with a 256-token
#: position table (prompt plus output must fit) and no dropout. ``serve`` is a size between
#: ``small`` and ``medium`` whose prefill of 100 tokens takes about 25 ms on one CPU core and a
#: decode step about 4-8 ms: slow enough that a 2-core machine saturates at tens of requests
#: per second, where a Python scheduler's own overhead is small beside the model.
SERVING_PRESETS: dict[str, ModelPreset] = {
    "tiny": replace(PRESETS["tiny"], context=256, dropout=0.0, note="tests: a few ms per request"),
    "small": replace(PRESETS["small"], context=256, dropout=0.0, note="~3M params"),
    "serve": replace(
        PRESETS["small"], name="serve", n_layer=6, n_head=6, d_model=384, context=256, dropout=0.0,
        note="~11M params: the chapter's and the benchmark's server",
    ),
}


@dataclass(frozen=True)
class LengthClass:
    """One kind of request: prompt and output lengths drawn uniformly from inclusive ranges (tokens)."""

    weight: float
    prompt: tuple[int, int]
    output: tuple[int, int]

    def __post_init__(self):
        check(math.isfinite(self.weight) and self.weight > 0, "mix", self.weight, "class weights > 0")
        for what, (lo, hi) in (("prompt", self.prompt), ("output", self.output)):
            check(1 <= lo <= hi, "mix", f"{lo}-{hi}", f"{what} lengths as LO-HI with 1 <= LO <= HI")

    @property
    def max_tokens(self) -> int:
        return self.prompt[1] + self.output[1]


@dataclass(frozen=True)
class LengthMix:
    """A named mix of request kinds; a request's kind is drawn with probability proportional to weight."""

    name: str
    classes: tuple[LengthClass, ...]
    note: str = ""

    def __post_init__(self):
        check(len(self.classes) > 0, "mix", self.name, "at least one class of requests")

    @property
    def max_tokens(self) -> int:
        """The longest request (prompt plus output) the mix can draw: it must fit the model's context."""
        return max(c.max_tokens for c in self.classes)

    @property
    def max_output(self) -> int:
        return max(c.output[1] for c in self.classes)

    def mean_lengths(self) -> tuple[float, float]:
        """Expected (prompt, output) tokens of a request."""
        w = np.array([c.weight for c in self.classes]) / sum(c.weight for c in self.classes)
        prompt = sum(wi * (c.prompt[0] + c.prompt[1]) / 2 for wi, c in zip(w, self.classes))
        output = sum(wi * (c.output[0] + c.output[1]) / 2 for wi, c in zip(w, self.classes))
        return float(prompt), float(output)

    def describe(self) -> str:
        parts = [f"prompt {c.prompt[0]}-{c.prompt[1]}, output {c.output[0]}-{c.output[1]}" for c in self.classes]
        if len(self.classes) == 1:
            return f"{self.name}: {parts[0]} tokens"
        total = sum(c.weight for c in self.classes)
        return f"{self.name}: " + "; ".join(f"{c.weight / total:.0%} {p}" for c, p in zip(self.classes, parts)) + " tokens"


MIXES: dict[str, LengthMix] = {
    m.name: m
    for m in (
        LengthMix("chat", (LengthClass(1.0, (32, 128), (16, 64)),), "conversation turns: medium prompts and answers"),
        LengthMix("long-prompt", (LengthClass(1.0, (128, 224), (8, 32)),), "summarisation, retrieval: prefill-heavy"),
        LengthMix("long-output", (LengthClass(1.0, (16, 48), (64, 160)),), "writing, code: decode-heavy"),
        LengthMix(
            "mixed",
            (LengthClass(0.7, (32, 128), (16, 64)), LengthClass(0.3, (128, 224), (8, 32))),
            "70% chat, 30% long prompts",
        ),
    )
}

_CUSTOM = re.compile(r"^\s*(\d+)-(\d+)\s*/\s*(\d+)-(\d+)\s*$")


def parse_mix(text: str | LengthMix) -> LengthMix:
    """A mix by name (``chat``, ``long-prompt``, ``long-output``, ``mixed``) or ``P_LO-P_HI/O_LO-O_HI``.

    ``"64-128/16-32"``: prompts of 64 to 128 tokens, outputs of 16 to 32.
    """
    if isinstance(text, LengthMix):
        return text
    if text in MIXES:
        return MIXES[text]
    m = _CUSTOM.match(str(text))
    allowed = f"one of {', '.join(MIXES)}, or prompt/output ranges such as 64-128/16-32"
    if not m:
        raise ConfigError("mix", text, allowed)
    p_lo, p_hi, o_lo, o_hi = (int(g) for g in m.groups())
    if not (1 <= p_lo <= p_hi and 1 <= o_lo <= o_hi):
        raise ConfigError("mix", text, "ranges LO-HI with 1 <= LO <= HI, e.g. 64-128/16-32")
    return LengthMix(text.strip(), (LengthClass(1.0, (p_lo, p_hi), (o_lo, o_hi)),), "custom")


@dataclass(frozen=True)
class Request:
    """One request: it arrives ``arrival_s`` after the measurement starts and wants ``output_len`` tokens."""

    id: int
    arrival_s: float
    prompt: np.ndarray = field(repr=False)  # token ids, int64
    output_len: int

    @property
    def prompt_len(self) -> int:
        return int(self.prompt.shape[0])


@dataclass(frozen=True)
class Workload:
    """The requests that arrive at ``rate_rps`` for ``duration_s`` seconds (seeded Poisson process)."""

    rate_rps: float
    duration_s: float
    mix: LengthMix
    seed: int
    requests: tuple[Request, ...] = field(repr=False)

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def max_output(self) -> int:
        return max((r.output_len for r in self.requests), default=0)

    def prompt_tokens(self) -> int:
        return sum(r.prompt_len for r in self.requests)

    def output_tokens(self) -> int:
        return sum(r.output_len for r in self.requests)


def _unit_arrivals(seed: int, at_least: float) -> np.ndarray:
    """Cumulative sums of unit exponentials until they pass ``at_least`` (independent of any rate)."""
    rng = np.random.default_rng([seed, 0xA771])
    chunks, total = [], 0.0
    while total <= at_least:
        gaps = rng.exponential(1.0, size=max(64, int(at_least * 0.25) + 16))
        chunks.append(gaps)
        total += float(gaps.sum())
    return np.cumsum(np.concatenate(chunks))


def poisson_workload(rate_rps: float, duration_s: float, mix: LengthMix | str = "chat", seed: int = 0, vocab: int = 64,
                     min_requests: int = 0) -> Workload:
    """Requests arriving by a Poisson process of ``rate_rps`` per second during ``duration_s`` seconds.

    With ``min_requests``, the window is stretched, when needed, until that many requests have
    arrived (just past the last one's arrival): at a low rate a short window may see no request
    at all, and an empty measurement says nothing. ``Workload.duration_s`` is the window used.

    Deterministic in ``seed``; request ``i`` has the same prompt and lengths at every rate
    (see the module's docstring). Prompt tokens are drawn uniformly from ``vocab`` ids: what a
    token means does not change what it costs to compute.
    """
    check(isinstance(rate_rps, (int, float)) and math.isfinite(rate_rps) and rate_rps > 0, "rate", rate_rps, "requests per second > 0")
    check(isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and duration_s > 0, "duration", duration_s, "seconds > 0")
    check(isinstance(seed, int) and seed >= 0, "seed", seed, "a whole number >= 0")
    check(isinstance(min_requests, int) and min_requests >= 0, "min_requests", min_requests, "a whole number >= 0")
    mix = parse_mix(mix)
    arrivals = _unit_arrivals(seed, max(rate_rps * duration_s, 2.0 * min_requests + 10)) / rate_rps
    if min_requests and arrivals[min_requests - 1] >= duration_s:
        duration_s = float(np.nextafter(arrivals[min_requests - 1], math.inf))
    arrivals = arrivals[arrivals < duration_s]
    n = int(arrivals.size)
    # lengths and prompts: drawn in request order from their own streams, so request i's
    # values do not depend on how many requests the rate lets in
    lengths_rng = np.random.default_rng([seed, 0x1E47])
    prompts_rng = np.random.default_rng([seed, 0x9207])
    weights = np.array([c.weight for c in mix.classes], dtype=float)
    weights /= weights.sum()
    requests = []
    for i in range(n):
        u_class, u_prompt, u_output = lengths_rng.random(3)
        c = mix.classes[min(int(np.searchsorted(np.cumsum(weights), u_class, side="right")), len(mix.classes) - 1)]
        prompt_len = c.prompt[0] + int(u_prompt * (c.prompt[1] - c.prompt[0] + 1))
        output_len = c.output[0] + int(u_output * (c.output[1] - c.output[0] + 1))
        prompt = prompts_rng.integers(0, vocab, size=prompt_len, dtype=np.int64)
        requests.append(Request(i, float(arrivals[i]), prompt, output_len))
    return Workload(float(rate_rps), float(duration_s), mix, seed, tuple(requests))
