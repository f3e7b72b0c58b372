"""The explorer of chapter 'Tokenizers': a text cut into pieces by each tokenizer.

It computes with :func:`pieces_explorer_compute` (over
:func:`inferlab.tokens.token_counts.compare_pieces`); this module declares its controls,
turns the pieces into tables and draws them. It opens on the sentence of the chapter's
figure of pieces, so its first picture is that figure's. The site cannot take typed text:
it offers that sentence and the opening words of some of the book's sample texts, in other
languages and formats.
"""

from __future__ import annotations

from inferlab.common import checks
from inferlab.pages.explorers.base import Choice, Explorer, Text, register
from inferlab.pages.explorers.marks import badge
from inferlab.tokens import token_counts as tc
from inferlab.tokens.token_counts import compare_pieces
from inferlab.tokens.tokenizers import available_tokenizers

#: The pieces explorer's menu entry for every tokenizer at once.
ALL_TOKENIZERS = "all"


def pieces_explorer_compute(text: str, tokenizer: str = ALL_TOKENIZERS) -> list[dict]:
    """The pieces explorer's pure function: :func:`~inferlab.tokens.token_counts.compare_pieces`
    of ``text`` under one tokenizer, or under every one for :data:`ALL_TOKENIZERS`.

    Used in chapter 'Tokenizers' (the ``tok_pieces`` explorer).
    """
    if tokenizer == ALL_TOKENIZERS:
        return compare_pieces(text, None)
    checks.option("tokenizer", tokenizer, (*available_tokenizers(), ALL_TOKENIZERS))
    return compare_pieces(text, [tokenizer])


CHAPTER = "04_tokenizers"

#: The sentence of the chapter's figure of pieces (``SENTENCE`` there; a test holds the
#: two equal).
SENTENCE = "The ferry's captain knows every sandbank: 20 min calm, 38 in wind."

#: Sample texts the site offers besides the sentence, each cut to its first words.
_SAMPLES = ("prose_de.txt", "prose_ru.txt", "prose_hi.txt", "prose_zh.txt",
            "code_python.txt", "numbers_arithmetic.txt")
_SAMPLE_CHARS = 60

_WIDTH = 600
_ROW = 24
_ROOM = 1.7


def _opening(text: str) -> str:
    """The first line of ``text``, cut before :data:`_SAMPLE_CHARS` at a space if it has one."""
    line = text.strip().splitlines()[0][:_SAMPLE_CHARS]
    return line.rsplit(" ", 1)[0] if " " in line else line


def _site_texts() -> tuple[str, ...]:
    texts = tc.load_texts().set_index("file")["text"]
    return (SENTENCE, *(_opening(texts[name]) for name in _SAMPLES))


def _pieces_tables(rows: list[dict]) -> dict[str, dict]:
    pieces = {"tokenizer": [], "piece": [], "start": [], "end": [], "shade": []}
    for row in rows:
        start = 0
        for index, piece in enumerate(row["pieces"]):
            shown = tc._visible(piece)
            pieces["tokenizer"].append(row["tokenizer"])
            pieces["piece"].append(shown)
            pieces["start"].append(start)
            pieces["end"].append(start + len(shown))
            pieces["shade"].append(index % len(tc.PIECE_COLORS))
            start += len(shown)
    return {
        "counts": {"tokenizer": [row["tokenizer"] for row in rows],
                   "tokens": [row["tokens"] for row in rows],
                   "chars_per_token": [row["chars_per_token"] for row in rows],
                   # Room right of the longest bar for its label and the badge.
                   "room": [max(r["tokens"] for r in rows) * _ROOM] * len(rows)},
        "pieces": pieces,
    }


def _pieces_chart(part):
    import altair as alt

    names = list(available_tokenizers())
    row = alt.Y("tokenizer:N", sort=names, title=None, scale=alt.Scale(domain=names))
    counts = part("counts")
    bars = counts.mark_bar(color="#2166ac", height=14).encode(
        x=alt.X("tokens:Q", title="tokens", scale=alt.Scale(zero=True, nice=True)), y=row)
    labels = counts.mark_text(align="left", dx=4, fontSize=11).encode(
        x="tokens:Q", y=row, text="line:N",
    ).transform_calculate(line="datum.tokens + ' (' + format(datum.chars_per_token, '.2f') + "
                               "' characters per token)'")
    room = counts.mark_point(opacity=0).encode(x="room:Q", y=row)
    measured = badge("measured", width=_WIDTH)
    totals = alt.layer(bars, labels, room, measured).properties(width=_WIDTH,
                                                           height=_ROW * len(names))
    pieces = part("pieces")
    shades = alt.Scale(domain=list(range(len(tc.PIECE_COLORS))), range=list(tc.PIECE_COLORS))
    position = alt.X("start:Q", axis=None, title=None)
    boxes = pieces.mark_rect(stroke="#555555", strokeWidth=0.4).encode(
        x=position, x2="end:Q", y=row, color=alt.Color("shade:O", scale=shades, legend=None),
        tooltip=[alt.Tooltip("piece:N", title="piece")])
    text = pieces.mark_text(font="monospace", fontSize=10, align="center").encode(
        x="middle:Q", y=row, text="piece:N",
    ).transform_calculate(middle="(datum.start + datum.end) / 2")
    cuts = alt.layer(boxes, text).properties(width=_WIDTH, height=_ROW * len(names))
    return alt.vconcat(totals, cuts, spacing=14).resolve_scale(x="independent")


@register
def pieces_explorer() -> Explorer:
    """A text box (a menu of texts on the site) and a menu of tokenizers."""
    names = available_tokenizers()
    return Explorer(
        name="tok_pieces", kind="analytic", chapter=CHAPTER,
        compute=pieces_explorer_compute, tables=_pieces_tables, chart=_pieces_chart,
        controls=(
            Text("text", "text to tokenize", default=SENTENCE, grid=_site_texts()),
            Choice("tokenizer", "tokenizer", (ALL_TOKENIZERS, *names),
                   default=ALL_TOKENIZERS),
        ),
    )
