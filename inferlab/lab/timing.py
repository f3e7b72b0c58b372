"""Request timing: the two phases of one request and the clocks that time them.

A request waits in a queue, then **prefill** reads the whole prompt in one
forward pass and produces the first output token, then **decode** produces the
remaining tokens one forward pass at a time. Every "tokens per second" figure is
some number of tokens divided by one of the intervals this module names:

- time to first token (TTFT) = queue + prefill;
- time per output token (TPOT) = (end-to-end - TTFT) / (n - 1), vLLM's
  definition (NVIDIA AIPerf calls the same quantity "inter token latency");
- LLMPerf's inter-token latency = end-to-end / n, which *includes* the TTFT;
- end-to-end latency = the time the last token arrives;
- the rate *with* TTFT, n / end-to-end (LLMPerf's per-request throughput), and
  the rate *after* the first token, n / (end-to-end - TTFT), the decode-only
  rate that LLMPerf's medians give and Groq's dashboard reports.

The reconciliation of the two published Groq figures is the identity
``rate_with_ttft = n / (TTFT + n / decode_rate)``, with the decode-only rate
defined as above. Sources: the LLMPerf leaderboard and its raw data (Anyscale,
2023-24), Groq's reply to it (2024), vLLM's benchmark definitions.

The module also converts reading speed to tokens per second. The arithmetic
intensity of each phase lives in :mod:`inferlab.model.roofline`. Everything is in SI
units (seconds, tokens per second).

Used in chapter 'Prefill and decode'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inferlab.benchmark.mlperf import time_per_output_token
from inferlab.common import checks

CHAPTER = "01_prefill_decode"


# --- one request's timeline ------------------------------------------------------------------


@dataclass(frozen=True)
class Clocks:
    """The clocks of one request, all derived from three numbers: n, TTFT and end-to-end.

    ``tpot_s`` is ``nan`` for a one-token output (there is no gap to time).
    """

    output_tokens: int
    ttft_s: float
    e2e_s: float
    tpot_s: float
    llmperf_inter_token_latency_s: float
    rate_with_ttft_tok_per_s: float
    decode_only_tok_per_s: float


def clocks(output_tokens: int, ttft_s: float, e2e_s: float) -> Clocks:
    """Every clock of a request with ``output_tokens`` tokens, its TTFT and end-to-end latency.

    Formulas: TPOT = (e2e - TTFT) / (n - 1) (vLLM; AIPerf's "inter token latency");
    LLMPerf inter-token latency = e2e / n (includes TTFT); rate with TTFT = n / e2e
    (LLMPerf's per-request output throughput); decode-only rate = n / (e2e - TTFT).

    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    ttft = checks.non_negative("ttft_s", ttft_s)
    e2e = checks.positive("e2e_s", e2e_s)
    if e2e <= ttft:
        raise ValueError(
            f"e2e_s: {e2e_s!r} must be greater than ttft_s ({ttft_s!r}): the last token "
            "cannot arrive before the first"
        )
    return Clocks(
        output_tokens=n,
        ttft_s=ttft,
        e2e_s=e2e,
        tpot_s=time_per_output_token(ttft, e2e, n),
        llmperf_inter_token_latency_s=e2e / n,
        rate_with_ttft_tok_per_s=n / e2e,
        decode_only_tok_per_s=n / (e2e - ttft),
    )


@dataclass(frozen=True)
class RequestTimeline:
    """One modelled request: queue, prefill (which emits token 1), then n - 1 decode steps.

    Token ``k`` (1-based) arrives at ``ttft_s + (k - 1) * time_per_output_token_s``.
    Every step takes the same time: a batch-1 decode step reads the same weights
    each time, and the growing KV cache is ignored here.
    """

    prompt_tokens: int
    output_tokens: int
    queue_s: float
    prefill_s: float
    time_per_output_token_s: float

    @property
    def ttft_s(self) -> float:
        """Time to first token, queue plus prefill."""
        return self.queue_s + self.prefill_s

    @property
    def decode_s(self) -> float:
        """Time spent after the first token, in (n - 1) decode steps."""
        return (self.output_tokens - 1) * self.time_per_output_token_s

    @property
    def e2e_s(self) -> float:
        """End-to-end latency, TTFT plus the decode steps."""
        return self.ttft_s + self.decode_s

    def token_times_s(self) -> np.ndarray:
        """Arrival time of each output token, in seconds from the request being sent."""
        return self.ttft_s + np.arange(self.output_tokens) * self.time_per_output_token_s

    def clocks(self) -> Clocks:
        """The request's clocks (see :func:`clocks`)."""
        return clocks(self.output_tokens, self.ttft_s, self.e2e_s)


def request_timeline(prompt_tokens: int, output_tokens: int, decode_tok_per_s: float, *,
                     prefill_tok_per_s: float, queue_s: float = 0.0) -> RequestTimeline:
    """Model one request's timeline from its lengths and the two phase rates.

    prefill = prompt_tokens / prefill_tok_per_s; TTFT = queue_s + prefill;
    time per output token = 1 / decode_tok_per_s; end-to-end = TTFT + (n - 1) / decode rate.
    Assumes a fixed prefill rate (compute-bound) and a fixed decode step (batch 1,
    memory-bound, KV-cache growth ignored); the queue wait is an input, not modelled.

    Used in chapter 'Prefill and decode'.
    """
    prompt = checks.whole("prompt_tokens", prompt_tokens)
    n = checks.whole("output_tokens", output_tokens)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    prefill = checks.positive("prefill_tok_per_s", prefill_tok_per_s)
    queue = checks.non_negative("queue_s", queue_s)
    prefill_s = checks.finite_result(prompt / prefill, "prompt_tokens", "prefill_tok_per_s")
    tpot = checks.finite_result(1.0 / decode, "decode_tok_per_s")
    # The timeline's end-to-end time must be a float as well, not only its parts.
    checks.finite_result(queue + prefill_s + (n - 1) * tpot, "output_tokens", "decode_tok_per_s",
                         "queue_s")
    return RequestTimeline(prompt, n, queue, prefill_s, tpot)


# --- the reconciliation ----------------------------------------------------------------------


def decode_only_rate_tok_per_s(output_tokens: int, ttft_s: float, e2e_s: float) -> float:
    """Decode-only rate: output tokens divided by the time after the first token.

    Formula: n / (e2e - TTFT). From LLMPerf's median latencies for Groq's Llama 2 70B
    (150 tokens out, TTFT 0.222 s, e2e 0.805 s) it gives about 257 tok/s.
    (Medians of different quantities do not combine exactly; this is an estimate.)

    Used in chapter 'Prefill and decode'.
    """
    return clocks(output_tokens, ttft_s, e2e_s).decode_only_tok_per_s


def rate_with_ttft_tok_per_s(output_tokens: int | np.ndarray, ttft_s: float | np.ndarray,
                             decode_tok_per_s: float) -> float | np.ndarray:
    """Per-request tokens per second when the clock includes the first-token wait.

    Formula: rate = n / (TTFT + n / decode_rate), where decode_rate is the decode-only
    rate n / (e2e - TTFT); this is then exactly n / e2e. It rises toward the decode rate
    as n grows and never rises when TTFT grows. Source: the reconciliation of Groq's
    270+ tok/s with LLMPerf's 185 tok/s (Groq, 2024; LLMPerf leaderboard, 2023-24):
    n=150, TTFT=0.22 s, decode 270 tok/s gives about 193; n=1,000 gives about 255.

    ``output_tokens`` and ``ttft_s`` may be numpy arrays (for sweeps); the result
    then has their broadcast shape.

    Used in chapter 'Prefill and decode'.
    """
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    n = checks.reals("output_tokens", output_tokens, low=1.0)
    ttft = checks.reals("ttft_s", ttft_s, low=0.0)
    rate = n / (ttft + n / decode)
    return float(rate) if rate.ndim == 0 else rate


def ttft_for_rate_s(rate_with_ttft_tok_per_s: float, output_tokens: int,
                    decode_tok_per_s: float) -> float:
    """The TTFT that makes the TTFT-inclusive rate come out at a given value.

    Formula: TTFT = n / rate - n / decode_rate (the reconciliation formula solved for
    TTFT). At decode 270 tok/s and 150 tokens, 185 tok/s needs TTFT of about 0.255 s.
    The target must be below the decode rate (a TTFT of zero gives the decode rate).

    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    target = checks.positive("rate_with_ttft_tok_per_s", rate_with_ttft_tok_per_s, high=decode)
    return checks.finite_result(n / target - n / decode, "rate_with_ttft_tok_per_s")


def decode_rate_from_rate_with_ttft_tok_per_s(rate_with_ttft_tok_per_s: float,
                                              output_tokens: int, ttft_s: float) -> float:
    """The decode-only rate hidden in a TTFT-inclusive rate, given n and the TTFT.

    Formula: the reconciliation formula solved for the decode rate,
    r = n / (n / rate - TTFT). The rate must be below n / TTFT (otherwise the TTFT
    alone would take longer than the whole request).

    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    ttft = checks.non_negative("ttft_s", ttft_s)
    limit = n / ttft if ttft > 0 else math.inf
    rate = checks.real("rate_with_ttft_tok_per_s", rate_with_ttft_tok_per_s, low=0.0,
                       high=limit, low_open=True, high_open=True)
    return checks.finite_result(n / (n / rate - ttft), "rate_with_ttft_tok_per_s", "ttft_s")


def output_tokens_for_fraction(fraction: float, ttft_s: float, decode_tok_per_s: float) -> float:
    """How many output tokens it takes for the TTFT-inclusive rate to reach ``fraction`` of decode.

    Formula: from n / (TTFT + n / r) = f r, n = f / (1 - f) * TTFT * r. Returned as a
    real number (round up for a whole token count). ``fraction`` must lie in (0, 1).

    Used in chapter 'Prefill and decode'.
    """
    f = checks.fraction("fraction", fraction, low_open=True, high_open=True)
    ttft = checks.non_negative("ttft_s", ttft_s)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    return f / (1.0 - f) * ttft * decode


# --- what feels fast ----------------------------------------------------------------------------


def reading_rate_tok_per_s(words_per_minute: float, words_per_token: float) -> float:
    """A reading speed in words per minute, as output tokens per second.

    Formula: tok/s = wpm / 60 / (words per token). The words-per-token ratio depends on
    the tokenizer and the text; 0.75 is OpenAI's rule of thumb for English.

    Used in chapter 'Prefill and decode'.
    """
    wpm = checks.positive("words_per_minute", words_per_minute)
    wpt = checks.positive("words_per_token", words_per_token)
    return checks.finite_result(wpm / 60.0 / wpt, "words_per_minute", "words_per_token")


def words_per_minute(tok_per_s: float, words_per_token: float) -> float:
    """Tokens per second as words per minute: wpm = tok/s * 60 * (words per token).

    Used in chapter 'Prefill and decode'.
    """
    rate = checks.positive("tok_per_s", tok_per_s)
    wpt = checks.positive("words_per_token", words_per_token)
    return checks.finite_result(rate * 60.0 * wpt, "tok_per_s", "words_per_token")


# --- reconciling a published rate -------------------------------------------------------------


@dataclass(frozen=True)
class Reconciliation:
    """What the reconciliation explorer shows for one setting of its sliders."""

    output_tokens: int
    ttft_s: float
    decode_tok_per_s: float
    rate_with_ttft_tok_per_s: float
    ttft_for_target_s: float
    target_tok_per_s: float
    curve_output_tokens: np.ndarray
    curve_rate_tok_per_s: np.ndarray


def reconcile(output_tokens: int, ttft_s: float, decode_tok_per_s: float, *,
              target_tok_per_s: float = 185.0, max_output_tokens: int = 2000) -> Reconciliation:
    """The TTFT-inclusive rate at one setting, the curve over output length, and the TTFT
    that would make it exactly ``target_tok_per_s`` at this output length.

    ``ttft_for_target_s`` is ``nan`` when the target is not below the decode rate.
    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    ttft = checks.non_negative("ttft_s", ttft_s)
    decode = checks.rate("decode_tok_per_s", decode_tok_per_s)
    target = checks.rate("target_tok_per_s", target_tok_per_s)
    top = checks.whole("max_output_tokens", max_output_tokens)
    curve_n = np.unique(np.geomspace(1, max(top, n), 200).round())
    return Reconciliation(
        output_tokens=n,
        ttft_s=ttft,
        decode_tok_per_s=decode,
        rate_with_ttft_tok_per_s=rate_with_ttft_tok_per_s(n, ttft, decode),
        ttft_for_target_s=ttft_for_rate_s(target, n, decode) if target <= decode else math.nan,
        target_tok_per_s=target,
        curve_output_tokens=curve_n,
        curve_rate_tok_per_s=rate_with_ttft_tok_per_s(curve_n, ttft, decode),
    )
