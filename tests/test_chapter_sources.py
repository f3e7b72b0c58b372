"""Mistakes in a chapter's MyST source that the strict build does not catch.

With ``dollarmath`` on, a ``$`` right before a glue role opens inline math, and the
page shows the raw role instead of the number: the build raises no warning. Chapter
7's prices were printed that way until the dollar signs were escaped (``\\$``).
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

PAGES = sorted((ROOT / "book").glob("*.md"))
UNESCAPED_DOLLAR_BEFORE_ROLE = re.compile(r"(?<!\\)\$\{(glue|numref|term|cite)")


def test_the_pattern_finds_the_mistake_and_passes_the_escape():
    assert UNESCAPED_DOLLAR_BEFORE_ROLE.search("costs ${glue:text}`usd:.2f` an hour")
    assert not UNESCAPED_DOLLAR_BEFORE_ROLE.search(r"costs \${glue:text}`usd:.2f` an hour")
    assert not UNESCAPED_DOLLAR_BEFORE_ROLE.search("a pass over $T$ tokens")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_dollar_sign_opens_math_before_a_role(page):
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        assert not UNESCAPED_DOLLAR_BEFORE_ROLE.search(line), (
            f"{page.name}:{number}: write \\$ before a role, or the page shows it raw: {line}")
