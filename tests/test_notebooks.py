"""Runnable notebooks: each chapter as an .ipynb that runs when downloaded on its own.

- The setup cell, in a Python that cannot import ``inferlab`` (``python -I -S``, with a
  stand-in for IPython's ``%pip``), installs the package from a published repository
  with the notebooks extra and then imports it; with none published (the book's own
  configuration today) it stops, saying how to install from a copy of the sources, and
  names no repository. In a kernel that has ``inferlab`` it does nothing. The note above
  it shows the same ``pip install`` command.
- An exported chapter starts with those cells, and ``--repository`` changes where the
  cell installs from (``--raw``: its roles as written, as jupytext converts them).
- Its markdown reads as the site prints it: each glue role the value myst-nb formats,
  each citation sphinxcontrib-bibtex's author-year text, each ``{numref}`` the figure's
  number and each ``{term}`` and ``{func}`` its text; a key the build did not glue stops
  the export.
- The site's notebook and ``export_notebooks.py`` over the same build show the number
  the built page shows for a known glue key, and no chapter keeps a raw role (``build``).
- An exported chapter executes from a folder outside the repository (``build``).
- A one-page book built with ``book/_ext/notebooks.py`` offers the notebook on the
  page and in the download button, and a student build strips its solutions (``build``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
import types

import jupytext
import nbformat
import pytest
import yaml
from conftest import MYST_HEADER, ROOT, build_book, glued, write_one_page_book
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

import inferlab

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import notebooks  # noqa: E402

_spec = importlib.util.spec_from_file_location("export_notebooks", ROOT / "scripts" /
                                               "export_notebooks.py")
export_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(export_notebooks)

CHAPTER = ROOT / "book" / "04_tokenizers.md"
#: A published repository, as a fork would configure it.
FORK = "https://example.org/someone/tokens-per-second"
SETUP = notebooks.setup_cells()[1].source
FORK_SETUP = notebooks.setup_cells(FORK)[1].source
REQUIREMENT = notebooks.REQUIREMENT.format(repository=FORK)


def _as_python(cell: str) -> str:
    """The cell as IPython runs it: ``%pip ...`` becomes a ``run_line_magic`` call."""
    return TransformerManager().transform_cell(cell)


# A stand-in for IPython in a plain Python: ``%pip`` prints what it was asked and
# "installs" inferlab by writing an empty package into a folder on sys.path.
FAKE_IPYTHON = """
import pathlib, sys
site = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(site))


class Shell:
    def run_line_magic(self, name, line):
        print("magic:", name, line)
        (site / "inferlab").mkdir()
        (site / "inferlab" / "__init__.py").write_text("")


def get_ipython():
    return Shell()
"""


def test_setup_cell_installs_inferlab_when_the_kernel_lacks_it(tmp_path):
    # -I ignores PYTHONPATH and the user's site, -S the site-packages (where the editable
    # install lives); the cell needs only the standard library.
    site = tmp_path / "site"
    site.mkdir()
    code = FAKE_IPYTHON + _as_python(FORK_SETUP) + "\nprint('imported:', inferlab.__file__)\n"
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(site)], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f'magic: pip install --quiet "{REQUIREMENT}"',
        f"imported: {site / 'inferlab' / '__init__.py'}",
    ]


def test_without_a_published_repository_the_setup_cell_stops_saying_how_to_install(tmp_path):
    assert yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"][
        "inferlab_repository"] == notebooks.REPOSITORY == ""
    site = tmp_path / "site"
    site.mkdir()
    code = FAKE_IPYTHON + _as_python(SETUP) + "\nprint('imported')\n"
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(site)], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode != 0 and "magic:" not in done.stdout and "imported" not in done.stdout
    assert "ModuleNotFoundError: inferlab is not installed in this kernel" in done.stderr
    assert "pip install '/path/to/the/book[notebooks]'" in done.stderr
    note = notebooks.setup_cells()[0].source
    assert 'pip install "/path/to/the/book[notebooks]"' in note
    assert "git+" not in note + SETUP and "github.com" not in note + SETUP


@pytest.mark.parametrize("cell", [SETUP, FORK_SETUP], ids=["unpublished", "published"])
def test_setup_cell_leaves_an_installed_inferlab_alone(cell):
    calls: list = []
    shell = types.SimpleNamespace(run_line_magic=lambda *args: calls.append(args))
    namespace = {"get_ipython": lambda: shell}
    exec(compile(_as_python(cell), "<setup cell>", "exec"), namespace)
    assert calls == []
    assert namespace["inferlab"] is inferlab


def test_setup_note_shows_the_install_command():
    note = notebooks.setup_cells(FORK)[0].source
    assert f'pip install "{REQUIREMENT}"' in note
    assert "pip install -r requirements.txt" in notebooks.setup_cells()[0].source
    assert "pip install -r requirements.txt" in note


def test_export_installs_from_the_repository_it_is_given(tmp_path):
    assert export_notebooks.main([str(CHAPTER), "--out", str(tmp_path), "--repository",
                                  FORK, "--raw"]) == 0
    nb = nbformat.read(tmp_path / f"{CHAPTER.stem}.ipynb", as_version=4)
    assert f'%pip install --quiet "inferlab[notebooks] @ git+{FORK}"' in nb.cells[1].source


def test_exported_notebook_starts_with_the_setup_cells_and_has_no_outputs(tmp_path):
    assert export_notebooks.main([str(CHAPTER), "--out", str(tmp_path), "--raw"]) == 0
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
    export_notebooks.main([str(CHAPTER), "--out", str(tmp_path), "--student", "--raw"])
    text = (tmp_path / f"{CHAPTER.stem}.ipynb").read_text(encoding="utf8")
    assert "{exercise}" in text
    assert "solution-start" not in text and "solution-end" not in text


def _site_text(**plain: str) -> notebooks.SiteText:
    """What a build printed for page 01_page, whose glued outputs' text/plain forms are
    ``plain``, over the book's bibliography, with one numbered figure."""
    glue = {key: {"data": {"text/plain": text}} for key, text in plain.items()}
    return notebooks.SiteText("01_page", glue, "01_page.glue.json",
                              *notebooks.bibliography([ROOT / "book" / "references.bib"]),
                              {"fig-a": "Fig. 1.2"})


