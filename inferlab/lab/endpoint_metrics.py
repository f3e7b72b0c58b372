"""One trace, six definitions: each benchmark tool's metrics, computed from the same run.

Every function here is pure: it reads :class:`inferlab.benchmark.traces.RequestTrace`
objects (send time, each streamed chunk's arrival time and text, the server's
usage) and applies one tool's definition as its source code computes it. Times
are seconds, rates tokens per second. A *choice chunk* is a streamed event that
carries a choice (a chat role chunk with empty text is one); a *content chunk*
is one whose text is not empty. The definitions, and the code they were read
from:

LLMPerf (Anyscale)
    From ``get_token_throughput_latencies`` in ``token_benchmark_ray.py`` and
    ``src/llmperf/ray_clients/openai_chat_completions_client.py``. TTFT is the
    first content chunk. The client adds up the gaps between
    content chunks starting with TTFT (the time to the last content chunk) and
    the benchmark loop divides that sum by the client's count of received
    events (every streamed choice chunk, the role and finish chunks included),
    not by tokens. Output tokens are counted by re-tokenizing the text with
    one fixed Llama 2 tokenizer (``hf-internal-testing/llama-tokenizer``,
    whose ``encode`` adds a BOS token), whatever model served it; the
    per-request output throughput is those tokens over the end-to-end latency
    (to the end of the stream), TTFT included.

vLLM's serving benchmark (``vllm bench serve``)
    From ``calculate_metrics`` in ``vllm/benchmarks/serve.py`` and
    ``vllm/benchmarks/lib/endpoint_request_func.py``. TTFT is the first choice
    chunk (a chat role chunk starts the clock); the
    latency ends at the last choice chunk; ITL is every gap between
    consecutive choice chunks, pooled over requests (a chunk, not a token).
    Output tokens are the usage's ``completion_tokens``; without usage the
    text is re-tokenized with the model's tokenizer (no special tokens). TPOT
    is ``(latency - TTFT) / (tokens - 1)`` for requests of more than one token.
    Total token throughput adds the prompt lengths the *client* sized (its
    ``prompt_len``), not the server's usage; the newest source read (commit
    ``02cfb53``) replaces them with the usage's ``prompt_tokens`` when the
    server sends them (``prompt_source="server"``). Means, medians and
    ``numpy.percentile``.

MLPerf Inference (MLCommons rules and LoadGen)
    TTFT runs to the first token and TPOT is ``(latency - TTFT) / (tokens - 1)``
    with the tokens the system under test reports; from a client, the first
    and the last content chunk. A run is judged by the 99th percentiles,
    LoadGen style (no interpolation, :func:`inferlab.benchmark.early_stopping.loadgen_percentile`),
    against the model's bounds (:func:`inferlab.benchmark.mlperf.bounds`), and reports
    one number: tokens per second of the whole system, valid only if both
    p99 values are within their bounds. MLPerf has no per-user rate.

NVIDIA AIPerf (version 0.13)
    From ``aiperf/metrics/types/`` and ``aiperf/records/inference_result_parser.py``.
    Only content chunks count as responses: TTFT is the first, the request
    latency ends at the last, and the inter chunk latency is each gap between
    them. Output tokens are, by default, the generated text re-tokenized with
    the model's Hugging Face tokenizer (``add_special_tokens=False``); with
    ``--use-server-token-count`` they are the usage's ``completion_tokens``.
    Its "inter token latency" is ``(request latency - TTFT) / (tokens - 1)``;
    "output token throughput per user" is its reciprocal, averaged over
    requests; the benchmark duration runs from the first send to the last
    content chunk.

guidellm (version 0.8)
    From ``GenerativeRequestStats`` in ``src/guidellm/schemas/request_stats.py``
    and ``src/guidellm/backends/openai/http.py``. TTFT is the first content chunk. Its "ITL" is
    ``(last content - first content) / (tokens - 1)`` (vLLM's TPOT) and its
    "TPOT" is ``(last content - send) / tokens``, TTFT included (LLMPerf's
    formula). Tokens are the usage's ``completion_tokens``. Over a run it
    weights ITL and TPOT by tokens (the mean is total time over total tokens)
    and divides all output tokens by the benchmark's duration.

InferenceMAX (SemiAnalysis)
    Runs vLLM's serving benchmark and plots throughput per GPU (total, input
    plus output, token throughput divided by the GPU count; also output only)
    against interactivity, ``1000 / TPOT in ms`` tokens per second per user,
    at the median.

The readers of :mod:`inferlab.lab.tool_files` turn each tool's saved per-request records
into the book's :class:`~inferlab.benchmark.traces.Trace`, so every definition here can be
applied to a run any of them recorded.

Used in the endpoint lab.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from inferlab.benchmark.early_stopping import loadgen_percentile
from inferlab.benchmark.mlperf import LatencyBounds, time_per_output_token
from inferlab.benchmark.traces import RequestTrace
from inferlab.common import checks
from inferlab.tokens.tokenizers import get_tokenizer

#: The tokenizer LLMPerf counts every model's output with (Llama 1/2's, 32,000 ids).
LLMPERF_TOKENIZER = "llama2"

#: The text a reader gives a content chunk whose own text the tool's file did not keep.
PLACEHOLDER = "\N{HORIZONTAL ELLIPSIS}"


# -- per-request primitives ------------------------------------------------------------------


def _check_trace(r) -> None:
    if len(r.chunk_s) != len(r.chunk_text):
        raise ValueError(f"request {r.index}: chunk_s and chunk_text differ in length")
    if any(b < a for a, b in zip(r.chunk_s, r.chunk_s[1:], strict=False)):
        raise ValueError(f"request {r.index}: chunk times must not decrease")


def _content_times(r) -> list[float]:
    _check_trace(r)
    return [t for t, text in zip(r.chunk_s, r.chunk_text, strict=True) if text]


def _choice_times(r) -> list[float]:
    _check_trace(r)
    return [t for t, text in zip(r.chunk_s, r.chunk_text, strict=True) if text is not None]


def first_content_s(r) -> float:
    """Time from sending to the first content chunk (LLMPerf, MLPerf, AIPerf, guidellm), or nan."""
    times = _content_times(r)
    return times[0] - r.send_s if times else math.nan


def first_choice_s(r) -> float:
    """Time from sending to the first chunk that carries a choice, empty or not (vLLM)."""
    times = _choice_times(r)
    return times[0] - r.send_s if times else math.nan


def last_content_s(r) -> float:
    """Time from sending to the last content chunk (AIPerf's request latency); nan if none."""
    times = _content_times(r)
    return times[-1] - r.send_s if times else math.nan


def last_choice_s(r) -> float:
    """Time from sending to the last chunk with a choice (vLLM's latency); nan if none."""
    times = _choice_times(r)
    return times[-1] - r.send_s if times else math.nan


def e2e_s(r) -> float:
    """End-to-end latency, sending to the end of the stream (LLMPerf, guidellm)."""
    return r.end_s - r.send_s


def chunk_gaps_s(r) -> list[float]:
    """Gaps between consecutive chunks that carry a choice (vLLM's ITL)."""
    times = _choice_times(r)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def content_gaps_s(r) -> list[float]:
    """Gaps between consecutive content chunks (AIPerf's inter chunk latency)."""
    times = _content_times(r)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def tpot_s(r, tokens: int | None = None) -> float:
    """vLLM's TPOT, ``(latency - TTFT) / (tokens - 1)`` from the first to the last choice chunk.

    ``tokens`` defaults to the server's ``completion_tokens``; nan for one
    token or fewer (the formula has no gap to divide by), as vLLM skips them.
    A ``tokens`` given must be at least 2: asking for the TPOT of a count that has
    none is refused by name rather than answered with nan.
    """
    if tokens is not None:
        tokens = checks.whole("tokens", tokens, minimum=2)
    return _tpot(r, r.completion_tokens if tokens is None else tokens)


def _tpot(r, n: int | None) -> float:
    if n is None or n < 2:
        return math.nan
    return time_per_output_token(first_choice_s(r), last_choice_s(r), n)


def llama2_counter(count_bos: bool = True) -> Callable[[str], int]:
    """LLMPerf's token count: Llama 2 tokens of the text, plus one BOS token if ``count_bos``."""
    tokenizer = get_tokenizer(LLMPERF_TOKENIZER)
    extra = 1 if count_bos else 0
    return lambda text: tokenizer.count(text) + extra


def tokenizer_counter(name: str) -> Callable[[str], int]:
    """A counter that re-tokenizes text with one of the book's tokenizers, adding no special token.

    What AIPerf (by default) and vLLM (without usage) do with the model's own
    tokenizer; for the lab server that is its ``cl100k_base``.
    """
    tokenizer = get_tokenizer(name)
    return tokenizer.count


def synthetic_request(ttft_s: float, tpot_s: float, tokens: int, tokens_per_chunk: int = 1,
                      token_text: str = "x", prompt_tokens: int = 1):
    """A constructed trace: first chunk at ``ttft_s``, then one token every ``tpot_s``.

    Tokens are streamed ``tokens_per_chunk`` at a time (a chunk leaves when its
    last token is ready), each token's text is ``token_text``, and the server
    reports ``tokens``; the prompt is ``prompt_tokens`` long for client and
    server alike. For exercises and for showing how a definition reacts to one
    change at a time (endpoint lab).
    """
    tokens = checks.whole("tokens", tokens, maximum=checks.MAX_ITEMS)
    tokens_per_chunk = checks.whole("tokens_per_chunk", tokens_per_chunk)
    prompt_tokens = checks.whole("prompt_tokens", prompt_tokens)
    ttft_s, tpot_s = checks.positive("ttft_s", ttft_s), checks.positive("tpot_s", tpot_s)
    checks.text("token_text", token_text, empty=True)
    checks.finite_result(ttft_s + (tokens - 1) * tpot_s, "ttft_s", "tpot_s", "tokens")
    ready = [ttft_s + i * tpot_s for i in range(tokens)]
    times, texts = [], []
    for start in range(0, tokens, tokens_per_chunk):
        group = ready[start:start + tokens_per_chunk]
        times.append(group[-1])
        texts.append(token_text * len(group))
    return RequestTrace(index=0, scheduled_s=0.0, send_s=0.0, end_s=ready[-1],
                        chunk_s=tuple(times), chunk_text=tuple(texts),
                        prompt_tokens=prompt_tokens, completion_tokens=tokens,
                        requested_prompt_tokens=prompt_tokens)


# -- the tools ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMPerfRequest:
    """One request as LLMPerf records it (the keys of its individual responses file)."""

    ttft_s: float
    e2e_s: float
    output_tokens: int
    inter_token_latency_s: float
    output_throughput_tok_s: float


def llmperf_request(r, count_tokens: Callable[[str], int] | None) -> LLMPerfRequest:
    """LLMPerf's metrics of one request, tokens counted by ``count_tokens(text)``.

    ``inter_token_latency_s = (last content chunk - send) / received events``
    (LLMPerf's benchmark loop divides the summed gaps by the client's event
    count, which every choice chunk adds to) and
    ``output_throughput_tok_s = tokens / e2e``: both include TTFT.
    ``count_tokens=None`` takes the trace's ``completion_tokens`` as the count
    (for traces read from LLMPerf's own file, where that is LLMPerf's count).
    """
    n = r.completion_tokens if count_tokens is None else count_tokens(r.text)
    if n is None:
        raise ValueError(f"count_tokens: request {r.index} has no token count; pass a counter")
    events = len(_choice_times(r))
    itl = last_content_s(r) / events if n and events else 0.0
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
        "output_throughput_tok_s": _per_second(sum(x.output_tokens for x in rows), duration_s),
    }


