"""Student and instructor editions: one-page books built with scripts/build_edition.py.

The student edition must carry no solution text anywhere in its site: not the
explanation, not the code of a gated solution, not that code's output, not the
page source offered for download. The instructor edition shows every solution
expanded (no dropdown).
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
from conftest import MYST_HEADER, ROOT, STRICT_FLAGS, write_one_page_book

pytestmark = pytest.mark.build

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from editions import strip_solutions  # noqa: E402

_spec = importlib.util.spec_from_file_location("build_edition", ROOT / "scripts" /
                                               "build_edition.py")
build_edition = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_edition)

PAGE = MYST_HEADER + "\n" + textwrap.dedent(
    """\
    # Page

    ```{exercise} Add two numbers
    :label: ex-page-add
    What is QUESTION_TEXT_OK two plus two?
    ```

    ```{solution-start} ex-page-add
    :class: dropdown
    ```
    EXPLANATION_SECRET_TEXT: add them.
    ```{code-cell} ipython3
    answer = "OUTPUT_" + "SECRET_" + str(2 + 2)
    print(answer)
    ```
    ```{solution-end}
    ```

    ```{exercise} A plain one
    :label: ex-page-plain
    Name a colour.
    ```

    ```{solution} ex-page-plain
    :class: dropdown
    PLAIN_SOLUTION_SECRET blue.
    ```
    """
)

SECRETS = ("EXPLANATION_SECRET_TEXT", "OUTPUT_SECRET_4", "PLAIN_SOLUTION_SECRET",
           '"SECRET_"')


def _site_text(html_dir) -> str:
    return "\n".join(path.read_text(encoding="utf8", errors="replace")
                     for path in html_dir.rglob("*")
                     if path.is_file() and path.suffix in (".html", ".md", ".txt", ".js",
                                                           ".ipynb", ".json"))


@pytest.fixture(scope="module")
def one_page_source(tmp_path_factory):
    return write_one_page_book(tmp_path_factory.mktemp("edition") / "src", PAGE)


def _build(source, edition):
    out = source.parent / edition
    code = build_edition.main([edition, "--source", str(source), "--out", str(out),
                               *STRICT_FLAGS])
    assert code == 0, f"{edition} edition failed to build"
    return out / "_build" / "html"


def test_student_edition_has_no_solution_text(one_page_source):
    html = _build(one_page_source, "student")
    page = (html / "book" / "page.html").read_text(encoding="utf8")
    assert "QUESTION_TEXT_OK" in page  # the exercise itself stays
    site = _site_text(html)
    for secret in SECRETS:
        assert secret not in site, secret
    assert 'class="solution' not in page


def test_instructor_edition_shows_solutions_expanded(one_page_source):
    html = _build(one_page_source, "instructor")
    page = (html / "book" / "page.html").read_text(encoding="utf8")
    for secret in ("EXPLANATION_SECRET_TEXT", "OUTPUT_SECRET_4", "PLAIN_SOLUTION_SECRET"):
        assert secret in page, secret
    assert 'class="solution admonition"' in page
    assert "solution dropdown" not in page


def test_strip_solutions_keeps_exercises():
    stripped = strip_solutions(PAGE)
    assert "QUESTION_TEXT_OK" in stripped and "Name a colour" in stripped
    for secret in ("EXPLANATION_SECRET_TEXT", "PLAIN_SOLUTION_SECRET", "SECRET_"):
        assert secret not in stripped


def test_every_chapter_solution_is_stripped():
    for chapter in sorted((ROOT / "book").glob("0*.md")):
        stripped = strip_solutions(chapter.read_text(encoding="utf8"))
        assert "{solution" not in stripped, chapter.name


def test_merge_is_recursive_and_editions_are_checked():
    merged = build_edition.merge({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": 5}})
    assert merged == {"a": {"b": 5, "c": 2}, "d": 3}
    config = build_edition.edition_config("student")
    assert config["sphinx"]["config"]["inferlab_edition"] == "student"
    assert config["sphinx"]["local_extensions"]["freshness"] == str(ROOT / "book" / "_ext")
    with pytest.raises(ValueError, match="edition"):
        build_edition.edition_config("teacher")