def test_markdown_reads_as_the_site_prints_it():
    site = _site_text(tflop="989.4000000000001", share="0.4567", chip="'H200'",
                      tokens="21494.0")
    markdown = ("Both do {glue:text}`tflop:,.1f` TFLOP/s, {glue:text}`share:.0%` of it on "
                "the {glue:text}`chip` at {glue:text}`tokens:,.0f` tokens ({numref}`fig-a`); "
                "the {term}`roofline <Roofline>` {cite:p}`williams2009roofline,kwon2023vllm` "
                "of {cite:t}`williams2009roofline` ({func}`~inferlab.model.roofline.attainable`, "
                "{func}`inferlab.model.roofline.attainable`).")
    kwon = site.formatted["kwon2023vllm"].label  # as the bibliography labels it, lettered
    assert site.fill(markdown) == (
        "Both do 989.4 TFLOP/s, 46% of it on the H200 at 21,494 tokens (Fig. 1.2); the "
        f"roofline [Williams et al., 2009; {kwon}] of Williams et al. [2009] "
        "(`attainable()`, `inferlab.model.roofline.attainable()`).")


def test_a_role_the_build_cannot_fill_stops_the_export():
    site = _site_text(tflop="989.4")
    with pytest.raises(ValueError, match=r"'watts'.*01_page\.glue\.json"):
        site.fill("{glue:text}`watts:.0f` W")
    with pytest.raises(ValueError, match="'nobody2099'"):
        site.fill("{cite:p}`nobody2099`")
    with pytest.raises(ValueError, match="'fig-b'"):
        site.fill("{numref}`fig-b`")


def test_export_without_a_build_says_to_build_first(tmp_path, capsys):
    with pytest.raises(SystemExit):
        export_notebooks.main([str(CHAPTER), "--out", str(tmp_path), "--build",
                               str(tmp_path / "_build")])
    assert "build the book first" in capsys.readouterr().err


@pytest.mark.build
def test_exported_chapter_runs_outside_the_repository(tmp_path):
    notebooks.export([CHAPTER], tmp_path)
    nb = nbformat.read(tmp_path / f"{CHAPTER.stem}.ipynb", as_version=4)
    assert not tmp_path.resolve().is_relative_to(ROOT)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[1].outputs == []  # the kernel has inferlab: nothing installed or printed


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


# A glue key of chapter 2 and its format in the chapter: the H200's memory bandwidth.
GLUED_CHAPTER, GLUED_KEY, GLUED_FORMAT = "02_bandwidth_floor", "bw_h200_tb_s", ".2f"
RAW_ROLE = re.compile(r"\{(glue|cite|numref|term|func)[:a-z]*\}`")


def _markdown(nb) -> str:
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")


@pytest.mark.build
def test_notebooks_show_the_numbers_the_site_shows(built_book, tmp_path):
    assert built_book.returncode == 0, built_book.log[-3000:]
    page = (built_book.html / "book" / f"{GLUED_CHAPTER}.html").read_text(encoding="utf8")
    value = format(glued(built_book, GLUED_CHAPTER)[GLUED_KEY], GLUED_FORMAT)
    assert f'<span class="pasted-text">{value}</span>' in page
    # Where the chapter writes the role, the notebook has the page's number: the text
    # between the previous role (or the cell's start) and this one, then the number.
    role = f"{{glue:text}}`{GLUED_KEY}:{GLUED_FORMAT}`"
    source = (ROOT / "book" / f"{GLUED_CHAPTER}.md").read_text(encoding="utf8")
    before = source.split(role)[0].rsplit("`", 1)[-1].rsplit("\n\n", 1)[-1]
    site = nbformat.read(built_book.html / "notebooks" / f"{GLUED_CHAPTER}.ipynb", as_version=4)
    assert before + value in _markdown(site)
    # The figure the chapter's first {numref} names, numbered as on the page.
    label = re.search(r"\{numref\}`([^`]+)`", source).group(1)
    number = re.search(rf'href="#{label}"><span class="std std-numref">([^<]+)</span>',
                       page).group(1)
    assert f"{number} " in _markdown(site)
    # The command line, over the same build, writes the same notebooks.
    assert export_notebooks.main(["--out", str(tmp_path), "--build",
                                  str(built_book.html.parent)]) == 0
    for path in sorted(tmp_path.glob("*.ipynb")):
        exported = _markdown(nbformat.read(path, as_version=4))
        assert exported == _markdown(nbformat.read(built_book.html / "notebooks" / path.name,
                                                   as_version=4)), path.name
        left = RAW_ROLE.findall(exported)
        assert not left, f"{path.name} still has raw roles: {sorted(set(left))}"