def vllm_output_tokens(r, count_tokens: Callable[[str], int] | None = None) -> int:
    """vLLM's output length of one request: the usage count, else the text re-tokenized.

    Raises ``ValueError`` naming ``count_tokens`` when the server sent no usage
    and no counter is given (vLLM always has the model's tokenizer at hand).
    """
    if r.completion_tokens:
        return r.completion_tokens
    if count_tokens is None:
        raise ValueError(f"count_tokens: request {r.index} has no usage count; pass the "
                         "model's tokenizer counter (vLLM re-tokenizes the text)")
    return count_tokens(r.text)


def vllm_summary(requests: Sequence, duration_s: float, *,
                 slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
                 slo_e2el_ms: float | None = None,
                 count_tokens: Callable[[str], int] | None = None,
                 prompt_source: str = "client") -> dict[str, float]:
    """``vllm bench serve``'s metrics: TTFT, TPOT (excluding the first token), pooled ITL, rates.

    ITL pools the gaps between choice chunks of every request, so a chunk
    carrying several tokens is one long gap. Goodput counts the requests whose
    TTFT, TPOT (0 for one-token requests) and latency, those given, are all
    within their SLOs in milliseconds, over ``duration_s``. Output tokens come
    from :func:`vllm_output_tokens`. ``prompt_source`` is ``"client"`` (the
    prompt lengths the client sized, ``requested_prompt_tokens``) or
    ``"server"`` (the usage's ``prompt_tokens``).
    """
    _check_nonempty(requests)
    if prompt_source not in ("client", "server"):
        raise ValueError(f"prompt_source: got {prompt_source!r}; must be 'client' or 'server'")
    ttft = [first_choice_s(r) for r in requests]
    latency = [last_choice_s(r) for r in requests]
    tokens = [vllm_output_tokens(r, count_tokens) for r in requests]
    tpot = [_tpot(r, n) for r, n in zip(requests, tokens, strict=True)]
    itl = [gap for r in requests for gap in chunk_gaps_s(r)]
    if prompt_source == "client":
        prompt = sum(r.requested_prompt_tokens for r in requests)
    else:
        prompt = sum(r.prompt_tokens or 0 for r in requests)
    good = 0
    for t, p, e in zip(ttft, tpot, latency, strict=True):
        slos = [(slo_ttft_ms, t), (slo_tpot_ms, 0.0 if math.isnan(p) else p), (slo_e2el_ms, e)]
        if all(slo is None or value * 1e3 <= slo for slo, value in slos):
            good += 1
    return {
        "ttft_mean_s": _mean(ttft), "ttft_median_s": _median(ttft),
        "tpot_mean_s": _mean(tpot), "tpot_median_s": _median(tpot),
        "itl_mean_s": _mean(itl), "itl_median_s": _median(itl),
        "itl_p99_s": float(np.percentile(itl, 99)) if itl else math.nan,
        "e2el_mean_s": _mean(latency),
        "request_throughput_per_s": _per_second(len(requests), duration_s),
        "request_goodput_per_s": _per_second(good, duration_s),
        "output_throughput_tok_s": _per_second(sum(tokens), duration_s),
        "total_token_throughput_tok_s": _per_second(sum(tokens) + prompt, duration_s),
    }


