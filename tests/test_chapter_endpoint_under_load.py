"""Chapter 6 (the endpoint lab) executes on a busy machine.

Two CPU-bound processes run beside the notebook for the whole run, as another
heavy job would on a reader's laptop or a CI runner. The chapter sizes its load
from the rate it measures and bounds every run in time, so it must still pass
its own checks (``trace.errors == 0`` among them) within the book's cell timeout.
"""

from __future__ import annotations

import subprocess
import sys

import jupytext
import pytest
import yaml
from conftest import ROOT
from nbclient import NotebookClient

CHAPTER = ROOT / "book" / "06_endpoint_lab.md"
BURN = "while True:\n    pass\n"

# It executes a whole chapter (75-110 s on a busy 2-core machine with the two burners),
# so it is a build test: CI runs it, the quick loop (-m "not build") does not wait on it.
pytestmark = pytest.mark.build


def test_chapter_6_runs_beside_two_cpu_bound_processes():
    timeout = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"]
    notebook = jupytext.read(CHAPTER)
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(CHAPTER.parent)}})
        client.execute()  # raises CellExecutionError naming the cell that failed
        assert all(burner.poll() is None for burner in burners)  # the load lasted the run
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    # As the book's build (stderr_output: error), anything written to stderr is a failure.
    faults = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.get("output_type") == "error"
              or (output.get("output_type") == "stream" and output.get("name") == "stderr")]
    assert faults == []
