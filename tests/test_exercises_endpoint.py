"""The exercises of chapter 'The endpoint lab', as the executed chapter answers them.

Each exercise describes its requests in round numbers, so each answer can be worked
out by hand from the definitions the chapter quotes (LLMPerf's, vLLM's and
InferenceMAX's). The tests read the answers the solutions glued in the book build
and check them against that arithmetic, so an edited solution fails here.
"""

from __future__ import annotations

import pytest
from conftest import glued


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "06_endpoint_lab")


@pytest.mark.build
def test_ex_ep_1_llmperf_counts_the_wait_and_vllm_does_not(answers):
    e2e_s = 0.3 + 149 * 0.004  # the first token after 0.3 s, then 149 gaps of 4 ms
    assert answers["ex_ep_1_e2e_s"] == pytest.approx(e2e_s)
    assert answers["ex_ep_1_llmperf_rate"] == pytest.approx(150 / e2e_s)
    assert answers["ex_ep_1_vllm_rate"] == pytest.approx(1 / 0.004)


@pytest.mark.build
def test_ex_ep_2_a_chunk_of_four_tokens_is_four_token_gaps(answers):
    assert answers["ex_ep_2_itl_ms"] == pytest.approx(4 * 4.0)
    assert answers["ex_ep_2_factor"] == pytest.approx(4.0)


@pytest.mark.build
def test_ex_ep_3_one_bos_token_adds_a_tenth_to_ten_tokens(answers):
    assert answers["ex_ep_3_pct"] == pytest.approx((11 / 10 - 1) * 100)


@pytest.mark.build
def test_ex_ep_4_interactivity_and_throughput_per_gpu(answers):
    assert answers["ex_ep_4_interactivity"] == pytest.approx(1 / 0.025)
    assert answers["ex_ep_4_per_gpu"] == pytest.approx(64 * (1000 + 200) / 10 / 8)


@pytest.mark.build
def test_ex_ep_5_goodput_counts_the_requests_that_meet_both_slos(answers):
    # The second request's 0.6 s TTFT misses 500 ms; the first's 40 ms TPOT meets 50, not 30.
    assert answers["ex_ep_5_loose"] == pytest.approx(1 / 2.0)
    assert answers["ex_ep_5_tight"] == 0


@pytest.mark.build
def test_ex_ep_knee_the_open_queue_grows_and_the_closed_one_is_bounded(answers):
    # 3 requests a second beyond service for 20 s; drained at 10 a second.
    assert answers["ex_ep_knee_queued"] == pytest.approx(60)
    assert answers["ex_ep_knee_wait_s"] == pytest.approx(6)
    assert answers["ex_ep_knee_closed_most"] == 15

