"""One trace, five definitions: each benchmark tool's metrics, computed from the same run.

Every function here is pure: it reads :class:`inferlab.loadclient.RequestTrace`
objects (send time, each streamed chunk's arrival time and text, the server's
usage) and applies one tool's published definition. Times are seconds, rates
tokens per second. The definitions, and where each is written down:

LLMPerf (Anyscale, ``token_benchmark_ray.py`` and its OpenAI client)
    TTFT is the first chunk with non-empty content. The inter-token latency of
    a request is the sum of its per-chunk gaps *starting with TTFT*, i.e. the
    time from sending to the last content chunk, divided by the number of
    output tokens. Output tokens are counted by re-tokenizing the text with
    one fixed Llama 2 tokenizer (``hf-internal-testing/llama-tokenizer``,
    whose ``encode`` adds a BOS token), whatever model served it. The per-request
    output throughput is tokens over end-to-end latency, TTFT included.

vLLM's serving benchmark (``vllm bench serve``, formerly ``benchmarks/benchmark_serving.py``)
    TTFT is the first chunk that carries a choice. TPOT excludes the first
    token: ``(latency - TTFT) / (tokens - 1)`` per request, for requests of more
    than one token. ITL is every gap between consecutive chunks after the first,
    pooled over all requests (a chunk, not a token). Output tokens are the
    server's usage count when given. Throughputs divide totals by the run's
    duration; goodput counts the requests meeting every SLO given.

MLPerf Inference (MLCommons rules and LoadGen)
    TTFT and TPOT per request (TPOT as vLLM's), tokens reported by the system
    under test; a run is judged by the 99th percentiles, LoadGen style (no
    interpolation, :func:`inferlab.loadgen.loadgen_percentile`).

NVIDIA AIPerf (metrics reference)
    TTFT skips responses with no content; its "inter token latency" is
    ``(request latency - TTFT) / (output tokens - 1)``, the quantity vLLM
    calls TPOT; "output token throughput per user" is its reciprocal.
    "Inter chunk latency" is the per-chunk gap.

InferenceMAX (SemiAnalysis)
    Runs vLLM's serving benchmark and plots throughput per GPU (total, input
    plus output, token throughput divided by the GPU count; also output only)
    against interactivity, ``1000 / TPOT in ms`` tokens per second per user,
    at the median.

Used in the endpoint lab.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from inferlab.loadgen import loadgen_percentile
from inferlab.tokenizers import get_tokenizer

#: The tokenizer LLMPerf counts every model's output with (Llama 1/2's, 32,000 ids).
LLMPERF_TOKENIZER = "llama2"


# -- per-request primitives ------------------------------------------------------------------


def _check_trace(r) -> None:
    if len(r.chunk_s) != len(r.chunk_text):
        raise ValueError(f"request {r.index}: chunk_s and chunk_text differ in length")
    if any(b < a for a, b in zip(r.chunk_s, r.chunk_s[1:], strict=False)):
        raise ValueError(f"request {r.index}: chunk times must not decrease")


def first_content_s(r) -> float:
    """Time from sending to the first chunk with non-empty text (LLMPerf, AIPerf); nan if none."""
    _check_trace(r)
    for t, text in zip(r.chunk_s, r.chunk_text, strict=True):
        if text:
            return t - r.send_s
    return math.nan


def first_choice_s(r) -> float:
    """Time from sending to the first chunk that carries a choice, empty or not (vLLM)."""
    _check_trace(r)
    for t, text in zip(r.chunk_s, r.chunk_text, strict=True):
        if text is not None:
            return t - r.send_s
    return math.nan


def last_content_s(r) -> float:
    """Time from sending to the last chunk with non-empty text; nan if none."""
    times = [t for t, text in zip(r.chunk_s, r.chunk_text, strict=True) if text]
    return times[-1] - r.send_s if times else math.nan


def e2e_s(r) -> float:
    """End-to-end latency, sending to the end of the stream."""
    return r.end_s - r.send_s


def chunk_gaps_s(r) -> list[float]:
    """Gaps between consecutive chunks that carry a choice (vLLM's ITL; AIPerf's inter chunk)."""
    times = [t for t, text in zip(r.chunk_s, r.chunk_text, strict=True) if text is not None]
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def tpot_s(r, tokens: int | None = None) -> float:
    """``(e2e - TTFT) / (tokens - 1)``: vLLM's TPOT, MLPerf's TPOT, AIPerf's inter token latency.

    ``tokens`` defaults to the server's ``completion_tokens``; nan for one
    token or fewer (the formula has no gap to divide by), as vLLM skips them.
    """
    n = r.completion_tokens if tokens is None else tokens
    if n is None or n < 2:
        return math.nan
    return (e2e_s(r) - first_choice_s(r)) / (n - 1)


def llama2_counter(count_bos: bool = True) -> Callable[[str], int]:
    """LLMPerf's token count: Llama 2 tokens of the text, plus one BOS token if ``count_bos``."""
    tokenizer = get_tokenizer(LLMPERF_TOKENIZER)
    extra = 1 if count_bos else 0
    return lambda text: tokenizer.count(text) + extra


