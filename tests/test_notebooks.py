"""Runnable notebooks: each chapter as an .ipynb that runs when downloaded on its own.

- The setup cell's ``find_inferlab`` (run with a fake import and a fake folder tree):
  it uses an installed package, finds a clone in or above the notebook's folder or
  next to it, and otherwise prints how to get the book and stops.
- The same cell in a Python that cannot import ``inferlab`` (``python -I -S`` in a
  folder outside the repository) prints the instructions and fails.
- An exported chapter executes from a folder outside the repository (``build``).
- A one-page book built with ``book/_ext/notebooks.py`` offers the notebook on the
  page and in the download button, and a student build strips its solutions (``build``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import types

import jupytext
import nbformat
import pytest
import yaml
from conftest import MYST_HEADER, ROOT, build_book, write_one_page_book
from nbclient import NotebookClient

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import notebooks  # noqa: E402

_spec = importlib.util.spec_from_file_location("export_notebooks", ROOT / "scripts" /
                                               "export_notebooks.py")
export_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(export_notebooks)

CHAPTER = ROOT / "book" / "04_tokenizers.md"
SETUP = notebooks.setup_cells()[1].source


def _find_inferlab():
    """The setup cell's function, from its source (running the cell imports inferlab)."""
    namespace: dict = {}
    exec(compile(SETUP, "<setup cell>", "exec"), namespace)
    return namespace["find_inferlab"]


class FakeImport:
    """``import_module`` that finds ``inferlab`` only once ``folder`` is on ``path``."""

    def __init__(self, path: list[str], folder=None, installed_at=None):
        self.path, self.folder, self.installed_at = path, folder, installed_at

    def __call__(self, name):
        assert name == "inferlab"
        if self.installed_at is not None:
            return types.SimpleNamespace(__file__=str(self.installed_at / "__init__.py"))
        if self.folder is not None and str(self.folder) in self.path:
            return types.SimpleNamespace(__file__=str(self.folder / "inferlab" / "__init__.py"))
        raise ModuleNotFoundError("No module named 'inferlab'", name="inferlab")


def _clone(folder):
    (folder / "inferlab").mkdir(parents=True)
    (folder / "inferlab" / "__init__.py").write_text("")
    (folder / "data").mkdir()
    (folder / "book").mkdir()
    return folder


def test_setup_uses_an_installed_inferlab_with_its_data(tmp_path):
    clone = _clone(tmp_path / "clone")
    path: list[str] = []
    module = _find_inferlab()(start=tmp_path, path=path,
                              import_module=FakeImport(path, installed_at=clone / "inferlab"))
    assert module.__file__.startswith(str(clone))
    assert path == []


@pytest.mark.parametrize("where", ["in the clone's book folder", "next to the clone"])
def test_setup_finds_a_clone_of_the_book(tmp_path, capsys, where):
    name = notebooks.REPOSITORY.rsplit("/", 1)[-1]
    clone = _clone(tmp_path / name)
    start = clone / "book" if where.startswith("in") else tmp_path
    path: list[str] = []
    module = _find_inferlab()(start=start, path=path, import_module=FakeImport(path, clone))
    assert path == [str(clone)]
    assert module.__file__ == str(clone / "inferlab" / "__init__.py")
    assert f"Using the book's repository at {clone}" in capsys.readouterr().out


def test_setup_without_inferlab_prints_how_to_get_it_and_stops(tmp_path, capsys):
    path: list[str] = []
    with pytest.raises(ModuleNotFoundError, match="git clone"):
        _find_inferlab()(start=tmp_path, path=path, import_module=FakeImport(path))
    out = capsys.readouterr().out
    assert f"git clone {notebooks.REPOSITORY}" in out
    assert "pip install -r requirements.txt" in out
    assert "pip install -e" in out


