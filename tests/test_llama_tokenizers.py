"""Tests for the Llama 2 and Llama 3 tokenizers bundled with ``inferlab``.

The expected ids are the npm packages' own: ``llama2_source_tests.json`` and
``llama3_source_tests.json`` were read out of ``llama-tokenizer-js`` 1.2.2 and
``llama3-tokenizer-js`` 1.2.0 by ``scripts/build_llama_tokenizers.py``, and
``reference_encodings.json`` holds the count and id hash the packages give for
each sample text in ``data/texts``. A few well-known cases are also written out
here so that a reader can see them without opening the JSON.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from conftest import ROOT

from inferlab.tokens import sentencepiece_bpe
from inferlab.tokens.tokenizers import (
    TIKTOKEN_ENCODINGS,
    TOKENIZER_DATA_DIR,
    available_tokenizers,
    get_tokenizer,
    llama3_encoding,
)

DATA = TOKENIZER_DATA_DIR
TEXTS = ROOT / "data" / "texts"
ALL = available_tokenizers()


def _cases(name: str) -> list[dict]:
    return json.loads((DATA / f"{name}_source_tests.json").read_text(encoding="utf-8"))["cases"]


LLAMA2_CASES = _cases("llama2")
LLAMA3_CASES = _cases("llama3")


def _case_id(case: dict) -> str:
    text = case.get("input", case.get("output", ""))
    return f"{case['kind']}:{text[:20]!r}"


@pytest.fixture(scope="module")
def llama2() -> sentencepiece_bpe.SentencePieceBPE:
    return sentencepiece_bpe.load()


@pytest.fixture(scope="module")
def llama3():
    return llama3_encoding()


def test_source_test_files_are_not_empty():
    assert len(LLAMA2_CASES) == 20
    assert len(LLAMA3_CASES) == 43
    # The long llama paragraph is in both, with hundreds of expected ids.
    assert max(len(case.get("ids", [])) for case in LLAMA2_CASES) > 400
    assert max(len(case.get("ids", [])) for case in LLAMA3_CASES) > 300


# --------------------------------------------------------------------------- Llama 2


@pytest.mark.parametrize("case", LLAMA2_CASES, ids=_case_id)
def test_llama2_reproduces_package_tests(llama2, case):
    if case["kind"] == "encode":
        ids = llama2.encode(case["input"], add_bos=case["bos"],
                            add_preceding_space=case["preceding_space"])
        assert ids == case["ids"]
        assert llama2.decode(ids) == case["input"]
    else:
        assert llama2.decode(case["ids"], skip_bos=case["bos"],
                             remove_preceding_space=case["preceding_space"]) == case["output"]


def test_llama2_readme_example(llama2):
    # llama-tokenizer-js README: encode("Hello world!") -> [1, 15043, 3186, 29991].
    assert llama2.encode("Hello world!") == [1, 15043, 3186, 29991]
    assert llama2.decode([1, 15043, 3186, 29991]) == "Hello world!"


def test_llama2_interface_has_no_bos_but_the_leading_space():
    tokenizer = get_tokenizer("llama2")
    assert tokenizer.encode("Hello world!") == [15043, 3186, 29991]
    assert tokenizer.count("Hello world!") == 3
    assert tokenizer.bos_id == 1
    assert tokenizer.vocab_size == 32000
    # "Hello" alone is the same token as inside a sentence: the dummy prefix space.
    assert tokenizer.pieces("Hello world!") == ["Hello", " world", "!"]
    assert tokenizer.decode(tokenizer.encode(" two  spaces")) == " two  spaces"


def test_llama2_byte_fallback(llama2):
    # The llama emoji is not in the vocabulary: four byte tokens <0xF0> <0x9F> <0xA6> <0x99>.
    ids = llama2.encode("🦙", add_bos=False)
    assert ids == [29871, 243, 162, 169, 156]
    assert [llama2.tokens[i] for i in ids[1:]] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]
    assert b"".join(llama2.token_bytes(i) for i in ids) == " 🦙".encode()


def test_llama2_vocab_keeps_carriage_returns(llama2):
    # Token 15231 is '",\r'; reading the file in text mode would have lost the \r.
    assert llama2.tokens[15231] == '",\r'
    assert llama2.tokens[613] == '",'
    assert len(set(llama2.tokens)) == 32000


def test_llama2_heap_and_rescan_merge_agree(llama2):
    """The two merge loops (short and long pieces) give the same ids."""
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyzéü0123456789 ▁.,\n#{}\"'镇"
    for _ in range(300):
        piece = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 90)))
        symbols = llama2._symbols(piece)
        assert llama2._merge(list(symbols)) == llama2._merge_heap(list(symbols)), piece


def test_llama2_long_text_without_spaces_uses_heap_and_matches_short_pieces(llama2):
    # 2,000 characters of one "word": one piece, merged by the heap.
    text = "ab" * 1000
    assert len(llama2.encode(text, add_bos=False)) < 2000
    assert llama2.decode(llama2.encode(text)) == text


def test_llama2_count_equals_length_of_encode(llama2):
    text = (TEXTS / "prose_de.txt").read_text(encoding="utf-8")
    assert llama2.count(text) == len(llama2.encode(text, add_bos=False))
    assert llama2.count("") == 0


# --------------------------------------------------------------------------- Llama 3


@pytest.mark.parametrize("case", LLAMA3_CASES, ids=_case_id)
def test_llama3_reproduces_package_tests(llama3, case):
    if case["kind"] == "encode":
        # The package parses special-token strings in the input as special tokens.
        ids = llama3.encode(case["input"], allowed_special="all")
        ids = [128000] * case["bos"] + ids + [128001] * case["eos"]
        assert ids == case["ids"]
    elif case["kind"] == "decode":
        assert llama3.decode(case["ids"]) == case["output"]
    else:  # optimistic_count: a package helper for unknown special tokens, not a tokenizer
        assert case["count"] == 37


def test_llama3_official_example():
    # "This is a test sentence." from Meta's Llama 3 repository, via the package tests.
    tokenizer = get_tokenizer("llama3")
    assert tokenizer.encode("This is a test sentence.") == [2028, 374, 264, 1296, 11914, 13]
    assert tokenizer.bos_id == 128000
    assert tokenizer.vocab_size == 128256


def test_llama3_interface_treats_special_token_text_as_plain_text():
    tokenizer = get_tokenizer("llama3")
    assert 128000 not in tokenizer.encode("<|begin_of_text|>")
    assert tokenizer.count("<|begin_of_text|>") > 1


def test_llama3_starts_with_cl100k_vocabulary():
    """Llama 3's first 100,256 tokens are cl100k_base's ordinary tokens, in the same order."""
    llama3 = get_tokenizer("llama3")
    cl100k = get_tokenizer("cl100k_base")
    assert all(llama3._token_bytes(i) == cl100k._token_bytes(i) for i in range(100_256))
    with pytest.raises(KeyError):  # where cl100k_base's ordinary tokens end
        cl100k._token_bytes(100_256)


# ------------------------------------------------------------------ against the packages


REFERENCE = json.loads((DATA / "reference_encodings.json").read_text(encoding="utf-8"))["texts"]


@pytest.mark.parametrize("file_name", sorted(REFERENCE))
@pytest.mark.parametrize("name", ["llama2", "llama3"])
def test_sample_texts_match_the_javascript_packages(file_name, name):
    path = TEXTS / file_name
    text = path.read_text(encoding="utf-8")
    entry = REFERENCE[file_name]
    assert hashlib.sha256(text.encode()).hexdigest() == entry["text_sha256"], (
        f"{file_name} changed; rerun scripts/build_llama_tokenizers.py")
    ids = get_tokenizer(name).encode(text)
    assert len(ids) == entry[name]["count"]
    assert hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest() == entry[name]["sha256"]


def test_every_sample_text_has_a_reference():
    texts = sorted(p.name for p in (TEXTS).glob("*.txt"))
    assert sorted(REFERENCE) == texts


def test_readme_lists_every_file_with_its_sha256():
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for path in DATA.iterdir():
        if path.name != "README.md":
            assert f"`{path.name}`" in readme
            assert hashlib.sha256(path.read_bytes()).hexdigest() in readme
    assert "Llama 2 Community License" in readme or "LLAMA 2 Community License" in readme


# ------------------------------------------------------------------ the one interface


@pytest.mark.parametrize("name", ALL)
def test_empty_text_is_zero_tokens_every_tokenizer(name):
    tokenizer = get_tokenizer(name)
    assert tokenizer.count("") == 0
    assert tokenizer.encode("") == []
    assert tokenizer.pieces("") == []
    assert tokenizer.decode([]) == ""


@pytest.mark.parametrize("name", ["llama2", "llama3"])
@pytest.mark.parametrize("bad", [b"hello", None, 42])
def test_llama_rejects_non_text(name, bad):
    with pytest.raises(TypeError, match="text"):
        get_tokenizer(name).count(bad)


@pytest.mark.parametrize("ids", [[32000], [-1], ["7"]])
def test_llama2_decode_rejects_ids_outside_the_vocabulary(ids):
    with pytest.raises(ValueError, match="ids"):
        get_tokenizer("llama2").decode(ids)


def test_bos_ids():
    assert get_tokenizer("llama2").bos_id == 1
    assert get_tokenizer("llama3").bos_id == 128000
    assert all(get_tokenizer(name).bos_id is None for name in TIKTOKEN_ENCODINGS)


def test_pieces_join_to_text_for_llama2_despite_the_prefix_space():
    tokenizer = get_tokenizer("llama2")
    assert "".join(tokenizer.pieces("ferry crossing")) == "ferry crossing"
    # A text starting with a newline: the first token is the prefix space alone.
    assert tokenizer.pieces("\nx")[0] == ""
