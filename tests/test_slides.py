"""Lecture decks: every chapter's deck built with sphinx-revealjs, held to a lecture's shape.

The quick tests check the extension's pieces. The deck tests (marked ``build``) run
``scripts/build_slides.py`` once over the executed notebooks of the session's book build
(its jupyter-cache, so no chapter executes again) and check every deck: a deck per
chapter, short slides (median at most 40 words and none above 90, code, figures,
math and notes aside), speaker notes on at least 80 % of slides, figure numbers exactly
as the book prints them, no punctuation stranded by a removed citation, no MyST left
unresolved and nothing loaded from outside the deck folder. With Chromium available
every deck is also opened from disk and must load with no request leaving the folder.
"""

from __future__ import annotations

import importlib.util
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from conftest import ROOT, background_decks

sys.path.insert(0, str(ROOT / "slides" / "_ext"))
import lecture  # noqa: E402

_spec = importlib.util.spec_from_file_location("build_slides", ROOT / "scripts" /
                                               "build_slides.py")
build_slides = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_slides)

MEDIAN_WORDS, MAX_WORDS, NOTES_SHARE = 40, 90, 0.8
# Not slide text: speaker notes, figures with their captions, code and typeset math.
NOT_TEXT = ["aside.notes", "figure", "pre", "div.highlight", "code", ".math", "div.math"]
# What a citation removed from the middle of a sentence leaves behind.
# (An empty pair right after a name is a function call, not a lost citation.)
STRAY = re.compile(r"\s[,;:.)](?!\d)|(?:^|\s)\(\s*\)|\[\s*\]|,\s*[,;.]|\(\s*[,;]")


def test_a_deck_belongs_to_the_chapter_of_the_same_name():
    assert lecture.chapter_of("slides/05_scenarios") == "book/05_scenarios"
    assert lecture.chapter_of("book/05_scenarios") is None
    assert lecture.chapter_of("slides/sub/05_scenarios") is None


def test_glue_in_a_deck_reads_its_chapter_unless_it_names_a_page():
    source = ["{glue:text}`scen_min_s:.0f` s, {glue:text}`scen_model` and "
              "{glue:text}`/book/01_prefill_decode.md::pd_claim:.0f`"]
    lecture._source_read(None, "slides/05_scenarios", source)
    assert source[0] == ("{glue:text}`/book/05_scenarios.md::scen_min_s:.0f` s, "
                         "{glue:text}`/book/05_scenarios.md::scen_model:` and "
                         "{glue:text}`/book/01_prefill_decode.md::pd_claim:.0f`")
    untouched = ["{glue:text}`scen_min_s:.0f`"]
    lecture._source_read(None, "book/05_scenarios", untouched)
    assert untouched == ["{glue:text}`scen_min_s:.0f`"]


def test_a_figure_caption_keeps_its_first_sentence():
    assert lecture._first_sentence("Tokens per word (measured). Lower is cheaper.") == \
        "Tokens per word (measured)."
    assert lecture._first_sentence("About 0.8 words per token. Then more.") == \
        "About 0.8 words per token."


def test_the_stray_pattern_catches_what_a_removed_citation_leaves():
    for text in ("the rules in MLPerf's , with bounds", "its posts ; and", "as shown ( ).",
                 "reported [] here", "as said (, 2024)"):
        assert STRAY.search(text), text
    for text in ("MLPerf's rules, with bounds [MLCommons, 2025].", "call rank_systems() here",
                 "p99 is 0.25 s (Kwon et al., 2023)", "from 5 to 40 tok/s"):
        assert not STRAY.search(text), text


def test_every_chapter_has_a_deck_and_every_deck_a_chapter():
    decks = {path.stem for path in build_slides.deck_files()}
    chapters = {path.stem for path in build_slides.toc_chapters()}
    outlines = {path.stem for path in (ROOT / "slides").glob("[0-9][0-9]_*.md")}
    assert decks == chapters == outlines


def test_the_reveal_bundle_is_the_audited_one():
    assert build_slides.check_reveal().is_file()


@dataclass(frozen=True)
class Decks:
    folder: Path
    seconds: float


@pytest.fixture(scope="module")
def decks(built_book, tmp_path_factory) -> Decks:
    assert built_book.returncode == 0, built_book.log[-3000:]
    built = background_decks()
    if built is not None:  # started by conftest as soon as the book was built
        returncode, log, folder, seconds = built
        assert returncode == 0, log[-3000:]
        return Decks(folder, seconds)
    out = tmp_path_factory.mktemp("slides")
    cache = built_book.html.parent / ".jupyter_cache"
    start = time.perf_counter()
    assert build_slides.main(["--out", str(out), "--cache", str(cache)]) == 0
    return Decks(out, time.perf_counter() - start)


def _pages(decks: Decks) -> dict[str, BeautifulSoup]:
    return {page.stem: BeautifulSoup(page.read_text(encoding="utf8"), "html.parser")
            for page in sorted((decks.folder / "slides").glob("*.html"))}


def _slides(soup: BeautifulSoup):
    """The slides a viewer steps through: sections that hold no further section."""
    return [s for s in soup.select("div.slides section") if not s.find("section")]


def _words(slide) -> int:
    slide = BeautifulSoup(str(slide), "html.parser")
    for selector in NOT_TEXT:
        for element in slide.select(selector):
            element.decompose()
    return len(slide.get_text(" ").split())


