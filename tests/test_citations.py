"""No two works cite alike: "[MLCommons, 2025a; MLCommons, 2025b]", not "[MLCommons, 2025,
MLCommons, 2025]" as issue 18 found.

``book/_ext/citations.py`` labels every entry of ``book/references.bib`` "Author, Year"
as its citation reads, with a letter where two would read the same. The first tests
hold the bibliography to that with the extension's own label style; the build test
reads every citation of the built book and checks that one label always leads to one
entry and one entry always shows one label, and that a group never names a work twice.
"""

from __future__ import annotations

import collections
import html
import re
import sys

import pytest
from conftest import ROOT
from pybtex.database import parse_file

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import citations  # noqa: E402

BIB = parse_file(str(ROOT / "book" / "references.bib"))


def _labels() -> dict[str, str]:
    style = citations.LetteredStyle()
    entries = list(style.sort(BIB.entries.values()))
    return {entry.key: label for entry, label in zip(entries, style.format_labels(entries),
                                                     strict=True)}


def test_every_entry_has_a_label_of_its_own():
    labels = _labels()
    repeated = [label for label, n in collections.Counter(labels.values()).items() if n > 1]
    assert not repeated, f"entries that would cite alike: {repeated}"
    assert len(labels) == len(BIB.entries)


def test_only_works_that_would_read_alike_get_a_letter():
    labels = _labels()
    plain = {key: citations.label(BIB.entries[key]) for key in labels}
    shared = collections.Counter(plain.values())
    for key, label in labels.items():
        if shared[plain[key]] == 1:
            assert label == plain[key], key
        else:
            assert re.fullmatch(re.escape(plain[key]) + "[a-z]", label), (key, label)
    # The review's case: MLCommons's rules and its v5.0 results, both of 2025.
    assert labels["mlcommons_inference_rules"] != labels["mlperf_results_v50"]
    assert labels["mlcommons_inference_rules"].startswith("MLCommons, 2025")
    assert labels["williams2009roofline"] == "Williams et al., 2009"


def test_a_group_is_separated_by_semicolons():
    style = citations.LetteredAuthorYear()
    assert style.bracket_parenthetical.sep == "; "
    assert {"p", "t"} <= set(style.role_names())


SPAN = re.compile(r'<span class="bibtex-citation"[^>]*>(.*?)</span>', re.S)
LINK = re.compile(r'<a class="reference internal" href="[^"#]*bibliography\.html#([^"]+)"[^>]*>'
                  r"(.*?)</a>", re.S)


def _plain(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).strip()


ENTRY = re.compile(r'<div class="citation" id="([^"]+)"[^>]*>\s*<span class="label">(.*?)</span>'
                   r"</span>", re.S)


def _citations(page: str) -> list[list[tuple[str, str]]]:
    """The page's citations, each a list of ``(label, target)``: a parenthetical one's
    link text ("MLCommons, 2025a"), or for a textual one ("Ainslie et al. [2023]") the
    author before the bracket joined to the year in it, as the bibliography labels it."""
    groups = []
    for span in SPAN.finditer(page):
        author = _plain(span.group(1).split("[", 1)[0])
        found = [(f"{author}, {text}" if author else text, target)
                 for target, text in ((target, _plain(text))
                                      for target, text in LINK.findall(span.group(1)))]
        if found:
            groups.append(found)
    return groups


@pytest.mark.build
def test_the_built_book_cites_each_work_by_one_label_of_its_own(built_book):
    assert built_book.returncode == 0, built_book.log[-3000:]
    targets: dict[str, set[str]] = collections.defaultdict(set)
    labels: dict[str, set[str]] = collections.defaultdict(set)
    groups = 0
    for path in sorted(built_book.html.rglob("*.html")):
        for group in _citations(path.read_text(encoding="utf-8")):
            groups += 1
            names = [label for label, _ in group]
            assert len(set(names)) == len(names), f"{path.name}: {names}"
            for label, target in group:
                targets[label].add(target)
                labels[target].add(label)
    assert groups > 50, "the test found almost no citations; has the HTML changed?"
    assert any(re.fullmatch(r"MLCommons, 2025[a-z]", label) for label in targets), sorted(targets)
    shared = {label: sorted(found) for label, found in targets.items() if len(found) > 1}
    assert not shared, f"one label, several entries: {shared}"
    # Each citation reads as the bibliography labels the entry it links to.
    listed = {target: _plain(label).strip("[]") for target, label in ENTRY.findall(
        (built_book.html / "book" / "bibliography.html").read_text(encoding="utf-8"))}
    assert len(listed) >= len(BIB.entries)
    differ = {target: (sorted(found), listed.get(target)) for target, found in labels.items()
              if found != {listed.get(target)}}
    assert not differ, f"citations that read otherwise than their entry's label: {differ}"
