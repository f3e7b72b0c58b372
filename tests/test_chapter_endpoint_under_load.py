"""Chapter 6 (the endpoint lab) executes on a busy machine.

On a reader's busy laptop, or a CI runner shared with other jobs, the chapter gets only
part of the CPU, and gets it in slices. Here the kernel, which holds the lab server, its
engine and the load client alike, is stopped for 10 ms of every 30 ms for the whole run:
the chapter has two thirds of the time, as it had beside two CPU-bound processes on a
2-core machine, with the pauses a scheduler imposes. Pausing it spends no CPU, so the
build running beside this test in CI keeps both cores. The chapter sizes its load from
the rate it measures and bounds every run in time, so it must still pass its own checks
(``trace.errors == 0`` among them) within the book's cell timeout.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import jupytext
import pytest
import yaml
from conftest import ROOT
from nbclient import NotebookClient

CHAPTER = ROOT / "book" / "06_endpoint_lab.md"
RUN_S, PAUSE_S = 0.020, 0.010

# It executes a whole chapter (70-110 s on a 2-core machine), so it is a build test: CI
# runs it, the quick loop (-m "not build") does not wait on it.
pytestmark = pytest.mark.build


class Throttle(threading.Thread):
    """Stops and resumes a process group in turn until told to end, counting its pauses."""

    def __init__(self, pgid: int) -> None:
        super().__init__(daemon=True)
        self.pgid = pgid
        self.pauses = 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(RUN_S):
                os.killpg(self.pgid, signal.SIGSTOP)
                self.pauses += 1
                time.sleep(PAUSE_S)
                os.killpg(self.pgid, signal.SIGCONT)
        finally:
            os.killpg(self.pgid, signal.SIGCONT)  # never leave the kernel stopped

    def end(self) -> None:
        self.done.set()
        self.join()


def test_chapter_6_runs_with_a_third_of_its_time_taken():
    timeout = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"]
    notebook = jupytext.read(CHAPTER)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(CHAPTER.parent)}})
    with client.setup_kernel():
        throttle = Throttle(client.km.provisioner.pgid)
        start = time.perf_counter()
        throttle.start()
        try:
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)  # raises CellExecutionError, naming it
        finally:
            throttle.end()
        elapsed = time.perf_counter() - start
    # The pauses lasted the run: at least half the cycles its length allows (sleeps overrun).
    assert throttle.pauses >= 0.5 * elapsed / (RUN_S + PAUSE_S), (throttle.pauses, elapsed)
    # As the book's build (stderr_output: error), anything written to stderr is a failure.
    faults = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.get("output_type") == "error"
              or (output.get("output_type") == "stream" and output.get("name") == "stderr")]
    assert faults == []
