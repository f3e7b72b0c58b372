"""The lab server's tokenizer as a Hugging Face ``tokenizer.json``, so that tools which
count tokens with a Hugging Face tokenizer (AIPerf, guidellm) count the server's own.
Used by :mod:`inferlab.lab.server` and the endpoint lab's live tests.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from inferlab.common import checks


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-to-character table: the character that stands for each byte 0-255.

    Printable Latin-1 bytes stand for themselves; the rest (controls, space,
    ...) take the characters from U+0100 upwards, in byte order. Hugging Face's
    byte-level BPE writes its vocabulary in these characters.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, spare = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + spare)
            spare += 1
    return [table[byte] for byte in range(256)]


def _oniguruma(pattern: str) -> str:
    """tiktoken's regex in the dialect of Hugging Face's regex engine (Oniguruma).

    tiktoken writes ``\\p{N}{1,3}+``, a possessive "one to three digits"; in
    Oniguruma ``{1,3}+`` means "one or more runs of one to three", which
    would keep a long number in one piece. Nothing follows it in its
    alternative, so the plain ``{1,3}`` matches the same.
    """
    return pattern.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")


def hf_tokenizer_json(tokenizer: str = "cl100k_base") -> dict:
    """One of the book's tiktoken encodings as a Hugging Face ``tokenizer.json`` (a dict).

    tiktoken's byte-level BPE merges, at every step, the adjacent pair whose
    concatenation has the lowest rank. Hugging Face's BPE merges the pair with
    the lowest merge rank. Listing, for every token, each split into two
    tokens ``(a, b)`` with the token's own rank as the merge's rank makes the
    two choose the same pair, so they cut text identically (the tests check
    this against tiktoken). The pre-tokenizer is the encoding's own regex. No
    special tokens are added: the book encodes every text as plain text (see
    :mod:`inferlab.tokens.tokenizers`), so ``"<|endoftext|>"`` in a prompt is counted
    as its characters by both. Built in a few seconds from the
    bundled vocabulary, so nothing is downloaded. Raises ``ValueError`` for a
    tokenizer that is not a tiktoken encoding.
    """
    from inferlab.tokens.tokenizers import TIKTOKEN_ENCODINGS

    if tokenizer not in TIKTOKEN_ENCODINGS:
        raise ValueError(f"tokenizer: got {tokenizer!r}; must be one of "
                         f"{sorted(TIKTOKEN_ENCODINGS)} (a tiktoken encoding)")
    import tiktoken

    encoding = tiktoken.get_encoding(tokenizer)
    ranks: dict[bytes, int] = encoding._mergeable_ranks
    alphabet = _byte_alphabet()

    def spell(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    vocab = {spell(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], spell(left), spell(right)))
    merges.sort()
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": _oniguruma(encoding._pat_str)},
             "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[left, right] for *_, left, right in merges]},
    }


@functools.cache
def _tokenizer_json_text(tokenizer: str) -> str:
    # Rebuilding the merges of a 100k-token vocabulary takes seconds; a lab writes the
    # folder for each server it starts.
    return json.dumps(hf_tokenizer_json(tokenizer))


def write_tokenizer_dir(path, tokenizer: str = "cl100k_base",
                        context_tokens: int = 2048) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` for the server's tokenizer.

    The folder is what ``AutoTokenizer.from_pretrained(path)`` reads offline,
    so AIPerf (``--tokenizer path``) and guidellm (``--processor path``) count
    tokens exactly as this server does. No BOS token is added (tiktoken
    encodings have none). Returns the folder's path. Used in the endpoint lab.
    """
    context_tokens = checks.whole("context_tokens", context_tokens)
    text = _tokenizer_json_text(checks.text("tokenizer", tokenizer))
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(text, encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": context_tokens,
              "bos_token": None, "eos_token": None, "add_bos_token": False,
              "add_eos_token": False, "clean_up_tokenization_spaces": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1),
                                                  encoding="utf-8")
    return folder


