"""Slide decks: the MyST-to-slides conversion, and one chapter's deck built for real.

The conversion tests are quick. The deck test (marked ``build``) executes
``book/04_tokenizers.md``, exports its deck with ``scripts/build_slides.py`` into a
temporary folder and checks that it has slides, carries the chapter's key figures
as embedded images, has no unresolved MyST left, references nothing outside its
folder, and that reveal.js and MathJax sit next to it. With Chromium available it
also opens the deck from disk and counts the slides reveal.js sees.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import jupytext
import nbformat
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import myst_to_slides as mts  # noqa: E402

_spec = importlib.util.spec_from_file_location("build_slides", ROOT / "scripts" /
                                               "build_slides.py")
build_slides = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_slides)

CHAPTER = ROOT / "book" / "04_tokenizers.md"


def _glued(key: str, plain: str, mime: str = "text/plain") -> dict:
    return nbformat.v4.new_output(
        "display_data", data={f"{mts.GLUE_PREFIX}{mime}": plain},
        metadata={"scrapbook": {"name": key, "mime_prefix": mts.GLUE_PREFIX}})


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _code(source="x = 1", tags=(), outputs=(), **metadata):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags), **metadata})
    cell.outputs = list(outputs)
    return cell


def test_glue_values_are_read_from_the_executed_outputs_and_formatted_like_myst_nb():
    nb = _notebook(_code(outputs=[_glued("rate", "241.0"), _glued("name", "'llama2'"),
                                  _glued("note", "**bold**", "text/markdown")]))
    glue = mts.glue_values(nb)
    assert glue["rate"] == {"text/plain": "241.0"}
    text = ("{glue:text}`rate:.0f` and {glue:text}`rate:,.2f` tok/s by {glue:text}`name`; "
            "{glue:md}`note`")
    assert mts.resolve_roles(text, glue) == "241 and 241.00 tok/s by llama2; **bold**"


def test_a_missing_glue_key_is_an_error_as_in_the_book_build():
    with pytest.raises(KeyError, match="no_such_key"):
        mts.resolve_roles("{glue:text}`no_such_key:.0f`", {})


def test_other_roles_become_plain_text():
    text = ("A {term}`token` and {term}`active parameters <Active parameters>` "
            "{cite:p}`aa_methodology`. See {numref}`fig-b`, as {cite:t}`k1` says.")
    out = mts.resolve_roles(text, figures={"fig-a": 1, "fig-b": 2},
                            citations={"k1": "Ainslie et al. (2023)"})
    assert out == ("A token and active parameters. See Fig. 2, as Ainslie et al. (2023) "
                   "says.")


def test_directives_become_markdown_and_solutions_are_dropped_across_cells():
    converter = mts.Converter()
    first = converter.markdown(
        ":::{admonition} Takeaway\n:class: tip\nDecode is bound by memory.\n:::\n\n"
        "```{exercise} Convert a rate\n:label: ex-1\n\nWhat is 300 tok/s in o200k?\n```\n\n"
        "```{solution-start} ex-1\n:class: dropdown\n```\nScale by the ratio.")
    assert "> **Takeaway**" in first and "> Decode is bound by memory." in first
    assert "### Exercise: Convert a rate" in first and "What is 300 tok/s" in first
    assert "Scale by the ratio" not in first and ":label:" not in first
    assert converter.in_solution  # the code cells that follow belong to the solution
    second = converter.markdown("About 299 for English.\n```{solution-end}\n```\n\n## Summary")
    assert not converter.in_solution
    assert second.strip() == "## Summary"
    plain = mts.Converter().markdown("Q?\n\n```{solution} ex-2\nHidden.\n```\nShown.")
    assert "Hidden" not in plain and "Shown." in plain


def test_slide_types_cells_dropped_and_captions_kept():
    nb = _notebook(
        nbformat.v4.new_markdown_cell("# Title\n\nIntro with {glue:text}`n:.0f` texts.\n\n"
                                      "### Detail\n\nMore."),
        _code("glue('n', 11)", tags=["remove-cell"], outputs=[_glued("n", "11")]),
        _code("plot()", tags=["hide-input"], mystnb={"figure": {
            "caption": "Tokens for {glue:text}`n:.0f` texts (measured).", "name": "fig-a"}},
            outputs=[nbformat.v4.new_output("display_data", data={
                "image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 640x480>"})]),
        _code("explorer()", tags=["remove-output"]),
        _code("import warnings", tags=["hide-input"]),  # no output: nothing to show
        nbformat.v4.new_markdown_cell("## Next\n\nSee {numref}`fig-a`."),
    )
    slides = mts.slide_notebook(nb)
    kinds = [(c.cell_type, c.metadata["slideshow"]["slide_type"]) for c in slides.cells]
    assert kinds == [("markdown", "slide"), ("markdown", "-"), ("markdown", "subslide"),
                     ("markdown", "-"), ("code", "subslide"), ("markdown", "-"),
                     ("markdown", "slide"), ("markdown", "-")]
    sources = [c.source for c in slides.cells]
    assert sources[1] == "Intro with 11 texts."
    assert "Fig. 1." in sources[5] and "Tokens for 11 texts" in sources[5]
    assert sources[7] == "See Fig. 1."
    code = slides.cells[4]
    assert code.metadata["tags"] == ["hide-input"]
    assert [list(o["data"]) for o in code.outputs] == [["image/png", "text/plain"]]


def test_long_prose_continues_on_a_sub_slide_and_math_stays_whole():
    paragraph = "word " * 100
    text = f"## Section\n\n{paragraph}\n\n$$\na = b\n\nc = d\n$$\n\n{paragraph}\n\n{paragraph}"
    blocks = mts.split_blocks(text)
    assert blocks[2] == "$$\na = b\n\nc = d\n$$"
    slides = mts.slide_notebook(_notebook(nbformat.v4.new_markdown_cell(text)))
    kinds = [c.metadata["slideshow"]["slide_type"] for c in slides.cells]
    assert kinds[0] == "slide" and "subslide" in kinds[1:]


def test_the_toc_chapters_are_the_numbered_files():
    chapters = build_slides.toc_chapters()
    assert CHAPTER in chapters
    assert all(re.match(r"\d\d_", c.name) for c in chapters)


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    out = tmp_path_factory.mktemp("slides")
    assert build_slides.main([str(CHAPTER), "--out", str(out)]) == 0
    return out / f"{CHAPTER.stem}.slides.html"


@pytest.mark.build
def test_deck_has_slides_figures_and_no_unresolved_myst(deck):
    html = deck.read_text(encoding="utf8")
    assert html.count("<section") > 5
    figures = sum(1 for cell in jupytext.read(CHAPTER).cells
                  if cell.metadata.get("mystnb", {}).get("figure"))
    assert figures > 0
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', html)) >= figures
    for leftover in ("{glue:", "{term}", "{cite:", "{numref}", "{exercise}", ":::{",
                     "{solution"):
        assert leftover not in html, leftover


@pytest.mark.build
def test_deck_references_nothing_outside_its_folder(deck):
    html = deck.read_text(encoding="utf8")
    references = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)["\']', html)
    external = [r for r in references if re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", r, re.I)]
    assert external == []
    assert "unpkg.com" not in html and "cdnjs" not in html and "require.js" not in html
    local = [r for r in references if not r.startswith(("#", "data:"))]
    assert local, "the deck should load reveal.js from next to it"
    for reference in local:
        assert (deck.parent / reference.split("#")[0]).is_file(), reference
    assert (deck.parent / "reveal.js" / "dist" / "reveal.js").is_file()
    assert (deck.parent / "reveal.js" / "LICENSE").is_file()
    assert (deck.parent / "mathjax" / "tex-chtml.js").is_file()


@pytest.mark.build
@pytest.mark.browser
def test_deck_opens_offline_in_chromium(deck, browser):
    problems: list[str] = []
    page = browser.new_page()
    try:
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        page.on("console", lambda message: problems.append(f"console: {message.text}")
                if message.type == "error" else None)
        page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
        page.on("request", lambda request: problems.append(f"external: {request.url}")
                if not request.url.startswith(("file:", "data:")) else None)
        page.goto(deck.as_uri())
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
        page.wait_for_function("document.querySelector('mjx-container') !== null",
                               timeout=30_000)
        total = page.evaluate("Reveal.getTotalSlides()")
    finally:
        page.close()
    assert total > 5
    assert problems == []
