"""Chapter 2 as the README tells a student to use it: opened in JupyterLab as a notebook.

JupyterLab serves a copy of the chapter (``benchmarks/jupyterlab_driver.py``), jupytext
opens it as a notebook in the session's headless Chromium, every cell runs, and then a
slider of the floor explorer is moved: its chart must change, recomputed by the kernel,
with no error in the browser's console. The benchmark that times such moves is
``benchmarks/explorers.py``.

The chapter exported as a notebook by the book build, opened without running it, reads
as the site does: the page's number where the chapter glues one, admonitions and
exercises drawn by jupyterlab-myst rather than shown as MyST source.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
from conftest import ROOT, glued

from inferlab.pages.explorers import registered_explorers

# Loaded by its path: putting benchmarks/ on sys.path would let its tokenizers.py shadow
# Hugging Face's tokenizers package for every test that imports it later.
_spec = importlib.util.spec_from_file_location("jupyterlab_driver",
                                               ROOT / "benchmarks" / "jupyterlab_driver.py")
lab = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = lab  # its dataclasses look their module up while being made
_spec.loader.exec_module(lab)

pytestmark = pytest.mark.browser

CHAPTER = ROOT / "book" / "02_bandwidth_floor.md"

# jupyterlab-myst logs one console error per {term} and {numref} of a chapter's .md: their
# targets are the glossary's and the code cells' figures, which it cannot see. The
# exported notebook has none (its terms and figure numbers are the site's text).
_UNRESOLVED = re.compile(r"(Cross reference target was not found: .*\n?)+")


def _errors(errors: list[str]) -> list[str]:
    """The console errors, but jupyterlab-myst's unresolved cross-references."""
    return [error for error in errors if not _UNRESOLVED.fullmatch(error)]


def test_chapter_two_runs_in_jupyterlab_and_its_explorer_recomputes(browser):
    with lab.lab([CHAPTER]) as server:
        page, errors = lab.open_and_run(browser, server, CHAPTER.name,
                                        ["bw_floor", "bw_roofline"])
        try:
            before = lab.svg(page, "bw_floor")
            ms = lab.redraw_ms(page, "bw_floor", lambda: lab.press(
                page, "bw_floor", "batch (requests)", "ArrowRight"))
            after = lab.svg(page, "bw_floor")
        finally:
            page.close()
    # It opened on its defaults (a slider snapping its default to a step would not).
    floor = registered_explorers()["bw_floor"]
    step = floor.tables_at(**floor.defaults())["step"]
    assert f"floor {step['floor_ms'][0]:.2f} ms" in before
    assert ms is not None and after != before, "moving the batch slider changed nothing"
    # Batch 17 is on no grid of the site's: the kernel computed it.
    assert "17 request(s)" in after and "16 request(s)" in before
    assert not _errors(errors), f"console errors in JupyterLab: {_errors(errors)}"


@pytest.mark.build
def test_the_exported_chapter_reads_as_the_site_in_jupyterlab(browser, built_book):
    assert built_book.returncode == 0, built_book.log[-3000:]
    notebook = built_book.html / "notebooks" / f"{CHAPTER.stem}.ipynb"
    # The text before the chapter's first bw_h200_tb_s role, and the number the site prints.
    role = "{glue:text}`bw_h200_tb_s:.2f`"
    before = CHAPTER.read_text(encoding="utf8").split(role)[0].rsplit("`", 1)[-1]
    value = f"{glued(built_book, CHAPTER.stem)['bw_h200_tb_s']:.2f}"
    with lab.lab([notebook]) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            page.goto(server.notebook_url(notebook.name))
            # Every markdown cell drawn by jupyterlab-myst (its output is a ".myst" widget).
            page.wait_for_function("() => document.querySelectorAll('.jp-MarkdownCell .myst')"
                                   f".length >= {_markdown_cells(notebook)}", timeout=120_000)
            text = page.locator(".jp-Notebook").inner_text()
        finally:
            page.close()
    assert " ".join((before + value).split()) in " ".join(text.split())
    assert "{glue" not in text and "{cite" not in text
    # jupyterlab-myst draws the admonitions and exercises.
    assert ":::{admonition}" not in text and "Takeaway" in text
    assert re.search(r"Exercise 1\s*\(", text), "the first exercise is not drawn as one"
    assert not errors, f"console errors in JupyterLab: {errors}"


def _markdown_cells(notebook) -> int:
    import nbformat

    return sum(c.cell_type == "markdown" for c in nbformat.read(notebook, as_version=4).cells)
