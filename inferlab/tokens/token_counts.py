"""Whose token is it? Counting text, and converting speeds between tokenizers.

A "token" is whatever a model's tokenizer cuts, so "tokens per second" from two
models with different tokenizers measure different amounts of text. This
module holds the arithmetic the tokenizers chapter uses to make them comparable:

- :func:`load_texts` and :func:`count_tokens`: the book's sample texts (prose
  in eight languages, code, JSON, numbers) counted by every tokenizer, as a
  tidy table of tokens per word, per character and per unit of content;
- :func:`convert_rate`: the same text's speed in another tokenizer's tokens,
  ``tok/s in B = tok/s in A x tokens_B / tokens_A``;
- :func:`chars_per_second`: a speed that needs no tokenizer at all;
- :func:`llmperf_rate`: what LLMPerf reports for a model when it counts the
  model's output with the Llama 2 tokenizer, beginning-of-sequence token included;
- :func:`reading_tokens_per_s`: a reading speed in words per minute, as tokens
  per second;
- :func:`compare_pieces` and the ``tok_pieces`` explorer: one text cut by
  several tokenizers, side by side.

Bad numbers raise ``ValueError`` naming the argument, the value and what is
allowed. Used in chapter 'Tokenizers'.
"""

from __future__ import annotations

import csv
import html
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from inferlab.benchmark.mlperf import MLPERF_LLAMA2_70B_BOUNDS
from inferlab.common import checks
from inferlab.common.data import DATA_DIR
from inferlab.tokens.tokenizers import available_tokenizers, get_tokenizer

TEXTS_DIR = DATA_DIR / "texts"

#: Columns of ``data/texts/manifest.csv``, in file order.
MANIFEST_COLUMNS = (
    "file", "kind", "language", "script", "spaces_between_words", "parallel_to",
    "origin", "license", "source",
)
TEXT_KINDS = ("prose", "code", "json", "numbers")

#: Reading speed the MLPerf Inference latency bound was anchored to (words per minute).
READING_WPM = 240.0
#: MLPerf Inference's Server bound on time per output token for Llama 2 70B, in
#: seconds (:mod:`inferlab.benchmark.mlperf`).
MLPERF_SERVER_TPOT_S = MLPERF_LLAMA2_70B_BOUNDS["Server"][1]


# --------------------------------------------------------------------------- checks


def _tokenizer_names(tokenizers: Sequence[str] | None) -> tuple[str, ...]:
    allowed = available_tokenizers()
    if tokenizers is None:
        return allowed
    if isinstance(tokenizers, str):
        tokenizers = (tokenizers,)
    names = tuple(tokenizers)
    if not names:
        raise ValueError(f"tokenizers: choose at least one of {', '.join(allowed)}")
    for name in names:
        if name not in allowed:
            raise ValueError(f"tokenizers: {name!r} is not one of {', '.join(allowed)}")
    return names


# --------------------------------------------------------------------------- texts


def load_texts(texts_dir: Path | str | None = None) -> pd.DataFrame:
    """The sample texts listed in ``data/texts/manifest.csv``, with their contents.

    One row per file: the manifest's columns (kind, language, script, whether
    words are separated by spaces, the file it translates, origin, license,
    source) plus ``text``, the file read as UTF-8. Raises ``ValueError`` naming
    the manifest line and column for a missing column, an unknown kind, a
    missing file or a ``parallel_to`` that names no listed file.

    Used in chapter 'Tokenizers'.
    """
    folder = Path(texts_dir) if texts_dir is not None else TEXTS_DIR
    manifest = folder / "manifest.csv"
    if not manifest.is_file():
        raise ValueError(f"texts_dir: {manifest} not found")
    with manifest.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{manifest}: missing column(s) {', '.join(missing)}")
        rows = list(reader)
    files = {row["file"] for row in rows}
    for line, row in enumerate(rows, start=2):
        where = f"{manifest}, line {line}"
        if row["kind"] not in TEXT_KINDS:
            raise ValueError(f"{where}, column 'kind': {row['kind']!r} is not one of "
                             f"{', '.join(TEXT_KINDS)}")
        if row["spaces_between_words"] not in ("yes", "no"):
            raise ValueError(f"{where}, column 'spaces_between_words': must be yes or no")
        if row["parallel_to"] and row["parallel_to"] not in files:
            raise ValueError(f"{where}, column 'parallel_to': {row['parallel_to']!r} is "
                             "not a listed file")
        path = folder / row["file"]
        if not path.is_file():
            raise ValueError(f"{where}, column 'file': {path} not found")
        row["text"] = path.read_text(encoding="utf-8")
        if not row["text"].strip():
            raise ValueError(f"{where}, column 'file': {path} is empty")
    return pd.DataFrame(rows, columns=[*MANIFEST_COLUMNS, "text"])


