"""Write each chapter as a Jupyter notebook (.ipynb) that runs when downloaded on its own.

    python scripts/export_notebooks.py                       # every chapter in _toc.yml
    python scripts/export_notebooks.py book/04_tokenizers.md --out /tmp/notebooks
    python scripts/export_notebooks.py --student       # solutions removed

Each chapter (a ``_toc.yml`` file whose name starts with two digits) is converted with
jupytext, without outputs, to ``<out>/<chapter>.ipynb`` (default out:
``_build/notebooks``). A setup cell is put first: when the notebook runs in a kernel
that cannot import ``inferlab``, it installs the package with ``%pip`` from the
repository (``inferlab[notebooks] @ git+<repository>``: the package with the libraries
the chapters import). The package carries the book's tables, sample texts, traces and
tokenizer files, so the chapter then runs from any folder, offline. A kernel that
already has ``inferlab`` (``pip install -r requirements.txt`` in a clone installs it,
editable) installs nothing.

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
                        help=f"repository the setup cell installs from (default: {REPOSITORY})")
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
