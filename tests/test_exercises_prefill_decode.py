"""The exercises of chapter 'Prefill and decode', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against the data the exercise starts from and the property it is about, so an
edited solution fails here. Only the last test is a unit test: it holds for any run.
"""

from __future__ import annotations

import pytest
from conftest import glued

from inferlab.common.data import result
from inferlab.lab.timing import clocks, rate_with_ttft_tok_per_s
from inferlab.model import specs

# LLMPerf's runs of 2023 asked for 150 output tokens ("550 in / 150 out").
LLMPERF_OUTPUT_TOKENS = 150


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "01_prefill_decode")


@pytest.mark.build
def test_ex_pd_short_the_wait_is_part_of_the_time_divided_by(answers):
    rate = answers["ex_pd_short_rate"]
    # 50 tokens at the reported rate take as long as the 0.4 s wait plus 50 at 100/s.
    assert 50 / rate == pytest.approx(0.4 + 50 / 100)
    assert answers["ex_pd_short_ttft_pct"] == pytest.approx(100 * 0.4 / 0.9)


@pytest.mark.build
def test_ex_pd_invert_the_decode_rate_gives_back_anyscales_published_rate(answers):
    published = result("llmperf-anyscale-l2-70b-throughput")["value"]
    ttft = result("llmperf-anyscale-l2-70b-ttft")["value"]
    n = LLMPERF_OUTPUT_TOKENS
    decode = answers["ex_pd_invert_decode_rate"]
    assert n / (ttft + n / decode) == pytest.approx(published)
    assert answers["ex_pd_invert_e2e_s"] == pytest.approx(n / published)
    assert answers["ex_pd_invert_ttft_pct"] == pytest.approx(100 * ttft * published / n)
    # The solution's explanation: the same wait weighs more in Groq's faster run.
    groq_pct = 100 * (result("llmperf-groq-l2-70b-ttft")["value"]
                      / result("llmperf-groq-l2-70b-e2e")["value"])
    assert groq_pct > 2.5 * answers["ex_pd_invert_ttft_pct"]


@pytest.mark.build
def test_ex_pd_length_is_the_fewest_tokens_that_come_within_the_fraction(answers):
    ttft, decode = answers["pd_ttft_round"], result("groq-claim-l2-70b")["value"]

    def rate(n):
        return n / (ttft + n / decode)

    for percent in (95, 99):
        n = answers[f"ex_pd_length_tokens_{percent}"]
        assert rate(n) >= percent / 100 * decode > rate(n - 1), percent
    # "Groq's ~1,000-token average sits just short of the first."
    assert answers["ex_pd_length_tokens_95"] > 1000
    assert 0.9 * decode < rate(1000) < 0.95 * decode


@pytest.mark.build
def test_ex_pd_conventions_follow_vllms_and_llmperfs_definitions(answers):
    ttft = result("llmperf-groq-l2-70b-ttft")["value"]
    e2e = result("llmperf-groq-l2-70b-e2e")["value"]
    n = LLMPERF_OUTPUT_TOKENS
    # vLLM's TPOT: the time after the first token over its n - 1 gaps.
    assert answers["ex_pd_conventions_tpot_ms"] == pytest.approx((e2e - ttft) / (n - 1) * 1e3)
    assert answers["ex_pd_conventions_tpot_rate"] == pytest.approx((n - 1) / (e2e - ttft))
    # LLMPerf's inter-token latency: the whole request over all n tokens.
    assert answers["ex_pd_conventions_itl_ms"] == pytest.approx(e2e / n * 1e3)
    assert answers["ex_pd_conventions_itl_rate"] == pytest.approx(n / e2e)
    assert answers["ex_pd_conventions_tpot_rate"] < n / (e2e - ttft)


@pytest.mark.build
def test_ex_pd_own_a_longer_answer_raises_your_rate_and_a_longer_prompt_lowers_it(answers):
    assert (answers["ex_pd_own_long_prompt_rate"] < answers["ex_pd_own_rate"]
            < answers["ex_pd_own_long_answer_rate"] < answers["ex_pd_own_decode_rate"])


@pytest.mark.parametrize(("ttft_s", "tpot_s", "n_out", "prompt"),
                         [(0.5, 0.006, 32, 128), (0.05, 0.02, 32, 128), (1.0, 0.01, 48, 256)])
def test_ex_pd_own_reasoning_holds_for_any_measured_run(ttft_s, tpot_s, n_out, prompt):
    measured = clocks(n_out, ttft_s, ttft_s + (n_out - 1) * tpot_s)
    r_own = 1 / measured.tpot_s
    same = rate_with_ttft_tok_per_s(n_out, measured.ttft_s, r_own)
    long_answer = rate_with_ttft_tok_per_s(1000, measured.ttft_s, r_own)
    long_prompt = rate_with_ttft_tok_per_s(n_out, measured.ttft_s * 2048 / prompt, r_own)
    assert long_prompt < same < long_answer < r_own


@pytest.mark.build
def test_ex_pd_head_the_head_is_charged_once_per_prompt(answers):
    # Llama 3.1 8B's config: a 128,256-token vocabulary and a hidden size of 4,096; the
    # head is its own matrix (untied), so a token's FLOPs are twice the parameters less
    # the input embedding table, which is looked up, not multiplied.
    llama8 = specs.model("Llama 3.1 8B")
    assert (llama8.vocab_size, llama8.hidden_size) == (128_256, 4_096)
    head = 2 * 128_256 * 4_096
    per_token = 2 * (llama8.params_active - 128_256 * 4_096)
    assert answers["ex_pd_head_vocab"] == 128_256
    assert answers["ex_pd_head_share"] == pytest.approx(head / per_token)
    # 1,000 positions through the layers and one through the head, against the head at
    # every position: 999 heads more.
    once = 1000 * (per_token - head) + head
    assert answers["ex_pd_head_extra"] == pytest.approx(999 * head / once)
    assert 0.06 < answers["ex_pd_head_extra"] < 0.08
