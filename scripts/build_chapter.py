"""Build one chapter strictly, on its own, for quick checks while writing it.

    python scripts/build_chapter.py book/01_prefill_decode.md [--out /tmp/chapter]

It builds a small book holding the chapter, the glossary and the bibliography
(so terms and citations resolve) with the book's own ``_config.yml``, executes
every cell afresh and fails on any warning, as the full build in the tests does.
Cross-references to other chapters will not resolve here; the full build checks them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# jupyter-book's CLI module has no __main__ guard, so "-m" would silently do nothing.
JUPYTER_BOOK = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", type=Path, help="path of the chapter's .md file")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    args = parser.parse_args()
    chapter = args.chapter.resolve()
    if not chapter.is_file():
        parser.error(f"chapter: no such file {args.chapter}")
    out = args.out or Path(tempfile.mkdtemp(prefix="chapter-"))
    src = out / "src"
    shutil.rmtree(src, ignore_errors=True)
    (src / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", src / "_config.yml")
    for folder in ("_ext", "_static"):
        shutil.copytree(ROOT / "book" / folder, src / "book" / folder)
    for page in ("glossary.md", "bibliography.md", "data_appendix.md", "references.bib"):
        shutil.copy(ROOT / "book" / page, src / "book" / page)
    shutil.copy(chapter, src / "book" / chapter.name)
    (src / "_toc.yml").write_text(
        f"format: jb-book\nroot: book/{chapter.stem}\nchapters:\n"
        "  - file: book/glossary\n  - file: book/bibliography\n  - file: book/data_appendix\n"
    )
    command = [*JUPYTER_BOOK, "build", str(src),
               "--path-output", str(out), "-W", "-n", "--keep-going"]
    code = subprocess.call(command, cwd=src)
    print(f"\nHTML: {out / '_build' / 'html' / 'book' / (chapter.stem + '.html')}")
    return code


if __name__ == "__main__":
    sys.exit(main())
