"""The printable checklist keeps one block per chapter (issue 31): each chapter's
"Reading a claim" list, shortened, under a heading numbered as the chapter is."""

from __future__ import annotations

import re

from conftest import ROOT


def checklist_blocks(text: str) -> list[int]:
    """The numbers of the checklist's numbered blocks (``## 6. The endpoint: ...``)."""
    return [int(number) for number in re.findall(r"^## (\d+)\. ", text, flags=re.M)]


def test_the_blocks_are_read_from_their_headings():
    assert checklist_blocks("## 1. The phase\n- a\n## Before you quote it\n## 2. Floor\n") == [1, 2]


def test_the_checklist_has_one_block_per_chapter_in_order():
    chapters = sorted(path.stem for path in (ROOT / "book").glob("[0-9][0-9]_*.md"))
    text = (ROOT / "book" / "checklist.md").read_text(encoding="utf-8")
    assert checklist_blocks(text) == list(range(1, len(chapters) + 1))


def test_the_endpoint_block_asks_what_the_lab_teaches():
    text = (ROOT / "book" / "checklist.md").read_text(encoding="utf-8")
    block = text[text.index("## 6. The endpoint"):text.index("## 7. ")]
    for asked in ("Closed loop", "open loop", "Chunks or tokens", "Whose definition",
                  "p99", "ignore_eos"):
        assert asked in block, asked
