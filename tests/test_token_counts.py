"""Tests for ``inferlab.tokens.token_counts``: the sample texts, the count table and the
normalisation arithmetic of the tokenizers chapter."""

from __future__ import annotations

import math
import shutil

import pytest

from inferlab.pages.explorers import tokenization
from inferlab.tokens import token_counts as tc
from inferlab.tokens.tokenizers import available_tokenizers, get_tokenizer


@pytest.fixture(scope="module")
def counts():
    return tc.count_tokens()


# --------------------------------------------------------------------------- texts


def test_texts_cover_the_kinds_and_at_least_five_other_languages():
    texts = tc.load_texts()
    assert set(texts["kind"]) == set(tc.TEXT_KINDS)
    prose = texts[texts["kind"] == "prose"]
    assert "English" in set(prose["language"])
    assert len(set(prose["language"]) - {"English"}) >= 5
    assert len({*prose["script"]}) >= 5  # Latin, Cyrillic, Han, kana, Devanagari, Arabic
    for row in texts.itertuples():
        assert row.origin and row.license and row.source
        if row.kind == "prose":
            # "several hundred words": 300+ words, or 700+ characters where no spaces
            assert len(row.text.split()) >= 300 or len(row.text) >= 700, row.file


def test_translations_point_at_the_english_original():
    texts = tc.load_texts()
    translations = texts[texts["parallel_to"] != ""]
    assert set(translations["parallel_to"]) == {"prose_en.txt"}
    assert len(translations) == 7


def test_load_texts_names_a_missing_file(tmp_path):
    shutil.copy(tc.TEXTS_DIR / "manifest.csv", tmp_path / "manifest.csv")
    with pytest.raises(ValueError, match=r"line 2, column 'file'"):
        tc.load_texts(tmp_path)


def test_load_texts_names_an_unknown_kind(tmp_path):
    for path in tc.TEXTS_DIR.iterdir():
        shutil.copy(path, tmp_path / path.name)
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(manifest.read_text().replace(",code,", ",poetry,"), encoding="utf-8")
    with pytest.raises(ValueError, match="column 'kind': 'poetry'"):
        tc.load_texts(tmp_path)


# --------------------------------------------------------------------------- counts


def test_count_table_is_tidy(counts):
    texts = tc.load_texts()
    assert len(counts) == len(texts) * len(available_tokenizers())
    assert not counts.duplicated(["file", "tokenizer"]).any()
    row = counts[(counts.file == "prose_en.txt") & (counts.tokenizer == "cl100k_base")].iloc[0]
    text = (tc.TEXTS_DIR / "prose_en.txt").read_text(encoding="utf-8")
    assert row.tokens == get_tokenizer("cl100k_base").count(text)
    assert row.chars == len(text)
    assert row.words == len(text.split())
    assert row.tokens_per_word == pytest.approx(row.tokens / row.words)
    assert row.chars_per_token == pytest.approx(1 / row.tokens_per_char)
    assert row.tokens_vs_source == 1.0


def test_languages_without_spaces_have_no_word_count(counts):
    chinese = counts[counts.language == "Chinese"]
    assert chinese["words"].isna().all()
    assert chinese["tokens_per_word"].isna().all()
    # ... but they are still compared per English word of the same content.
    english_words = counts[counts.file == "prose_en.txt"]["words"].iloc[0]
    assert (chinese["tokens_per_source_word"] == chinese["tokens"] / english_words).all()


def test_english_is_the_cheapest_language_for_every_tokenizer(counts):
    prose = counts[counts.kind == "prose"]
    for name, group in prose.groupby("tokenizer"):
        english = group[group.language == "English"]["tokens"].iloc[0]
        assert (group["tokens"] >= english).all(), name


def test_bigger_openai_vocabularies_never_cost_more_on_prose(counts):
    """r50k (50k) >= cl100k (100k) >= o200k (200k) tokens on every prose text."""
    prose = counts[counts.kind == "prose"].pivot(index="file", columns="tokenizer",
                                                 values="tokens")
    assert (prose["r50k_base"] >= prose["cl100k_base"]).all()
    assert (prose["cl100k_base"] >= prose["o200k_base"]).all()


def test_token_ratio(counts):
    ratio = tc.token_ratio(counts, "llama2", "cl100k_base")
    pivot = counts.pivot(index="file", columns="tokenizer", values="tokens")
    assert ratio["prose_en.txt"] == pivot.loc["prose_en.txt", "llama2"] / pivot.loc[
        "prose_en.txt", "cl100k_base"]
    with pytest.raises(ValueError, match="numerator: 'gpt2'"):
        tc.token_ratio(counts, "gpt2", "cl100k_base")


def test_count_tokens_rejects_unknown_tokenizer():
    with pytest.raises(ValueError, match="tokenizers: 'bpe-9000'"):
        tc.count_tokens(tokenizers=["bpe-9000"])
    with pytest.raises(ValueError, match="at least one"):
        tc.count_tokens(tokenizers=[])


# --------------------------------------------------------------------------- arithmetic


def test_convert_rate_formula():
    # 100 tok/s counted in A; the same text is 120 tokens in B for every 100 in A.
    assert tc.convert_rate(100, tokens_from=100, tokens_to=120) == pytest.approx(120)
    assert tc.convert_rate(250, 500, 500) == 250