def mlperf_tpot_s(r) -> float:
    """MLPerf's TPOT of one request: first to last content chunk over ``tokens - 1``; nan if < 2."""
    return time_per_output_token(first_content_s(r), last_content_s(r), r.completion_tokens)


def mlperf_summary(requests: Sequence, duration_s: float,
                   bounds: LatencyBounds | None = None) -> dict[str, float]:
    """MLPerf's view: p99 TTFT and TPOT (LoadGen percentile), and tokens per second.

    ``tokens_per_s`` is every reported token over ``duration_s``: the system's
    aggregate rate, the one number MLPerf publishes, and only for a valid run.
    Given ``bounds`` (:func:`inferlab.benchmark.mlperf.bounds`), ``valid`` is 1.0 when
    both p99 values are within them and 0.0 otherwise; without, nan.
    """
    _check_nonempty(requests)
    ttft = [first_content_s(r) for r in requests]
    tpot = [t for t in (mlperf_tpot_s(r) for r in requests) if not math.isnan(t)]
    tokens = sum(r.completion_tokens or 0 for r in requests)
    ttft_p99 = loadgen_percentile(ttft, 0.99)
    tpot_p99 = loadgen_percentile(tpot, 0.99) if tpot else math.nan
    valid = math.nan
    if bounds is not None:
        valid = float(ttft_p99 <= bounds.ttft_s and tpot_p99 <= bounds.tpot_s)
    return {"ttft_p99_s": ttft_p99, "tpot_p99_s": tpot_p99,
            "tokens_per_s": _per_second(tokens, duration_s), "valid": valid}


