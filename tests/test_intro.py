"""The introduction's setup commands start where the book's configuration says its sources are.

The commands are written by a cell of the introduction from ``_config.yml``'s
``sphinx.config.inferlab_repository`` (the repository the downloaded notebooks install
from), so they cannot drift from it: a clone command when it names a repository, and
none (the commands start in a copy of the sources) while it is empty, as it is until the
book is published, so that no page names a repository that does not exist. The quick
tests run that cell as the build does, from ``book/``, on the real configuration and on
a published one; the build test reads the page the reader gets.
"""

from __future__ import annotations

import ast
import html
import os
import re
import shutil

import jupytext
import pytest
import yaml
from conftest import ROOT

INTRO = ROOT / "book" / "intro.md"
COMMANDS = ["python -m venv .venv && source .venv/bin/activate",
            "pip install -r requirements.txt -c constraints.txt", "jupyter lab book/"]


def configured_repository() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"]["inferlab_repository"]


def clone_lines(text: str) -> list[str]:
    return re.findall(r"git clone \S+ && cd \S+", text)


def run_clone_cell(root=ROOT) -> str:
    """The Markdown the introduction's clone cell displays, run from ``root/book/``."""
    notebook = jupytext.read(INTRO)
    cells = [cell for cell in notebook.cells
             if cell.cell_type == "code" and "inferlab_repository" in cell.source]
    assert len(cells) == 1, "the introduction should write its clone command in one cell"
    body = ast.parse(cells[0].source)
    *statements, last = body.body
    namespace: dict = {}
    exec("import yaml\nfrom pathlib import Path\n"  # the intro's first cell imports these
         "from IPython.display import Markdown", namespace)
    here = os.getcwd()
    os.chdir(root / "book")
    try:
        exec(compile(ast.Module(statements, []), str(INTRO), "exec"), namespace)
        shown = eval(compile(ast.Expression(last.value), str(INTRO), "eval"), namespace)
    finally:
        os.chdir(here)
    return shown.data


def test_an_unpublished_book_names_no_repository_and_starts_in_a_copy():
    assert configured_repository() == ""
    shown = run_clone_cell()
    assert clone_lines(shown) == [] and "github.com" not in shown
    assert "cd /path/to/the/book" in shown
    assert all(command in shown for command in COMMANDS)
    assert "<this repository>" not in INTRO.read_text(encoding="utf-8")


def test_a_published_repository_is_cloned_first(tmp_path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["sphinx"]["config"]["inferlab_repository"] = "https://example.org/me/my-book"
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (tmp_path / "book").mkdir()
    shutil.copy(INTRO, tmp_path / "book" / "intro.md")
    shown = run_clone_cell(tmp_path)
    assert clone_lines(shown) == ["git clone https://example.org/me/my-book && cd my-book"]
    assert all(command in shown for command in COMMANDS)


@pytest.mark.build
def test_the_published_introduction_shows_those_commands(built_book):
    page = (built_book.html / "book" / "intro.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert clone_lines(text) == [] and "cd /path/to/the/book" in text
    assert all(command in text for command in COMMANDS)