def synthetic_request(ttft_s: float, tpot_s: float, tokens: int, tokens_per_chunk: int = 1,
                      token_text: str = "x"):
    """A constructed trace: first chunk at ``ttft_s``, then one token every ``tpot_s``.

    Tokens are streamed ``tokens_per_chunk`` at a time (a chunk leaves when its
    last token is ready), each token's text is ``token_text``, and the server
    reports ``tokens``. For exercises and for showing how a definition reacts
    to one change at a time (endpoint lab).
    """
    if not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens: got {tokens!r}; must be a whole number >= 1")
    if not isinstance(tokens_per_chunk, int) or tokens_per_chunk < 1:
        raise ValueError(f"tokens_per_chunk: got {tokens_per_chunk!r}; must be >= 1")
    if not (ttft_s > 0 and tpot_s > 0):
        raise ValueError(f"ttft_s, tpot_s: got {ttft_s!r}, {tpot_s!r}; must be > 0")
    from inferlab.loadclient import RequestTrace

    ready = [ttft_s + i * tpot_s for i in range(tokens)]
    times, texts = [], []
    for start in range(0, tokens, tokens_per_chunk):
        group = ready[start:start + tokens_per_chunk]
        times.append(group[-1])
        texts.append(token_text * len(group))
    return RequestTrace(index=0, scheduled_s=0.0, send_s=0.0, end_s=ready[-1],
                        chunk_s=tuple(times), chunk_text=tuple(texts),
                        prompt_tokens=1, completion_tokens=tokens)


# -- the tools ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMPerfRequest:
    """One request as LLMPerf records it."""

    ttft_s: float
    e2e_s: float
    output_tokens: int
    inter_token_latency_s: float
    output_throughput_tok_s: float


def llmperf_request(r, count_tokens: Callable[[str], int]) -> LLMPerfRequest:
    """LLMPerf's metrics of one request, tokens counted by ``count_tokens(text)``.

    ``inter_token_latency_s = (last content chunk - send) / tokens`` (the sum of
    TTFT and every later gap, over the re-counted tokens) and
    ``output_throughput_tok_s = tokens / e2e``: both include TTFT.
    """
    n = count_tokens(r.text)
    itl = last_content_s(r) / n if n else 0.0
    return LLMPerfRequest(first_content_s(r), e2e_s(r), n, itl, n / e2e_s(r))


def llmperf_summary(requests: Sequence, duration_s: float,
                    count_tokens: Callable[[str], int] | None = None) -> dict[str, float]:
    """LLMPerf's summary: means and medians of the per-request metrics, and the overall rate.

    ``output_throughput_tok_s`` is all counted output tokens over ``duration_s``.
    ``count_tokens`` defaults to :func:`llama2_counter` (BOS included).
    """
    count = count_tokens or llama2_counter()
    rows = [llmperf_request(r, count) for r in requests]
    _check_nonempty(rows)
    return {
        "ttft_mean_s": _mean(x.ttft_s for x in rows),
        "inter_token_latency_mean_s": _mean(x.inter_token_latency_s for x in rows),
        "request_output_throughput_mean_tok_s": _mean(x.output_throughput_tok_s for x in rows),
        "request_output_throughput_median_tok_s": _median(x.output_throughput_tok_s
                                                          for x in rows),
        "output_tokens": float(sum(x.output_tokens for x in rows)),
        "output_throughput_tok_s": sum(x.output_tokens for x in rows) / _positive(duration_s),
    }


