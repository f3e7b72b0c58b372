"""Chapters short enough to answer their question in one sitting (issues 18 and 31).

Two counts. A chapter's *length* is its words the way a reader meets them in the
source: every whitespace-separated piece of the MyST file after its jupytext header,
prose, code and directives alike (chapter 1 answers one puzzle; chapter 2 keeps one
treatment of the roofline). Its *main thread* is the prose a lecture covers: the
words before its exercises, with code cells, other fenced blocks and directive
options left out, at most 4,000 (a 50-minute lecture holds about 3,500-4,000).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

# The most words each chapter may have.
LIMITS = {"01_prefill_decode": 6000, "02_bandwidth_floor": 7000}

#: The most words of main-thread prose a chapter may have.
LECTURE_WORDS = 4000

#: Every numbered chapter is held to one lecture.
LECTURES = sorted(path.stem for path in (ROOT / "book").glob("[0-9][0-9]_*.md"))

LABEL = re.compile(r"^\(.*\)=$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\{([^}]*)\})?")


def without_front_matter(text: str) -> str:
    """A chapter's source without its YAML front matter (the jupytext header between the
    first two ``---`` lines)."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end < 0:
            raise ValueError("text: the front matter opened by '---' never closes")
        text = text[end + len("\n---"):]
    return text


def chapter_words(text: str) -> int:
    """Words of a chapter's source, its YAML front matter left out."""
    return len(without_front_matter(text).split())


def main_thread_words(text: str) -> int:
    """Words of prose before the chapter's "Exercises" heading: code cells and plain
    fenced blocks (code, glue) left out whole, a directive's options (``:label:``) left
    out but its body (an admonition's text) counted, as a reader hears it."""
    kept, fence = [], None
    for line in without_front_matter(text).splitlines():
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence) and not stripped.strip("`~"):
                fence = None
            continue
        opened = FENCE.match(stripped)
        if opened:
            kind = opened.group(3) or ""
            if kind in ("", "code-cell") or kind.startswith("glue"):
                fence = opened.group(1)
            continue
        if re.match(r"^#+\s+Exercises\b", stripped):
            break
        # A directive's option, a cell break, a label target: markup, not prose.
        if re.match(r"^:[\w-]+:", stripped) or stripped == "+++" or LABEL.match(stripped):
            continue
        kept.append(line)
    return len(" ".join(kept).split())


def test_the_main_thread_keeps_prose_and_admonitions_and_stops_at_the_exercises():
    page = ("---\njupytext: {}\n---\n# Title here\n\n(sec-x)=\nOne two three.\n\n"
            "```{code-cell} ipython3\n:tags: [remove-cell]\nx = 1 + 2 + 3\n```\n\n"
            ":::{admonition} Takeaway\n:class: tip\nFour five.\n:::\n\n"
            "```python\nprint('not prose')\n```\n\n## Exercises\n\nNot counted at all.\n")
    # "# Title here" 3, "One two three." 3, ":::{admonition} Takeaway" 2, "Four five." 2,
    # the closing ":::" 1.
    assert main_thread_words(page) == 11
    with pytest.raises(ValueError, match="never closes"):
        main_thread_words("---\nkernelspec: python3\n")


@pytest.mark.parametrize("chapter", LECTURES)
def test_the_chapter_is_one_lecture(chapter):
    text = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    words = main_thread_words(text)
    assert words <= LECTURE_WORDS, (
        f"book/{chapter}.md has {words:,} words of main-thread prose, "
        f"{words - LECTURE_WORDS:,} over one lecture's {LECTURE_WORDS:,}; move detail a "
        f"first reading does not need to a page under the hood")


def test_every_chapter_is_held_to_one_lecture():
    assert len(LECTURES) >= 8 and "08_sizing" in LECTURES


def test_the_count_leaves_out_the_front_matter_and_counts_everything_else():
    header = "---\njupytext:\n  format_name: myst\n---\n"
    assert chapter_words(header + "# Title\n\nTwo words.\n") == 4
    assert chapter_words("# Five pieces, no header\n") == 5
    assert chapter_words(header + "```{code-cell} ipython3\nx = 1\n```\n") == 6  # code counts
    with pytest.raises(ValueError, match="never closes"):
        chapter_words("---\nkernelspec: python3\n# a title\n")


@pytest.mark.parametrize("chapter", sorted(LIMITS))
def test_the_chapter_is_within_its_word_limit(chapter):
    text = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    words = chapter_words(text)
    assert words <= LIMITS[chapter], (
        f"book/{chapter}.md has {words:,} words, {words - LIMITS[chapter]:,} over its "
        f"limit of {LIMITS[chapter]:,}")


def test_every_limited_chapter_exists():
    assert all(Path(ROOT / "book" / f"{name}.md").is_file() for name in LIMITS)
