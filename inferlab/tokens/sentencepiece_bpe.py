"""The Llama 1/2 tokenizer: SentencePiece BPE with byte fallback, in pure Python.

Llama 1 and Llama 2 share one tokenizer of 32,000 tokens, trained with
SentencePiece's BPE algorithm (Touvron et al., 2023). This module
reproduces, id for id, the encoder of the npm package ``llama-tokenizer-js``
1.2.2 (itself a port of Hugging Face's ``LlamaTokenizerFast``), which is what
LLMPerf counts every model's output with. It encodes a text in four steps:

1. Put a space in front of the text (SentencePiece's "dummy prefix") and write
   every space as "▁" (U+2581), so ``"Hello world"`` becomes ``"▁Hello▁world"``.
2. Turn each character into the token of that one character, or, if the
   vocabulary has no such token (an emoji, a newline, a rare character), into
   one byte token ``<0xNN>`` per UTF-8 byte: the *byte fallback*, ids 3-258.
3. Merge adjacent tokens by the merge list: always the highest-priority merge
   present, and among equal ones the leftmost, until no merge applies.
4. Optionally put the beginning-of-sequence token ``<s>`` (id 1) in front.

Speed: step 3 never joins a character to a "▁" that follows it (no token in
the vocabulary has "▁" after another character; the build script checks it),
so a text can be cut before each run of "▁" and every piece encoded on its own.
Pieces repeat (words), so each is encoded once per tokenizer and then looked
up: a large English text costs little more than one dictionary look-up per
word. See ``benchmarks/tokenizers.py``.

The data (``inferlab/tokens/tokenizer_data/llama2.*``) is Meta's Llama 2 vocabulary,
converted by ``scripts/build_llama_tokenizers.py``; see the README there for
sources and licenses (Llama 2 Community License).

Used in chapter 'Tokenizers'.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Sequence
from pathlib import Path

from inferlab.common import checks

DATA_DIR = Path(__file__).resolve().parent / "tokenizer_data"

#: Ids of the special tokens and of the first byte-fallback token.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
FIRST_BYTE_ID = 3

SPACE = "▁"  # U+2581, SentencePiece's visible space
_PIECE = re.compile(f"{SPACE}+[^{SPACE}]*|[^{SPACE}]+")

# Below this many symbols a piece is merged by rescanning its pairs (fast for
# words); above it, by a heap (fast for long runs of text without spaces).
_HEAP_ABOVE = 48


class SentencePieceBPE:
    """A SentencePiece BPE tokenizer with byte fallback (the Llama 1/2 kind).

    ``tokens[i]`` is the string of token ``i`` ("▁" for a space, ``<0xNN>`` for
    byte tokens); ``merges`` lists ``(left_id, right_id)`` pairs, highest
    priority first. Build one with :func:`load`.

    Used in chapter 'Tokenizers'.
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[tuple[int, int]]) -> None:
        self.tokens = tuple(checks.text("tokens", token, empty=True) for token in tokens)
        if not self.tokens:
            raise ValueError("tokens: give at least one token")
        merges = checks.wholes("merges", merges, minimum=0, maximum=len(self.tokens) - 1,
                               empty=True)
        if merges.size and (merges.ndim != 2 or merges.shape[1] != 2):
            raise ValueError(f"merges: shape {merges.shape}; give (left_id, right_id) pairs")
        index = {token: i for i, token in enumerate(self.tokens)}
        unknown = [(left, right) for left, right in merges.tolist()
                   if self.tokens[left] + self.tokens[right] not in index]
        if unknown:
            raise ValueError(f"merges: {unknown[0]} joins two tokens into one that is not in "
                             f"tokens ({len(unknown):,} such pairs)")
        # Single characters that have a token of their own.
        self._char_id = {token: i for token, i in index.items() if len(token) == 1}
        # (left, right) -> (priority, merged id); smaller priority merges first.
        self._merges = {
            (left, right): (rank, index[self.tokens[left] + self.tokens[right]])
            for rank, (left, right) in enumerate(merges.tolist())
        }
        self._bytes = tuple(self._token_bytes(i) for i in range(len(self.tokens)))
        self._cache: dict[str, tuple[int, ...]] = {}

    def clear_cache(self) -> None:
        """Forget the cached ids of every piece seen so far (for timing a first pass)."""
        self._cache.clear()

    @property
    def vocab_size(self) -> int:
        """Number of token ids (32,000 for Llama 2)."""
        return len(self.tokens)

    def _token_bytes(self, token_id: int) -> bytes:
        if FIRST_BYTE_ID <= token_id < FIRST_BYTE_ID + 256:
            return bytes([token_id - FIRST_BYTE_ID])
        return self.tokens[token_id].replace(SPACE, " ").encode("utf-8")

    def _symbols(self, piece: str) -> list[int]:
        """Step 2: one token per character, or its UTF-8 bytes as byte tokens."""
        char_id = self._char_id
        ids: list[int] = []
        for char in piece:
            token = char_id.get(char)
            if token is not None:
                ids.append(token)
            else:
                ids.extend(FIRST_BYTE_ID + byte for byte in char.encode("utf-8"))
        return ids

    def _merge(self, ids: list[int]) -> list[int]:
        """Step 3 for a short list: rescan all pairs after each merge."""
        merges = self._merges
        while len(ids) > 1:
            best = None
            at = -1
            for i in range(len(ids) - 1):
                found = merges.get((ids[i], ids[i + 1]))
                if found is not None and (best is None or found[0] < best[0]):
                    best, at = found, i
            if best is None:
                break
            ids[at : at + 2] = [best[1]]
        return ids

    def _merge_heap(self, ids: list[int]) -> list[int]:
        """Step 3 for a long list: a heap of candidate pairs over a linked list.

        Pops the pair with the smallest (priority, original position of its left
        token), as llama-tokenizer-js does; entries made stale by an earlier
        merge are recognised because a merged node's token always changes.
        """
        merges = self._merges
        n = len(ids)
        token = list(ids)
        after = [*range(1, n), -1]
        before = list(range(-1, n - 1))
        alive = [True] * n
        heap = []
        for i in range(n - 1):
            found = merges.get((token[i], token[i + 1]))
            if found is not None:
                heap.append((found[0], i, token[i], token[i + 1]))
        heapq.heapify(heap)
        while heap:
            _, i, left, right = heapq.heappop(heap)
            j = after[i]
            if not alive[i] or token[i] != left or j < 0 or token[j] != right:
                continue
            token[i] = merges[left, right][1]
            alive[j] = False
            after[i] = after[j]
            if after[j] >= 0:
                before[after[j]] = i
            p, k = before[i], after[i]
            if p >= 0 and (found := merges.get((token[p], token[i]))) is not None:
                heapq.heappush(heap, (found[0], p, token[p], token[i]))
            if k >= 0 and (found := merges.get((token[i], token[k]))) is not None:
                heapq.heappush(heap, (found[0], i, token[i], token[k]))
        out = []
        i = 0
        while i >= 0:
            out.append(token[i])
            i = after[i]
        return out

    def encode_piece(self, piece: str) -> tuple[int, ...]:
        """Token ids of one piece (a run of "▁" and the characters up to the next).

        The core of the encoder, cached per piece; :meth:`encode` calls it once
        per piece of the text.
        """
        cached = self._cache.get(piece)
        if cached is None:
            symbols = self._symbols(piece)
            if len(symbols) <= _HEAP_ABOVE:
                merged = self._merge(symbols)
            else:
                merged = self._merge_heap(symbols)
            cached = self._cache[piece] = tuple(merged)
        return cached

    def encode(self, text: str, add_bos: bool = True,
               add_preceding_space: bool = True) -> list[int]:
        """Token ids of ``text``, as ``llamaTokenizer.encode(text, add_bos, add_preceding_space)``.

        The defaults match the package (and Hugging Face's ``tokenizer.encode``):
        ``<s>`` first and the dummy-prefix space. The empty text has no tokens,
        not even ``<s>``, as in the package.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            return []
        if add_preceding_space:
            text = " " + text
        ids = [BOS_ID] if add_bos else []
        encode_piece = self.encode_piece
        for piece in _PIECE.findall(text.replace(" ", SPACE)):
            ids.extend(encode_piece(piece))
        return ids

    def count(self, text: str) -> int:
        """``len(encode(text, add_bos=False))`` without building the list."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            return 0
        encode_piece = self.encode_piece
        return sum(len(encode_piece(piece)) for piece in _PIECE.findall(
            (" " + text).replace(" ", SPACE)))

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token: a space for each "▁"; one byte for ``<0xNN>``."""
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"token id must be an int, got {type(token_id).__name__}")
        if not 0 <= token_id < len(self._bytes):
            raise KeyError(token_id)
        return self._bytes[token_id]

    def decode(self, ids: Sequence[int], skip_bos: bool = True,
               remove_preceding_space: bool = True) -> str:
        """Text of ``ids``, as ``llamaTokenizer.decode(ids, skip_bos, remove_preceding_space)``.

        A leading ``<s>`` is dropped when ``skip_bos``; other special tokens
        decode to their text (``"<s>"``). Byte tokens are joined into UTF-8 and
        bytes that do not form a character become U+FFFD. With
        ``remove_preceding_space`` one leading space (the dummy prefix) is removed.
        """
        ids = list(ids)
        if skip_bos and ids[:1] == [BOS_ID]:
            ids = ids[1:]
        text = b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")
        if remove_preceding_space and text.startswith(" "):
            text = text[1:]
        return text


def _read(data_dir: Path, name: str) -> tuple[list[str], list[tuple[int, int]]]:
    vocab_path = data_dir / f"{name}.vocab"
    merges_path = data_dir / f"{name}.merges"
    # Bytes, split on "\n" only: some tokens hold a "\r" (id 15231 is '",\r'), which
    # text-mode reading would turn into "\n", and str.splitlines would split on it.
    tokens = vocab_path.read_bytes().decode("utf-8").split("\n")[:-1]
    merges = []
    for line in merges_path.read_text(encoding="ascii").split("\n")[:-1]:
        left, right = line.split(" ")
        merges.append((int(left), int(right)))
    return tokens, merges


def load(data_dir: Path | str | None = None, name: str = "llama2") -> SentencePieceBPE:
    """The tokenizer stored as ``<name>.vocab`` and ``<name>.merges`` in ``data_dir``.

    ``data_dir`` defaults to the bundled ``inferlab/tokens/tokenizer_data``; the result
    for the default is built once per process.

    Used in chapter 'Tokenizers'.
    """
    folder = DATA_DIR if data_dir is None else Path(data_dir)
    checks.text("name", name)
    if not (folder / f"{name}.vocab").is_file() or not (folder / f"{name}.merges").is_file():
        stored = sorted(path.stem for path in folder.glob("*.merges"))
        raise ValueError(f"name: no tokenizer {name!r} in {folder}; give one of "
                         f"{', '.join(stored) or 'none (the folder holds no .merges file)'}")
    if data_dir is None:
        return _load_bundled(name)
    return SentencePieceBPE(*_read(folder, name))


@functools.cache
def _load_bundled(name: str) -> SentencePieceBPE:
    return SentencePieceBPE(*_read(DATA_DIR, name))