def vllm_summary(requests: Sequence, duration_s: float, *,
                 slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
                 slo_e2el_ms: float | None = None) -> dict[str, float]:
    """``vllm bench serve``'s metrics: TTFT, TPOT (excluding the first token), pooled ITL, rates.

    ITL pools the gaps between chunks of every request, so a chunk carrying
    several tokens is one long gap. Goodput is the number of requests whose
    TTFT, TPOT and e2e latency (those given) are all within their SLOs, in
    milliseconds, over ``duration_s``.
    """
    _check_nonempty(requests)
    duration = _positive(duration_s)
    ttft = [first_choice_s(r) for r in requests]
    tpot = [tpot_s(r) for r in requests]
    itl = [gap for r in requests for gap in chunk_gaps_s(r)]
    tokens = sum(r.completion_tokens or 0 for r in requests)
    prompt = sum(r.prompt_tokens or 0 for r in requests)
    good = 0
    for r, t, p in zip(requests, ttft, tpot, strict=True):
        checks = [(slo_ttft_ms, t), (slo_tpot_ms, 0.0 if math.isnan(p) else p),
                  (slo_e2el_ms, e2e_s(r))]
        if all(slo is None or value * 1e3 <= slo for slo, value in checks):
            good += 1
    return {
        "ttft_mean_s": _mean(ttft), "ttft_median_s": _median(ttft),
        "tpot_mean_s": _mean(tpot), "tpot_median_s": _median(tpot),
        "itl_mean_s": _mean(itl), "itl_median_s": _median(itl),
        "itl_p99_s": float(np.percentile(itl, 99)) if itl else math.nan,
        "request_throughput_per_s": len(requests) / duration,
        "request_goodput_per_s": good / duration,
        "output_throughput_tok_s": tokens / duration,
        "total_token_throughput_tok_s": (tokens + prompt) / duration,
    }


def mlperf_summary(requests: Sequence, duration_s: float) -> dict[str, float]:
    """MLPerf's view: 99th-percentile TTFT and TPOT (LoadGen percentile) and tokens per second."""
    _check_nonempty(requests)
    ttft = [first_choice_s(r) for r in requests]
    tpot = [t for t in (tpot_s(r) for r in requests) if not math.isnan(t)]
    tokens = sum(r.completion_tokens or 0 for r in requests)
    return {
        "ttft_p99_s": loadgen_percentile(ttft, 0.99),
        "tpot_p99_s": loadgen_percentile(tpot, 0.99) if tpot else math.nan,
        "tokens_per_s": tokens / _positive(duration_s),
    }


def aiperf_summary(requests: Sequence, duration_s: float,
                   count_tokens: Callable[[str], int] | None = None) -> dict[str, float]:
    """AIPerf's view: TTFT of the first content, "inter token latency" (vLLM's TPOT), per user.

    Output tokens are the server's usage unless ``count_tokens`` is given
    (AIPerf counts with the model's own tokenizer, or with the server's count
    when asked to). ``output_token_throughput_per_user_tok_s`` is the mean of
    ``1 / inter_token_latency`` over requests.
    """
    _check_nonempty(requests)
    itl, per_user = [], []
    for r in requests:
        n = count_tokens(r.text) if count_tokens else r.completion_tokens
        if n is None or n < 2:
            continue
        value = (e2e_s(r) - first_content_s(r)) / (n - 1)
        itl.append(value)
        per_user.append(1.0 / value)
    chunk = [gap for r in requests for gap in chunk_gaps_s(r)]
    tokens = sum((count_tokens(r.text) if count_tokens else r.completion_tokens or 0)
                 for r in requests)
    return {
        "ttft_mean_s": _mean(first_content_s(r) for r in requests),
        "inter_token_latency_mean_s": _mean(itl),
        "inter_chunk_latency_mean_s": _mean(chunk),
        "output_token_throughput_per_user_tok_s": _mean(per_user),
        "output_token_throughput_tok_s": tokens / _positive(duration_s),
    }


