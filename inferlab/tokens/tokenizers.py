"""One interface over the tokenizers the book compares.

A :class:`Tokenizer` turns text into integer token ids and back. Every
tokenizer, whatever library implements it, offers the same few methods, so a
chapter can loop over :func:`available_tokenizers` without caring which is
which:

- ``encode(text) -> list[int]`` and ``decode(ids) -> str``;
- ``count(text) -> int``, the number of tokens, which is what prices, context
  windows and tokens-per-second figures are measured in;
- ``pieces(text) -> list[str]`` and ``token_bytes(text) -> list[bytes]``, the
  text and the exact bytes of each token, for showing where the splits fall.

The registry holds six tokenizers, all read from files bundled with the
package (no network at run time):

- OpenAI's four byte-level BPE encodings, ``r50k_base``, ``p50k_base``,
  ``cl100k_base`` and ``o200k_base``, run by ``tiktoken`` from
  ``inferlab/tokens/tiktoken_cache`` (see ``scripts/build_tiktoken_cache.py``);
- ``llama2``: the Llama 1/2 SentencePiece BPE tokenizer (32,000 tokens, byte
  fallback), run by the pure-Python :mod:`inferlab.tokens.sentencepiece_bpe`;
- ``llama3``: the Llama 3 / 3.1 tokenizer (128,000 tokens plus 256 special),
  a byte-level BPE like OpenAI's, run by ``tiktoken``.

The two Llama tokenizers come from ``inferlab/tokens/tokenizer_data`` (see
``scripts/build_llama_tokenizers.py``). Another family plugs in by adding a
loader to ``_LOADERS`` that builds a :class:`Tokenizer` from its own encode,
decode and token-bytes functions.

Beginning-of-sequence token: ``encode`` and ``count`` never add one, so a count
is the tokens of the text itself. ``Tokenizer.bos_id`` says which id the
model's own tokenizer puts in front when asked to (Hugging Face's
``tokenizer.encode`` does by default, which is how LLMPerf counts it).

Leading space: SentencePiece tokenizers (``llama2``) write a space in front of
every text before cutting it (the "dummy prefix"), so ``"Hello"`` is one token
``"▁Hello"``, the same as the word inside a sentence. That space belongs to the
first token, and ``decode`` removes it again; ``token_bytes`` and ``pieces``
leave it out too, so the pieces still join to the text.

Special tokens: text is always encoded as *plain text*. A document that
contains the string ``"<|endoftext|>"`` is counted as the ordinary characters
``<``, ``|``, ``endoftext`` ... rather than as the one special token, and is
never an error (tiktoken's ``encode`` would refuse it by default). That is the
right count for user text sent to a model, and it is what
``tiktoken.Encoding.encode_ordinary`` does (tiktoken documents it as equivalent
to ``encode(text, disallowed_special=())``).

Used in the tokenizers chapter.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Folder of the bundled Llama tokenizer files (see its README.md).
TOKENIZER_DATA_DIR = Path(__file__).resolve().parent / "tokenizer_data"

# OpenAI's encodings, oldest first, with the models that use them (source: the
# model-to-encoding table in tiktoken's ``tiktoken/model.py``).
TIKTOKEN_ENCODINGS: dict[str, str] = {
    "r50k_base": "GPT-3 (davinci, curie, babbage, ada); same tokens as GPT-2",
    "p50k_base": "Codex, text-davinci-002 and -003",
    "cl100k_base": "GPT-3.5-turbo, GPT-4, text-embedding-ada-002 and -3",
    "o200k_base": "GPT-4o, GPT-4.1, GPT-5, o1, o3, o4-mini",
}


@dataclass(frozen=True)
class Tokenizer:
    """A tokenizer: text to token ids and back, the same way for every family.

    ``name`` is the registry name (e.g. ``"cl100k_base"``). ``vocab_size`` is
    the number of token ids, counted as one more than the largest id, special
    tokens included (tiktoken's ``n_vocab``); a few ids below it may be unused,
    e.g. 100261-100275 in cl100k_base. ``family`` names the algorithm and
    library (``"byte-level BPE (tiktoken)"``). The three callables are the
    backend's own functions, supplied by a loader: call the methods instead.
    ``bos_id`` is the beginning-of-sequence id the model's tokenizer can put
    in front (``None`` for OpenAI's encodings, which have none);
    ``prefix_space`` is True when the tokenizer writes a space before the text
    (SentencePiece's dummy prefix).

    Used in the tokenizers chapter.
    """

    name: str
    vocab_size: int
    family: str
    _encode: Callable[[str], list[int]] = field(repr=False, compare=False)
    _decode: Callable[[Sequence[int]], str] = field(repr=False, compare=False)
    _token_bytes: Callable[[int], bytes] = field(repr=False, compare=False)
    bos_id: int | None = None
    prefix_space: bool = False

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, special-token strings treated as plain text."""
        return self._encode(_checked_text(text))

    def count(self, text: str) -> int:
        """Number of tokens in ``text``: ``len(encode(text))``; 0 for ``""``.

        Calls the backend encoder directly (for tiktoken, ``encode_ordinary``,
        which is ``encode(text, disallowed_special=())``), so it costs the same
        as calling tiktoken yourself; see ``benchmarks/tokenizers.py``.
        """
        return len(self._encode(_checked_text(text)))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of the token ids ``ids``.

        Bytes that do not form whole UTF-8 characters (a sequence cut in the
        middle of a character) decode to U+FFFD, as tiktoken's ``decode`` does.
        An id that is not in the vocabulary raises ``ValueError``.
        """
        try:
            return self._decode(ids)
        except (KeyError, OverflowError, TypeError) as error:
            raise ValueError(
                f"ids must be token ids of {self.name} (0 to {self.vocab_size - 1}, "
                f"each assigned): {error}"
            ) from error

    def token_bytes(self, text: str) -> list[bytes]:
        """The exact bytes of each token of ``text``; they join to its UTF-8.

        For a tokenizer with ``prefix_space`` the first token's leading space
        (the dummy prefix, not part of the text) is left out, so a first token
        that is only that space has no bytes (``b""``).
        """
        pieces = [self._token_bytes(token) for token in self.encode(text)]
        if self.prefix_space and pieces and pieces[0].startswith(b" "):
            pieces[0] = pieces[0][1:]
        return pieces

    def pieces(self, text: str) -> list[str]:
        """The text of each token of ``text``, for showing where the splits fall.

        Byte-level tokenizers may cut a multi-byte UTF-8 character (a Chinese
        character is 3 bytes, most emoji 4) across tokens. Each token's bytes
        are decoded on their own with ``errors="replace"``, so a token holding
        part of a character shows U+FFFD ("\\ufffd", the replacement character)
        for the bytes it cannot complete. Hence ``"".join(pieces(text)) == text``
        exactly when no token splits a character; use :meth:`token_bytes` for
        the exact bytes.
        """
        return [piece.decode("utf-8", errors="replace") for piece in self.token_bytes(text)]


def _checked_text(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text


def _from_tiktoken(encoding_name: str) -> Tokenizer:
    """Wrap one of OpenAI's encodings, read offline from the bundled files."""
    import tiktoken  # after ``import inferlab`` has set TIKTOKEN_CACHE_DIR

    encoding = tiktoken.get_encoding(encoding_name)
    return Tokenizer(
        name=encoding_name,
        vocab_size=encoding.n_vocab,
        family="byte-level BPE (tiktoken)",
        _encode=encoding.encode_ordinary,
        _decode=encoding.decode,
        _token_bytes=encoding.decode_single_token_bytes,
    )


def _from_sentencepiece() -> Tokenizer:
    """Llama 1/2: the pure-Python SentencePiece BPE encoder."""
    from inferlab.tokens import sentencepiece_bpe

    model = sentencepiece_bpe.load()

    def encode(text: str) -> list[int]:
        return model.encode(text, add_bos=False)

    return Tokenizer(
        name="llama2",
        vocab_size=model.vocab_size,
        family="SentencePiece BPE, byte fallback (pure Python)",
        _encode=encode,
        _decode=model.decode,
        _token_bytes=model.token_bytes,
        bos_id=sentencepiece_bpe.BOS_ID,
        prefix_space=True,
    )


def llama3_encoding(data_dir: Path | str | None = None):
    """The Llama 3 / 3.1 tokenizer as a ``tiktoken.Encoding``.

    Llama 3 is a byte-level BPE of the same kind as OpenAI's (its merge order is
    the rank order of the tokens it makes; ``scripts/build_llama_tokenizers.py``
    checks this), so tiktoken runs it from ``llama3.tiktoken`` (rank = token id),
    the split regex and the 256 special tokens in ``llama3.json``.

    Used in chapter 'Tokenizers'.
    """
    import tiktoken

    folder = Path(data_dir) if data_dir is not None else TOKENIZER_DATA_DIR
    meta = json.loads((folder / "llama3.json").read_text(encoding="utf-8"))
    ranks = {}
    for line in (folder / "llama3.tiktoken").read_bytes().splitlines():
        token, rank = line.split(b" ")
        ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name="llama3",
        pat_str=meta["pat_str"],
        mergeable_ranks=ranks,
        special_tokens=meta["special_tokens"],
    )


def _from_llama3() -> Tokenizer:
    encoding = llama3_encoding()
    return Tokenizer(
        name="llama3",
        vocab_size=encoding.n_vocab,
        family="byte-level BPE (tiktoken)",
        _encode=encoding.encode_ordinary,
        _decode=encoding.decode,
        _token_bytes=encoding.decode_single_token_bytes,
        bos_id=encoding.encode_single_token("<|begin_of_text|>"),
    )


#: The models that use each Llama tokenizer, from Meta's model cards.
LLAMA_TOKENIZERS: dict[str, str] = {
    "llama2": "Llama 1 and Llama 2 (and LLMPerf's counter for every model)",
    "llama3": "Llama 3, 3.1, 3.2 and 3.3",
}

# Registry name -> loader. A new family adds its names here.
_LOADERS: dict[str, Callable[[], Tokenizer]] = {
    **{name: functools.partial(_from_tiktoken, name) for name in TIKTOKEN_ENCODINGS},
    "llama2": _from_sentencepiece,
    "llama3": _from_llama3,
}


def available_tokenizers() -> tuple[str, ...]:
    """Names :func:`get_tokenizer` accepts: OpenAI's oldest first, then Llama 2 and 3.

    Used in the tokenizers chapter.
    """
    return tuple(_LOADERS)


def get_tokenizer(name: str) -> Tokenizer:
    """The tokenizer called ``name`` (one of :func:`available_tokenizers`).

    Loaded once per process and then reused. An unknown name raises
    ``ValueError`` listing the allowed names.

    Used in the tokenizers chapter.
    """
    if not isinstance(name, str) or name not in _LOADERS:
        allowed = ", ".join(_LOADERS)
        raise ValueError(f"name must be one of {allowed}; got {name!r}")
    return _load(name)


@functools.cache
def _load(name: str) -> Tokenizer:
    return _LOADERS[name]()
