"""Write each chapter as a Jupyter notebook (.ipynb) that runs when downloaded on its own.

    jupyter-book build . && python scripts/export_notebooks.py   # every chapter in _toc.yml
    python scripts/export_notebooks.py book/04_tokenizers.md --out /tmp/notebooks
    python scripts/export_notebooks.py --student       # solutions removed
    python scripts/export_notebooks.py --raw           # roles as written, no build needed

Each chapter (a ``_toc.yml`` file whose name starts with two digits) is converted with
jupytext, without outputs, to ``<out>/<chapter>.ipynb`` (default out:
``book/notebooks``, git-ignored and left out of the book, so that ``jupyter lab book/``
shows it). Its markdown reads as the site does: every glue role is the number the
built site prints, every citation its author-year text, every ``{numref}`` the figure's
number (``SiteText`` in ``book/_ext/notebooks.py``), read from the book's last build
(``--build``, default ``_build``: the Sphinx environment and the glued outputs myst-nb
kept); a key the build did not glue stops the export. A setup cell is put first: when
the notebook runs in a kernel that cannot import ``inferlab``, it installs the package
with ``%pip`` from ``--repository`` (``inferlab[notebooks] @ git+<repository>``: the
package with the libraries the chapters import), or, without one (the default until the
book is published), stops saying how to install it from a copy of the sources. The
package carries the book's tables, sample texts, traces and tokenizer files, so the
chapter then runs from any folder, offline. A kernel that already has ``inferlab``
(``pip install -r requirements.txt`` in a clone installs it, editable) passes untouched.

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
from notebooks import REPOSITORY, SiteText, export, load_environment  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter .md files (default: every chapter in _toc.yml)")
    parser.add_argument("--out", type=Path, default=ROOT / "book" / "notebooks",
                        help="output folder (default: book/notebooks)")
    parser.add_argument("--build", type=Path, default=ROOT / "_build",
                        help="the book build whose numbers fill the text (default: _build)")
    parser.add_argument("--raw", action="store_true",
                        help="keep the glue, citation, numref and term roles as written "
                             "(no build needed)")
    parser.add_argument("--repository", default=REPOSITORY,
                        help="a published git URL the setup cell installs from (default: "
                             "none, and the cell says how to install from a copy)")
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
    site = None
    try:
        if not args.raw:
            env = load_environment(args.build.resolve())
            texts = {chapter: SiteText.of(env, chapter.stem) for chapter in chapters}
            for chapter, text in texts.items():
                glued = Path(text.where)
                if glued.is_file() and glued.stat().st_mtime < chapter.stat().st_mtime:
                    print(f"warning: {chapter} changed after the build that glued "
                          f"{glued}: its numbers may be out of date", file=sys.stderr)
            site = texts.__getitem__
        written = export(chapters, args.out.resolve(), args.repository, transform, site)
    except ValueError as error:
        parser.error(str(error))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