def aiperf_output_tokens(r, count_tokens: Callable[[str], int] | None,
                         use_server_token_count: bool) -> int | None:
    """AIPerf's output sequence length: the text re-tokenized, or the usage with the switch."""
    if use_server_token_count:
        return r.completion_tokens
    if count_tokens is None:
        raise ValueError("count_tokens: AIPerf re-tokenizes the text by default; pass the "
                         "model's tokenizer counter, or use_server_token_count=True")
    return count_tokens(r.text) if r.text else None


def aiperf_duration_s(requests: Sequence, started_ns: Sequence[int] | None = None) -> float:
    """AIPerf's benchmark duration: first send to the last content chunk of any request.

    AIPerf dates each send on the wall clock and times the request from it on the
    monotonic one. ``started_ns`` are those wall-clock sends, one per request in integer
    nanoseconds (a raw export's ``metadata.request_start_ns``), and give its duration
    exactly; without them the requests' own send times stand in, off by the jitter
    between AIPerf's two clock reads (milliseconds on a busy machine).
    """
    _check_nonempty(requests)
    if started_ns is None:
        return (max(r.send_s + last_content_s(r) for r in requests)
                - min(r.send_s for r in requests))
    if len(started_ns) != len(requests):
        raise ValueError(f"started_ns: give one send time per request ({len(requests)}), "
                         f"not {len(started_ns)}")
    first = min(started_ns)
    return max((start - first) / 1e9 + last_content_s(r)
               for start, r in zip(started_ns, requests, strict=True))