def test_setup_refuses_an_inferlab_installed_without_its_data(tmp_path, capsys):
    site = tmp_path / "site-packages" / "inferlab"
    site.mkdir(parents=True)
    path: list[str] = []
    with pytest.raises(ModuleNotFoundError, match="data/"):
        _find_inferlab()(start=tmp_path, path=path,
                         import_module=FakeImport(path, installed_at=site))
    assert "pip install -r requirements.txt" in capsys.readouterr().out


def test_setup_cell_in_a_python_without_inferlab(tmp_path):
    # -I ignores PYTHONPATH and the user's site, -S the site-packages (where the editable
    # install lives); the setup cell needs only the standard library.
    completed = subprocess.run([sys.executable, "-I", "-S", "-c", SETUP], cwd=tmp_path,
                               capture_output=True, text=True)
    assert completed.returncode != 0
    assert "ModuleNotFoundError" in completed.stderr
    assert f"git clone {notebooks.REPOSITORY}" in completed.stdout
    assert "pip install -r requirements.txt" in completed.stdout


def test_exported_notebook_starts_with_the_setup_cells_and_has_no_outputs(tmp_path):
    assert export_notebooks.main([str(CHAPTER), "--out", str(tmp_path)]) == 0
    path = tmp_path / f"{CHAPTER.stem}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and "pip install" in nb.cells[0].source
    assert nb.cells[1].source == SETUP
    assert "jupytext" not in nb.metadata
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")
    chapter = jupytext.read(CHAPTER)
    assert [c.source for c in nb.cells[2:]] == [c.source for c in chapter.cells]


def test_student_export_has_no_solutions(tmp_path):
    export_notebooks.main([str(CHAPTER), "--out", str(tmp_path), "--student"])
    text = (tmp_path / f"{CHAPTER.stem}.ipynb").read_text(encoding="utf8")
    assert "{exercise}" in text
    assert "solution-start" not in text and "solution-end" not in text


@pytest.mark.build
def test_exported_chapter_runs_outside_the_repository(tmp_path):
    notebooks.export([CHAPTER], tmp_path)
    nb = nbformat.read(tmp_path / f"{CHAPTER.stem}.ipynb", as_version=4)
    assert not tmp_path.resolve().is_relative_to(ROOT)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    setup_output = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "git clone" not in setup_output


PAGE = MYST_HEADER + "\n" + textwrap.dedent(
    """\
    # A chapter

    ```{code-cell} ipython3
    print(6 * 7)
    ```

    ```{exercise} Multiply
    :label: ex-mul

    What is six times seven?
    ```

    ```{solution-start} ex-mul
    :class: dropdown
    ```
    It is SECRET-ANSWER.
    ```{code-cell} ipython3
    6 * 7
    ```
    ```{solution-end}
    ```
    """
)


def _book_with_the_extension(tmp_path, extra_config: dict | None = None):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("local_extensions", {})["notebooks"] = "book/_ext"
    if extra_config:
        sphinx["local_extensions"]["editions"] = "book/_ext"
        sphinx.setdefault("config", {}).update(extra_config)
    source = write_one_page_book(tmp_path / "src", PAGE, page="01_page", config=config)
    return build_book(source, tmp_path / "out")


@pytest.mark.build
def test_book_pages_offer_their_notebook(tmp_path):
    build = _book_with_the_extension(tmp_path)
    assert build.returncode == 0, build.log[-4000:]
    notebook = build.html / "notebooks" / "01_page.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    assert nb.cells[1].source == SETUP
    assert "SECRET-ANSWER" in json.dumps(nb)  # the default site shows solutions
    page = (build.html / "book" / "01_page.html").read_text(encoding="utf8")
    assert page.count('href="../notebooks/01_page.ipynb"') == 2  # the note and the button
    assert "Download this chapter as a notebook" in page


@pytest.mark.build
def test_student_book_notebooks_have_no_solutions(tmp_path):
    build = _book_with_the_extension(tmp_path, {"inferlab_edition": "student"})
    assert build.returncode == 0, build.log[-4000:]
    text = (build.html / "notebooks" / "01_page.ipynb").read_text(encoding="utf8")
    assert "What is six times seven?" in text
    assert "SECRET-ANSWER" not in text
