"""Shared fixtures: the strict executed build of the whole book, run once per test session."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# jupyter-book's CLI module has no __main__ guard, so "-m" would silently do nothing.
JUPYTER_BOOK = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]

# The README's build command with the strict flags: warnings are errors (-W), every
# cross-reference must resolve (-n), and all problems are reported before failing.
STRICT_FLAGS = ["-W", "-n", "--keep-going"]


@dataclass(frozen=True)
class Build:
    returncode: int
    log: str
    html: Path


def build_book(source: Path, output: Path) -> Build:
    """Run ``jupyter-book build`` strictly on ``source`` into ``output`` (a fresh folder,
    so every notebook executes: nothing can come from a stale cache)."""
    command = [*JUPYTER_BOOK, "build", str(source),
               "--path-output", str(output), *STRICT_FLAGS]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=source)
    return Build(completed.returncode, completed.stdout + completed.stderr,
                 output / "_build" / "html")


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Build:
    return build_book(ROOT, tmp_path_factory.mktemp("book"))