def _book_numbers(built_book, chapter: str) -> dict[str, str]:
    page = BeautifulSoup((built_book.html / "book" / f"{chapter}.html").read_text(
        encoding="utf8"), "html.parser")
    return {figure["id"]: figure.select_one(".caption-number").get_text().strip()
            for figure in page.select("figure[id]") if figure.select_one(".caption-number")}


@pytest.mark.build
def test_the_build_reuses_the_book_and_stays_quick(decks):
    print(f"\nall decks built in {decks.seconds:.0f} s")
    assert decks.seconds < 240


@pytest.mark.build
def test_every_slide_is_short_and_most_carry_the_chapter_as_notes(decks):
    report = []
    for name, soup in _pages(decks).items():
        slides = _slides(soup)
        words = [_words(slide) for slide in slides]
        noted = [bool(s.select_one("aside.notes") and s.select_one("aside.notes")
                      .get_text().strip()) for s in slides]
        report.append(f"{name}: {len(slides)} slides, median {statistics.median(words):.0f} "
                      f"words, max {max(words)}, notes on {sum(noted) / len(slides):.0%}")
        assert len(slides) >= 8, name
        assert statistics.median(words) <= MEDIAN_WORDS, (name, words)
        too_long = [(i + 1, n) for i, n in enumerate(words) if n > MAX_WORDS]
        assert too_long == [], (name, too_long)
        assert sum(noted) / len(slides) >= NOTES_SHARE, (name, noted)
    print("\n" + "\n".join(report))


@pytest.mark.build
def test_figures_are_numbered_as_in_the_book(decks, built_book):
    for name, soup in _pages(decks).items():
        book = _book_numbers(built_book, name)
        figures = soup.select("figure.lecture-figure")
        assert figures, name
        for figure in figures:
            label = next(c.removeprefix("from-") for c in figure["class"]
                         if c.startswith("from-"))
            caption = figure.select_one("figcaption").get_text(" ").strip()
            assert caption.startswith(book[label] + "."), (name, label, caption, book[label])
            assert figure.select_one("img"), (name, label)
        chapter_number = next(iter(book.values())).split()[1].split(".")[0]
        for mention in re.findall(r"Fig\. [\d.]*\d", soup.get_text(" ")):
            assert re.fullmatch(rf"Fig\. {chapter_number}\.\d+", mention), (name, mention)


@pytest.mark.build
def test_no_citation_leaves_stray_punctuation_and_no_myst_is_left(decks):
    for name, soup in _pages(decks).items():
        for slide in _slides(soup):
            text = " ".join(slide.get_text(" ").split())
            for leftover in ("{glue", "{term}", "{cite", "{numref}", "{chapter-", ":::",
                             "Run it live"):
                assert leftover not in text, (name, leftover, text[:200])
            notes = slide.select_one("aside.notes")
            shown = BeautifulSoup(str(slide), "html.parser")
            for element in shown.select("aside.notes, figure"):
                element.decompose()
            for element in shown.select(".math"):
                element.replace_with("x")  # a formula reads as a word in its sentence
            # The slide's own text as a reader sees it (inline elements joined as they
            # are set, not with a separator that would itself put a space before a comma).
            parts = [shown.get_text(""), notes.get_text(" ") if notes else ""]
            for part in (" ".join(part.split()) for part in parts):
                assert not STRAY.search(part), (name, STRAY.search(part), part[:300])


@pytest.mark.build
def test_decks_load_nothing_from_outside_their_folder(decks):
    folder = decks.folder.resolve()
    for page in sorted((folder / "slides").glob("*.html")):
        html = page.read_text(encoding="utf8")
        references = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)["\']', html)
        assert [r for r in references if re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", r, re.I)] == []
        for reference in references:
            if reference.startswith(("#", "data:")):
                continue
            target = (page.parent / reference.split("#")[0].split("?")[0]).resolve()
            assert target.is_relative_to(folder) and target.is_file(), (page.name, reference)
    assert (folder / "_static" / "revealjs" / "dist" / "reveal.js").is_file()
    assert (folder / "_static" / "revealjs" / "plugin" / "notes" / "notes.js").is_file()
    assert (folder / "_static" / "mathjax" / "tex-chtml.js").is_file()


def _open_offline(browser, page: Path, folder: str) -> tuple[int, bool, list[str]]:
    """Slides reveal.js counts, whether its notes plugin loaded, and what went wrong."""
    problems: list[str] = []
    tab = browser.new_page()
    try:
        tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        tab.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
        tab.on("request", lambda request: problems.append(f"outside: {request.url}")
               if not request.url.startswith((folder, "data:")) else None)
        tab.goto(page.resolve().as_uri())
        tab.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
        total = tab.evaluate("Reveal.getTotalSlides()")
        speaker_view = tab.evaluate("Boolean(Reveal.getPlugin('notes'))")
    finally:
        tab.close()
    return total, speaker_view, problems


@pytest.mark.build
@pytest.mark.browser
def test_decks_open_offline_in_chromium(decks, browser):
    folder = decks.folder.resolve().as_uri()
    for page in sorted((decks.folder / "slides").glob("*.html")):
        total, speaker_view, problems = _open_offline(browser, page, folder)
        assert total >= 8, page.name
        assert speaker_view, f"{page.name}: no notes plugin, so `s` shows no notes"
        assert problems == [], (page.name, problems)
