"""Each tool's metrics on two constructed traces, every answer worked by hand below."""

from __future__ import annotations

import math

import pytest

from inferlab import endpoint_metrics as em
from inferlab.loadclient import RequestTrace

# Request A (completions): sent at 0; one token per chunk at 0.5, 0.6, 0.7, 0.8 s;
# a usage-only chunk (no choice) at 0.8 s; stream ends at 0.9 s; the server counts 4.
A = RequestTrace(index=0, scheduled_s=0.0, send_s=0.0, end_s=0.9,
                 chunk_s=(0.5, 0.6, 0.7, 0.8, 0.8), chunk_text=("a", "b", "c", "d", None),
                 prompt_tokens=10, completion_tokens=4)
# Request B (chat): sent at 1.0; an empty role chunk at 1.3; all four tokens in one
# chunk "abcd" at 1.5; ends at 1.6; the server counts 4.
B = RequestTrace(index=1, scheduled_s=1.0, send_s=1.0, end_s=1.6,
                 chunk_s=(1.3, 1.5), chunk_text=("", "abcd"),
                 prompt_tokens=10, completion_tokens=4)


def chars(text: str) -> int:
    """A stand-in tokenizer: one token per character."""
    return len(text)


def test_ttft_depends_on_which_chunk_counts():
    assert em.first_content_s(A) == pytest.approx(0.5)
    assert em.first_choice_s(A) == pytest.approx(0.5)
    # B's empty role chunk is a choice (vLLM starts the clock) but has no content.
    assert em.first_choice_s(B) == pytest.approx(0.3)
    assert em.first_content_s(B) == pytest.approx(0.5)


def test_tpot_excludes_the_first_token():
    # A: (0.9 - 0.5) / (4 - 1) = 0.1333 s; B: (0.6 - 0.3) / 3 = 0.1 s.
    assert em.tpot_s(A) == pytest.approx(0.4 / 3)
    assert em.tpot_s(B) == pytest.approx(0.1)
    assert math.isnan(em.tpot_s(A, tokens=1))


def test_llmperf_folds_ttft_into_its_inter_token_latency():
    r = em.llmperf_request(A, chars)
    # 4 tokens; the last content chunk came 0.8 s after sending: 0.8 / 4 = 0.2 s.
    assert r.inter_token_latency_s == pytest.approx(0.2)
    # 4 tokens over the 0.9 s end-to-end latency.
    assert r.output_throughput_tok_s == pytest.approx(4 / 0.9)


def test_counting_a_bos_token_raises_llmperf_rates():
    def with_bos(text):
        return len(text) + 1

    r = em.llmperf_request(A, with_bos)
    assert r.output_tokens == 5
    assert r.inter_token_latency_s == pytest.approx(0.8 / 5)
    assert r.output_throughput_tok_s == pytest.approx(5 / 0.9)


def test_vllm_itl_is_per_chunk_and_pooled():
    # A's gaps between chunks with a choice: 0.1, 0.1, 0.1; B's: 1.5 - 1.3 = 0.2.
    v = em.vllm_summary([A, B], duration_s=1.6)
    assert v["itl_mean_s"] == pytest.approx((0.1 * 3 + 0.2) / 4)
    assert v["itl_median_s"] == pytest.approx(0.1)
    assert v["ttft_mean_s"] == pytest.approx((0.5 + 0.3) / 2)
    assert v["tpot_median_s"] == pytest.approx((0.4 / 3 + 0.1) / 2)
    # 8 output tokens and 20 prompt tokens over 1.6 s.
    assert v["output_throughput_tok_s"] == pytest.approx(8 / 1.6)
    assert v["total_token_throughput_tok_s"] == pytest.approx(28 / 1.6)
    assert v["request_throughput_per_s"] == pytest.approx(2 / 1.6)


def test_goodput_counts_requests_within_every_slo():
    # TTFT SLO 400 ms: A (500 ms) misses, B (300 ms) meets: 1 request in 1.6 s.
    v = em.vllm_summary([A, B], duration_s=1.6, slo_ttft_ms=400)
    assert v["request_goodput_per_s"] == pytest.approx(1 / 1.6)
    # Adding a TPOT SLO of 120 ms keeps B (100 ms) and still drops A (133 ms).
    both = em.vllm_summary([A, B], duration_s=1.6, slo_ttft_ms=400, slo_tpot_ms=120)
    assert both["request_goodput_per_s"] == pytest.approx(1 / 1.6)
    none = em.vllm_summary([A, B], duration_s=1.6, slo_ttft_ms=250)
    assert none["request_goodput_per_s"] == 0


def test_mlperf_takes_loadgen_p99():
    # Two values: LoadGen's index floor(2 x 0.99) = 1, the larger.
    m = em.mlperf_summary([A, B], duration_s=1.6)
    assert m["ttft_p99_s"] == pytest.approx(0.5)
    assert m["tpot_p99_s"] == pytest.approx(0.4 / 3)
    assert m["tokens_per_s"] == pytest.approx(5.0)


def test_aiperf_inter_token_latency_is_vllm_tpot_from_first_content():
    a = em.aiperf_summary([A], duration_s=0.9)
    assert a["inter_token_latency_mean_s"] == pytest.approx(em.tpot_s(A))
    assert a["output_token_throughput_per_user_tok_s"] == pytest.approx(3 / 0.4)
    # For B, AIPerf's clock starts at the content (1.5), so (1.6 - 1.5) / 3.
    b = em.aiperf_summary([B], duration_s=0.6)
    assert b["inter_token_latency_mean_s"] == pytest.approx(0.1 / 3)


def test_inferencemax_interactivity_and_per_gpu_throughput():
    x = em.inferencemax_summary([A, B], duration_s=1.6, gpus=2)
    median_tpot_ms = (400 / 3 + 100) / 2
    assert x["interactivity_median_tok_s_user"] == pytest.approx(1000 / median_tpot_ms)
    assert x["throughput_per_gpu_tok_s"] == pytest.approx(28 / 1.6 / 2)
    assert x["output_throughput_per_gpu_tok_s"] == pytest.approx(8 / 1.6 / 2)


def test_headlines_disagree_on_the_same_requests():
    rates = em.headline_rates([A, B], duration_s=1.6, count_tokens=chars)
    assert len(rates) == len(em.HEADLINES)
    # LLMPerf mean of 4 / 0.9 and 4 / 0.6; vLLM median TPOT's reciprocal.
    assert rates["LLMPerf: request output throughput (mean)"] == pytest.approx(
        (4 / 0.9 + 4 / 0.6) / 2)
    assert rates["vLLM: 1 / TPOT (median)"] == pytest.approx(1 / ((0.4 / 3 + 0.1) / 2))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="requests"):
        em.vllm_summary([], 1.0)
    with pytest.raises(ValueError, match="duration_s"):
        em.mlperf_summary([A], 0.0)
    with pytest.raises(ValueError, match="gpus"):
        em.inferencemax_summary([A], 1.0, gpus=0)
    backwards = RequestTrace(index=2, scheduled_s=0, send_s=0, end_s=1, chunk_s=(0.5, 0.4),
                             chunk_text=("a", "b"))
    with pytest.raises(ValueError, match="decrease"):
        em.first_content_s(backwards)


def test_llama2_counter_adds_bos():
    assert em.llama2_counter(True)("Hello") == em.llama2_counter(False)("Hello") + 1
