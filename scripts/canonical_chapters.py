"""Rewrite the chapters in the exact form jupytext writes them.

    python scripts/canonical_chapters.py [--check]

A student opens a chapter in JupyterLab as a notebook (jupytext), and JupyterLab
saves it back through jupytext: any chapter not already in jupytext's own form
is rewritten on the first autosave (header fields, requoted captions, blank
lines), which leaves a clone dirty with changes nobody made. Here each chapter
is read and written once by jupytext, with two choices that make the result
stable:

- the kernel's display name is the one ipykernel installs ("Python 3 (ipykernel)"),
  which JupyterLab would otherwise write in;
- a figure caption is one string; jupytext then writes it as a plain YAML scalar
  folded over lines (a literal ``|`` block it would requote into a quoted string
  with blank lines between its lines).

``--check`` changes nothing and exits 1, naming the files, if any chapter is not
in that form (``tests/test_chapters_canonical.py`` runs the same check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
FORMAT = "md:myst"
KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"


def notebooks() -> list[Path]:
    """Every page of the book that is a jupytext notebook (it names a kernel)."""
    return sorted(path for path in (ROOT / "book").glob("*.md")
                  if "\nkernelspec:" in path.read_text(encoding="utf-8"))


def canonical(text: str) -> str:
    """``text`` as jupytext writes it, with the two choices of the module docstring."""
    notebook = jupytext.reads(text, fmt=FORMAT)
    notebook.metadata["kernelspec"]["display_name"] = KERNEL_DISPLAY_NAME
    for cell in notebook.cells:
        figure = cell.metadata.get("mystnb", {}).get("figure", {})
        if "caption" in figure:
            if "\n\n" in figure["caption"].strip():
                raise ValueError(f"a caption holds a blank line, which one string would "
                                 f"lose: {figure['caption'][:60]!r}")
            figure["caption"] = " ".join(figure["caption"].split())
    return jupytext.writes(notebook, fmt=FORMAT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a chapter is not canonical")
    args = parser.parse_args()
    stale = []
    for path in notebooks():
        text = path.read_text(encoding="utf-8")
        wanted = canonical(text)
        if wanted != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(wanted, encoding="utf-8")
    verb = "not in jupytext's form" if args.check else "rewritten"
    for path in stale:
        print(f"{path}: {verb}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
