"""ruff, configured in pyproject.toml, finds nothing in the code of the repository."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_ruff_is_clean():
    completed = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