@pytest.mark.parametrize("tok_s", [1.0, 37.9, 1665.0])
@pytest.mark.parametrize(("a", "b"), [(504, 547), (1116, 1412), (592, 1535)])
def test_convert_rate_round_trip_and_text_per_second(tok_s, a, b):
    there = tc.convert_rate(tok_s, a, b)
    assert tc.convert_rate(there, b, a) == pytest.approx(tok_s)
    # The text per second is the same whichever tokenizer counts it.
    assert there / b == pytest.approx(tok_s / a)


@pytest.mark.parametrize("bad", [0, -5, math.nan, math.inf, "100", None, True])
@pytest.mark.parametrize("argument", ["tok_s", "tokens_from", "tokens_to"])
def test_convert_rate_rejects_bad_values_naming_them(argument, bad):
    values = {"tok_s": 100.0, "tokens_from": 10.0, "tokens_to": 12.0, argument: bad}
    with pytest.raises(ValueError, match=argument):
        tc.convert_rate(**values)


def test_chars_per_second():
    assert tc.chars_per_second(100, 4.5) == pytest.approx(450)
    with pytest.raises(ValueError, match="chars_per_token"):
        tc.chars_per_second(100, 0)


def test_chars_per_second_is_the_same_in_every_tokenizer(counts):
    """Converting a speed between tokenizers never changes characters per second."""
    en = counts[counts.file == "prose_en.txt"].set_index("tokenizer")
    base = tc.chars_per_second(100, en.loc["cl100k_base", "chars_per_token"])
    for name in en.index:
        rate = tc.convert_rate(100, en.loc["cl100k_base", "tokens"], en.loc[name, "tokens"])
        assert tc.chars_per_second(rate, en.loc[name, "chars_per_token"]) == pytest.approx(base)


def test_llmperf_rate_counts_bos_as_output():
    # 150 own tokens at 100 tok/s take 1.5 s; Llama 2 counts 160 + <s> = 161.
    assert tc.llmperf_rate(100, own_tokens=150, llama2_tokens=160) == pytest.approx(161 / 1.5)
    assert tc.llmperf_rate(100, 150, 160, count_bos=False) == pytest.approx(160 / 1.5)
    # Same tokenizer, no BOS: the rate is unchanged.
    assert tc.llmperf_rate(100, 150, 150, count_bos=False) == pytest.approx(100)


def test_llmperf_rate_bos_matters_less_for_longer_outputs():
    short = tc.llmperf_rate(100, 10, 10) / 100
    long = tc.llmperf_rate(100, 1000, 1000) / 100
    assert short == pytest.approx(1.1)
    assert long == pytest.approx(1.001)


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"own_tok_s": 0, "own_tokens": 10, "llama2_tokens": 10}, "own_tok_s"),
    ({"own_tok_s": 10, "own_tokens": 0, "llama2_tokens": 10}, "own_tokens"),
    ({"own_tok_s": 10, "own_tokens": 1.5, "llama2_tokens": 10}, "own_tokens"),
    ({"own_tok_s": 10, "own_tokens": 10, "llama2_tokens": -1}, "llama2_tokens"),
])
def test_llmperf_rate_rejects_bad_values(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        tc.llmperf_rate(**kwargs)


def test_reading_speed():
    # MLPerf: 240 words a minute at 0.8 words per token is 5 tokens per second.
    assert tc.reading_tokens_per_s(tokens_per_word=1 / 0.8) == pytest.approx(5.0)
    # The rule of thumb of 0.75 words per token gives 5.33.
    assert tc.reading_tokens_per_s(4 / 3, words_per_minute=240) == pytest.approx(16 / 3)
    with pytest.raises(ValueError, match="words_per_minute"):
        tc.reading_tokens_per_s(1.3, words_per_minute=-240)


# --------------------------------------------------------------------------- pieces


def test_compare_pieces():
    rows = tc.compare_pieces("Hello world", ["cl100k_base", "llama2"])
    assert [row["tokenizer"] for row in rows] == ["cl100k_base", "llama2"]
    assert rows[0]["pieces"] == ["Hello", " world"]
    assert rows[1]["pieces"] == ["Hello", " world"]
    assert rows[0]["chars_per_token"] == pytest.approx(11 / 2)


def test_compare_pieces_refuses_the_empty_text_which_has_no_chars_per_token():
    with pytest.raises(ValueError, match="text"):
        tc.compare_pieces("")


def test_compare_pieces_bad_input():
    with pytest.raises(ValueError, match="text"):
        tc.compare_pieces(b"bytes")
    with pytest.raises(ValueError, match="tokenizers"):
        tc.compare_pieces("x", ["nope"])


def test_pieces_html_escapes_and_shows_white_space():
    out = tc.pieces_html(tc.compare_pieces("<b> a\n", ["cl100k_base"]))
    assert "&lt;" in out and "<b>" not in out
    assert "·" in out and "↵" in out


def test_the_explorers_function_cuts_under_one_tokenizer_or_all():
    every = tokenization.pieces_explorer_compute("The ferry leaves at six.")
    assert [row["tokenizer"] for row in every] == list(available_tokenizers())
    (one,) = tokenization.pieces_explorer_compute("The ferry leaves at six.", "llama2")
    assert one == every[available_tokenizers().index("llama2")]
    with pytest.raises(ValueError, match="text"):
        tokenization.pieces_explorer_compute("")
    with pytest.raises(ValueError, match="tokenizer"):
        tokenization.pieces_explorer_compute("x", "no such tokenizer")