def word_count(text: str) -> int:
    """Words separated by white space (``len(text.split())``).

    Meaningful for languages that put spaces between words; Chinese and
    Japanese do not, which is why :func:`count_tokens` compares translations
    by the word count of their English original instead.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return len(text.split())


def count_tokens(texts: pd.DataFrame | None = None,
                 tokenizers: Sequence[str] | None = None, *, progress=None) -> pd.DataFrame:
    """Tokens of each text under each tokenizer, as a tidy table.

    One row per (text, tokenizer) with columns ``file, kind, language,
    tokenizer, vocab_size, chars, words, tokens`` and the ratios

    - ``tokens_per_word`` = tokens / words (NaN where words are not separated
      by spaces);
    - ``tokens_per_char`` = tokens / chars and ``chars_per_token`` = chars / tokens
      (characters are Unicode code points);
    - ``tokens_per_source_word`` = tokens / words of the English original, for
      a text and its translations: the tokens it takes to say one English
      word's worth of the same content (for other texts, ``tokens_per_word``);
    - ``tokens_vs_source`` = tokens / tokens of the English original under the
      same tokenizer (1 for the original, NaN for texts without one).

    ``texts`` defaults to :func:`load_texts`; ``tokenizers`` to all of
    :func:`inferlab.tokens.tokenizers.available_tokenizers`. ``progress`` draws a bar over the
    tokenizers in a notebook (pass :func:`inferlab.pages.progress.progress`; ``None`` shows
    nothing).

    Used in chapter 'Tokenizers'.
    """
    frame = load_texts() if texts is None else texts
    names = _tokenizer_names(tokenizers)
    # The English original of each text: what it translates, or itself if others
    # translate it; None for a text that is neither.
    translated = {row.parallel_to for row in frame.itertuples() if row.parallel_to}
    original = {
        row.file: row.parallel_to or (row.file if row.file in translated else None)
        for row in frame.itertuples()
    }
    words = {
        row.file: word_count(row.text) if row.spaces_between_words == "yes" else math.nan
        for row in frame.itertuples()
    }
    tokens = {
        (row.file, name): get_tokenizer(name).count(row.text)
        for name in checks.shown("progress", progress, names,
                                 label="Counting tokens, one tokenizer at a time")
        for row in frame.itertuples()
    }
    records = []
    for name in names:
        for row in frame.itertuples():
            source = original[row.file]
            count = tokens[row.file, name]
            per_word = count / words[row.file]
            records.append({
                "file": row.file, "kind": row.kind, "language": row.language,
                "tokenizer": name, "vocab_size": get_tokenizer(name).vocab_size,
                "chars": len(row.text), "words": words[row.file], "tokens": count,
                "tokens_per_word": per_word,
                "tokens_per_char": count / len(row.text),
                "chars_per_token": len(row.text) / count,
                "tokens_per_source_word": count / words[source] if source else per_word,
                "tokens_vs_source": count / tokens[source, name] if source else math.nan,
            })
    return pd.DataFrame.from_records(records)


def token_ratio(counts: pd.DataFrame, numerator: str, denominator: str) -> pd.Series:
    """tokens under ``numerator`` / tokens under ``denominator``, per file.

    ``counts`` is a table from :func:`count_tokens`. The ratio is the factor
    that :func:`convert_rate` multiplies by to turn a speed in the
    denominator's tokens into the numerator's, for that kind of text.

    Used in chapter 'Tokenizers'.
    """
    names = set(counts["tokenizer"])
    for argument, name in (("numerator", numerator), ("denominator", denominator)):
        if name not in names:
            raise ValueError(f"{argument}: {name!r} is not in counts; it has "
                             f"{', '.join(sorted(names))}")
    pivot = counts.pivot(index="file", columns="tokenizer", values="tokens")
    return pivot[numerator] / pivot[denominator]


# ------------------------------------------------------------------ speed arithmetic


def convert_rate(tok_s: float, tokens_from: float, tokens_to: float) -> float:
    """A speed in one tokenizer's tokens, expressed in another's.

    Formula: ``tok_s x tokens_to / tokens_from``, where ``tokens_from`` and
    ``tokens_to`` count the *same text* with the tokenizer the speed was
    measured in and the one wanted. The text per second is the same; only the
    unit changes. Assumption: the ratio of the sample text holds for the text
    the model generated (it depends on language and kind of text).

    Used in chapter 'Tokenizers'.
    """
    rate = (checks.positive("tok_s", tok_s) * checks.positive("tokens_to", tokens_to)
            / checks.positive("tokens_from", tokens_from))
    return checks.finite_result(rate, "tok_s", "tokens_to", "tokens_from")


def chars_per_second(tok_s: float, chars_per_token: float) -> float:
    """A tokenizer-free speed: characters of text per second.

    Formula: ``tok_s x chars_per_token``, with ``chars_per_token`` measured for
    the tokenizer the speed counts in, on text like the model's output.

    Used in chapter 'Tokenizers'.
    """
    rate = checks.positive("tok_s", tok_s) * checks.positive("chars_per_token", chars_per_token)
    return checks.finite_result(rate, "tok_s", "chars_per_token")


def llmperf_rate(own_tok_s: float, own_tokens: int, llama2_tokens: int,
                 count_bos: bool = True) -> float:
    """The tokens per second LLMPerf reports for a model, from its true rate.

    LLMPerf counts every model's output with one Llama 2 tokenizer
    (``hf-internal-testing/llama-tokenizer``) through ``len(tokenizer.encode(text))``,
    which puts the beginning-of-sequence token ``<s>`` in front: one token more
    than the text has. LLMPerf's clock includes the time to first token: a model
    that waits ``TTFT`` and then writes ``n`` of its own tokens at ``r`` tokens per
    second is reported at ``(llama2_tokens + 1) / (TTFT + n / r)``.

    ``own_tok_s`` is the model's own end-to-end rate on that same clock,
    ``n / (TTFT + n / r)`` in its own tokens, so the request took
    ``own_tokens / own_tok_s`` seconds and the reported rate is

        ``(llama2_tokens + 1) / (own_tokens / own_tok_s)``

    tokens per second (without the ``+ 1`` if ``count_bos`` is False): the ratio
    to ``own_tok_s`` is ``(llama2_tokens + 1) / own_tokens`` whatever the timing.
    ``llama2_tokens`` is the Llama 2 count of the same text.
    Source: ``token_benchmark_ray.py`` in ray-project/llmperf.

    Used in chapter 'Tokenizers'.
    """
    rate = checks.positive("own_tok_s", own_tok_s)
    own = checks.whole("own_tokens", own_tokens)
    counted = checks.whole("llama2_tokens", llama2_tokens, minimum=0) + (1 if count_bos else 0)
    return checks.finite_result(counted / (own / rate), "own_tok_s", "own_tokens",
                                "llama2_tokens")


def reading_tokens_per_s(tokens_per_word: float,
                         words_per_minute: float = READING_WPM) -> float:
    """A reading speed in words per minute as tokens per second.

    Formula: ``words_per_minute / 60 x tokens_per_word``. The common rule of
    thumb is 0.75 words per token (``tokens_per_word`` = 4/3); MLPerf's
    240 words a minute at 5 tokens a second assumes 0.8. The chapter measures
    ``tokens_per_word`` per tokenizer and language instead. For a language
    that is not English, pass tokens per *English* word of the same content
    (``tokens_per_source_word`` in :func:`count_tokens`), so that the reader
    takes in the same story per minute.

    Used in chapter 'Tokenizers'.
    """
    rate = (checks.positive("words_per_minute", words_per_minute) / 60.0
            * checks.positive("tokens_per_word", tokens_per_word))
    return checks.finite_result(rate, "words_per_minute", "tokens_per_word")


# ------------------------------------------------------------------ pieces and views

#: Background colours for alternating pieces (light, colour-blind safe pairs).
PIECE_COLORS = ("#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3")


def compare_pieces(text: str, tokenizers: Sequence[str] | None = None) -> list[dict]:
    """One text cut by several tokenizers: a row per tokenizer.

    Each row has ``tokenizer``, ``vocab_size``, ``tokens`` (the count), ``pieces``
    (the text of each token, see :meth:`inferlab.tokens.tokenizers.Tokenizer.pieces`)
    and ``chars_per_token``. Raises ``ValueError`` for the empty text (no tokens,
    so no characters per token), an unknown tokenizer or an empty choice.

    Used in chapter 'Tokenizers' (the ``tok_pieces`` explorer).
    """
    if not checks.text("text", text, empty=True):
        raise ValueError("text: '' has no tokens, so no characters per token; give at least "
                         "one character")
    rows = []
    for name in _tokenizer_names(tokenizers):
        tokenizer = get_tokenizer(name)
        pieces = tokenizer.pieces(text)
        rows.append({
            "tokenizer": name,
            "vocab_size": tokenizer.vocab_size,
            "tokens": len(pieces),
            "pieces": pieces,
            "chars_per_token": len(text) / len(pieces) if pieces else math.nan,
        })
    return rows


def _visible(piece: str) -> str:
    """A piece with its white space made visible: "·" for a space, "↵" for a newline."""
    return piece.replace(" ", "·").replace("\n", "↵").replace("\t", "→")


def pieces_html(rows: Sequence[dict]) -> str:
    """HTML of the rows of :func:`compare_pieces`: coloured pieces, one line per tokenizer."""
    lines = []
    for row in rows:
        spans = "".join(
            f'<span style="background:{PIECE_COLORS[i % len(PIECE_COLORS)]};'
            f'padding:1px 0;margin-right:1px;white-space:pre">{html.escape(_visible(p))}</span>'
            for i, p in enumerate(row["pieces"])
        )
        lines.append(
            f'<div style="margin:2px 0"><code style="display:inline-block;width:9em">'
            f'{html.escape(row["tokenizer"])} ({row["tokens"]})</code>{spans}</div>'
        )
    return "\n".join(lines)


def draw_pieces(ax, text: str, tokenizers: Sequence[str] | None = None) -> list[dict]:
    """Draw ``text`` cut by each tokenizer as rows of coloured boxes on ``ax``.

    Monospaced, so each box is as wide as its piece; white space is shown as
    in :func:`pieces_html`. Meant for short texts in scripts that the default
    monospace font covers (Latin, Greek, Cyrillic). Returns the rows drawn.
    """
    from matplotlib.patches import Rectangle

    rows = compare_pieces(text, tokenizers)
    width = max([sum(len(p) for p in row["pieces"]) for row in rows] + [1])
    ax_width_in = ax.get_position().width * ax.figure.get_figwidth()
    fontsize = min(11.0, ax_width_in * 72 / (width + 2) / 0.6)
    for y, row in enumerate(rows):
        x = 0.0
        for i, piece in enumerate(row["pieces"]):
            shown = _visible(piece)
            ax.add_patch(Rectangle((x + 0.05, y - 0.35), len(shown) - 0.1, 0.7,
                                   facecolor=PIECE_COLORS[i % len(PIECE_COLORS)],
                                   edgecolor="#555555", linewidth=0.4))
            ax.text(x + len(shown) / 2, y, shown, ha="center", va="center",
                    family="monospace", fontsize=fontsize)
            x += len(shown)
    ax.set_xlim(0, width + 0.5)
    ax.set_ylim(len(rows) - 0.5, -1.1)  # room above the first row for a kind badge
    ax.set_yticks(range(len(rows)),
                  [f"{row['tokenizer']}: {row['tokens']}" for row in rows])
    ax.set_xticks([])
    ax.grid(False)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    return rows
