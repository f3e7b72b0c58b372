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

Today the registry holds OpenAI's four byte-level BPE encodings, run by
``tiktoken`` from the files bundled in ``inferlab/tiktoken_cache`` (no
network; see ``scripts/build_tiktoken_cache.py``). Other families, such as the
SentencePiece tokenizers of Llama 2 and 3, plug in by adding a loader to
``_LOADERS`` that builds a :class:`Tokenizer` from their own encode, decode and
token-bytes functions.

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

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

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

    Used in the tokenizers chapter.
    """

    name: str
    vocab_size: int
    family: str
    _encode: Callable[[str], list[int]] = field(repr=False, compare=False)
    _decode: Callable[[Sequence[int]], str] = field(repr=False, compare=False)
    _token_bytes: Callable[[int], bytes] = field(repr=False, compare=False)

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
        """The exact bytes of each token of ``text``; they join to its UTF-8."""
        return [self._token_bytes(token) for token in self.encode(text)]

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


# Registry name -> loader. A new family adds its names here.
_LOADERS: dict[str, Callable[[], Tokenizer]] = {
    name: functools.partial(_from_tiktoken, name) for name in TIKTOKEN_ENCODINGS
}


def available_tokenizers() -> tuple[str, ...]:
    """Names :func:`get_tokenizer` accepts, oldest first.

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