def aiperf_summary(requests: Sequence, duration_s: float | None = None,
                   count_tokens: Callable[[str], int] | None = None, *,
                   use_server_token_count: bool = False) -> dict[str, float]:
    """AIPerf's view: TTFT, inter token latency, inter chunk latency, per-user and total rates.

    By default output tokens are ``count_tokens(text)`` (AIPerf's default, the
    model's tokenizer); ``use_server_token_count=True`` is its
    ``--use-server-token-count`` switch, the usage's ``completion_tokens``.
    ``output_token_throughput_tok_s`` divides all output tokens by
    ``duration_s``: AIPerf 0.13 divides by its profiling phase's window
    (``end_time - start_time`` of ``profile_export_aiperf.json``, a few ms longer
    than the records span); ``None`` takes :func:`aiperf_duration_s` of the requests.
    AIPerf's benchmark duration itself is the trace's ``duration_s``
    (:func:`inferlab.lab.tool_files.read_aiperf_raw`), which needs the sends' wall-clock
    times that a request's trace does not keep.
    """
    _check_nonempty(requests)
    span = aiperf_duration_s(requests)
    itl, per_user, total = [], [], 0
    for r in requests:
        n = aiperf_output_tokens(r, count_tokens, use_server_token_count)
        total += n or 0
        if n is None or n < 2:
            continue
        value = time_per_output_token(first_content_s(r), last_content_s(r), n)
        itl.append(value)
        per_user.append(1.0 / value if value > 0 else math.nan)
    chunk = [gap for r in requests for gap in content_gaps_s(r)]
    return {
        "ttft_mean_s": _mean(first_content_s(r) for r in requests),
        "request_latency_mean_s": _mean(last_content_s(r) for r in requests),
        "inter_token_latency_mean_s": _mean(itl),
        "inter_chunk_latency_mean_s": _mean(chunk),
        "output_token_throughput_per_user_tok_s": _mean(per_user),
        "output_sequence_length_mean": total / len(requests),
        "output_token_throughput_tok_s": _per_second(total, span if duration_s is None
                                                     else duration_s),
    }


def guidellm_output_tokens(r) -> int:
    """guidellm's output tokens: the usage count, else the number of content chunks."""
    return r.completion_tokens or len(_content_times(r))


