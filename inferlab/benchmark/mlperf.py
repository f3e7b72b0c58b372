"""MLPerf Inference's LLM benchmarks as MLCommons defines them: the one place the book
keeps them.

Each benchmark names a model, its scenarios, the p99 bounds on time to first token and
time per output token of its latency-bound ones (``loadgen/mlperf.conf``), and the
minimum length of a valid run. A bound on time per output token is also a floor on each
user's rate, one token per TPOT: Llama 2 70B's Server and Interactive bounds (2,000 and
200 ms, 450 and 40 ms) promise 5 and 25 tokens per second. The mean prompt and answer
of Llama 2 70B's data set, which several chapters use, are here too.

:mod:`inferlab.serving.loadgen` runs and judges scenarios by these definitions; nothing here
depends on the simulator, so a module that needs only a bound (the endpoint lab's
metrics) need not load it. Used in chapters 'Batching' and 'Benchmark scenarios'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from inferlab.common import checks

#: The bounds (TTFT in s, TPOT in s) at the 99th percentile, by scenario.
MLPERF_LLAMA2_70B_BOUNDS = MappingProxyType({
    "Server": (2.0, 0.200),
    "Interactive": (0.450, 0.040),
})

#: The mean prompt of Llama 2 70B's MLPerf data set (24,576 Open Orca samples), in Llama 2
#: tokens, rounded; it is the mean of ``data/mlperf_llama2_70b_input_lengths.csv``, which a
#: test holds this figure to.
LLAMA2_70B_MEAN_PROMPT_TOKENS = 222

#: The mean answer of MLCommons' reference Llama 2 70B on that data set, in tokens; the
#: answers are published only as this mean, not sample by sample.
LLAMA2_70B_MEAN_OUTPUT_TOKENS = 294


#: LoadGen's scenarios as the book names them ("Interactive" is Server with tighter bounds).
SCENARIOS = ("SingleStream", "Offline", "Server", "Interactive")

#: Scenarios with a latency bound on every query.
BOUNDED_SCENARIOS = ("Server", "Interactive")


def time_per_output_token(first_token_s, last_token_s, output_tokens):
    """Time per output token after the first, ``(last - first) / (tokens - 1)``: MLPerf's
    TPOT, vLLM's TPOT and AIPerf's inter-token latency alike (they differ only in which
    timestamps they take). ``nan`` where a request produced one token (or ``None`` were
    counted): there is no gap to time. Numbers give a float, checked (a ``ValueError``
    names a time that is not finite, a last token before the first or a count below
    1); arrays give an array, unchecked, for the simulator's millions of requests.

    Used by the simulator's results, LoadGen's log, the endpoint lab's metrics and a
    request's clocks (chapter 'Prefill and decode').
    """
    if np.ndim(output_tokens) == 0:
        first = checks.real("first_token_s", first_token_s)
        last = checks.real("last_token_s", last_token_s)
        if last < first:
            raise ValueError(f"last_token_s: {last!r} is before first_token_s ({first!r})")
        if output_tokens is None:
            return math.nan
        tokens = checks.whole("output_tokens", output_tokens)
        return math.nan if tokens == 1 else (last - first) / (tokens - 1)
    tokens = np.asarray(output_tokens)
    with np.errstate(divide="ignore", invalid="ignore"):
        gaps = (np.asarray(last_token_s, dtype=float) - first_token_s) / (tokens - 1)
    return np.where(tokens > 1, gaps, np.nan)


@dataclass(frozen=True)
class LatencyBounds:
    """The 99th-percentile bounds of one benchmark and scenario, in seconds.

    Used in chapter 'Benchmark scenarios'.
    """

    ttft_s: float
    tpot_s: float

    @property
    def per_user_tok_s(self) -> float:
        """The token rate a user sees at exactly the TPOT bound, ``1 / tpot_s``."""
        return 1.0 / self.tpot_s


def _bounds(pairs: dict[str, tuple[float, float]]) -> MappingProxyType:
    return MappingProxyType({name: LatencyBounds(*pair) for name, pair in pairs.items()})


#: MLPerf Inference's p99 bounds per model and scenario, (TTFT, TPOT), from
#: ``loadgen/mlperf.conf``: llama2-70b 2,000 / 200 ms and 450 / 40 ms; llama3.1-8b
#: 2,000 / 100 and 500 / 30; llama3.1-405b 6,000 / 175 and 4,500 / 80; mixtral-8x7b
#: 2,000 / 200 (Server only); deepseek-r1 2,000 / 80 and 1,500 / 15. The
#: llama2-70b pair is the one :data:`MLPERF_LLAMA2_70B_BOUNDS`
#: above defines for the batching chapter, so there is one definition of it.
BOUNDS = MappingProxyType({
    "llama2-70b": _bounds(MLPERF_LLAMA2_70B_BOUNDS),
    "llama3.1-8b": _bounds({"Server": (2.0, 0.100), "Interactive": (0.500, 0.030)}),
    "llama3.1-405b": _bounds({"Server": (6.0, 0.175), "Interactive": (4.5, 0.080)}),
    "mixtral-8x7b": _bounds({"Server": (2.0, 0.200)}),
    "deepseek-r1": _bounds({"Server": (2.0, 0.080), "Interactive": (1.5, 0.015)}),
})

#: The per-user rate each Llama 2 70B bound guarantees to 99 % of requests, one over its
#: TPOT bound.
MLPERF_PER_USER_TOK_S = MappingProxyType({
    name: limit.per_user_tok_s for name, limit in BOUNDS["llama2-70b"].items()})

#: The model each MLPerf LLM benchmark serves, as ``data/models.csv`` names it.
BENCHMARK_MODELS = MappingProxyType({
    "llama2-70b": "Llama 2 70B", "llama3.1-8b": "Llama 3.1 8B",
    "llama3.1-405b": "Llama 3.1 405B", "mixtral-8x7b": "Mixtral 8x7B",
    "deepseek-r1": "DeepSeek-R1",
})


def benchmark_of(model_name: str) -> str | None:
    """The MLPerf benchmark that serves the model called ``model_name``, ``None`` if none."""
    return next((b for b, name in BENCHMARK_MODELS.items() if name == model_name), None)


#: LoadGen's minimum run length for every scenario (``*.*.min_duration = 600000`` ms).
MLPERF_MIN_DURATION_S = 600.0

#: LoadGen's default minimum query count (``TestSettings.min_query_count``).
MLPERF_MIN_QUERIES = 100

#: Offline's minimum sample count per model (``<model>.Offline.min_query_count``).
OFFLINE_MIN_SAMPLES = MappingProxyType({
    "llama2-70b": 24_576, "llama3.1-8b": 13_368, "llama3.1-405b": 8_313,
    "mixtral-8x7b": 15_000, "deepseek-r1": 4_388,
})

#: The performance dataset of each benchmark, in samples
#: (``<model>.*.performance_sample_count_override`` in ``mlperf.conf``): what equal-issue
#: mode pads the query count to a multiple of.
PERFORMANCE_SAMPLE_COUNT = MappingProxyType({
    "llama2-70b": 24_576, "llama3.1-8b": 13_368, "llama3.1-405b": 8_313,
    "mixtral-8x7b": 15_000, "deepseek-r1": 4_388,
})

#: The percentile each scenario targets — 90 for Single-Stream, 99 for Server and Interactive.
TARGET_PERCENTILE = MappingProxyType({
    "SingleStream": 0.90, "Offline": 0.90, "Server": 0.99, "Interactive": 0.99,
})


def bounds(model: str, scenario: str) -> LatencyBounds:
    """The p99 TTFT and TPOT bounds of ``model`` (a key of :data:`BOUNDS`) in ``scenario``.

    Raises ``ValueError`` naming the argument for an unknown model, or for a
    scenario that has no bound (Offline, Single-Stream) or is unknown.

    Used in chapter 'Benchmark scenarios'.
    """
    if model not in BOUNDS:
        raise ValueError(f"model: {model!r} has no bounds here; give one of {', '.join(BOUNDS)}")
    checks.option("scenario", scenario, SCENARIOS)
    if scenario not in BOUNDED_SCENARIOS:
        raise ValueError(f"scenario: {scenario!r} has no latency bound; only "
                         f"{' and '.join(BOUNDED_SCENARIOS)} do")
    if scenario not in BOUNDS[model]:
        raise ValueError(f"scenario: MLPerf's {model} benchmark has no {scenario} scenario; "
                         f"give one of {', '.join(BOUNDS[model])}")
    return BOUNDS[model][scenario]
