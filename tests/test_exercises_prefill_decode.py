"""The answers of the exercises in chapter 'Prefill and decode', computed as the solutions do."""

from __future__ import annotations

import math

import pytest

from inferlab import roofline, specs
from inferlab.data import result
from inferlab.speculative import least_acceptance_for_speedup, speedup
from inferlab.timing import (
    clocks,
    decode_rate_from_rate_with_ttft_tok_per_s,
    output_tokens_for_fraction,
    rate_with_ttft_tok_per_s,
)


def test_ex_pd_short():
    answer = rate_with_ttft_tok_per_s(50, ttft_s=0.4, decode_tok_per_s=100)
    assert answer == pytest.approx(55.56, abs=0.01)
    assert 0.4 / (50 / answer) == pytest.approx(0.444, abs=0.001)


def test_ex_pd_invert():
    rate = result("llmperf-anyscale-l2-70b-throughput")["value"]
    ttft = result("llmperf-anyscale-l2-70b-ttft")["value"]
    r = decode_rate_from_rate_with_ttft_tok_per_s(rate, 150, ttft)
    assert r == pytest.approx(72.7, abs=0.1)
    assert rate_with_ttft_tok_per_s(150, ttft, r) == pytest.approx(rate)
    share_anyscale = ttft / (150 / rate)
    share_groq = (result("llmperf-groq-l2-70b-ttft")["value"]
                  / result("llmperf-groq-l2-70b-e2e")["value"])
    assert share_anyscale == pytest.approx(0.092, abs=0.001)
    assert share_groq > 2.5 * share_anyscale  # the explanation the solution gives


def test_ex_pd_length():
    n_95 = math.ceil(output_tokens_for_fraction(0.95, ttft_s=0.22, decode_tok_per_s=270))
    n_99 = math.ceil(output_tokens_for_fraction(0.99, ttft_s=0.22, decode_tok_per_s=270))
    assert (n_95, n_99) == (1129, 5881)
    assert rate_with_ttft_tok_per_s(1000, 0.22, 270) < 0.95 * 270  # "just short"


def test_ex_pd_conventions():
    c = clocks(output_tokens=150, ttft_s=0.222, e2e_s=0.805)
    assert c.tpot_s * 1000 == pytest.approx(3.91, abs=0.005)
    assert 1 / c.tpot_s == pytest.approx(255.6, abs=0.1)
    assert c.llmperf_inter_token_latency_s * 1000 == pytest.approx(5.37, abs=0.005)
    assert 1 / c.llmperf_inter_token_latency_s == pytest.approx(c.rate_with_ttft_tok_per_s)
    assert 1 / c.tpot_s < c.decode_only_tok_per_s  # 149 gaps, not 150 tokens


def test_ex_pd_intensity():
    h100 = specs.chip("NVIDIA H100 SXM")
    llama = specs.model("Llama 2 70B")
    ridge = roofline.ridge_point_flop_per_byte(h100.bf16_flop_per_s,
                                               h100.memory_bandwidth_bytes_per_s)
    decode = roofline.decode_workload(llama.params_active, "int8").intensity_flop_per_byte
    prefill = roofline.prefill_workload(llama.params_active, "bf16", 2048).intensity_flop_per_byte
    assert ridge == pytest.approx(295, abs=1)
    assert decode == pytest.approx(2.0)
    assert prefill == pytest.approx(2048.0)
    assert decode < ridge < prefill
    assert round(ridge / decode) == 148 and round(prefill / ridge) == 7


def test_ex_pd_specdec():
    before = result("aa-groq-l31-70b-before-specdec")["value"]
    after = result("aa-groq-l31-70b-specdec")["value"]
    a, k = least_acceptance_for_speedup(after / before, draft_cost_ratio=0.01)
    assert after / before == pytest.approx(6.66, abs=0.01)
    assert (round(a, 2), k) == (0.89, 16)
    assert speedup(a, k, 0.01) == pytest.approx(after / before, rel=1e-9)


@pytest.mark.parametrize(("ttft_s", "tpot_s", "n_out", "prompt"),
                         [(0.5, 0.006, 32, 128), (0.05, 0.02, 32, 128), (1.0, 0.01, 48, 256)])
def test_ex_pd_own(ttft_s, tpot_s, n_out, prompt):
    # The solution's reasoning holds for any measured run: a longer answer raises the
    # TTFT-inclusive rate, a longer prompt (larger TTFT) lowers it.
    measured = clocks(n_out, ttft_s, ttft_s + (n_out - 1) * tpot_s)
    r_own = 1 / measured.tpot_s
    same = rate_with_ttft_tok_per_s(n_out, measured.ttft_s, r_own)
    long_answer = rate_with_ttft_tok_per_s(1000, measured.ttft_s, r_own)
    long_prompt = rate_with_ttft_tok_per_s(n_out, measured.ttft_s * 2048 / prompt, r_own)
    assert long_prompt < same < long_answer < r_own
