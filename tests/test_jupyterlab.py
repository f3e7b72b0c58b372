"""Chapter 2 as the README tells a student to use it: opened in JupyterLab as a notebook.

JupyterLab serves a copy of the chapter (``benchmarks/jupyterlab_driver.py``), jupytext
opens it as a notebook in the session's headless Chromium, every cell runs, and then a
slider of the floor explorer is moved: its chart must change, recomputed by the kernel,
with no error in the browser's console. The benchmark that times such moves is
``benchmarks/explorers.py``.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import ROOT

from inferlab.explorers import registered_explorers

# Loaded by its path: putting benchmarks/ on sys.path would let its tokenizers.py shadow
# Hugging Face's tokenizers package for every test that imports it later.
_spec = importlib.util.spec_from_file_location("jupyterlab_driver",
                                               ROOT / "benchmarks" / "jupyterlab_driver.py")
lab = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = lab  # its dataclasses look their module up while being made
_spec.loader.exec_module(lab)

pytestmark = pytest.mark.browser

CHAPTER = ROOT / "book" / "02_bandwidth_floor.md"


def test_chapter_two_runs_in_jupyterlab_and_its_explorer_recomputes(browser):
    with lab.lab([CHAPTER]) as server:
        page, errors = lab.open_and_run(browser, server, CHAPTER.name,
                                        ["bw_floor", "bw_roofline"])
        try:
            before = lab.svg(page, "bw_floor")
            ms = lab.redraw_ms(page, "bw_floor", lambda: lab.press(
                page, "bw_floor", "batch (requests)", "ArrowRight"))
            after = lab.svg(page, "bw_floor")
        finally:
            page.close()
    # It opened on its defaults (a slider snapping its default to a step would not).
    floor = registered_explorers()["bw_floor"]
    step = floor.tables_at(**floor.defaults())["step"]
    assert f"floor {step['floor_ms'][0]:.2f} ms" in before
    assert ms is not None and after != before, "moving the batch slider changed nothing"
    # Batch 17 is on no grid of the site's: the kernel computed it.
    assert "17 request(s)" in after and "16 request(s)" in before
    assert not errors, f"console errors in JupyterLab: {errors}"
