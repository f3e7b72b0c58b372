"""Opening a chapter in JupyterLab and saving it changes nothing.

JupyterLab saves a chapter opened as a notebook back through jupytext, so a
chapter that is not byte for byte what jupytext writes is rewritten by the first
autosave (issue 16 counted +427/-123 lines over five chapters). Each chapter must
survive a jupytext round trip unchanged, under the kernel name ipykernel installs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "canonical_chapters", ROOT / "scripts" / "canonical_chapters.py")
canonical_chapters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(canonical_chapters)

PAGES = canonical_chapters.notebooks()


def test_every_executable_page_is_checked():
    names = {path.name for path in PAGES}
    assert {f"0{n}" for n in range(1, 8)} <= {name[:2] for name in names}
    assert "intro.md" in names


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.name)
def test_a_jupytext_round_trip_leaves_the_chapter_byte_identical(path):
    text = path.read_text(encoding="utf-8")
    again = jupytext.writes(jupytext.reads(text, fmt="md:myst"), fmt="md:myst")
    assert again == text, (f"{path.name} is not in jupytext's form; run "
                           "python scripts/canonical_chapters.py")


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.name)
def test_the_kernel_is_named_as_ipykernel_installs_it(path):
    from jupyter_client.kernelspec import KernelSpecManager

    installed = KernelSpecManager().get_kernel_spec("python3").display_name
    metadata = jupytext.reads(path.read_text(encoding="utf-8"), fmt="md:myst").metadata
    assert metadata["kernelspec"] == {"display_name": installed, "language": "python",
                                      "name": "python3"}
