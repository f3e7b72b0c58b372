"""The strict executed build is the notebook test.

The first test builds the real book. The others build a one-page book with the
real ``_config.yml`` and one deliberate fault each, and check that the strict
build fails and names the fault: a build that could not fail would test nothing.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from conftest import MYST_HEADER, ROOT, build_book, write_one_page_book

pytestmark = pytest.mark.build

def test_book_builds_strictly_with_every_notebook_executed(built_book):
    assert built_book.returncode == 0, built_book.log[-6000:]
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [
        chapter["file"] for part in toc["parts"] for chapter in part["chapters"]
    ]
    for page in files:
        assert (built_book.html / f"{page}.html").is_file(), page


def test_build_executes_every_notebook_and_serves_none_from_cache(built_book):
    # myst-nb logs "Executed notebook in ..." once per notebook it runs and "Using cached
    # notebook" for one it takes from jupyter-cache: every page with code must run afresh.
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]] + [
        chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    notebooks = [page for page in pages
                 if "{code-cell}" in (ROOT / f"{page}.md").read_text(encoding="utf-8")]
    assert "Using cached notebook" not in built_book.log
    assert built_book.log.count("Executed notebook in") == len(notebooks), notebooks


def test_long_cells_leave_no_progress_bar_on_the_site(built_book):
    # inferlab.pages.progress draws a bar while a cell runs in a kernel, the build's included,
    # and must leave an empty output behind it. (A code listing escapes "<", so only a
    # rendered bar would match.)
    assert built_book.returncode == 0, built_book.log[-3000:]
    pages = sorted(built_book.html.rglob("*.html"))
    assert pages
    for page in pages:
        assert "<progress" not in page.read_text(encoding="utf-8"), page.name


def _one_page_book(tmp_path, body: str):
    source = write_one_page_book(tmp_path / "src", MYST_HEADER + textwrap.dedent(body))
    return build_book(source, tmp_path / "out")


BREAKAGES = {
    "a cell that raises": (
        """\
        # Page
        ```{code-cell} ipython3
        raise RuntimeError("deliberate failure")
        ```
        """,
        "deliberate failure",
    ),
    "a warning printed by a cell": (
        """\
        # Page
        ```{code-cell} ipython3
        import warnings
        warnings.warn("deliberate warning")
        ```
        """,
        "stderr was found in the cell outputs",
    ),
    "a Sphinx warning": (
        """\
        # Page
        ```{no-such-directive}
        ```
        """,
        "no-such-directive",
    ),
    "a missing glue key": (
        """\
        # Page
        The value is {glue:text}`no_such_key`.
        """,
        "no_such_key",
    ),
    "a broken cross-reference": (
        """\
        # Page
        See {numref}`fig-that-does-not-exist`.
        """,
        "fig-that-does-not-exist",
    ),
    "an undefined glossary term": (
        """\
        # Page
        A {term}`word nobody defined`.
        """,
        "word nobody defined",
    ),
}


@pytest.mark.parametrize("fault", BREAKAGES)
def test_strict_build_fails_on(fault, tmp_path):
    body, evidence = BREAKAGES[fault]
    build = _one_page_book(tmp_path, body)
    assert build.returncode != 0, f"the build passed despite {fault}"
    assert evidence in build.log, build.log[-3000:]


def test_strict_build_fails_on_a_figure_that_breaks_a_figure_rule(tmp_path):
    # inferlab.pages.figure_rules warns when a watched figure is drawn; the warning is the
    # cell's only stderr, and the build fails on it.
    build = _one_page_book(tmp_path, """\
        # Page
        ```{code-cell} ipython3
        from inferlab.pages.plotting import figure, label_kind
        fig, ax = figure()
        ax.bar(["a", "b"], [1.05, 1.17])
        ax.set_ylim(0.9, 1.2)
        label_kind(ax, "modelled")
        ```
        """)
    assert build.returncode != 0, "the build passed despite a bar axis starting at 0.9"
    assert "stderr was found in the cell outputs" in build.log, build.log[-3000:]
    executed = build.html.parent / "jupyter_execute" / "book" / "page.ipynb"
    stderr = ["".join(output["text"]) for cell in json.loads(executed.read_text())["cells"]
              for output in cell.get("outputs", []) if output.get("name") == "stderr"]
    assert any("FigureRuleWarning" in text and "above zero" in text for text in stderr), stderr
