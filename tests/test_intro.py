"""The introduction's setup command clones the repository the book's configuration names.

The command is written by a cell of the introduction from ``_config.yml``'s
``sphinx.config.inferlab_repository`` (the repository the downloaded notebooks install
from), so it cannot drift from it. The quick test runs that cell as the build does,
from ``book/``; the build test reads the page the reader gets.
"""

from __future__ import annotations

import ast
import html
import os
import re

import jupytext
import pytest
import yaml
from conftest import ROOT

INTRO = ROOT / "book" / "intro.md"


def configured_repository() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"]["inferlab_repository"]


def clone_lines(text: str) -> list[str]:
    return re.findall(r"git clone \S+ && cd \S+", text)


def run_clone_cell() -> str:
    """The Markdown the introduction's clone cell displays, run from ``book/``."""
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
    os.chdir(INTRO.parent)
    try:
        exec(compile(ast.Module(statements, []), str(INTRO), "exec"), namespace)
        shown = eval(compile(ast.Expression(last.value), str(INTRO), "eval"), namespace)
    finally:
        os.chdir(here)
    return shown.data


def test_the_clone_command_names_the_configured_repository():
    repository = configured_repository()
    assert repository.startswith("https://")
    lines = clone_lines(run_clone_cell())
    assert lines == [f"git clone {repository} && cd {repository.rsplit('/', 1)[-1]}"]
    assert "<this repository>" not in INTRO.read_text(encoding="utf-8")


@pytest.mark.build
def test_the_published_introduction_shows_that_command(built_book):
    page = (built_book.html / "book" / "intro.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    repository = configured_repository()
    assert clone_lines(text) == [
        f"git clone {repository} && cd {repository.rsplit('/', 1)[-1]}"]
