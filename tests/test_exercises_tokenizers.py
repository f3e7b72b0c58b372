"""The exercises of chapter 'Tokenizers', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against the token counts of the sample texts in `data/texts/`, the published rates in
`data/` and what a change of tokenizer must preserve: the text per second, and the
time a response takes. An edited solution fails here.
"""

from __future__ import annotations

import pytest
from conftest import glued

from inferlab.common.data import load_table, result
from inferlab.tokens.token_counts import count_tokens

OUTPUT_TOKENS = 150  # LLMPerf's runs asked for about 150 output tokens


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "04_tokenizers")


@pytest.fixture(scope="module")
def counts():
    return count_tokens()


@pytest.fixture(scope="module")
def tokens(counts):
    return counts.pivot(index="file", columns="tokenizer", values="tokens")


@pytest.mark.build
def test_ex_tok_convert_keeps_the_text_per_second(answers, tokens):
    for text, key in (("prose_en.txt", "ex_tok_convert_en"), ("prose_hi.txt", "ex_tok_convert_hi")):
        # The same text streams at the same pace counted in either tokenizer's tokens.
        assert answers[key] / tokens.loc[text, "o200k_base"] == pytest.approx(
            300 / tokens.loc[text, "llama3"]), text
    assert answers["ex_tok_convert_en"] == pytest.approx(300, rel=0.02)  # "nearly agree"
    assert answers["ex_tok_convert_hi"] < answers["ex_tok_convert_en"]


@pytest.mark.build
def test_ex_tok_llmperf_keeps_the_time_of_a_response(answers, tokens):
    n_llama2 = answers["ex_tok_llmperf_llama2_tokens"]
    ratio = tokens.loc["prose_zh.txt", "llama2"] / tokens.loc["prose_zh.txt", "o200k_base"]
    assert abs(n_llama2 - OUTPUT_TOKENS * ratio) <= 0.5
    # LLMPerf's count, with its BOS token, at 120/s takes as long as the model's own 150.
    assert OUTPUT_TOKENS / answers["ex_tok_llmperf_rate"] == pytest.approx((n_llama2 + 1) / 120)


@pytest.mark.build
def test_ex_tok_bos_removes_one_token_in_n_and_finds_the_shortest_safe_answer(answers):
    reported = result("llmperf-groq-l2-70b-throughput")["value"]
    assert answers["ex_tok_bos_text_rate"] == pytest.approx(
        reported * (OUTPUT_TOKENS - 1) / OUTPUT_TOKENS)
    needed = answers["ex_tok_bos_tokens_needed"]
    assert 1 / (needed - 1) < 0.001 <= 1 / (needed - 2)


@pytest.mark.build
def test_ex_tok_reading_scales_the_reading_speed_by_tokens_per_word(answers, counts):
    japanese = counts[counts.file == "prose_ja.txt"].set_index("tokenizer")
    words_per_s = answers["tok_wpm"] / 60  # the reading speed the exercise states
    for name in ("llama2", "llama3"):
        needed = answers[f"ex_tok_reading_{name}"]
        assert needed == pytest.approx(
            japanese.loc[name, "tokens_per_source_word"] * words_per_s), name
        assert needed > answers["tok_mlperf_tok_s"]  # "both above MLPerf's"


@pytest.mark.build
def test_ex_tok_numbers_cheapest_is_not_the_largest_vocabulary(answers, tokens):
    arithmetic = tokens.loc["numbers_arithmetic.txt"]
    cheapest = set(answers["ex_tok_numbers_cheapest"].split(" and "))
    assert cheapest == set(arithmetic[arithmetic == arithmetic.min()].index)
    assert "o200k_base" not in cheapest
    assert answers["ex_tok_numbers_dearest"] == "llama2"  # one token per digit


@pytest.mark.build
def test_ex_tok_chars_convert_the_leaderboard_rates_to_characters(answers, counts, tokens):
    rate = load_table("leaderboard").set_index("rank")["output_tokens_per_s"]
    chars = counts.groupby("file")["chars"].first()["code_python.txt"]
    c1, c2 = answers["ex_tok_chars_cerebras"], answers["ex_tok_chars_gpt5"]
    assert c1 == pytest.approx(rate[1] * chars / tokens.loc["code_python.txt", "llama3"])
    assert c2 == pytest.approx(rate[14] * chars / tokens.loc["code_python.txt", "o200k_base"])
    assert answers["ex_tok_chars_ratio"] == pytest.approx(c1 / c2)
    # "On code the two tokenizers nearly agree, so the token ratio survives."
    assert c1 / c2 == pytest.approx(rate[1] / rate[14], rel=0.05)
