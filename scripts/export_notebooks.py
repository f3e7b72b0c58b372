"""Write each chapter as a Jupyter notebook (.ipynb) that runs when downloaded on its own.

    python scripts/export_notebooks.py                       # every chapter in _toc.yml
    python scripts/export_notebooks.py book/04_tokenizers.md --out /tmp/notebooks

Each chapter (a ``_toc.yml`` file whose name starts with two digits) is converted with
jupytext, without outputs, to ``<out>/<chapter>.ipynb`` (default out:
``_build/notebooks``). A setup cell is put first. When the notebook runs, it

1. imports ``inferlab`` if it is installed (``pip install -r requirements.txt`` in a
   clone installs it, editable);
2. otherwise looks for the repository in the working folder (the notebook's, in
   Jupyter) and its parents, and in a clone named like the repository inside any of
   them (a folder holding both ``inferlab/`` and ``data/``; a notebook saved into the
   clone's ``book/`` folder, or next to the clone, is found) and puts it on
   ``sys.path``;
3. otherwise prints how to get it (clone, ``pip install -r requirements.txt``) and
   raises ``ModuleNotFoundError``.

The package finds its data (``data/``, tokenizer files) relative to its own folder, so
the setup cell also checks that ``data/`` sits next to the package it imported (an
editable install or a clone; a plain ``pip install`` of the package alone has none).

The site offers these notebooks on every chapter page: ``book/_ext/notebooks.py``
calls :func:`export` at the end of the Sphinx build.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
#: Where the book's sources live; the setup cell's instructions name it.
REPOSITORY = "https://github.com/inferlab/tokens-per-second"

SETUP_MARKDOWN = """\
**Setup.** This notebook is one chapter of *Tokens per Second Is Not a Property of a
Chip*. It needs the book's helper package `inferlab` and its data. The next cell finds
them: an installed `inferlab` (`pip install -r requirements.txt` in a clone of the
repository installs it), or a clone of the repository in this notebook's folder or a
folder above it. If it finds neither, it prints how to get them:

```bash
git clone {repository}
cd {folder}
pip install -r requirements.txt
jupyter lab book/
```
"""

# The setup cell's code. ``find_inferlab`` is kept a function of its inputs so that the
# tests can run it with a fake import and a fake folder tree.
SETUP_CODE = '''\
# Setup: find the book's helper package `inferlab` (see the note above).
import importlib
import sys
from pathlib import Path

REPOSITORY = "{repository}"


def find_inferlab(start=None, import_module=importlib.import_module, path=sys.path):
    """Import inferlab, from the environment or from a clone of the book above `start`.

    Returns the imported module; raises ModuleNotFoundError with instructions otherwise.
    """
    get = (
        "Get them with:\\n\\n"
        f"    git clone {{REPOSITORY}}\\n"
        f"    cd {{REPOSITORY.rstrip('/').rsplit('/', 1)[-1]}}\\n"
        "    pip install -r requirements.txt\\n\\n"
        "then open this notebook from the clone's book/ folder (jupyter lab book/), or "
        "run `pip install -e <path of the clone>` in the environment of this kernel."
    )
    try:
        module = import_module("inferlab")
    except ModuleNotFoundError:
        module = None
    if module is None:
        start = Path(start or Path.cwd()).resolve()
        name = REPOSITORY.rstrip("/").rsplit("/", 1)[-1]
        places = [place for folder in (start, *start.parents) for place in (folder, folder / name)]
        for folder in places:
            if (folder / "inferlab" / "__init__.py").is_file() and (folder / "data").is_dir():
                path.insert(0, str(folder))
                print(f"Using the book's repository at {{folder}}")
                module = import_module("inferlab")
                break
    if module is not None:
        if (Path(module.__file__).resolve().parent.parent / "data").is_dir():
            return module
        message = ("inferlab is installed without the book's data/ folder next to it "
                   "(install it editable, from a clone).\\n" + get)
        print(message)
        raise ModuleNotFoundError(message)
    message = (
        "This notebook needs the book's helper package `inferlab` and its data, and "
        "neither is installed nor found in this folder or a folder above it.\\n" + get
    )
    print(message)
    raise ModuleNotFoundError(message)


inferlab = find_inferlab()
'''


def toc_chapters(toc_file: Path = ROOT / "_toc.yml") -> list[Path]:
    """The chapter files of the table of contents: names that start with two digits."""
    toc = yaml.safe_load(toc_file.read_text(encoding="utf8"))
    files: list[str] = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    root = toc_file.parent
    return [root / f"{name}.md" for name in files if re.match(r"\d\d", Path(name).name)]


def setup_cells(repository: str = REPOSITORY) -> list:
    """The markdown note and the code cell that open every exported notebook."""
    folder = repository.rstrip("/").rsplit("/", 1)[-1]
    return [
        nbformat.v4.new_markdown_cell(SETUP_MARKDOWN.format(repository=repository,
                                                            folder=folder),
                                      metadata={"tags": ["setup"]}),
        nbformat.v4.new_code_cell(SETUP_CODE.format(repository=repository),
                                  metadata={"tags": ["setup"]}),
    ]


def chapter_notebook(chapter: Path, repository: str = REPOSITORY) -> nbformat.NotebookNode:
    """The chapter as a notebook: jupytext's conversion with the setup cells first."""
    nb = jupytext.read(chapter)
    nb.cells = setup_cells(repository) + nb.cells
    nb.metadata.pop("jupytext", None)  # a plain notebook, not paired with the .md file
    nb.metadata.setdefault("kernelspec", {"display_name": "Python 3", "language": "python",
                                          "name": "python3"})
    return nb


def export(chapters: list[Path], out: Path, repository: str = REPOSITORY) -> list[Path]:
    """Write ``<out>/<chapter>.ipynb`` for each chapter; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for chapter in chapters:
        target = out / f"{chapter.stem}.ipynb"
        nbformat.write(chapter_notebook(chapter, repository), target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter .md files (default: every chapter in _toc.yml)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "notebooks",
                        help="output folder (default: _build/notebooks)")
    args = parser.parse_args(argv)
    chapters = [c.resolve() for c in args.chapters] or toc_chapters()
    for chapter in chapters:
        if not chapter.is_file():
            parser.error(f"chapter: no such file {chapter}")
    for path in export(chapters, args.out.resolve()):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
