"""The exercise tests check the book, not copies of it.

Every exercise's solution glues its answers under keys named for the exercise's label
(``ex-bw-ridge`` glues ``ex_bw_ridge_...``), and a test in ``test_exercises_*.py``
reads them from the book build. The last test edits one number in a real solution,
builds it, and shows that the exercise's test then fails.
"""

from __future__ import annotations

import re

import pytest
import test_exercises_endpoint as endpoint_exercises
from conftest import MYST_HEADER, ROOT, build_book, glued, write_one_page_book

CHAPTERS = sorted(path.stem for path in (ROOT / "book").glob("[0-9][0-9]_*.md"))
EXERCISE_TESTS = "\n".join(path.read_text(encoding="utf-8")
                           for path in sorted((ROOT / "tests").glob("test_exercises_*.py")))


def exercise_labels(chapter: str) -> list[str]:
    text = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    return re.findall(r"^```\{exercise\}.*\n:label: (ex-[\w-]+)$", text, flags=re.M)


def key_prefix(label: str) -> str:
    return label.replace("-", "_") + "_"


def solution_code(chapter: str, label: str) -> list[str]:
    """The code cells of one exercise's solution, as the chapter has them."""
    text = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    start = text.index(f"```{{solution-start}} {label}\n")
    block = text[start:text.index("```{solution-end}", start)]
    return re.findall(r"^```\{code-cell\} ipython3\n(.*?)^```$", block, flags=re.M | re.S)


def test_every_chapter_with_exercises_is_found():
    assert sum(len(exercise_labels(chapter)) for chapter in CHAPTERS) >= 45


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_has_a_test_that_reads_its_glued_answers(chapter):
    untested = [label for label in exercise_labels(chapter)
                if f'"{key_prefix(label)}' not in EXERCISE_TESTS]
    assert not untested, f"no test reads the answers of {untested}"


@pytest.mark.build
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_glues_its_answers(built_book, chapter):
    keys = glued(built_book, chapter)
    unglued = [label for label in exercise_labels(chapter)
               if not any(key.startswith(key_prefix(label)) for key in keys)]
    assert not unglued, f"these solutions glue no answer: {unglued}"


@pytest.mark.build
def test_an_edited_solution_fails_its_test(tmp_path):
    # ex-ep-4's own solution with the throughput shared among 4 GPUs instead of 8.
    cells = solution_code("06_endpoint_lab", "ex-ep-4")
    edited = [cell.replace("gpus=8", "gpus=4") for cell in cells]
    assert edited != cells, "the solution no longer says gpus=8; pick another edit"
    setup = ("from inferlab.lab import endpoint_metrics as em\n"
             "from inferlab.pages.glue import number\n")
    page = MYST_HEADER + "# Page\n\n" + "".join(
        f"```{{code-cell}} ipython3\n{cell}```\n\n" for cell in [setup, *edited])
    build = build_book(write_one_page_book(tmp_path / "src", page), tmp_path / "out")
    assert build.returncode == 0, build.log[-3000:]
    answers = glued(build, "page")
    with pytest.raises(AssertionError):
        endpoint_exercises.test_ex_ep_4_interactivity_and_throughput_per_gpu(answers)
