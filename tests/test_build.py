"""The strict executed build is the notebook test.

The first tests read the real book's build. The others build books with the real
``_config.yml`` and deliberate faults, one a page, and check that the strict build
fails and names each fault on its page: a build that could not fail would test
nothing.
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


# A cell that raises stops the build there (nb_execution_raise_on_error), so it gets a
# book of its own; every other fault is one page of a single book, built once.
RAISING_CELL = """\
    # Page
    ```{code-cell} ipython3
    raise RuntimeError("deliberate failure")
    ```
    """

BREAKAGES = {
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
    "a figure that breaks a figure rule": (
        # inferlab.pages.figure_rules warns when a watched figure is drawn; the warning is
        # the cell's only stderr, and the build fails on it.
        """\
        # Page
        ```{code-cell} ipython3
        from inferlab.pages.plotting import figure, label_kind
        fig, ax = figure()
        ax.bar(["a", "b"], [1.05, 1.17])
        ax.set_ylim(0.9, 1.2)
        label_kind(ax, "modelled")
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


def _page_name(fault: str) -> str:
    return "fault_" + "_".join(fault.split())


@pytest.fixture(scope="module")
def broken_book(tmp_path_factory):
    """One strict build of a book whose every page but the first holds one fault."""
    tmp = tmp_path_factory.mktemp("broken")
    source = write_one_page_book(tmp / "src", MYST_HEADER + "# A sound page\n", page="index")
    for fault, (body, _) in BREAKAGES.items():
        # A cell of its own on every page: pages with the same code share one jupyter-cache
        # entry, which the build's two workers would then race to write.
        own = f"```{{code-cell}} ipython3\npage = {_page_name(fault)!r}\n```\n"
        (source / "book" / f"{_page_name(fault)}.md").write_text(
            MYST_HEADER + own + textwrap.dedent(body))
    (source / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n" + "".join(
        f"  - file: book/{_page_name(fault)}\n" for fault in BREAKAGES))
    return build_book(source, tmp / "out")


def test_strict_build_fails_on_a_cell_that_raises(tmp_path):
    build = _one_page_book(tmp_path, RAISING_CELL)
    assert build.returncode != 0, "the build passed despite a cell that raises"
    # The tail every build test quotes on failure names the failed cell's error.
    assert "RuntimeError: deliberate failure" in build.log[-3000:], build.log[-3000:]


@pytest.mark.parametrize("fault", BREAKAGES)
def test_strict_build_fails_on(fault, broken_book):
    # -W makes every warning an error, so a warning or error reported against the fault's
    # own page is enough to fail a build that held only that page.
    _, evidence = BREAKAGES[fault]
    assert broken_book.returncode != 0, f"the build passed despite {fault}"
    page = f"/book/{_page_name(fault)}.md:"
    reported = [line for line in broken_book.log.splitlines()
                if page in line and ("WARNING" in line or "ERROR" in line)]
    assert any(evidence in line for line in reported), broken_book.log[-3000:]


def test_the_figure_rule_is_what_the_cell_wrote_to_stderr(broken_book):
    page = _page_name("a figure that breaks a figure rule")
    executed = broken_book.html.parent / "jupyter_execute" / "book" / f"{page}.ipynb"
    stderr = ["".join(output["text"]) for cell in json.loads(executed.read_text())["cells"]
              for output in cell.get("outputs", []) if output.get("name") == "stderr"]
    assert any("FigureRuleWarning" in text and "above zero" in text for text in stderr), stderr
