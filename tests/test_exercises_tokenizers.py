"""The answers of the tokenizers chapter's exercises, computed as the chapter does.

Each test repeats an exercise's solution with the package and checks the number
the chapter prints, so a solution cannot drift from the code or the data.
"""

from __future__ import annotations

import math

import pytest

from inferlab.data import load_table, result
from inferlab.token_counts import (
    chars_per_second,
    convert_rate,
    count_tokens,
    reading_tokens_per_s,
)

OUTPUT_TOKENS = 150


@pytest.fixture(scope="module")
def counts():
    return count_tokens()


@pytest.fixture(scope="module")
def tokens(counts):
    return counts.pivot(index="file", columns="tokenizer", values="tokens")


def test_ex_tok_convert(tokens):
    en = convert_rate(300, tokens.loc["prose_en.txt", "llama3"],
                      tokens.loc["prose_en.txt", "o200k_base"])
    hi = convert_rate(300, tokens.loc["prose_hi.txt", "llama3"],
                      tokens.loc["prose_hi.txt", "o200k_base"])
    assert en == pytest.approx(298.8, abs=0.1)
    assert hi == pytest.approx(189.4, abs=0.1)
    assert hi < en < 300


def test_ex_tok_llmperf(tokens):
    n_llama2 = round(OUTPUT_TOKENS * tokens.loc["prose_zh.txt", "llama2"]
                     / tokens.loc["prose_zh.txt", "o200k_base"])
    true_rate = 120 * OUTPUT_TOKENS / (n_llama2 + 1)
    assert n_llama2 == 271
    assert true_rate == pytest.approx(66.2, abs=0.05)


def test_ex_tok_bos():
    reported = result("llmperf-groq-l2-70b-throughput")["value"]
    text_rate = reported * (OUTPUT_TOKENS - 1) / OUTPUT_TOKENS
    assert text_rate == pytest.approx(183.8, abs=0.05)
    needed = math.floor(1 / 0.001) + 2
    assert needed == 1002
    assert 1 / (needed - 1) < 0.001 <= 1 / (needed - 2)


def test_ex_tok_reading(counts):
    japanese = counts[counts.file == "prose_ja.txt"].set_index("tokenizer")
    l2 = reading_tokens_per_s(japanese.loc["llama2", "tokens_per_source_word"])
    l3 = reading_tokens_per_s(japanese.loc["llama3", "tokens_per_source_word"])
    assert l2 == pytest.approx(10.5, abs=0.05)
    assert l3 == pytest.approx(6.6, abs=0.05)
    assert l3 > 5 and l2 > 5


def test_ex_tok_numbers(tokens):
    arithmetic = tokens.loc["numbers_arithmetic.txt"]
    cheapest = sorted(arithmetic[arithmetic == arithmetic.min()].index)
    assert cheapest == ["p50k_base", "r50k_base"]
    assert arithmetic.idxmax() == "llama2"
    # The largest vocabulary is not the cheapest for numbers.
    assert arithmetic["o200k_base"] > arithmetic.min()


def test_ex_tok_chars(counts, tokens):
    board = load_table("leaderboard")
    cerebras = board[board["rank"] == 1].iloc[0]["output_tokens_per_s"]
    gpt5 = board[board["rank"] == 14].iloc[0]["output_tokens_per_s"]
    chars = counts.groupby("file")["chars"].first()["code_python.txt"]
    c1 = chars_per_second(cerebras, chars / tokens.loc["code_python.txt", "llama3"])
    c2 = chars_per_second(gpt5, chars / tokens.loc["code_python.txt", "o200k_base"])
    assert c1 == pytest.approx(8027, abs=1)
    assert c2 == pytest.approx(365.4, abs=0.1)
    assert c1 / c2 == pytest.approx(22.0, abs=0.05)