def guidellm_summary(requests: Sequence, duration_s: float) -> dict[str, float]:
    """guidellm's view: TTFT, its "ITL" (vLLM's TPOT), its "TPOT" (LLMPerf's formula), rates.

    Per request, ``itl = (last content - first content) / (tokens - 1)`` and
    ``tpot = (last content - send) / tokens``. Over the run both are weighted by
    tokens (``tokens - 1`` and ``tokens``), so each mean is total time over
    total tokens, and its median is the smallest value whose cumulative weight
    reaches one half (``Percentiles.from_pdf``: no interpolation).
    ``output_tokens_per_s`` divides all output tokens by ``duration_s``.
    """
    _check_nonempty(requests)
    ttft, itl, itl_w, tpot, tpot_w, total = [], [], [], [], [], 0
    for r in requests:
        n = guidellm_output_tokens(r)
        total += n
        ttft.append(first_content_s(r))
        if n >= 1:
            tpot.append(last_content_s(r) / n)
            tpot_w.append(n)
        if n >= 2:
            itl.append((last_content_s(r) - first_content_s(r)) / (n - 1))
            itl_w.append(n - 1)
    return {
        "ttft_mean_s": _mean(ttft), "ttft_median_s": _weighted_median(ttft, [1] * len(ttft)),
        "itl_mean_s": _weighted_mean(itl, itl_w), "itl_median_s": _weighted_median(itl, itl_w),
        "tpot_mean_s": _weighted_mean(tpot, tpot_w),
        "tpot_median_s": _weighted_median(tpot, tpot_w),
        "request_latency_mean_s": _mean(e2e_s(r) for r in requests),
        "output_tokens_per_s": _per_second(total, duration_s),
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
     "streamed events / time to last chunk, TTFT included"),
    ("vLLM", "1 / TPOT (median)", "server tokens after the first / time after TTFT"),
    ("vLLM", "1 / ITL (median)", "chunks per second, pooled over requests"),
    ("AIPerf", "output token throughput per user", "mean of 1 / inter token latency"),
    ("guidellm", "1 / ITL (mean)", "vLLM's TPOT, token-weighted"),
    ("guidellm", "1 / TPOT (mean)", "LLMPerf's formula, TTFT included, token-weighted"),
    ("InferenceMAX", "interactivity (median)", "1000 / median TPOT in ms"),
    ("vLLM", "output throughput (all users)", "server tokens / run duration"),
    ("MLPerf", "tokens per second (all users)",
     "server tokens / run duration, valid only under the p99 bounds"),
)


def headline_rates(requests: Sequence, duration_s: float,
                   count_tokens: Callable[[str], int] | None = None,
                   model_count_tokens: Callable[[str], int] | None = None) -> dict[str, float]:
    """Each tool's "tokens per second" for the same requests, keyed ``"tool: name"``.

    The keys and definitions are those of :data:`HEADLINES`, in its order.
    ``count_tokens`` is LLMPerf's counter (default :func:`llama2_counter`);
    ``model_count_tokens`` the model's own tokenizer, which AIPerf re-tokenizes
    with by default (without it AIPerf is read with ``--use-server-token-count``).
    """
    lp = llmperf_summary(requests, duration_s, count_tokens)
    v = vllm_summary(requests, duration_s, count_tokens=model_count_tokens)
    m = mlperf_summary(requests, duration_s)
    a = aiperf_summary(requests, duration_s, model_count_tokens,
                       use_server_token_count=model_count_tokens is None)
    g = guidellm_summary(requests, duration_s)
    x = inferencemax_summary(requests, duration_s)
    values = (
        lp["request_output_throughput_mean_tok_s"],
        1.0 / lp["inter_token_latency_mean_s"],
        1.0 / v["tpot_median_s"],
        1.0 / v["itl_median_s"],
        a["output_token_throughput_per_user_tok_s"],
        1.0 / g["itl_mean_s"],
        1.0 / g["tpot_mean_s"],
        x["interactivity_median_tok_s_user"],
        v["output_throughput_tok_s"],
        m["tokens_per_s"],
    )
    return {f"{tool}: {name}": value
            for (tool, name, _), value in zip(HEADLINES, values, strict=True)}


# -- bring your own trace: other tools' per-request files ------------------------------------


# -- helpers -------------------------------------------------------------------------------


def _values(values: Iterable[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _mean(values: Iterable[float]) -> float:
    kept = _values(values)
    return float(np.mean(kept)) if kept else math.nan


def _median(values: Iterable[float]) -> float:
    kept = _values(values)
    return float(np.median(kept)) if kept else math.nan


def _weighted_mean(values: Sequence[float], weights: Sequence[int]) -> float:
    total = sum(weights)
    return float(np.dot(values, weights) / total) if total else math.nan


def _weighted_median(values: Sequence[float], weights: Sequence[int]) -> float:
    """guidellm's median: the smallest value whose cumulative weight share reaches one half."""
    if not sum(weights):
        return math.nan
    order = np.argsort(values, kind="stable")
    share = np.cumsum(np.asarray(weights, float)[order]) / float(sum(weights))
    return float(np.asarray(values, float)[order][np.searchsorted(share, 0.5, side="left")])


def _positive(duration_s: float) -> float:
    return checks.positive("duration_s", duration_s)


def _per_second(total: float, duration_s: float) -> float:
    # A duration near the smallest float divides a count to infinity.
    return checks.finite_result(total / _positive(duration_s), "duration_s")


def _check_nonempty(requests) -> None:
    if len(requests) == 0:
        raise ValueError("requests: give at least one request trace")
