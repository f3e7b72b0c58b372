"""The instructor guide names the explorers' controls as the reader sees them.

The guide's live demos tell the instructor which control to move, in bold. A control
renamed in ``inferlab.pages.explorers`` (issue 16 gave every control a label in whole words)
would leave the guide pointing at a slider that no longer exists, so every bold phrase
must be the label of a control of a registered explorer, in full or up to its
parenthesis ("precision of the weights", "target rate (queries per second)"), except
the guide's own run-in headings, which end in a period or a colon ("**50 minutes.**",
"**Weekly:**").
"""

from __future__ import annotations

import re

from conftest import ROOT

from inferlab.pages.explorers import registered_explorers

GUIDE = ROOT / "book" / "instructor_guide.md"
BOLD = re.compile(r"\*\*([^*]+)\*\*")


def control_names(text: str) -> list[str]:
    """The bold phrases of ``text`` that are not run-in headings, whitespace made single."""
    phrases = [" ".join(found.split()) for found in BOLD.findall(text)]
    return [phrase for phrase in phrases if not phrase.endswith((".", ":"))]


def labels() -> set[str]:
    """Every control label of the book's explorers, whole and without its parenthesis."""
    found = set()
    for explorer in registered_explorers().values():
        for control in explorer.controls:
            found.add(control.label)
            found.add(control.label.split(" (")[0])
    return found


def test_the_pattern_reads_a_phrase_broken_over_lines_and_skips_headings():
    text = "move **KV cache per token\n(KiB)** after **50 minutes.** or **Weekly:**"
    assert control_names(text) == ["KV cache per token (KiB)"]


def test_every_control_the_guide_names_is_a_control_of_an_explorer():
    named = control_names(GUIDE.read_text(encoding="utf-8"))
    assert len(named) >= 10  # the demos of every chapter name their controls
    unknown = sorted(set(named) - labels())
    assert unknown == [], f"the instructor guide names controls no explorer has: {unknown}"
