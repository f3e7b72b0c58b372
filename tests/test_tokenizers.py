"""Tests for ``inferlab.tokens.tokenizers`` and the bundled tiktoken files.

The offline test runs a fresh Python with ``TIKTOKEN_CACHE_DIR`` unset, an
unreachable proxy, and ``tiktoken.load.read_file`` (tiktoken's only download
path) replaced by a function that raises, so it passes only if every encoding
is read from ``inferlab/tokens/tiktoken_cache``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import inferlab
from inferlab.tokens.tokenizers import available_tokenizers, get_tokenizer

NAMES = ("r50k_base", "p50k_base", "cl100k_base", "o200k_base")

# tiktoken's n_vocab: largest token id + 1, special tokens included.
VOCAB_SIZES = {"r50k_base": 50257, "p50k_base": 50281, "cl100k_base": 100277, "o200k_base": 200019}

# "hello world": published in tiktoken's tests/test_encoding.py (r50k, p50k,
# cl100k) and in openai/harmony's tests (o200k).
HELLO_WORLD = {
    "r50k_base": [31373, 995],
    "p50k_base": [31373, 995],
    "cl100k_base": [15339, 1917],
    "o200k_base": [24912, 2375],
}

# Computed with the bundled (sha256-verified) files and frozen here. The eight
# spaces are where p50k_base differs from r50k_base: it added whitespace-run
# tokens for code (50262 is eight spaces).
CODE = "def f(x):\n        return x  # 8 spaces"
CODE_IDS = {
    "r50k_base": [4299, 277, 7, 87, 2599, 198, 220, 220, 220, 220, 220, 220, 220, 1441, 2124,
                  220, 1303, 807, 9029],
    "p50k_base": [4299, 277, 7, 87, 2599, 198, 50262, 1441, 2124, 220, 1303, 807, 9029],
    "cl100k_base": [755, 282, 2120, 997, 286, 471, 865, 220, 674, 220, 23, 12908],
    "o200k_base": [1314, 285, 4061, 1883, 309, 622, 1215, 220, 1069, 220, 23, 18608],
}  # fmt: skip

ROUND_TRIP = {
    "ascii": "The quick brown fox jumps over the lazy dog. 0123456789 !@#$%^&*()",
    "chinese": "你好，世界。大型语言模型的推理速度",
    "emoji": "tokens 👋🏽🙂🚀 and a family 👨‍👩‍👧",
    "leading space and newline": " indented\n\tline\n",
    "special-token text": "before <|endoftext|> <s> after",
}

_OFFLINE_CHILD = """
import json, os, sys
import tiktoken.load

def no_download(blobpath):
    raise RuntimeError(f"tiktoken tried to download {blobpath}")

tiktoken.load.read_file = no_download
import inferlab, tiktoken

out = {"cache_dir": os.environ.get("TIKTOKEN_CACHE_DIR")}
for name in sys.argv[1:]:
    enc = tiktoken.get_encoding(name)
    out[name] = {"hello": enc.encode("hello world"), "n_vocab": enc.n_vocab}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def offline_run() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR",)}
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-c", _OFFLINE_CHILD, *NAMES],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_import_points_tiktoken_at_bundled_cache(offline_run):
    assert Path(offline_run["cache_dir"]) == inferlab.TIKTOKEN_CACHE_DIR


@pytest.mark.parametrize("name", NAMES)
def test_encoding_loads_offline_in_fresh_process(offline_run, name):
    assert offline_run[name] == {"hello": HELLO_WORLD[name], "n_vocab": VOCAB_SIZES[name]}


