"""Time every code cell of the chapters, to find the cells that need a progress bar.

    python benchmarks/cell_times.py [book/05_scenarios.md ...] [--over 3]

Each chapter is read with jupytext and executed once, in a fresh kernel whose
working folder is ``book/`` (as the book's build runs it), one cell at a time.
Printed: one line per cell that took longer than ``--over`` seconds,

    cell chapter=NAME index=I seconds=S progress=yes|no first_line=...

where ``progress`` says whether the cell's source uses :func:`inferlab.pages.progress.progress`,
and last, per chapter, ``chapter=NAME total_seconds=T long_cells=N without_progress=M``.
A long cell without a progress bar leaves the reader of the notebook staring at a
busy kernel (issue 15).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jupytext
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def cell_seconds(path: Path) -> list[tuple[int, float, str]]:
    """``(index, seconds, source)`` of every code cell of the chapter at ``path``."""
    notebook = jupytext.read(path)
    client = NotebookClient(notebook, timeout=1800, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    timings = []
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            start = time.perf_counter()
            client.execute_cell(cell, index)
            timings.append((index, time.perf_counter() - start, cell.source))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        default=sorted((ROOT / "book").glob("0*.md")))
    parser.add_argument("--over", type=float, default=3.0,
                        help="report cells that take longer than this many seconds")
    args = parser.parse_args()
    for chapter in args.chapters:
        timings = cell_seconds(chapter.resolve())
        long = [(i, s, src) for i, s, src in timings if s > args.over]
        missing = 0
        for index, seconds, source in long:
            has_bar = "progress(" in source
            missing += not has_bar
            first = next((line for line in source.splitlines()
                          if line.strip() and not line.startswith(("#", ":"))), "")
            print(f"cell chapter={chapter.stem} index={index} seconds={seconds:.1f} "
                  f"progress={'yes' if has_bar else 'no'} first_line={first[:70]}", flush=True)
        total = sum(seconds for _, seconds, _ in timings)
        print(f"chapter={chapter.stem} total_seconds={total:.0f} long_cells={len(long)} "
              f"without_progress={missing}", flush=True)


if __name__ == "__main__":
    main()