def inferencemax_summary(requests: Sequence, duration_s: float, gpus: int = 1) -> dict[str, float]:
    """InferenceMAX's two axes: median interactivity and throughput per GPU.

    ``interactivity_median_tok_s_user = 1000 / median TPOT in ms``;
    ``throughput_per_gpu_tok_s`` is vLLM's total (input plus output) token
    throughput over ``gpus``, ``output_throughput_per_gpu_tok_s`` output only.
    """
    if not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus: got {gpus!r}; must be a whole number >= 1")
    v = vllm_summary(requests, duration_s)
    return {
        "interactivity_median_tok_s_user": 1000.0 / (v["tpot_median_s"] * 1e3),
        "throughput_per_gpu_tok_s": v["total_token_throughput_tok_s"] / gpus,
        "output_throughput_per_gpu_tok_s": v["output_throughput_tok_s"] / gpus,
    }


#: The headline "tokens per second" of each tool, with the definition in a phrase.
HEADLINES: tuple[tuple[str, str, str], ...] = (
    ("LLMPerf", "request output throughput (mean)",
     "Llama 2 tokens (+BOS) / e2e latency, TTFT included"),
    ("LLMPerf", "1 / inter-token latency",
     "Llama 2 tokens / time to last chunk, TTFT included"),
    ("vLLM", "1 / TPOT (median)", "server tokens after the first / time after TTFT"),
    ("vLLM", "1 / ITL (median)", "chunks per second, pooled over requests"),
    ("MLPerf", "1 / TPOT (p99)", "the slowest 1% of requests' decode rate"),
    ("AIPerf", "output token throughput per user", "mean of 1 / inter token latency"),
    ("InferenceMAX", "interactivity (median)", "1000 / median TPOT in ms"),
    ("vLLM", "output throughput (all users)", "server tokens / run duration"),
)


def headline_rates(requests: Sequence, duration_s: float,
                   count_tokens: Callable[[str], int] | None = None) -> dict[str, float]:
    """Each tool's "tokens per second" for the same requests, keyed ``"tool: name"``.

    The keys and definitions are those of :data:`HEADLINES`, in its order.
    """
    lp = llmperf_summary(requests, duration_s, count_tokens)
    v = vllm_summary(requests, duration_s)
    m = mlperf_summary(requests, duration_s)
    a = aiperf_summary(requests, duration_s)
    x = inferencemax_summary(requests, duration_s)
    values = (
        lp["request_output_throughput_mean_tok_s"],
        1.0 / lp["inter_token_latency_mean_s"],
        1.0 / v["tpot_median_s"],
        1.0 / v["itl_median_s"],
        1.0 / m["tpot_p99_s"],
        a["output_token_throughput_per_user_tok_s"],
        x["interactivity_median_tok_s_user"],
        v["output_throughput_tok_s"],
    )
    return {f"{tool}: {name}": value
            for (tool, name, _), value in zip(HEADLINES, values, strict=True)}


# -- helpers -------------------------------------------------------------------------------


def _values(values: Iterable[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _mean(values: Iterable[float]) -> float:
    kept = _values(values)
    return float(np.mean(kept)) if kept else math.nan


def _median(values: Iterable[float]) -> float:
    kept = _values(values)
    return float(np.median(kept)) if kept else math.nan


def _positive(duration_s: float) -> float:
    if not duration_s > 0:
        raise ValueError(f"duration_s: got {duration_s!r}; must be > 0")
    return float(duration_s)


def _check_nonempty(requests) -> None:
    if len(requests) == 0:
        raise ValueError("requests: give at least one request trace")