@pytest.mark.parametrize("name", NAMES)
def test_encoding_loads_offline_in_process(monkeypatch, name):
    """Re-read the file with tiktoken's in-process registry emptied."""
    import tiktoken.load
    import tiktoken.registry

    def no_download(blobpath):
        raise AssertionError(f"tiktoken tried to download {blobpath}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(inferlab.TIKTOKEN_CACHE_DIR))
    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    assert tiktoken.get_encoding(name).encode("hello world") == HELLO_WORLD[name]


def _tiktoken_source(monkeypatch, name: str) -> tuple[str, str]:
    """(URL, expected sha256) that the installed tiktoken uses for ``name``."""
    from tiktoken_ext import openai_public

    seen = {}

    def record(url, expected_hash=None):
        seen.update(url=url, sha256=expected_hash)
        raise LookupError("recorded")

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", record)
    with pytest.raises(LookupError, match="recorded"):
        openai_public.ENCODING_CONSTRUCTORS[name]()
    return seen["url"], seen["sha256"]


@pytest.mark.parametrize("name", NAMES)
def test_bundled_file_has_tiktokens_expected_sha256(monkeypatch, name):
    url, expected = _tiktoken_source(monkeypatch, name)
    path = inferlab.TIKTOKEN_CACHE_DIR / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == expected
    readme = (inferlab.TIKTOKEN_CACHE_DIR / "README.md").read_text(encoding="utf-8")
    assert path.name in readme and expected in readme


def test_available_tokenizers():
    # OpenAI's four, oldest first, then the Llama tokenizers (tests/test_llama_tokenizers.py).
    assert available_tokenizers() == (*NAMES, "llama2", "llama3")


@pytest.mark.parametrize("name", NAMES)
def test_known_token_ids(name):
    tokenizer = get_tokenizer(name)
    assert tokenizer.encode("hello world") == HELLO_WORLD[name]
    assert tokenizer.encode(CODE) == CODE_IDS[name]
    assert tokenizer.count(CODE) == len(CODE_IDS[name])
    assert tokenizer.decode(CODE_IDS[name]) == CODE


@pytest.mark.parametrize("name", NAMES)
def test_vocab_size(name):
    tokenizer = get_tokenizer(name)
    assert tokenizer.name == name
    assert tokenizer.vocab_size == VOCAB_SIZES[name]


@pytest.mark.parametrize("name", available_tokenizers())
@pytest.mark.parametrize("kind", ROUND_TRIP)
def test_round_trip_every_tokenizer(name, kind):
    tokenizer = get_tokenizer(name)
    text = ROUND_TRIP[kind]
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.count(text) == len(ids)
    assert b"".join(tokenizer.token_bytes(text)) == text.encode("utf-8")
    assert len(tokenizer.pieces(text)) == len(ids)


@pytest.mark.parametrize("name", NAMES)
def test_special_token_text_is_counted_as_plain_text(name):
    tokenizer = get_tokenizer(name)
    # As plain text "<|endoftext|>" is several ordinary tokens, never the special one.
    assert tokenizer.count("<|endoftext|>") > 1


def test_pieces_ascii_join_to_text():
    tokenizer = get_tokenizer("cl100k_base")
    assert tokenizer.pieces("hello world") == ["hello", " world"]


def test_pieces_mark_split_characters_with_replacement_character():
    # r50k_base cuts "好" (3 UTF-8 bytes) across two tokens.
    tokenizer = get_tokenizer("r50k_base")
    pieces = tokenizer.pieces("你好")
    assert len(pieces) == len(tokenizer.encode("你好"))
    assert "\ufffd" in "".join(pieces)
    assert all(isinstance(piece, str) for piece in pieces)


def test_unknown_name_names_it_and_the_allowed_names():
    with pytest.raises(ValueError, match="gpt-17") as error:
        get_tokenizer("gpt-17")
    assert "cl100k_base" in str(error.value)


@pytest.mark.parametrize("name", NAMES)
def test_empty_text_is_zero_tokens(name):
    tokenizer = get_tokenizer(name)
    assert tokenizer.count("") == 0
    assert tokenizer.encode("") == []
    assert tokenizer.pieces("") == []
    assert tokenizer.decode([]) == ""


@pytest.mark.parametrize("bad", [b"hello", None, 42, ["hello"]])
@pytest.mark.parametrize("method", ["encode", "count", "pieces", "token_bytes"])
def test_non_str_text_is_rejected(method, bad):
    tokenizer = get_tokenizer("cl100k_base")
    with pytest.raises(TypeError, match="text"):
        getattr(tokenizer, method)(bad)


@pytest.mark.parametrize("ids", [[10**7], [100265], [-1]])
def test_decode_rejects_ids_outside_the_vocabulary(ids):
    with pytest.raises(ValueError, match="ids"):
        get_tokenizer("cl100k_base").decode(ids)


def test_tokenizer_is_loaded_once():
    assert get_tokenizer("o200k_base") is get_tokenizer("o200k_base")
