"""Write each chapter as a Jupyter notebook (.ipynb) that runs when downloaded on its own.

    python scripts/export_notebooks.py                       # every chapter in _toc.yml
    python scripts/export_notebooks.py book/04_tokenizers.md --out /tmp/notebooks
    python scripts/export_notebooks.py --student       # solutions removed

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

The site offers the same notebooks on every chapter page: the Sphinx extension
``book/_ext/notebooks.py``, which holds the conversion and the setup cell, writes them
at the end of the build to ``_build/html/notebooks/`` and links them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_toc import toc_chapters  # noqa: E402
from notebooks import REPOSITORY, export  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter .md files (default: every chapter in _toc.yml)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "notebooks",
                        help="output folder (default: _build/notebooks)")
    parser.add_argument("--repository", default=REPOSITORY,
                        help=f"clone URL the setup cell prints (default: {REPOSITORY})")
    parser.add_argument("--student", action="store_true",
                        help="remove exercise solutions, as the student edition does")
    args = parser.parse_args(argv)
    chapters = [c.resolve() for c in args.chapters] or toc_chapters()
    for chapter in chapters:
        if not chapter.is_file():
            parser.error(f"chapter: no such file {chapter}")
    transform = None
    if args.student:
        from editions import strip_solutions

        transform = strip_solutions
    for path in export(chapters, args.out.resolve(), args.repository, transform):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
