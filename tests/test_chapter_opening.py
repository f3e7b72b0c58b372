"""Every numbered chapter opens, as Project Pythia's cookbooks do, with what it assumes
and how long it takes: a short admonition right after the title naming the earlier
chapters it needs, the Python a reader needs and an honest time to read and to run.

"Honest" is checked where it can be: the stated reading time must fit the chapter's
length at a technical reading pace, so a chapter that doubles or halves fails here
until its estimate follows.
"""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT
from test_chapter_length import chapter_words

TITLE = "Prerequisites and time to learn"
FIELDS = ("**Prerequisites:**", "**Python:**", "**Time to learn:**")
MAX_LINES = 10  # a few lines, not a section
# Words a minute of technical prose with code and figures: slow and fast readers.
READING_WORDS_PER_MINUTE = (120, 250)
READ = re.compile(r"about (\d+) minutes to read")
RUN = re.compile(r"(\d+) minutes? to run|nothing to run")


def numbered_chapters() -> list[str]:
    """The pages of ``_toc.yml``'s numbered parts, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [entry["file"] for part in toc.get("parts", []) if part.get("numbered")
            for entry in part.get("chapters", [])]


def opening(text: str) -> str:
    """The admonition that follows the page's title, or ``ValueError`` saying what is
    there instead."""
    match = re.search(r"^# .+\n\n", text, flags=re.MULTILINE)
    if not match:
        raise ValueError("text: no '# ' title followed by a blank line")
    rest = text[match.end():]
    head = f":::{{admonition}} {TITLE}\n"
    if not rest.startswith(head):
        raise ValueError(f"text: the title is followed by {rest[:60]!r}, not {head!r}")
    end = rest.find("\n:::\n", len(head))
    if end < 0:
        raise ValueError("text: the admonition after the title never closes")
    return rest[:end + len("\n:::")]


def reading_minutes(box: str) -> int:
    found = READ.search(" ".join(box.split()))
    if not found:
        raise ValueError(f"box: no 'about N minutes to read' in {box!r}")
    return int(found.group(1))


def test_the_opening_is_found_only_right_after_the_title():
    box = (f":::{{admonition}} {TITLE}\n:class: note prerequisites\n"
           "- **Prerequisites:** none.\n- **Python:** none.\n"
           "- **Time to learn:** about 5 minutes to read, and nothing to run.\n:::\n")
    assert opening(f"---\nk: v\n---\n\n# A chapter\n\n{box}\nText.\n").startswith(":::")
    with pytest.raises(ValueError, match="is followed by"):
        opening(f"# A chapter\n\nAn opening paragraph first.\n\n{box}")
    with pytest.raises(ValueError, match="never closes"):
        opening(f"# A chapter\n\n{box[:-5]}")
    assert reading_minutes(box) == 5
    with pytest.raises(ValueError, match="minutes to read"):
        reading_minutes(box.replace("about 5 minutes", "a while"))


def test_every_part_that_numbers_its_pages_is_read():
    chapters = numbered_chapters()
    assert "book/01_prefill_decode" in chapters and "book/07_choosing_hardware" in chapters
    assert "book/glossary" not in chapters


@pytest.mark.parametrize("page", numbered_chapters())
def test_the_chapter_opens_with_prerequisites_and_time_to_learn(page):
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    box = opening(text)
    assert len(box.splitlines()) <= MAX_LINES, f"{page}: the opening has grown into a section"
    for field in FIELDS:
        assert field in box, f"{page}: the opening does not say {field}"
    assert RUN.search(" ".join(box.split())), f"{page}: the opening gives no time to run"
    minutes, words = reading_minutes(box), chapter_words(text)
    slow, fast = READING_WORDS_PER_MINUTE
    assert words / fast <= minutes <= words / slow, (
        f"{page}: {minutes} minutes to read {words:,} words; at {slow} to {fast} words a "
        f"minute it takes {words / fast:.0f} to {words / slow:.0f}")
