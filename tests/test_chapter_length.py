"""Chapters short enough to answer their question in one sitting (issue 18).

A chapter's length is its words, counted the way a reader meets them in the source:
every whitespace-separated piece of the MyST file after its jupytext header, prose,
code and directives alike. Chapter 1 answers one puzzle; chapter 2 keeps one
treatment of the roofline.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

# The most words each chapter may have.
LIMITS = {"01_prefill_decode": 6000, "02_bandwidth_floor": 7000}


def chapter_words(text: str) -> int:
    """Words of a chapter's source, its YAML front matter (the jupytext header between
    the first two ``---`` lines) left out."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end < 0:
            raise ValueError("text: the front matter opened by '---' never closes")
        text = text[end + len("\n---"):]
    return len(text.split())


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
