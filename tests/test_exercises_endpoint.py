"""The endpoint lab's exercise answers, computed as the chapter does and checked by hand."""

from __future__ import annotations

import pytest

from inferlab import endpoint_metrics as em


def test_ex_ep_1_llmperf_against_vllm():
    r = em.synthetic_request(0.3, 0.004, 150)
    # 150 tokens over 0.3 + 149 x 0.004 = 0.896 s; vLLM: 149 gaps of 4 ms after TTFT.
    assert em.llmperf_request(r, len).output_throughput_tok_s == pytest.approx(150 / 0.896)
    assert 1 / em.tpot_s(r) == pytest.approx(250.0)


def test_ex_ep_2_four_tokens_to_a_chunk():
    r4 = em.synthetic_request(0.3, 0.004, 150, tokens_per_chunk=4)
    itl_ms = em.vllm_summary([r4], r4.end_s)["itl_median_s"] * 1e3
    assert itl_ms == pytest.approx(16.0)
    assert itl_ms / 4 == pytest.approx(4.0)


def test_ex_ep_3_bos_on_short_answers():
    r10 = em.synthetic_request(0.2, 0.005, 10)
    plain = em.llmperf_request(r10, len).output_throughput_tok_s
    with_bos = em.llmperf_request(r10, lambda text: len(text) + 1).output_throughput_tok_s
    assert (with_bos / plain - 1) * 100 == pytest.approx(10.0)


def test_ex_ep_4_interactivity_and_per_gpu():
    one = em.synthetic_request(0.5, 0.025, 200, prompt_tokens=1000)
    x = em.inferencemax_summary([one] * 64, duration_s=10.0, gpus=8)
    assert x["interactivity_median_tok_s_user"] == pytest.approx(40.0)
    assert x["throughput_per_gpu_tok_s"] == pytest.approx(64 * 1200 / 10 / 8)


def test_ex_ep_5_goodput():
    pair = [em.synthetic_request(0.3, 0.040, 50), em.synthetic_request(0.6, 0.020, 50)]
    loose = em.vllm_summary(pair, 2.0, slo_ttft_ms=500, slo_tpot_ms=50)
    tight = em.vllm_summary(pair, 2.0, slo_ttft_ms=500, slo_tpot_ms=30)
    assert loose["request_goodput_per_s"] == pytest.approx(0.5)
    assert tight["request_goodput_per_s"] == 0
